"""CLI: fit a scaling law to a run table.

    python -m nblib.lccp.scaling fit RUNS.csv [--law additive] [--holdout S4] [--bootstrap 200] [--out PRED.csv]

RUNS.csv has columns N, Ds, Dl, longppl (absolute counts; LongPPL) and optionally scale.
Prints parameters (normalised and absolute units) with bootstrap percentile intervals and,
with --holdout, the held-out R^2/MAPE in log(LongPPL) space (App. A.2). A bad table exits 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from nblib.cli import run_cli
from nblib.store.atomic import atomic_path
from .bootstrap import bootstrap
from .fit import fit_law, split_scales
from .profile import POLISH_STARTS
from .laws import VARIANTS, get_law
from .metrics import mape_log, r2_log
from .table import TableError, check_table, table_target


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m nblib.lccp.scaling", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit", help="fit a law to RUNS.csv (App. A.5 procedure)")
    f.add_argument("runs", help="csv with columns N, Ds, Dl, longppl [, scale]")
    f.add_argument("--law", default="additive", help=f"one of: {', '.join(VARIANTS)}")
    f.add_argument("--holdout", nargs="+", default=None, metavar="SCALE",
                   help="scales held out of the fit and evaluated (needs a scale column)")
    f.add_argument("--bootstrap", type=int, default=200, metavar="N_BOOT",
                   help="bootstrap refits for intervals (0: none)")
    f.add_argument("--ci", type=float, default=0.95, help="interval coverage")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--n-starts", type=int, default=POLISH_STARTS,
                   help="L-BFGS-B runs on the profile, from the best local minima of the start grid")
    f.add_argument("--out", default=None, help="write predictions csv here")
    return ap


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def run_fit(args) -> int:
    try:
        with open(args.runs, "rb") as f:
            if b"\0" in f.read(8192):
                raise TableError(f"cannot read {args.runs}: not a text CSV file (binary content)")
        raw = pd.read_csv(args.runs)
    except UnicodeDecodeError:
        raise TableError(f"cannot read {args.runs}: not a text CSV file (binary content)") from None
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise TableError(f"cannot read {args.runs}: {e}") from None
    if args.out:
        parent = Path(args.out).resolve().parent
        if Path(args.out).is_dir() or not parent.is_dir() or not os.access(parent, os.W_OK):
            raise TableError(f"--out {args.out} cannot be written (a folder, or a folder that is missing or not "
                             f"writable); allowed: a file path in a writable folder")
    if args.law not in VARIANTS:
        raise TableError(f"unknown law {args.law!r}; allowed: {', '.join(VARIANTS)}")
    law = get_law(args.law)
    if args.bootstrap != 0 and args.bootstrap < 2:
        raise TableError(f"--bootstrap must be 0 or >= 2, got {args.bootstrap}")
    if not 0 < args.ci < 1:
        raise TableError(f"--ci must be in (0, 1), got {args.ci}")
    if args.n_starts < 1:
        raise TableError(f"--n-starts must be >= 1, got {args.n_starts}")
    table = check_table(raw, need_scale=args.holdout is not None).reset_index(drop=True)
    if table["longppl"].nunique() < 2:
        raise TableError(f"every longppl in {args.runs} is {table['longppl'].iloc[0]}: nothing to fit; allowed: a "
                         f"table whose LongPPL varies")
    if args.holdout:
        train_scales = [s for s in map(str, table["scale"].unique()) if s not in set(args.holdout)]
        if not train_scales:
            raise TableError(f"--holdout {' '.join(args.holdout)} names every scale of the table; allowed: leave at "
                             f"least one scale to fit on")
        train, test = split_scales(table, train_scales, args.holdout)
    else:
        train, test = table, table.iloc[:0]
    check_table(train, n_params=law.n_params)  # fewer points than params -> clear error

    kw = dict(n_starts=args.n_starts)
    if args.bootstrap:
        boot = bootstrap(train, law, n_boot=args.bootstrap, seed=args.seed,
                         points=table[["N", "Ds", "Dl"]], ci=args.ci, **kw)
        fit = boot.fit
    else:
        boot, fit = None, fit_law(train, law, **kw)

    print(f"law {law.name}: log(LongPPL) = {law.formula}")
    print(f"fit on {fit.n_train} configurations; beta_bar from slices: "
          + ", ".join(f"{k}={'none' if v is None else _fmt(v)}" for k, v in fit.beta_bar.items()))
    print(f"training R^2 = {fit.r2:.4f}, MAPE = {fit.mape:.2f}%  (log(LongPPL) space)")
    for line in fit.at_bound:
        print(f"note: {line}")
    if boot and boot.n_at_bound:
        print(f"note: {boot.n_at_bound} of {args.bootstrap} bootstrap refits have a parameter on a bound")
    pct = f"{100 * args.ci:g}%"
    for title, absolute in (("normalised units (N/1e8, D/1e9)", False), ("absolute counts (Table 11 style)", True)):
        print(f"\nparameters, {title}" + (f", {pct} bootstrap interval ({args.bootstrap} refits)" if boot else ""))
        est = fit.absolute_params() if absolute else fit.params
        iv = boot.intervals(absolute=absolute) if boot else None
        for name in law.param_names:
            line = f"  {name:>8s} = {_fmt(est[name]):>12s}"
            if iv is not None:
                line += f"   [{_fmt(iv.loc[name, 'lo'])}, {_fmt(iv.loc[name, 'hi'])}]"
            print(line)

    if len(test):
        y_t, yhat_t = table_target(test), fit.predict_table(test)
        print(f"\nheld-out {', '.join(args.holdout)} ({len(test)} configurations): "
              f"R^2 = {r2_log(y_t, yhat_t):.4f}, MAPE = {mape_log(y_t, yhat_t):.2f}%")

    if args.out:
        out = raw.loc[:, [c for c in ("scale", "N", "Ds", "Dl", "longppl") if c in raw.columns]].copy()
        out["split"] = np.where(out.index.isin(test.index), "test", "train")
        out["log_longppl"] = table_target(table)
        out["pred_log_longppl"] = fit.predict_table(table)
        if boot:
            pi = boot.pred_intervals()
            out["pred_lo"], out["pred_hi"] = pi["pred_lo"].to_numpy(), pi["pred_hi"].to_numpy()
        with atomic_path(args.out, suffix=".csv") as tmp:
            out.to_csv(tmp, index=False)
        print(f"\npredictions written to {args.out}")
    return 0


def main(argv=None) -> int:
    return run_fit(_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(run_cli(main))
