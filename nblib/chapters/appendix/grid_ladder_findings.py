"""The toy grid designs' ladder in words (appendix A, "The grid designs tried"; appendix B,
"Past the turn"): the grid-level targets of the toy Part 1, the ladder table read from
data/probes/toy_grid_ladder.csv, and the findings the chapters print from it.
Split from nblib.chapters.appendix.toy_design, which re-exports these names."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nblib.budgets import targets as T
from nblib.probes import grid_ladder as GL

# The grid-level targets of the toy Part 1 (chapters 3 and 4), read from nblib.budgets.targets as the
# scorecard reads them: held-out R² of Eq. 1 on both splits (Fig. 3), Lin's CCC of
# Constant-Last4 against Linear-Decay at S4 (Fig. 4b) and the share of S1-S4 trajectory points
# where Last4 is at or below Raw (§4.1). Until issue 64 the ladder held R² and the Constant-Last4
# law to 0.8 and S5's ρ to -0.8; the rows' verdicts here use today's targets.
GRID_TARGETS = {GL.R2["S1-S3 → S4"]: T.LAW_R2, GL.R2["S1-S4 → S5"]: T.LAW_R2, GL.CCC: T.CCC,
                GL.LAST4_LE_RAW: T.AT_OR_BELOW_RAW_PCT}
# §4.2 and Table 4 at toy: S5's Constant trajectory keeps improving (Spearman rho of Last4
# LongPPL against Dl at most targets.S5_RHO) and the Constant-Last4 law extrapolates; ("<=", t)
# is an upper bound
TRAJECTORY_TARGETS = {GL.S5_RHO: ("<=", T.S5_RHO), GL.CL4_R2["held-out S4 R²"]: T.LAW_R2,
                      GL.CL4_R2["S5 trajectory R²"]: T.LAW_R2}


def _target(t) -> tuple[str, float]:
    return t if isinstance(t, tuple) else (">=", t)


def _meets(value: float, t) -> bool:
    op, bound = _target(t)
    return value <= bound if op == "<=" else value >= bound


def _target_words(t) -> str:
    op, bound = _target(t)
    return f"≤ {bound:g}" if op == "<=" else f"{bound:g}"


def grid_ladder_table(records: pd.DataFrame) -> pd.DataFrame:
    """The toy grid designs tried, one row each (data/probes/toy_grid_ladder.csv):
    what changed, the code it ran (commit), and the grid-level measures of `GRID_TARGETS`
    (empty where that design was not measured). ValueError naming a missing column."""
    need = ["design", "change", "code", *GRID_TARGETS]
    missing = [c for c in need if c not in records.columns]
    if missing:
        raise ValueError(f"grid ladder records lack columns {missing}; expected {need}")
    out = records[need + [c for c in records.columns if c not in need]].copy()
    for c in [*GRID_TARGETS, *(k for k in TRAJECTORY_TARGETS if k in out.columns)]:
        out[c] = pd.to_numeric(out[c], errors="coerce")
    return out.reset_index(drop=True)


def grid_ladder_findings(ladder: pd.DataFrame, targets: dict = GRID_TARGETS) -> str:
    """The ladder in words: per design, which targets it meets and misses (with the values),
    then every measure that no design reaches, with the best value seen and the design."""
    lines = []
    targets = {k: t for k, t in targets.items() if k in ladder.columns}
    for _, r in ladder.iterrows():
        met = [k for k, t in targets.items() if not np.isnan(r[k]) and _meets(r[k], t)]
        missed = [f"{k} {r[k]:g} (target {_target_words(t)})" for k, t in targets.items()
                  if not np.isnan(r[k]) and not _meets(r[k], t)]
        unmeasured = [k for k in targets if np.isnan(r[k])]
        if not met and not missed:
            continue
        text = f"- **{r['design']}** ({r['change']}): "
        text += ("meets " + ", ".join(met) if met else "meets none") + ("; misses " + ", ".join(missed) if missed else "")
        text += (f"; not measured: {', '.join(unmeasured)}." if unmeasured else ".")
        lines.append(text)
    for k, t in targets.items():
        vals = ladder[k].dropna()
        if len(vals) and not any(_meets(v, t) for v in vals):
            op, bound = _target(t)
            best_at = vals.idxmin() if op == "<=" else vals.idxmax()
            lines.append(f"- No design reaches {k} {'≤' if op == '<=' else '≥'} {bound:g}: the best is "
                         f"{vals[best_at]:g} ({ladder.loc[best_at, 'design']}).")
    both = [r["design"] for _, r in ladder.iterrows()
            if all(not np.isnan(r[k]) and _meets(r[k], t) for k, t in targets.items())]
    lines.append("- Every target at once: " + (", ".join(both) if both else "no design so far") + ".")
    return "\n".join(lines)


def book_grid_findings(ladder: pd.DataFrame, before: str = "F", now: str | None = None) -> str:
    """Why the book's grid is `now` (`grid_ladder.BOOK_GRID_DESIGN`) and not `before` (appendix A):
    for each, its latest fresh row of the ladder (`book_grid_rows`): S5's Constant trajectory
    (§4.2: Spearman rho of Last4 LongPPL against Dl, and its LongPPL along the trajectory),
    chapter 3's held-out R² (Fig. 3) and Part 1's wall time, then which meets the trajectory
    target of `TRAJECTORY_TARGETS`."""
    now = now or GL.BOOK_GRID_DESIGN
    rho_t = TRAJECTORY_TARGETS[GL.S5_RHO]
    lines, meets = [], {}
    for design in (before, now):
        rows = GL.book_grid_rows(ladder, design)
        if rows.empty:
            continue
        r = rows.iloc[-1]
        num = {c: pd.to_numeric(r.get(c), errors="coerce") for c in (GL.S5_RHO, *GL.S5_AT.values(), *GL.R2.values(),
                                                                      GL.PART1_MIN)}
        path = " -> ".join(f"{num[c]:.2f} at {dl}" for dl, c in GL.S5_AT.items() if pd.notna(num[c]))
        meets[design] = pd.notna(num[GL.S5_RHO]) and _meets(num[GL.S5_RHO], rho_t)
        lines.append(f"- **{design}** (row {r['design']}): S5's Last4 LongPPL {path or 'not measured'} "
                     f"(rho {num[GL.S5_RHO]:+.2f}); chapter 3's held-out R² {num[GL.R2['S1-S3 → S4']]:.3f} / "
                     f"{num[GL.R2['S1-S4 → S5']]:.3f}; Part 1 "
                     + (f"{num[GL.PART1_MIN]:.1f} min" if pd.notna(num[GL.PART1_MIN]) else "not timed") + ".")
    if len(meets) == 2:
        lines.append(f"- S5 keeps improving (rho {_target_words(rho_t)}): {before} "
                     f"{'yes' if meets[before] else 'no'}, {now} {'yes' if meets[now] else 'no'}.")
    return "\n".join(lines)


def past_turn_findings(ladder: pd.DataFrame, design: str, book: str | None = None) -> str:
    """A design run whole past the turn (issue: chapter 4's protocol claims), against the book's
    grid: chapter 4's measures (§4.1, Fig. 4b: CCC of Last4 against Linear-Decay at S4, Last4's
    mean gap to it, Last4 <= Raw; §4.2: S5's rho) and the two laws' held-out R² (Fig. 3; Table
    4), each with its target (`GRID_TARGETS`, `TRAJECTORY_TARGETS`) and whether it is met, and
    the spread of chapter 3's held-out S4 points (`grid_ladder.S4_RANGE`) on both.
    The book's values are its latest fresh row (`grid_ladder.book_grid_rows`)."""
    book = book or GL.BOOK_GRID_DESIGN
    ours = "the book's grid"
    rows = {ours: GL.book_grid_rows(ladder, book), design: ladder[ladder.design == design]}
    if any(r.empty for r in rows.values()):
        missing = [k for k, r in rows.items() if r.empty]
        raise ValueError(f"no ladder row for {missing}; designs in the ladder: {', '.join(ladder.design.astype(str))}")
    row = {k: r.iloc[-1] for k, r in rows.items()}
    targets = {**GRID_TARGETS, **TRAJECTORY_TARGETS}
    groups = {"chapter 4's protocol": (GL.CCC, GL.LAST4_LE_RAW, GL.S5_RHO),
              "the laws": (*GL.R2.values(), *GL.CL4_R2.values())}
    lines = []
    for group, cols in groups.items():
        parts = []
        for c in cols:
            vals = {k: pd.to_numeric(r.get(c), errors="coerce") for k, r in row.items()}
            mark = "met" if pd.notna(vals[design]) and _meets(vals[design], targets[c]) else "missed"
            parts.append(f"{c} {vals[ours]:.3g} -> **{vals[design]:.3g}** "
                         f"(target {_target_words(targets[c])}: {mark})")
        lines.append(f"- {group}: " + "; ".join(parts) + ".")
    spread = {k: pd.to_numeric(r.get(GL.S4_RANGE), errors="coerce") for k, r in row.items()}
    if spread[ours] > 0 and pd.notna(spread[design]):
        lines.append(f"- the held-out S4 points of chapter 3 span {spread[design]:.3f} in log LongPPL on {design}, "
                     f"{spread[design] / spread[ours]:.0%} of the {spread[ours]:.3f} they span on the book's grid: "
                     "a held-out R² divides its residuals by that spread.")
    gap = pd.to_numeric(row[design].get(GL.GAP), errors="coerce")
    lines.append(f"- {design}'s Last4 sits {abs(gap):.2f} {'below' if gap < 0 else 'above'} Linear-Decay at S4 "
                 f"(mean LongPPL; the book's grid: {pd.to_numeric(row[ours].get(GL.GAP), errors='coerce'):+.2f}).")
    return "\n".join(lines)
