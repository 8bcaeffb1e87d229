"""`python -m nblib.book html` (`make html`): the HTML book from the committed toy build (book/toy/,
nblib.book.executed, and figures/), executing nothing, then the site check; `python -m nblib.book
stale`: the chapters whose executed copy is older than its `.py`. A chapter with no copy shows its
clean notebook (no outputs) under a line saying so, and the run report says which chapters lack a
copy or changed since the build. Every other command goes to nblib.book.build.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat

from nblib.book.build import NOTEBOOKS, chapters, check_book, main as build_main, stage_book
from nblib.book.executed import TOY_DIR, inflate, stale_chapters, staleness_lines
from nblib.book.html import BOOK, build_html
from nblib.book.summary import repo_relative
from nblib.cli import run_cli
from nblib.store.atomic import atomic_write_text
from nblib.store.provenance import REPO_ROOT


def _under_title(nb, line: str) -> None:
    """Put `line` under the chapter's `# ` title (in its first Markdown cell that has one)."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and re.search(r"(?m)^# ", cell.source):
            cell.source = re.sub(r"(?m)^(# .*)$", lambda m: f"{m.group(1)}\n\n{line}\n", cell.source, count=1)
            return


def stage_committed(out: Path, executed: Path = TOY_DIR, figures: Path | None = None,
                    notebooks: Path = NOTEBOOKS, repo: Path = REPO_ROOT) -> tuple[list[str], list[str]]:
    """Stage the committed book in `out` for `build_html`: (the chapters shown from an executed
    copy, problems putting their figures back). `repo`: where the copies' figure paths start."""
    figures = Path(figures or REPO_ROOT / "figures")
    shutil.rmtree(out, ignore_errors=True)
    (out / "notebooks").mkdir(parents=True)
    shown, problems, stale = [], [], set(stale_chapters(executed, notebooks))
    for name in chapters():
        copy = Path(executed) / f"{name}.ipynb"
        if copy.is_file():
            nb = nbformat.read(str(copy), as_version=4)
            problems += [f"{name}: {p}" for p in inflate(nb, repo)]
            shown.append(name)
            if name in stale:
                _under_title(nb, f"*This page shows the toy build at git `{nb.metadata['nblib_build']['commit'][:10]}`; "
                                 f"`notebooks/{name}.py` has changed since (see the Run report).*")
        else:
            nb = nbformat.read(str(notebooks / f"{name}.ipynb"), as_version=4)
            for cell in (c for c in nb.cells if c.cell_type == "markdown"):  # as build.prepare_for_book fills them
                cell.source = re.sub(r"\{\{\s*budget\s*\}\}", "toy", cell.source)
            _under_title(nb, "*No executed copy of this chapter is in the tree yet: its code and words, without "
                             "outputs. `make book` runs it.*")
        atomic_write_text(out / "notebooks" / f"{name}.ipynb", nbformat.writes(nb))
    report = (BOOK / "run_report.md").read_text().rstrip()
    report += "\n\n## The executed chapters of this book\n\n" + "\n\n".join(staleness_lines(executed, notebooks)) + "\n"
    stage_book(out, report, (BOOK / "scorecard.md").read_text(), figures)
    return shown, problems


def html_book(out: Path, executed: Path = TOY_DIR, figures: Path | None = None, repo: Path = REPO_ROOT,
              notebooks: Path = NOTEBOOKS) -> int:
    """`make html`: stage the committed book, build it and check the site (book/check_site.py);
    returns an exit code (1 on a site problem; a missing executed copy is said, not failed on)."""
    t0 = time.time()
    figures = Path(figures or REPO_ROOT / "figures")
    shown, problems = stage_committed(out, executed, figures, notebooks, repo)
    for line in staleness_lines(executed, notebooks):
        print(f"[book] {line}", flush=True)
    html = build_html(out)
    problems += check_book(html, chapters(), figures, shown=shown)
    for p in problems:
        print(f"[book] site problem: {p}", file=sys.stderr)
    print(f"[book] the committed book ({len(shown)} of {len(chapters())} chapters executed) built and checked in "
          f"{time.time() - t0:.1f} s, {len(problems)} problem(s): {repo_relative(html / 'index.html')}", flush=True)
    return 1 if problems else 0


def main(argv=None) -> int:
    """`python -m nblib.book html|stale`, and every other command of nblib.book.build."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return run_cli(_main, argv) if argv[:1] in (["html"], ["stale"]) else build_main(argv)


def _main(argv) -> int:
    ap = argparse.ArgumentParser(prog="python -m nblib.book", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("html", help="the HTML book from the committed executed chapters (book/toy/), executing nothing")
    h.add_argument("--out", default=str(REPO_ROOT / "_build" / "committed"))
    h.add_argument("--executed", default=str(TOY_DIR), help="the executed chapters' folder (default book/toy)")
    sub.add_parser("stale", help="the chapters whose executed copy is older than its .py (never fails)")
    args = ap.parse_args(argv)
    if args.cmd == "html":
        return html_book(Path(args.out), Path(args.executed))
    print("\n".join(staleness_lines()))
    return 0
