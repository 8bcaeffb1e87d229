"""The book's scorecard: one row per claim of the two works, the source's number, the toy's
number read from the figures of the build, and a verdict by a rule that names its threshold.

    python -m nblib.chapters.claims.scorecard                      # the committed toy figures
    python -m nblib.chapters.claims.scorecard --figures _build/smoke/figures --budget smoke
    python -m nblib.chapters.claims.scorecard --budget-file examples/toy-own-data.toml   # its build's

Each `Claim` (the LCCP paper's in `lccp_claims`, the Gemma blog's in `blog_claims`) reads its
number from the saved tables of one build (`Figures`: the committed toy figures, or a smoke or
budget-file build's own), so the page follows the grid when the grid changes, and nothing on it
is typed by hand. Every threshold is read from `nblib.budgets.targets`, the one place the
scorecard, the chapters and the appendix's ladders share. The verdicts:

- **reproduced**: the toy meets the book's target for the whole claim;
- **partly**: the direction holds and a condition misses (the row names which);
- **within noise**: the difference the claim is about sits inside its named noise (a paired
  bootstrap interval), so the toy cannot tell;
- **out of reach at toy**: a committed ladder of at least three budgets measures the quantity and
  its fitted trend reaches the source's value only beyond the largest budget
  (`noise.out_of_reach`; no row takes it yet);
- **not**: the direction is reversed or the effect is absent;
- **not measured**: the build lacks the table.

A **control** row (`Claim.control`) is shown beside the claim it controls and left out of the
counts. The book runner writes the page (book/scorecard.md) after the chapters, right after
chapter 1 in the table of contents.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from nblib.budgets.budget_file import add_budget_args, budget_from_args
from nblib.chapters.claims.blog_claims import BLOG_CLAIMS
from nblib.chapters.claims.claim import VERDICTS, Figures, Measure
from nblib.chapters.claims.lccp_claims import LCCP_CLAIMS
from nblib.chapters.figures import figures_root
from nblib.store.provenance import REPO_ROOT

CLAIMS = LCCP_CLAIMS + BLOG_CLAIMS


def scorecard(figs: Figures, claims=CLAIMS) -> pd.DataFrame:
    """One row per claim: work, where, claim, source, toy (the measure as shown), verdict, rule,
    why, chapter and control."""
    rows = []
    for c in claims:
        try:
            m = c.measure(figs)
        except (KeyError, IndexError, ValueError, AttributeError) as e:  # a table of another shape: said
            m = Measure(float("nan"), f"unreadable: {type(e).__name__}: {e}")
        verdict = m.verdict if m.verdict is not None else c.rule.verdict(m.value)
        if not np.isfinite(m.value) and m.verdict is None:
            verdict = "not measured"
        rows.append({"work": c.work, "where": c.where, "claim": c.claim, "source": c.source, "toy": m.shown,
                     "value": m.value, "verdict": verdict, "rule": c.rule.words(), "why": c.why,
                     "chapter": c.chapter, "control": c.control})
    return pd.DataFrame(rows)


def verdict_counts(table: pd.DataFrame) -> dict[str, int]:
    """{verdict: rows} over the claims, control rows left out."""
    counted = table[~table.control.astype(bool)] if "control" in table else table
    c = counted.verdict.value_counts()
    return {v: int(c.get(v, 0)) for v in VERDICTS}


def verdict_line(figs: Figures, where: str, claims=CLAIMS) -> str:
    """One sentence: the scorecard's verdict on the claims at `where` (e.g. "§3.3, Fig. 3"),
    with the toy's number and the rule, for a chapter's "What we see"."""
    rows = scorecard(figs, [c for c in claims if c.where == where and not c.control])
    if rows.empty:
        raise ValueError(f"no claim at {where!r}; claims are at: {sorted({c.where for c in claims})}")
    return " ".join(f"**Verdict ({r.where}): {r.verdict}.** {r.claim[0].upper() + r.claim[1:]}: {r.toy}. Rule: "
                    f"{r.rule}." for r in rows.itertuples())


def _cell(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def _shown_root(root: Path) -> str:
    """A figures folder as the page names it: relative to the repository when inside it."""
    try:
        return str(Path(root).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return Path(root).name


def scorecard_markdown(figs: Figures, claims=CLAIMS) -> str:
    """The scorecard page: a count of verdicts, then one table per work."""
    t = scorecard(figs, claims)
    counts = verdict_counts(t)
    lines = ["# Scorecard: which claims the toy reproduces", "",
             f"Every number on this page is read from the figures of this build (`{_shown_root(figs.root)}`, budget "
             f"**{figs.budget}**) by `nblib.chapters.claims.scorecard`, and every verdict by the rule in its row, with thresholds "
             "from `nblib.budgets.targets`: **reproduced** when the toy meets the target for the whole claim, **partly** "
             "when the direction holds and a condition misses (named), **within noise** when the difference sits "
             "inside its paired bootstrap interval, **not** when the direction is reversed or the effect is absent. "
             "Control rows are shown beside their claim and not counted.", "",
             "Verdicts: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS) + ".", ""]
    for work, g in t.groupby("work", sort=False):
        lines += [f"## {work}", "", "| where | claim | source | toy | verdict | rule |", "|---|---|---|---|---|---|"]
        lines += [f"| {_cell(r.where)} | {_cell(r.claim)} | {_cell(r.source)} | {_cell(r.toy)} | "
                  f"**{'control: ' if r.control else ''}{r.verdict}** | {_cell(r.rule)} ({_cell(r.why)}) |"
                  for r in g.itertuples()]
        lines.append("")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m nblib.chapters.claims.scorecard", description=__doc__.splitlines()[0])
    add_budget_args(ap, default="toy", help="the budget the figures were made at")
    ap.add_argument("--figures", default=None,
                    help="a build's figures folder (default: the budget's; a budget file's build's, "
                         "_build/<file name>/figures)")
    return ap


def main(argv=None) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    b, _ = budget_from_args(ap, a)  # a budget file's figures are read at its base budget, as its chapters wrote them
    root = Path(a.figures) if a.figures else figures_root(b.name, a.budget_file)
    print(scorecard_markdown(Figures(root, b.name)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
