"""The toy book's executed chapters kept in the tree, so a reader opens the book without training it:
`book/toy/<chapter>.ipynb` and one build manifest, `book/toy/build.json` (`publish`, at the end of a
toy `make book`; smoke, full and budget-file runs write only under `_build/`).

A copy keeps every output, except that a PNG which is byte for byte a file under figures/ becomes a
reference to it (output metadata `nblib_figure`: path, sha256; `inflate` puts it back for `make
html`) and an output over MAX_OUTPUT_CHARS becomes a line saying so. Its metadata `nblib_build`
names its build: budget, commit, the sha256 of the chapter's `.py`. build.json holds the budget,
commit, dirty flag, time, per chapter {commit, source_sha256, status, wall_s}, the figures' {root,
tables_sha256, commits: the builds their manifests name} and the copies' size. book/check_build.py
(beside the book, like its site check) lists every way the copies, the figures' manifests,
figures/summary.json and build.json disagree; `stale_chapters` names the chapters whose `.py`
changed since the build: allowed (a toy rebuild takes hours), said, never failed on.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from pathlib import Path

import nbformat

from nblib.book.summary import SUMMARY_FILE, repo_relative, tables_sha256
from nblib.book.toc import CHAPTERS, chapter_names
from nblib.store.atomic import atomic_write_json, atomic_write_text
from nblib.store.provenance import REPO_ROOT

TOY_DIR = REPO_ROOT / "book" / "toy"
BUILD_FILE = "build.json"
BUILD_KEY, FIGURE_KEY = "nblib_build", "nblib_figure"
MAX_OUTPUT_CHARS = 200_000  # one output larger than this (as JSON) is left out of the committed copy
MAX_TOTAL_BYTES = 6_000_000  # all committed copies together
# The file ipykernel compiles a cell into, as a warning's traceback names it (/tmp/ipykernel_<pid>/<hash>.py)
KERNEL_CELL_FILE = re.compile(r"/\S*/ipykernel_\d+/\d+\.py")


def relative_paths(text: str, repo: Path = REPO_ROOT) -> str:
    """`text` as it reads on every clone: the repository's absolute path dropped (so a warning
    names nblib/..., not /home/you/repo/nblib/...), the kernel's temporary cell file named <cell>."""
    return KERNEL_CELL_FILE.sub("<cell>", text.replace(f"{Path(repo).resolve().as_posix()}/", ""))


def relative_outputs(out, repo: Path = REPO_ROOT) -> None:
    """`relative_paths` on an output's text in place: a stream's text, a result's text/plain."""
    if isinstance(out.get("text"), str):
        out["text"] = relative_paths(out["text"], repo)
    if isinstance(out.get("data", {}).get("text/plain"), str):
        out["data"]["text/plain"] = relative_paths(out["data"]["text/plain"], repo)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_sha256(name: str, notebooks: Path | None = None) -> str | None:
    """sha256 of a chapter's jupytext source `notebooks/<name>.py` (None when there is none)."""
    src = (notebooks or REPO_ROOT / "notebooks") / f"{name}.py"
    return _sha256(src.read_bytes()) if src.is_file() else None


def slim(nb, figures: Path, build: dict, repo: Path = REPO_ROOT):
    """An executed chapter as it is committed: runner metadata (papermill's timings) dropped, the
    build named in the notebook's metadata, each PNG that is byte for byte a file under `figures`
    replaced by a reference to it, each output over MAX_OUTPUT_CHARS by a line saying so, and the
    text of each output with paths relative to the repository (`relative_paths`)."""
    pngs = {_sha256(p.read_bytes()): p for p in sorted(Path(figures).rglob("*.png"))}
    nb.metadata.pop("papermill", None)
    nb.metadata[BUILD_KEY] = build
    for cell in nb.cells:
        cell.metadata.pop("papermill", None), cell.metadata.pop("execution", None)
        for i, out in enumerate(cell.get("outputs", [])):
            relative_outputs(out, repo)
            png = out.get("data", {}).get("image/png")
            digest = _sha256(base64.b64decode(png)) if isinstance(png, str) else None
            if digest in pngs:
                path = Path(pngs[digest]).resolve().relative_to(Path(repo).resolve()).as_posix()
                cell.outputs[i] = nbformat.v4.new_output("display_data", data={"text/plain": f"<figure {path}>"},
                                                         metadata={FIGURE_KEY: {"path": path, "sha256": digest}})
            elif len(json.dumps(out)) > MAX_OUTPUT_CHARS:
                cell.outputs[i] = nbformat.v4.new_output(
                    "stream", name="stdout", text=f"[an output of {len(json.dumps(out)) // 1000} KB is left out of "
                                                  "the committed copy; `make book` shows it]\n")
    return nb


def inflate(nb, repo: Path = REPO_ROOT) -> list[str]:
    """Put each referenced figure back into `nb` as its PNG (in place), for the HTML build.
    Returns problems: a referenced file that is missing, or that changed since the build."""
    problems = []
    for out in (o for cell in nb.cells for o in cell.get("outputs", []) if o.get("metadata", {}).get(FIGURE_KEY)):
        ref = out["metadata"][FIGURE_KEY]
        path = Path(repo) / ref["path"]
        data = path.read_bytes() if path.is_file() else b""
        if _sha256(data) != ref["sha256"]:
            problems.append(f"{ref['path']}: {'changed since the build of this copy' if data else 'missing'}")
        if data:
            out["data"] = {"image/png": base64.b64encode(data).decode(), "text/plain": "<Figure>"}
    return problems


def publish(executed: Path, records: list[dict], code: dict, figures: Path, dest: Path = TOY_DIR,
            notebooks: Path | None = None, repo: Path = REPO_ROOT) -> dict:
    """Copy the chapters that ran ok from `executed` (the run's `<out>/notebooks/`) to `dest`,
    slimmed (`slim`), and write `dest/build.json`. A chapter this run did not run keeps its
    earlier copy and entry, which name their own build (`build_problems` says so)."""
    chapters = dict((load_build(dest) or {}).get("chapters", {}))
    for r in records:
        name, digest = r["chapter"], source_sha256(r["chapter"], notebooks)
        chapters[name] = {"commit": code["git"], "source_sha256": digest, "status": r["status"], "wall_s": r["wall_s"]}
        if r["status"] == "ok" and (Path(executed) / f"{name}.ipynb").is_file():
            nb = slim(nbformat.read(str(Path(executed) / f"{name}.ipynb"), as_version=4), figures,
                      {"budget": "toy", "commit": code["git"], "source_sha256": digest}, repo)
            atomic_write_text(Path(dest) / f"{name}.ipynb", nbformat.writes(nb) + "\n")
    manifest = {"budget": "toy", "commit": code["git"], "dirty": bool(code.get("dirty")),
                "built": time.strftime("%Y-%m-%dT%H:%M:%S"), "chapters": chapters,
                "figures": {"root": Path(figures).resolve().relative_to(Path(repo).resolve()).as_posix(),
                            "tables_sha256": tables_sha256(figures),  # and the builds their manifests name:
                            "commits": sorted({str(r.get("code", {}).get("git"))
                                               for m in Path(figures).glob("*/manifest.json")
                                               for r in json.loads(m.read_text()).values()})},
                "size_bytes": sum(p.stat().st_size for p in Path(dest).glob("*.ipynb"))}
    atomic_write_json(Path(dest) / BUILD_FILE, manifest)
    return manifest


def load_build(dest: Path = TOY_DIR) -> dict | None:
    """build.json of the executed copies in `dest`, or None when there is none."""
    path = Path(dest) / BUILD_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def stale_chapters(dest: Path = TOY_DIR, notebooks: Path | None = None) -> list[str]:
    """The chapters whose executed copy is older than their `.py` source (its sha256 differs
    from the one build.json recorded), in book order; [] without a build."""
    done = (load_build(dest) or {"chapters": {}})["chapters"]
    return [n for n in chapter_names(CHAPTERS) if n in done and (Path(dest) / f"{n}.ipynb").is_file()
            and done[n].get("source_sha256") != source_sha256(n, notebooks)]


def staleness_lines(dest: Path = TOY_DIR, notebooks: Path | None = None) -> list[str]:
    """Markdown for the run report and `python -m nblib.book stale`: the build the executed
    copies come from, the chapters edited since and the chapters with no copy."""
    build, where = load_build(dest), repo_relative(Path(dest))
    if build is None:
        return [f"No executed toy chapters are in the tree yet (no `{where}/{BUILD_FILE}`): the pages show the "
                f"chapters' code and words without outputs; a toy `make book` keeps them in `{where}/`."]
    stale = stale_chapters(dest, notebooks)
    missing = [n for n in chapter_names(CHAPTERS) if not (Path(dest) / f"{n}.ipynb").is_file()]
    return [f"The executed chapters in `{where}/` come from the toy build at git `{build['commit'][:10]}` "
            f"({build['built']})."] + \
        ([f"Edited since that build (the page shows the older run): {', '.join(stale)}."] if stale else []) + \
        ([f"No executed copy yet (shown without outputs): {', '.join(missing)}."] if missing else []) + \
        ([] if stale or missing else ["Every chapter's copy was run from its current source."])
