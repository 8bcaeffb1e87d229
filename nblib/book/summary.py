"""The book's one summary of the scorecard: how many claims got each verdict, and the claims the
toy reproduces, each a link to the chapter whose figures give its number.

The book runner writes it once, after the chapters have run (as it writes the scorecard page),
from the same figures, to `<figures>/summary.json` (`write_summary`): `figures/summary.json`
for the toy book, `_build/<budget>/figures/summary.json` for a smoke or full run, the build's
own figures folder for a budget file. Chapter 1 shows it (`chapter_summary`): it computes the
summary from the tables the figures folder holds now with the same function, so what it shows
always comes from the current figures, and says whether that is the file the runner wrote or,
as when chapter 1 runs before the chapters that change those tables, not yet.

summary.json:

    {"budget": "toy",
     "figures": "figures",                 # the figures folder, relative to the repository
     "tables_sha256": "...",               # of every table (*.csv) in it: which tables it read
     "claims": 20, "controls": 2,          # rows counted, control rows left out of the counts
     "counts": {"reproduced": 6, "partly": 6, ...},   # one entry per verdict, in VERDICTS order
     "reproduced": [{"work": ..., "where": ..., "claim": ..., "chapter": "04_constant_last4",
                     "link": "notebooks/04_constant_last4.ipynb"}, ...]}

Every path in it is relative to the repository (`link` is null for a row without a chapter).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from pathlib import Path

import pandas as pd
from markdown_it import MarkdownIt

from nblib.book.toc import CHAPTERS
from nblib.chapters.claims.claim import VERDICTS, Figures
from nblib.chapters.claims.scorecard import scorecard
from nblib.store.atomic import atomic_write_text
from nblib.store.provenance import REPO_ROOT

SUMMARY_FILE = "summary.json"
SCORECARD = "book/scorecard.md"  # the page with every row (nblib.book.toc.SCORECARD_PAGE)


def _verdicts() -> tuple[str, ...]:
    return tuple(VERDICTS)


def repo_relative(path) -> str:
    """A path as a generated page names it: relative to the repository when inside it, else only
    its last two parts (never an absolute path)."""
    p = Path(path)
    try:
        return Path(p.resolve().relative_to(REPO_ROOT.resolve())).as_posix() or "."
    except ValueError:
        return Path(*p.parts[-2:]).as_posix() if len(p.parts) > 1 else p.name


def chapter_link(chapter) -> str | None:
    """`notebooks/<chapter>.ipynb`, relative to the repository, for a chapter of the book (the
    chapter registry); None for anything else (an empty or missing chapter)."""
    if not isinstance(chapter, str) or chapter not in {c.name for c in CHAPTERS}:
        return None
    return f"notebooks/{chapter}.ipynb"


def tables_sha256(root) -> str:
    """sha256 over every table (`*.csv`, with its path relative to `root`) in a figures folder:
    which tables a summary was made from."""
    h = hashlib.sha256()
    root = Path(root)
    for p in sorted(root.rglob("*.csv")) if root.is_dir() else []:
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def summary_json(table: pd.DataFrame, figures_root_rel: str, budget: str = "", tables: str = "") -> dict:
    """The summary of a scorecard table (`nblib.chapters.claims.scorecard.scorecard`): the counts by verdict
    over the rows that are not controls (a table without a `control` column has none), and the
    reproduced claims, each with its chapter and a link to it (none without a `chapter` column).
    `figures_root_rel`: the figures folder the table was read from, relative to the repository."""
    control = table["control"].fillna(False).astype(bool) if "control" in table else pd.Series(False, table.index)
    counted = table[~control]
    verdicts = _verdicts()
    n = counted["verdict"].value_counts()
    counts = {v: int(n.get(v, 0)) for v in verdicts}
    counts.update({str(v): int(k) for v, k in n.items() if v not in counts})  # a verdict VERDICTS lacks: still counted
    reproduced = []
    for _, r in counted[counted["verdict"] == "reproduced"].iterrows():
        chapter = r.get("chapter", "")
        chapter = chapter if isinstance(chapter, str) else ""
        reproduced.append({"work": str(r.get("work", "")), "where": str(r.get("where", "")),
                           "claim": str(r.get("claim", "")), "chapter": chapter, "link": chapter_link(chapter)})
    return {"budget": budget, "figures": figures_root_rel, "tables_sha256": tables, "claims": int(len(counted)),
            "controls": int(control.sum()), "counts": counts, "reproduced": reproduced}


def compute_summary(root, budget: str) -> dict:
    """The summary of the scorecard read from the figures folder `root` at `budget`."""
    return summary_json(scorecard(Figures(Path(root), budget)), repo_relative(root), budget, tables_sha256(root))


def write_summary(root, budget: str, summary: dict | None = None) -> Path:
    """Write `<root>/summary.json` (the book runner, after the chapters); returns its path."""
    s = summary if summary is not None else compute_summary(root, budget)
    path = Path(root) / SUMMARY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(s, indent=1, ensure_ascii=False) + "\n")
    return path


def chapter_summary(root, budget: str) -> tuple[dict, str]:
    """(summary, how) for chapter 1, computed from the tables `root` holds now (with the scorecard's
    code of now): `how` is "written" when `<root>/summary.json`, which the runner wrote, is that
    same summary, else "computed" (chapter 1 runs before the chapters that change the tables, or
    a threshold changed since the file was written)."""
    s = compute_summary(root, budget)
    path = Path(root) / SUMMARY_FILE
    try:
        written = json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        written = None
    return s, "written" if written == s else "computed"


def site_page(path: str) -> str:
    """The built site's file for a page given by its path in the repository
    (`notebooks/03_scaling_law.ipynb` -> `scaling-law.html`): mystmd's slug (the file name
    without its numeric prefix, lower case, runs of other characters as one '-'), one flat
    folder of `<slug>.html` (book/template)."""
    stem = Path(path).stem
    stem = re.sub(r"^[0-9_.\-]+", "", stem) or stem
    slug = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", stem.lower())).strip("-")[:50]
    return f"{slug}.html"


def href(path: str, base: str = "notebooks", site: bool = False) -> str:
    """A link to the page at `path` (relative to the repository) from a page in the folder `base`
    of the repository, or (site=True) from a page of the built site."""
    if site:
        return site_page(path)
    return posixpath.relpath(path, base or ".")


def _text(s: str) -> str:
    return str(s).replace("\n", " ").replace("[", "\\[").replace("]", "\\]")


def summary_markdown(summary: dict, base: str = "notebooks", site: bool = False, how: str | None = None) -> str:
    """The summary as Markdown: the counts by verdict, then each reproduced claim, linked to its
    chapter. Links are relative to the folder `base` of the repository (chapter 1: notebooks),
    or (site=True) to the built site's pages. `how` ("written" or "computed", `chapter_summary`)
    adds which figures it was read from."""
    counts = summary["counts"]
    card = href(SCORECARD, base, site)
    controls = f", {summary['controls']} of them" if summary.get("controls") else ""
    lines = [f"Of the {summary['claims']} claims of the two works on the [scorecard]({card}) "
             f"(control rows left out{controls}), "
             f"read from the figures of this build at budget **{summary['budget']}**: "
             + ", ".join(f"**{k} {v}**" for v, k in counts.items()) + ".", ""]
    rep = summary["reproduced"]
    if rep:
        lines += ["Reproduced at toy scale:" if summary["budget"] == "toy" else
                  f"Reproduced at budget {summary['budget']}:", ""]
        for work in dict.fromkeys(r.get("work", "") for r in rep):  # the works in the scorecard's order
            if work:
                lines += [f"*{_text(work)}*", ""]
            for r in (r for r in rep if r.get("work", "") == work):
                where = _text(r["where"]) or "claim"
                head = f"[{where}]({href(r['link'], base, site)})" if r.get("link") else where
                lines.append(f"- {head}: {_text(r['claim'])}")
            lines.append("")
    else:
        lines += ["No claim is rated reproduced by these figures.", ""]
    if how:
        folder, file = summary["figures"], posixpath.join(summary["figures"], SUMMARY_FILE)
        lines.append(f"*Read from the tables in `{folder}` (budget {summary['budget']}): the summary the book "
                     f"runner wrote to `{file}` after the chapters.*" if how == "written" else
                     f"*Computed as this chapter ran, from the tables in `{folder}` (budget {summary['budget']}); "
                     f"the book runner writes the same summary to `{file}` after the chapters.*")
    return "\n".join(lines).rstrip() + "\n"


def summary_bundle(summary: dict, how: str | None = None) -> dict:
    """A display bundle for a chapter (`IPython.display.display(bundle, raw=True)`): Markdown
    with links to the notebooks beside the chapter, and HTML with links to the built site's
    pages (the book shows the HTML, and its site check follows each link)."""
    md = MarkdownIt("commonmark").enable("table")
    return {"text/markdown": summary_markdown(summary, "notebooks", how=how),
            "text/html": md.render(summary_markdown(summary, site=True, how=how))}


# The landing page's findings sit between these two lines of book/index.md (`landing_page`); the
# rest of the page is written by hand. LANDING_FIGURE: chapter 4's figure of the title claim (§4.2).
LANDING_START = "<!-- findings: written by the book runner from figures/summary.json; edit nblib/book/summary.py -->"
LANDING_END = "<!-- end of findings -->"
LANDING_FIGURE = "04_constant_last4/fig_s5_last4_longppl.png"


def landing_page(page: str, figures) -> str:
    """book/index.md's text `page` with its findings block (between LANDING_START and LANDING_END;
    a page without both is refused, naming them) read from the figures folder `figures`: the counts
    by verdict, the reproduced claims linked to their chapters, and chapter 4's LANDING_FIGURE. The
    page links to `../figures/`, so the folder sits beside book/ (the repository, a staged book)."""
    start, end = page.find(LANDING_START), page.find(LANDING_END)
    if start < 0 or end < start:
        raise ValueError(f"the landing page has no findings block: it needs the lines {LANDING_START!r} and "
                         f"{LANDING_END!r}, in that order")
    path = Path(figures) / SUMMARY_FILE
    lines = ["## What the book found", "",
             summary_markdown(json.loads(path.read_text()), base="book") if path.is_file() else
             f"No summary of the scorecard yet (`figures/{SUMMARY_FILE}`): `make book` writes it after the chapters.", ""]
    if (Path(figures) / LANDING_FIGURE).is_file():
        lines += [f"![S5's Constant trajectory: LongPPL of the Last4 merges and of the raw checkpoints against the "
                  f"long-context tokens Dl](../figures/{LANDING_FIGURE})", "",
                  "*The title claim at toy scale: S5's Constant trajectory, LongPPL against Dl "
                  "([Chapter 4](../notebooks/04_constant_last4.ipynb)).*", ""]
    else:
        lines += [f"*Chapter 4's figure of S5's Last4 LongPPL against Dl (`figures/{LANDING_FIGURE}`) appears here "
                  "once chapter 4 has run at toy.*", ""]
    return page[:start + len(LANDING_START)] + "\n\n" + "\n".join(lines).rstrip() + "\n\n" + page[end:]
