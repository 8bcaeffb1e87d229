"""Benchmark: every Eq. 1 and Eq. 2 fit of chapters 3 and 4 at toy, the first implementation
(fit_law(method="multistart"): a coarse start grid, then L-BFGS-B on all parameters from 16
starts) against variable projection (method="profile", the default).

Inputs are the committed toy tables, so the benchmark needs no run store:
- figures/03_scaling_law/runs_linear_decay.csv: chapter 3's fits. Fig. 3's two held-out
  fits, Table 11's two bootstraps (the budget's n_boot refits each) with their VarPro
  cross-checks, Table 3 (10 variants x 2 splits), the fit CLI's bootstrap (20 refits on
  S1-S4), and the ShortPPL cross-check (2 fits).
- figures/04_constant_last4/runs_constant_last4.csv: chapter 4's fits. Fig. 5's two held-out
  fits, Table 4 (10 variants x 2 splits), Fig. 6's prefix fits of Eq. 2, Fig. 17's two Eq. 2
  fits, and the monitor's Eq. 2 fit with max(8, n_boot / 2) bootstrap refits.

A bootstrap is timed as the chapter runs it: the full-data fit, then one refit per resample
(App. A.5's slice thresholds recomputed on each). New refits polish from the full-data
optimum; old ones run the first implementation's multistart with that optimum as an extra
start. The old method is timed on the first `--old-boot` refits and scaled to the full count.
Every fit runs in this one process (one core), so a total here bounds the chapters' time on
two cores. Each fit's App. A.5 objective is recorded for both methods (for bootstraps: the
full fit and the refits timed with both).

    python -m benchmarks.bench_fit    # writes benchmarks/results/bench_fit.{json,md} and bench_fit.manifest.json
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from nblib.budgets import get_budget
from nblib.lccp import scaling
from nblib.probes.results import command_line, write_manifest
from nblib.store.atomic import atomic_write_json, atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
LD = ROOT / "figures" / "03_scaling_law" / "runs_linear_decay.csv"
CL4 = ROOT / "figures" / "04_constant_last4" / "runs_constant_last4.csv"
OUT = ROOT / "benchmarks" / "results"
METHODS = ("multistart", "profile")
LABEL = {"multistart": "old", "profile": "new"}


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def single(rows: list, chapter: str, name: str, fit_of) -> None:
    """One fit per method: fit_of(method) -> FitResult."""
    rec = {"chapter": chapter, "item": name, "fits": 1}
    for m in METHODS:
        f, t = timed(lambda: fit_of(m))
        rec[f"{LABEL[m]}_s"], rec[f"{LABEL[m]}_objective"] = t, f.objective
    rows.append(rec)


def boot(rows: list, chapter: str, name: str, full_of, refit_of, n_rows: int, n_boot: int, old_boot: int,
         seed: int = 0) -> None:
    """A bootstrap as the chapters run it: full_of(method) -> FitResult on all rows, then
    refit_of(method, idx, full) on each resample (row indices drawn as bootstrap() draws them)."""
    rng = np.random.default_rng(seed)
    resamples = [rng.integers(0, n_rows, n_rows) for _ in range(n_boot)]
    rec = {"chapter": chapter, "item": name, "fits": 1 + n_boot}
    objectives = {}
    for m in METHODS:
        full, t_full = timed(lambda: full_of(m))
        k = n_boot if m == "profile" else min(old_boot, n_boot)
        t0 = time.perf_counter()
        objectives[m] = [refit_of(m, idx, full).objective for idx in resamples[:k]]
        t_refit = (time.perf_counter() - t0) * n_boot / k
        rec[f"{LABEL[m]}_s"] = t_full + t_refit
        rec[f"{LABEL[m]}_objective"] = full.objective
        if k < n_boot:
            rec[f"{LABEL[m]}_scaled_from"] = k
    old, new = np.array(objectives["multistart"]), np.array(objectives["profile"][:len(objectives["multistart"])])
    rec["refits_compared"] = len(old)
    rec["refits_new_worse"] = int(np.sum(new > old * (1 + 1e-9)))
    rec["refits_max_rel_diff"] = float(np.max((new - old) / old))
    rows.append(rec)


def chapter3(rows: list, b, old_boot: int) -> None:
    t = pd.read_csv(LD)
    splits = {"S1-S3 → S4": (["S1", "S2", "S3"], ["S4"]), "S1-S4 → S5": (["S1", "S2", "S3", "S4"], ["S5"])}
    for name, (tr, te) in splits.items():
        single(rows, "03", f"Fig. 3 held-out fit {name}", lambda m: scaling.holdout_eval(t, tr, te, method=m).fit)
    for name, (tr, _) in splits.items():
        train = t[t.scale.isin(tr)].reset_index(drop=True)
        boot(rows, "03", f"Table 11 bootstrap {'-'.join(tr[::len(tr) - 1])}", lambda m: scaling.fit_law(train, method=m),
             lambda m, idx, full: scaling.fit_law(train.iloc[idx].reset_index(drop=True), start=full.theta, method=m),
             len(train), b.n_boot, old_boot)
        _, tv = timed(lambda: scaling.fit_varpro(train))
        rows.append({"chapter": "03", "item": f"Table 11 VarPro {'-'.join(tr[::len(tr) - 1])}", "fits": 1,
                     "old_s": tv, "new_s": tv})
    for variant in scaling.VARIANTS:
        for name, (tr, te) in splits.items():
            single(rows, "03", f"Table 3 {variant} {name}",
                   lambda m: scaling.holdout_eval(t, tr, te, law=variant, method=m).fit)
    train = t[t.scale != "S5"].reset_index(drop=True)
    boot(rows, "03", "fit CLI bootstrap S1-S4 (--bootstrap 20)", lambda m: scaling.fit_law(train, method=m),
         lambda m, idx, full: scaling.fit_law(train.iloc[idx].reset_index(drop=True), start=full.theta, method=m),
         len(train), 20, old_boot)
    short = t.assign(longppl=t["shortppl"])
    for name, (tr, te) in splits.items():
        single(rows, "03", f"ShortPPL held-out fit {name}", lambda m: scaling.holdout_eval(short, tr, te, method=m).fit)


def chapter4(rows: list, b, old_boot: int) -> None:
    t = pd.read_csv(CL4)
    split_a, split_b = (["S1", "S2", "S3"], ["S4"]), (["S1", "S2", "S3", "S4"], ["S5"])
    for name, (tr, te) in (("S1-S3 → S4", split_a), ("S1-S4 → S5 trajectory", split_b)):
        single(rows, "04", f"Fig. 5 held-out fit {name}", lambda m: scaling.holdout_eval(t, tr, te, method=m).fit)
        for variant in scaling.VARIANTS:
            single(rows, "04", f"Table 4 {variant} {name}",
                   lambda m: scaling.holdout_eval(t, tr, te, law=variant, method=m).fit)
    tl = t[t.scale == "S5"].sort_values("Dl")
    dl, y, mult = tl.Dl.to_numpy(float), np.log(tl.longppl.to_numpy()), tl.dl_mult.to_numpy(float)
    for pm in [b.multiple_scale * k for k in (20, 40, 60)]:
        inside = mult <= pm + 1e-9
        if inside.sum() >= 4 and (~inside).any():
            single(rows, "04", f"Fig. 6 Eq. 2 on the prefix to {pm:g}N",
                   lambda m: scaling.fit_fixed_model_law(dl[inside], y[inside], method=m))
    for metric in ("longppl", "shortppl"):
        single(rows, "04", f"Fig. 17 Eq. 2 on {metric}",
               lambda m: scaling.fit_fixed_model_law(dl, np.log(tl[metric].to_numpy()), method=m))
    n_boot = max(8, b.n_boot // 2)

    def monitor_refit(m, idx, full):  # the first implementation's monitor refit used 4 starts
        if m == "profile":
            return scaling.fit_fixed_model_law(dl[idx], y[idx], start=full.theta)
        return scaling.fit_fixed_model_law(dl[idx], y[idx], n_starts=4, method=m)

    boot(rows, "04", f"monitor: Eq. 2 and {n_boot} bootstrap refits",
         lambda m: scaling.fit_fixed_model_law(dl, y, method=m), monitor_refit, len(dl), n_boot, old_boot)


def markdown(res: dict) -> str:
    df = pd.DataFrame(res["items"])
    by = df.groupby("chapter")[["fits", "old_s", "new_s"]].sum()
    lines = ["# Scaling-law fits: old (multistart L-BFGS-B) against new (variable projection)\n",
             f"{res['machine']}; one process. Totals: old {res['total_s']['old']:.1f} s, new "
             f"{res['total_s']['new']:.1f} s ({res['total_s']['old'] / res['total_s']['new']:.1f}x).\n",
             "| chapter | fits | old (s) | new (s) |", "|---|---|---|---|"]
    lines += [f"| {c} | {int(r.fits)} | {r.old_s:.1f} | {r.new_s:.1f} |" for c, r in by.iterrows()]
    obj = df.dropna(subset=["old_objective"])
    rel = (obj.new_objective - obj.old_objective) / obj.old_objective
    lines += ["", f"Objectives: new <= old (within 1e-9 relative) on {int((rel <= 1e-9).sum())} of {len(obj)} fits; "
              f"largest relative change {rel.max():+.2e}, smallest {rel.min():+.2e}."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_fit", description=__doc__.splitlines()[0])
    ap.add_argument("--old-boot", type=int, default=10, help="old-method bootstrap refits timed (then scaled)")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    for path in (LD, CL4):
        if not path.is_file():
            raise SystemExit(f"error: {path} is missing: run chapters 3 and 4 at toy (make book) to write it")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    b = get_budget("toy")
    rows: list = []
    chapter3(rows, b, a.old_boot)
    chapter4(rows, b, a.old_boot)
    res = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load "
                      f"{os.getloadavg()[0]:.2f} at the end",
           "n_boot": b.n_boot, "old_boot_timed": a.old_boot,
           "total_s": {"old": float(sum(r["old_s"] for r in rows)), "new": float(sum(r["new_s"] for r in rows))},
           "items": rows}
    a.out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(a.out / "bench_fit.json", res)
    atomic_write_text(a.out / "bench_fit.md", markdown(res))
    write_manifest([a.out / "bench_fit.json", a.out / "bench_fit.md"], a.out / "bench_fit.manifest.json",
                   module="benchmarks.bench_fit", command=command_line("python -m benchmarks.bench_fit", argv))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
