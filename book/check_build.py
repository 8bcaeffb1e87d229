"""Check that the committed toy build agrees with itself: the executed chapters in book/toy/,
the figures' manifests, figures/summary.json and book/toy/build.json name one clean toy build
(nblib.book.executed writes them at the end of a toy `make book`).

build_problems(dest, figures, repo) -> list of problems (empty = they agree):
  - build.json names budget toy and a clean commit; every chapter of the registry has a copy,
    recorded `ok` at that commit, whose notebook metadata names the same commit and source sha256;
  - every figure a copy shows is the file under figures/ it was made as (sha256), and every code
    cell that prints, displays or saves a figure carries an output;
  - every entry of each chapter's figures/<chapter>/manifest.json was made at that commit, at toy;
  - figures/summary.json was computed from the tables the figures folder holds, the ones build.json
    records; the copies hold at most 6 MB together.
A chapter edited since the build is no problem (`python -m nblib.book stale` names it).

CLI: python book/check_build.py [--executed book/toy] [--figures figures]
Exit status 1 and one problem per line when anything disagrees; 0 with a note when no toy build
is in the tree yet.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import nbformat

from nblib.book.executed import BUILD_FILE, BUILD_KEY, MAX_TOTAL_BYTES, TOY_DIR, inflate, load_build
from nblib.book.summary import SUMMARY_FILE, repo_relative, tables_sha256
from nblib.book.toc import CHAPTERS, chapter_names
from nblib.store.provenance import REPO_ROOT

# A code cell that calls one of these shows something, so its executed copy must carry an output.
SHOWS = re.compile(r"\b(print|display|save_figure|markdown|verdict)\(")


def output_gaps(nb) -> list[str]:
    """Code cells that print, display or save a figure and carry no output in `nb` (their
    first line each): an executed copy must show what its cells show."""
    return [c.source.strip().splitlines()[0] for c in nb.cells
            if c.cell_type == "code" and SHOWS.search(c.source) and not c.get("outputs")]


def build_problems(dest: Path = TOY_DIR, figures: Path | None = None, repo: Path = REPO_ROOT) -> list[str]:
    """Every way the executed copies in `dest`, the figures' manifests, `<figures>/summary.json`
    and build.json fail to name one clean toy build of every chapter; [] when they agree.
    Chapters edited since the build (`stale_chapters`) are not problems."""
    figures, build = Path(figures or repo / "figures"), load_build(dest)
    if build is None:
        return [f"no toy build recorded: {repo_relative(Path(dest) / BUILD_FILE)} is missing"]
    commit, out = str(build.get("commit")), []
    if build.get("budget") != "toy" or build.get("dirty"):
        out.append(f"build.json: budget {build.get('budget')!r}, dirty {build.get('dirty')}; allowed: toy, clean")
    for name in chapter_names(CHAPTERS):
        entry, path = build["chapters"].get(name) or {}, Path(dest) / f"{name}.ipynb"
        if not path.is_file():
            out.append(f"{name}: no executed copy ({repo_relative(path)})")
            continue
        nb = nbformat.read(str(path), as_version=4)
        named = nb.metadata.get(BUILD_KEY, {})
        if (entry.get("status"), entry.get("commit"), named.get("commit")) != ("ok", commit, commit) \
                or named.get("source_sha256") != entry.get("source_sha256"):
            out.append(f"{name}: build.json says {entry.get('status')} at {str(entry.get('commit'))[:10]}, the copy "
                       f"names {str(named.get('commit'))[:10]}; the build is {commit[:10]}")
        out += [f"{name}: {p}" for p in inflate(nb, repo)]
        out += [f"{name}: a cell that shows something has no output: {g}" for g in output_gaps(nb)]
        manifest = figures / name / "manifest.json"
        for file, rec in (json.loads(manifest.read_text()) if manifest.is_file() else {}).items():
            if (rec.get("code", {}).get("git"), rec.get("budget")) != (commit, "toy"):
                out.append(f"{repo_relative(figures / name / file)}: made at {str(rec.get('code', {}).get('git'))[:10]}"
                           f" (budget {rec.get('budget')}), the build at {commit[:10]}")
    summary, tables = figures / SUMMARY_FILE, tables_sha256(figures)
    written = json.loads(summary.read_text()).get("tables_sha256") if summary.is_file() else None
    if not written == tables == build.get("figures", {}).get("tables_sha256"):
        out.append(f"{repo_relative(summary)}: not the build's tables (sha256: summary {str(written)[:12]}, build.json "
                   f"{str(build.get('figures', {}).get('tables_sha256'))[:12]}, figures now {tables[:12]})")
    size = sum(p.stat().st_size for p in Path(dest).glob("*.ipynb"))
    if size > MAX_TOTAL_BYTES:
        out.append(f"the executed copies hold {size / 1e6:.1f} MB; allowed: at most {MAX_TOTAL_BYTES / 1e6:.0f} MB")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executed", default=str(TOY_DIR), help="the executed chapters (default book/toy)")
    ap.add_argument("--figures", default=str(REPO_ROOT / "figures"), help="their figures (default figures)")
    args = ap.parse_args(argv)
    if load_build(Path(args.executed)) is None:
        print(f"check_build: no toy build in the tree yet ({repo_relative(Path(args.executed) / BUILD_FILE)} is "
              "missing): nothing to check; a toy `make book` writes it")
        return 0
    problems = build_problems(Path(args.executed), Path(args.figures))
    for p in problems:
        print(p)
    print(f"check_build: {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
