"""Append one toy grid design's row to chapter 2's ladder, computed from chapters 3-4's tables
(chapter 2, "The grid designs tried").

Each row is one design of the whole toy grid run through chapters 3 and 4, with the
grid-level measures the toy Part 1 is held to: held-out R² of Eq. 1 on both splits
(LCCP paper Fig. 3), Lin's CCC of Constant-Last4 against Linear-Decay at S4 (Fig. 4b, App. B),
the share of S1-S4 trajectory points where Last4 is at or below Raw, and Last4's mean gap to
Linear-Decay at S4; and, where chapter 4 wrote them, the S5 trajectory's Last4 Spearman ρ
against Dl with its LongPPL at Dl = 30 and 120 N(S1) (§4.2, Fig. 5 right), the Constant-Last4
law's held-out R² on S4 and on the S5 trajectory (Table 4's additive row), and Part 1's minutes.
The S5 trajectory's points themselves (dl, protocol, longppl, shortppl) go to
toy_grid_ladder_s5.jsonl with the design's letter, so chapter 2 can draw the designs' trajectories.

Rows A-H of data/probes/toy_grid_ladder.csv were read by hand from the outputs of chapters 3
and 4 at the commit in their `code` column (their manifest lists the commits that added them).
This module appends the next design's row, computed from the figures folder those chapters
wrote (`figures/` or a build's, e.g. `_build/avx2/figures`): R² from
03_scaling_law/fig03_r2_intervals.csv, CCC and the gap from 04_constant_last4/fig04b_ccc.csv.
The Last4 <= Raw share is in no table: it is read from chapter 4's executed output beside the
folder (`../logs/04_constant_last4.log` or `../notebooks/04_constant_last4.ipynb`, the line
`nblib.chapters.part1.protocol_findings.constant_last4_findings` prints), or given with --last4-le-raw.

    python -m nblib.probes grid_ladder --figures _build/avx2/figures --design I \\
        --change "as F, ..." --measured "chapters 3-4, fresh store" --dry-run
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from nblib.probes import results
from nblib.stats import spearman_rho
from nblib.store.provenance import REPO_ROOT, code_version

RECORDS = ("toy_grid_ladder.csv", "toy_grid_ladder_s5.jsonl")
R2 = {"S1-S3 → S4": "S1-S3 -> S4 R²", "S1-S4 → S5": "S1-S4 -> S5 R²"}
CCC = "CCC Last4 vs LD (S4 LongPPL)"
LAST4_LE_RAW = "Last4 <= Raw (% of S1-S4 points)"
GAP = "Last4 - LD (S4 mean LongPPL)"
S5_RHO = "S5 Last4 rho(Dl, LongPPL)"
S5_AT = {30: "S5 Last4 LongPPL at 30", 120: "S5 Last4 LongPPL at 120", 150: "S5 Last4 LongPPL at 150"}
CL4_R2 = {"held-out S4 R²": "CL4 law S4 R²", "S5 trajectory R²": "CL4 law S5 R²"}
PART1_MIN = "Part 1 min"
# the spread chapter 3's held-out S4 points have to explain: max - min of log LongPPL over S4's
# Linear-Decay runs (a held-out R² divides its residuals by that spread)
S4_RANGE = "S4 LD log-LongPPL range"
# the digits the hand-measured rows carry
DIGITS = {**{c: 3 for c in R2.values()}, CCC: 3, LAST4_LE_RAW: 1, GAP: 2, S5_RHO: 3,
          **{c: 2 for c in S5_AT.values()}, **{c: 3 for c in CL4_R2.values()}, PART1_MIN: 1, S4_RANGE: 3}
# The book's own toy grid in the ladder: its rows are the design's letter, and the letter with 2, 3,
# ... for the same grid re-run fresh on other hosts. F was the book's grid until design V; Vb is V
# with every run after the short stage in bf16 (Budget.long_precision); Vc, the book's since
# then, is Vb with the LongPPL reference and the short stages of S3 and S5 in bf16 too
# (Budget.bf16_short_scales) and S1's second trunk alone for the seed spread.
BOOK_GRID_DESIGN = "Vc"
# Rows of another letter that ran the book's grid too. Vb2 ran Vb under AVX2 kernels with
# long_precision=fp32, and in fp32 Vb and Vc are one grid: Vc changes only which runs train in bf16
# (and drops a trunk no ladder measure reads), so every run of Vb2 is Vc's at fp32.
BOOK_GRID_ALSO = {"Vc": ("Vb2",)}
# The ladder row the committed figures (figures/02_* to 05_*) were built as: the book's grid run
# fresh on the Intel Xeon host (issue 64's build). Row Vc is the same grid on the AMD EPYC host.
FIGURES_ROW = "Vc2"
# Where each of the book grid's rows ran: (host, precision and instruction set). What varied
# between two rows is read from here, so a spread is labelled by what changed (hosts, or
# precision and instruction set on one host), never "hosts" when one host ran both.
RAN_ON = {"Vc": ("AMD EPYC (AVX512-BF16)", "bf16 autocast, AVX-512 kernels"),
          "Vb2": ("AMD EPYC (AVX512-BF16)", "fp32, every kernel capped at AVX2"),
          "Vc2": ("Intel Xeon (AMX-BF16, AVX512-BF16)", "bf16 autocast, AVX-512 and AMX kernels")}
_LAST4_LINE = re.compile(r"Constant-Last4 ≤ Constant-Raw in LongPPL on ([0-9.]+)% of the")


def book_grid_rows(ladder: pd.DataFrame, design: str = BOOK_GRID_DESIGN) -> pd.DataFrame:
    """The ladder's rows of one grid, by default the book's own (`BOOK_GRID_DESIGN`): `design`,
    its fresh re-runs (`design` + a number) and the rows `BOOK_GRID_ALSO` names for it, one per
    host, instruction set or precision at the same seed, so their spread is the host spread of
    each measure."""
    names = ladder["design"].astype(str)
    return ladder[names.str.fullmatch(re.escape(design) + r"\d*") | names.isin(BOOK_GRID_ALSO.get(design, ()))]


def what_varied(designs: list[str]) -> str:
    """Words for what varied between ladder rows of one grid (`RAN_ON`): 'hosts', 'precision and
    instruction set, one host', both, or 'seeds or code versions' when neither did; a row
    `RAN_ON` lacks makes it 'runs (what varied is not recorded)'."""
    if any(d not in RAN_ON for d in designs):
        return "runs (what varied is not recorded)"
    hosts = {RAN_ON[d][0] for d in designs}
    kernels = {RAN_ON[d][1] for d in designs}
    if len(hosts) > 1 and len(kernels) > 1:
        return f"{len(hosts)} hosts, precision and instruction set"
    if len(hosts) > 1:
        return f"{len(hosts)} hosts"
    if len(kernels) > 1:
        return "precision and instruction set, one host"
    return "code versions, one host and precision"


def last4_le_raw_in(text: str) -> float | None:
    """The Last4 <= Raw share (percent) in chapter 4's printed findings, or None."""
    found = _LAST4_LINE.findall(text)
    return float(found[-1]) if found else None


def chapter4_output(figures: Path) -> Path | None:
    """Chapter 4's executed output beside a build's figures folder (its log, else its notebook)."""
    build = figures.parent
    for p in (build / "logs" / "04_constant_last4.log", build / "notebooks" / "04_constant_last4.ipynb"):
        if p.is_file():
            return p
    return None


def design_measures(figures: Path, last4_le_raw: float | None = None) -> dict:
    """The ladder's measures of one design from chapters 3-4's tables in `figures`, rounded as
    the committed rows are; `last4_le_raw` (percent) where no executed chapter 4 is beside it."""
    figures = Path(figures)
    r2 = pd.read_csv(figures / "03_scaling_law" / "fig03_r2_intervals.csv").set_index("split")["R²"]
    ccc = pd.read_csv(figures / "04_constant_last4" / "fig04b_ccc.csv").set_index(["metric", "rule"])
    out = {col: float(r2[split]) for split, col in R2.items()}
    out[CCC] = float(ccc.loc[("longppl", "last4"), "CCC"])
    out[GAP] = float(ccc.loc[("longppl", "last4"), "mean gap to LD"])
    out[S4_RANGE] = s4_range(figures)
    if last4_le_raw is None:
        src = chapter4_output(figures)
        last4_le_raw = last4_le_raw_in(src.read_text()) if src else None
    out[LAST4_LE_RAW] = last4_le_raw
    out.update(trajectory_measures(figures))
    return {k: None if v is None else round(v, DIGITS[k]) for k, v in out.items()}


def s4_range(figures: Path) -> float:
    """`S4_RANGE` from chapter 3's Linear-Decay table in `figures` (runs_linear_decay.csv)."""
    t = pd.read_csv(Path(figures) / "03_scaling_law" / "runs_linear_decay.csv")
    y = np.log(t.loc[t.scale == "S4", "longppl"].to_numpy(dtype=float))
    if y.size == 0:
        raise ValueError(f"no S4 rows in {figures}/03_scaling_law/runs_linear_decay.csv")
    return float(y.max() - y.min())


def trajectory_measures(figures: Path) -> dict:
    """The S5 trajectory's Last4 ρ(Dl, LongPPL) over every point it has (from its first Last4 window)
    and its LongPPL at Dl = 30, 120 and 150, and the
    Constant-Last4 law's two held-out R² (additive), from chapter 4's tables; {} where a
    design's chapter 4 did not write them."""
    out = {}
    traj = figures / "04_constant_last4" / "s5_trajectory.csv"
    if traj.is_file():
        t = pd.read_csv(traj)
        last4 = t[t.protocol == "Last4"].set_index("dl")["longppl"].sort_index()
        out[S5_RHO] = spearman_rho(last4.index, last4.to_numpy())
        out.update({col: float(last4[dl]) for dl, col in S5_AT.items() if dl in last4.index})
    table4 = figures / "04_constant_last4" / "table04_variant_ablation_cl4.csv"
    if table4.is_file():
        row = pd.read_csv(table4).set_index("variant").loc["additive"]
        out.update({col: float(row[src]) for src, col in CL4_R2.items()})
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes grid_ladder", description=__doc__.splitlines()[0])
    p.add_argument("--figures", default=str(REPO_ROOT / "figures"), help="the figures folder of chapters 3 and 4")
    p.add_argument("--design", required=True, help="the design's letter (a new one)")
    p.add_argument("--change", required=True, help="what it changes, against which design")
    p.add_argument("--measured", required=True, help="which chapters ran, on which store")
    p.add_argument("--code", default="", help="the commit it ran (default: this checkout's)")
    p.add_argument("--last4-le-raw", type=float, default=None,
                   help="Last4 <= Raw in percent (default: read from chapter 4's output beside --figures)")
    p.add_argument("--part1-minutes", type=float, default=None, help="Part 1's fresh wall time (chapter_times)")
    p.add_argument("--dry-run", action="store_true", help="print the row, write nothing")
    p.add_argument("--out", default=RECORDS[0], help="record file (a name in data/probes, or a path)")
    p.add_argument("--out-s5", default=RECORDS[1], help="the S5 trajectory's record file (JSON lines)")
    p.add_argument("--no-s5", action="store_true",
                   help="record no S5 trajectory points (the design shares another design's trajectory)")
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parser().parse_args(argv)
    out = results.record_path(a.out)
    if a.design in set(pd.read_csv(out)["design"].astype(str)):
        raise SystemExit(f"error: design {a.design!r} is already in {out}; name a new one")
    code = a.code or code_version()["git"][:7] + (" with local changes" if code_version()["dirty"] else "")
    row = {"design": a.design, "change": a.change, "code": code, **design_measures(Path(a.figures), a.last4_le_raw),
           PART1_MIN: None if a.part1_minutes is None else round(a.part1_minutes, 1), "measured": a.measured}
    row = {k: (f"{v:.{DIGITS[k]}f}" if k in DIGITS and v is not None else v) for k, v in row.items()}
    print(row)
    if not a.dry_run:
        results.append_csv_row(out, row, module=__spec__.name, argv=argv)
        traj = Path(a.figures) / "04_constant_last4" / "s5_trajectory.csv"
        if traj.is_file() and not a.no_s5:
            points = pd.read_csv(traj).assign(design=a.design)
            results.append_records(a.out_s5, points.to_dict("records"), module=__spec__.name, argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
