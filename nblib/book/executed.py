"""The toy book's executed chapters kept in the tree, so a reader opens the book without training it:
`book/toy/<chapter>.ipynb` and one build manifest, `book/toy/build.json`.

Only a toy run of the book runner writes here (`make book`, nblib.book.build, `publish`); a smoke,
full or budget-file run writes only under `_build/`. The `.py` sources in notebooks/ stay the clean
jupytext pair. A committed copy keeps every output (text, tables, images) except that a figure the
chapter saved under figures/ is kept as a reference to that file (output metadata `nblib_figure`:
its path and sha256), and an output larger than MAX_OUTPUT_CHARS is replaced by a line saying so;
`inflate` puts the figures back for the HTML build (`make html`, nblib.book.reader).

build.json:

    {"budget": "toy", "commit": "<git sha>", "dirty": false, "built": "2026-12-07T10:00:00",
     "chapters": {"03_scaling_law": {"commit": ..., "source_sha256": <sha256 of notebooks/03_scaling_law.py>,
                                     "status": "ok", "wall_s": 4230.1}, ...},
     "figures": {"root": "figures", "tables_sha256": <nblib.book.summary.tables_sha256>},
     "size_bytes": <all executed copies>}

Each copy's notebook metadata `nblib_build` names its build ({"budget", "commit", "source_sha256"}).
`build_problems` lists every way the copies, the figures' manifests, figures/summary.json and
build.json disagree; `stale_chapters` names the chapters whose `.py` changed since their copy was
made, which is allowed (a toy rebuild takes hours) and is said, never failed on.
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
# A code cell that calls one of these shows something, so its committed copy must carry an output.
_SHOWS = re.compile(r"\b(print|display|save_figure|markdown|verdict)\(")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_sha256(name: str, notebooks: Path | None = None) -> str | None:
    """sha256 of a chapter's jupytext source `notebooks/<name>.py` (None when there is none)."""
    src = (notebooks or REPO_ROOT / "notebooks") / f"{name}.py"
    return _sha256(src.read_bytes()) if src.is_file() else None


def slim(nb, figures: Path, build: dict, repo: Path = REPO_ROOT):
    """An executed chapter as it is committed: runner metadata (papermill's timings) dropped, the
    build named in the notebook's metadata, each PNG that is byte for byte a file under `figures`
    replaced by a reference to it, each output over MAX_OUTPUT_CHARS by a line saying so."""
    pngs = {_sha256(p.read_bytes()): p for p in sorted(Path(figures).rglob("*.png"))} if Path(figures).is_dir() else {}
    nb.metadata.pop("papermill", None)
    nb.metadata[BUILD_KEY] = build
    for cell in nb.cells:
        for key in ("papermill", "execution"):
            cell.metadata.pop(key, None)
        for i, out in enumerate(cell.get("outputs", [])):
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
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            ref = out.get("metadata", {}).get(FIGURE_KEY)
            if not ref:
                continue
            path = Path(repo) / ref["path"]
            if not path.is_file():
                problems.append(f"{ref['path']}: the figure this copy shows is missing")
                continue
            data = path.read_bytes()
            if _sha256(data) != ref["sha256"]:
                problems.append(f"{ref['path']}: changed since the build that made this copy (sha256 differs)")
            out["data"] = {"image/png": base64.b64encode(data).decode(), "text/plain": "<Figure>"}
    return problems


def publish(executed: Path, records: list[dict], code: dict, figures: Path, dest: Path = TOY_DIR,
            notebooks: Path | None = None, repo: Path = REPO_ROOT) -> dict:
    """Copy the chapters that ran ok from `executed` (the run's `<out>/notebooks/`) to `dest`,
    slimmed (`slim`), and write `dest/build.json`. A chapter this run did not run keeps its
    earlier copy and entry, which name their own build (`build_problems` says so)."""
    old = load_build(dest) or {}
    chapters = dict(old.get("chapters", {}))
    for r in records:
        name, digest = r["chapter"], source_sha256(r["chapter"], notebooks)
        entry = {"commit": code["git"], "source_sha256": digest, "status": r["status"], "wall_s": r["wall_s"]}
        src = Path(executed) / f"{name}.ipynb"
        if r["status"] == "ok" and src.is_file():
            nb = slim(nbformat.read(str(src), as_version=4), figures,
                      {"budget": "toy", "commit": code["git"], "source_sha256": digest}, repo)
            atomic_write_text(Path(dest) / f"{name}.ipynb", nbformat.writes(nb) + "\n")
        chapters[name] = entry
    size = sum(p.stat().st_size for p in Path(dest).glob("*.ipynb"))
    manifest = {"budget": "toy", "commit": code["git"], "dirty": bool(code.get("dirty")),
                "built": time.strftime("%Y-%m-%dT%H:%M:%S"), "chapters": chapters,
                "figures": {"root": repo_relative(figures), "tables_sha256": tables_sha256(figures)},
                "size_bytes": size}
    atomic_write_json(Path(dest) / BUILD_FILE, manifest)
    return manifest


def load_build(dest: Path = TOY_DIR) -> dict | None:
    """build.json of the executed copies in `dest`, or None when there is none."""
    path = Path(dest) / BUILD_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def output_gaps(nb) -> list[str]:
    """Code cells that print, display or save a figure and carry no output in `nb` (their
    first line each): an executed copy must show what its cells show."""
    return [c.source.strip().splitlines()[0] for c in nb.cells
            if c.cell_type == "code" and _SHOWS.search(c.source) and not c.get("outputs")
            and not re.search(r"show\s*=\s*False", c.source)]


def build_problems(dest: Path = TOY_DIR, figures: Path | None = None, repo: Path = REPO_ROOT,
                   names: list[str] | None = None) -> list[str]:
    """Every way the executed copies in `dest`, the figures' manifests, `<figures>/summary.json`
    and build.json fail to name one clean toy build of every chapter (`names`, default the
    registry's); [] when they agree. Chapters edited since (`stale_chapters`) are not problems."""
    figures = Path(figures or repo / "figures")
    build = load_build(dest)
    if build is None:
        return [f"no toy build recorded: {repo_relative(Path(dest) / BUILD_FILE)} is missing"]
    commit, out = build.get("commit"), []
    if build.get("budget") != "toy" or build.get("dirty"):
        out.append(f"build.json: budget {build.get('budget')!r}, dirty {build.get('dirty')}; allowed: toy, "
                   "from a clean commit")
    for name in names or chapter_names(CHAPTERS):
        entry = build["chapters"].get(name)
        path = Path(dest) / f"{name}.ipynb"
        if entry is None or not path.is_file():
            out.append(f"{name}: no executed copy in the build ({repo_relative(path)})")
            continue
        if entry.get("status") != "ok" or entry.get("commit") != commit:
            out.append(f"{name}: {entry.get('status')} at {str(entry.get('commit'))[:10]}; the build is ok at "
                       f"{str(commit)[:10]}")
        nb = nbformat.read(str(path), as_version=4)
        named = nb.metadata.get(BUILD_KEY, {})
        if named.get("commit") != commit or named.get("source_sha256") != entry.get("source_sha256"):
            out.append(f"{name}: the copy names build {str(named.get('commit'))[:10]}, build.json "
                       f"{str(commit)[:10]}")
        out += [f"{name}: {p}" for p in inflate(nb, repo)]
        out += [f"{name}: a cell that shows something has no output: {g}" for g in output_gaps(nb)]
        manifest = figures / name / "manifest.json"
        for file, rec in (json.loads(manifest.read_text()) if manifest.is_file() else {}).items():
            git = rec.get("code", {}).get("git")
            if git != commit or rec.get("budget") != "toy":
                out.append(f"{repo_relative(figures / name / file)}: made at {str(git)[:10]} (budget "
                           f"{rec.get('budget')}), the build at {str(commit)[:10]}")
    summary = figures / SUMMARY_FILE
    tables = tables_sha256(figures)
    written = json.loads(summary.read_text()).get("tables_sha256") if summary.is_file() else None
    if not (written == tables == build.get("figures", {}).get("tables_sha256")):
        out.append(f"{repo_relative(summary)}: its tables are not the build's (sha256 of the tables: summary "
                   f"{str(written)[:12]}, build.json {str(build.get('figures', {}).get('tables_sha256'))[:12]}, "
                   f"figures now {tables[:12]})")
    size = sum(p.stat().st_size for p in Path(dest).glob("*.ipynb"))
    if size > MAX_TOTAL_BYTES:
        out.append(f"the executed copies hold {size / 1e6:.1f} MB; allowed: at most {MAX_TOTAL_BYTES / 1e6:.0f} MB")
    return out


def stale_chapters(dest: Path = TOY_DIR, notebooks: Path | None = None) -> list[str]:
    """The chapters whose executed copy is older than their `.py` source (its sha256 differs
    from the one build.json recorded), in book order; [] without a build."""
    build = load_build(dest) or {"chapters": {}}
    return [n for n in chapter_names(CHAPTERS) if n in build["chapters"] and (Path(dest) / f"{n}.ipynb").is_file()
            and build["chapters"][n].get("source_sha256") != source_sha256(n, notebooks)]


def staleness_lines(dest: Path = TOY_DIR, notebooks: Path | None = None) -> list[str]:
    """Markdown for the run report and `python -m nblib.book stale`: which build the executed
    copies come from, the chapters edited since and the chapters with no copy."""
    build = load_build(dest)
    if build is None:
        return [f"No executed toy chapters are in the tree yet (`{repo_relative(Path(dest))}/` holds no "
                f"{BUILD_FILE}): the pages show the chapters' code and words without outputs; `make book` "
                "runs them and keeps their outputs there."]
    stale = stale_chapters(dest, notebooks)
    missing = [n for n in chapter_names(CHAPTERS) if not (Path(dest) / f"{n}.ipynb").is_file()]
    lines = [f"The executed chapters in `{repo_relative(Path(dest))}/` come from the toy build at git "
             f"`{build['commit'][:10]}` ({build['built']})."]
    if stale:
        lines.append(f"Edited since that build (their `.py` differs from the source the copy was run from; "
                     f"the page shows the older run): {', '.join(stale)}.")
    if missing:
        lines.append(f"No executed copy yet (shown without outputs): {', '.join(missing)}.")
    if not stale and not missing:
        lines.append("Every chapter's copy was run from its current source.")
    return lines
