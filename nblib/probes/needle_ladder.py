"""Append one design's row to chapter 5's needle ladder, computed from chapter 5's tables
(chapter 5, "Chapter 5 on the ladder's trajectories").

Each row is chapter 5 run whole on one design's S5 trajectory (the book's, or a design of
chapter 2's ladder through `python -m nblib.book run --budget-file ... --chapters
05_downstream`). It carries the measures §5.1's trend is held to at toy scale (LCCP paper
Fig. 7, Fig. 8a, Fig. 18, Table 14), each read from the tables that chapter writes:

- needle_trajectory.csv: the code-form single needles' mean at every trajectory point. From it
  come Last4's Spearman ρ of the per-piece hit rate and of the needle gain against Dl, the
  mean score at the first point, Raw's and Last4's score at the last point, and the larger
  control score there (the prompt without the needle line).
- code_needles.csv, the rows after the 4x extension: the best mean score over starting points
  and protocols, and the mean at the last starting point.
- retrieval_heads.csv: the best head's score at the last point (Fig. 18).
- table14.csv: how many of Table 14's five rows have both a Raw and a Last4 value.

    python -m nblib.probes needle_ladder --figures _build/designK/figures --design K \\
        --change "design K of chapter 2's ladder" --measured "chapter 5 on K's cached runs" --dry-run
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

import pandas as pd

from nblib.budgets import targets as T
from nblib.probes import results
from nblib.store.atomic import atomic_write_text
from nblib.stats import spearman_rho
from nblib.store.provenance import REPO_ROOT, code_version

RECORDS = ("toy_needle_ladder.csv",)
CHAPTER = "05_downstream"
RHO_PIECE = "Last4 rho(Dl, piece hit)"
RHO_GAIN = "Last4 rho(Dl, needle gain)"
FIRST = "score at first (mean)"
LAST = {"Raw": "Raw score at last", "Last4": "Last4 score at last"}
CONTROL = "control at last (max)"
EXT_BEST = "4x score, best start"
EXT_LAST = "4x score, last start"
RETRIEVAL = "best retrieval head at last"
TABLE14 = "Table 14 rows complete"
LAST_DL = "last Dl"
MINUTES = "chapter 5 min"
COLUMNS = ["design", "grid row", "change", "code", RHO_PIECE, RHO_GAIN, FIRST, LAST["Raw"], LAST["Last4"], CONTROL,
           EXT_BEST, EXT_LAST, RETRIEVAL, TABLE14, LAST_DL, MINUTES, "measured"]
DIGITS = {RHO_PIECE: 3, RHO_GAIN: 3, FIRST: 1, LAST["Raw"]: 1, LAST["Last4"]: 1, CONTROL: 1, EXT_BEST: 1,
          EXT_LAST: 1, RETRIEVAL: 3, TABLE14: 0, LAST_DL: 0, MINUTES: 1}
# the targets for the code-form needles at toy scale, read from nblib.budgets.targets as the scorecard
# reads them (chapter 5 states them beside the rows). Until issue 64 the ladder held the score
# at the last point to 20; the scorecard's 15 is the one target now.
TARGETS = {"rho": T.NEEDLE_RHO, "score": T.NEEDLE_SCORE, "above_control": T.NEEDLE_ABOVE_CONTROL,
           "retrieval": T.RETRIEVAL_HEAD, "table14": T.TABLE14_ROWS}


def needle_measures(figures: Path) -> dict:
    """The ladder's measures of chapter 5's tables in `figures` (a build's figures folder, its
    05_downstream inside), unrounded. A table that is missing is an error naming it."""
    folder = Path(figures) / CHAPTER
    need = ["needle_trajectory.csv", "code_needles.csv", "retrieval_heads.csv", "table14.csv"]
    missing = [n for n in need if not (folder / n).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} lacks {', '.join(missing)}: run chapter 5 on this design first")
    traj = pd.read_csv(folder / "needle_trajectory.csv")
    first, last = traj.dl.min(), traj.dl.max()
    last4 = traj[traj.protocol == "Last4"].sort_values("dl")
    out = {RHO_PIECE: spearman_rho(last4.dl, last4.piece_hit),
           RHO_GAIN: spearman_rho(last4.dl, last4.needle_gain),
           FIRST: float(traj[traj.dl == first].score.mean()), LAST_DL: float(last)}
    at_last = traj[traj.dl == last].set_index("protocol")
    out.update({col: float(at_last.loc[p, "score"]) for p, col in LAST.items()})
    out[CONTROL] = float(at_last.control_score.max())
    needles = pd.read_csv(folder / "code_needles.csv")
    ext = needles[needles.stage.str.startswith("after the 4x")]
    if len(ext):
        means = ext.groupby(["dl", "protocol"]).score.mean()
        out[EXT_BEST] = float(means.max())
        out[EXT_LAST] = float(means.loc[means.index.get_level_values("dl").max()].mean())
    heads = pd.read_csv(folder / "retrieval_heads.csv")
    out[RETRIEVAL] = float(heads[heads.dl == heads.dl.max()].score.max())
    t14 = pd.read_csv(folder / "table14.csv")
    out[TABLE14] = float(t14[["Raw", "Last4"]].notna().all(axis=1).sum())
    return out


def chapter_minutes(figures: Path) -> float | None:
    """Chapter 5's wall time in minutes from the build's chapter_times.json beside `figures`
    (or the book's figures/chapter_times_toy.json), None where neither names it."""
    figures = Path(figures)
    for p in (figures.parent / "chapter_times.json", figures / "chapter_times_toy.json"):
        if p.is_file():
            rows = json.loads(p.read_text()).get("chapters", [])
            for r in rows if isinstance(rows, list) else []:
                if r.get("chapter") == CHAPTER and r.get("wall_s"):
                    return r["wall_s"] / 60
    return None


def meets(row: dict) -> dict:
    """Which of the targets a ladder row meets: {target: bool} (NaN or missing counts as not)."""
    def v(k):
        x = row.get(k)
        return float("nan") if x is None or x == "" else float(x)
    # rounded as the rows are stored, so a row read back meets what it met when written
    return {f"piece hit and needle gain rise (rho >= {TARGETS['rho']:g})":
            round(min(v(RHO_PIECE), v(RHO_GAIN)), 3) >= TARGETS["rho"],
            f"Raw and Last4 >= {TARGETS['score']:g} at the last point":
            min(v(LAST["Raw"]), v(LAST["Last4"])) >= TARGETS["score"],
            f">= {TARGETS['above_control']:g} above control":
            min(v(LAST["Raw"]), v(LAST["Last4"])) - v(CONTROL) >= TARGETS["above_control"],
            "mean rises first to last": (v(LAST["Raw"]) + v(LAST["Last4"])) / 2 > v(FIRST),
            "above 0 after the 4x extension": v(EXT_BEST) > 0,
            f"a retrieval head above {TARGETS['retrieval']:g} at the last point": v(RETRIEVAL) > TARGETS["retrieval"],
            "Table 14 complete": v(TABLE14) >= TARGETS["table14"]}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes needle_ladder", description=__doc__.splitlines()[0])
    p.add_argument("--figures", default=str(REPO_ROOT / "figures"), help="the figures folder chapter 5 wrote")
    p.add_argument("--design", required=True, help="the design's letter (chapter 2's ladder), a new one here")
    p.add_argument("--grid-row", default=None,
                   help="its row in chapter 2's ladder (toy_grid_ladder.csv), for the S5 LongPPL and R² beside it "
                        "(default: the design's letter)")
    p.add_argument("--change", required=True, help="what the design is")
    p.add_argument("--measured", required=True, help="which chapters ran, on which store")
    p.add_argument("--code", default="", help="the commit it ran (default: this checkout's)")
    p.add_argument("--minutes", type=float, default=None,
                   help="chapter 5's wall time (default: read from chapter_times beside --figures)")
    p.add_argument("--dry-run", action="store_true", help="print the row, write nothing")
    p.add_argument("--out", default=RECORDS[0], help="record file (a name in data/probes, or a path)")
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parser().parse_args(argv)
    out = results.record_path(a.out)
    if out.is_file() and a.design in set(pd.read_csv(out)["design"].astype(str)):
        raise SystemExit(f"error: design {a.design!r} is already in {out}; name a new one")
    code = a.code or code_version()["git"][:7] + (" with local changes" if code_version()["dirty"] else "")
    minutes = a.minutes if a.minutes is not None else chapter_minutes(Path(a.figures))
    m = {**needle_measures(Path(a.figures)), MINUTES: minutes}
    row = {"design": a.design, "grid row": a.grid_row or a.design, "change": a.change, "code": code,
           **{k: None if v is None else f"{v:.{DIGITS[k]}f}" for k, v in m.items()}, "measured": a.measured}
    print(row)
    for target, ok in meets(row).items():
        print(f"  {'meets' if ok else 'misses'}: {target}")
    if not a.dry_run:
        if not out.is_file():
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerow(COLUMNS)
            atomic_write_text(out, buf.getvalue())
        results.append_csv_row(out, row, module=__spec__.name, argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
