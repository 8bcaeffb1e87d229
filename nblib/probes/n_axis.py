"""Does LongPPL fall with N? Adjacent scales of the grid with more than one short-stage seed
(chapter 2, "The N axis"; the law's monotone-N condition, chapter 4's "Back to Fig. 3").

The LCCP paper's law (§3.2, Eq. 1) has LongPPL fall with N at every (Ds, Dl). On the book's
toy grid a larger scale sometimes sits above the one below it (S3 over S2, S5 over S4) by
0.01-0.2 nats. Chapter 4 judges those rises against the spread between two Constant LCCP
seeds, which all start from one short-stage checkpoint: it cannot tell a design fault from
the spread between two short stages of one scale. This probe measures that spread. For each
scale of `--scales` and each short-stage seed of `--seeds` it trains the grid's short stage
(`grid.short_stage`: the stable trunk and a WSD decay for every Ds of the budget) and the
grid's Linear-Decay LCCP at each (Ds, Dl) of `--ds` x `--dls` from it (`grid.lccp_linear_decay`,
LCCP data order seed 0), then scores LongPPL and ShortPPL with the book's evaluator. Seed 0 is
the book's own run, shared with chapter 3 through the store. A design lever is a budget file
(data/probes/grid_designs/): the same command with `--budget-file` measures it.

    python -m nblib.probes n_axis --scales S2 S3 --seeds 0 1 --dls 10
    python -m nblib.probes n_axis --budget-file data/probes/grid_designs/O2.toml --scales S2 S3 --seeds 0 1 --dls 10

One JSON line per (scale, seed, Ds, Dl) goes to data/probes/toy_n_axis_probe.jsonl; `n_axis_table`
reads them as the pair comparison chapter 2 shows. It trains what the store lacks in one pool.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd

from nblib.budgets.budget_file import add_budget_args, budget_from_args
from nblib.lccp import grid
from nblib.lccp.evaluation import Evaluator, evaluate_many
from nblib.probes import results
from nblib.store.runstore import RunStore
from nblib.training.runner import get_or_run_many

RECORDS = ("toy_n_axis_probe.jsonl",)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes n_axis", description=__doc__.splitlines()[0])
    add_budget_args(p, default="toy", help="the budget whose grid is probed")
    p.add_argument("--scales", nargs="+", default=["S2", "S3"], help="scales, smallest first")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="short-stage seeds (0: the grid's)")
    p.add_argument("--ds", type=float, nargs="*", default=[], help="Ds multiples (default: every Ds of the budget)")
    p.add_argument("--dls", type=float, nargs="+", default=[10], help="Linear-Decay LCCP budgets Dl")
    p.add_argument("--run-root", default="runs", help="the run store (default: the book's)")
    p.add_argument("--out", default=RECORDS[0], help="record file (a name in data/probes, or a path)")
    return p


def _number(x: float):
    return int(x) if float(x).is_integer() else x


def main(argv=None, *, budget=None, budget_name: str | None = None) -> int:
    """Run the probe; `budget` (with `budget_name`) replaces `--budget` / `--budget-file`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    a = p.parse_args(argv)
    b, budget_name = (budget, budget_name or budget.name) if budget is not None else budget_from_args(p, a)
    unknown = [s for s in a.scales if s not in b.scales]
    if unknown:
        p.exit(2, f"error: --scales {' '.join(unknown)} not allowed; allowed: {', '.join(b.scales)}\n")
    ds_list = [_number(d) for d in (a.ds or b.ds_multiples)]
    bad = [d for d in ds_list if d not in b.ds_multiples]
    if bad:
        p.exit(2, f"error: --ds {bad[0]:g} is not allowed; allowed: this budget's Ds multiples "
                  f"{', '.join(f'{d:g}' for d in b.ds_multiples)}\n")
    if any(s < 0 for s in a.seeds) or len(set(a.seeds)) != len(a.seeds):
        p.exit(2, f"error: --seeds {a.seeds} not allowed; allowed: distinct seeds >= 0\n")
    dls = [_number(d) for d in a.dls]
    store = RunStore(a.run_root)
    ev = Evaluator.build(b, store)
    plan, cfgs = [], []
    for scale in a.scales:
        for seed in a.seeds:
            short = grid.short_stage(b, scale, seed)
            cfgs += short.all()
            for ds in ds_list:
                for dl in dls:
                    ld = grid.lccp_linear_decay(b, scale, ds, dl, short_seed=seed)
                    cfgs.append(ld)
                    plan.append((scale, seed, ds, dl, ld))
    t0 = time.time()
    get_or_run_many(store, list({c.hash: c for c in cfgs}.values()), desc="N axis")
    res = evaluate_many(ev, [(ld.hash, "raw", "final", None, {}) for *_, ld in plan], desc="LongPPL (N axis)")
    wall = round(time.time() - t0, 1)
    rows = []
    for (scale, seed, ds, dl, ld), r in zip(plan, res):
        model = b.scale(scale).model
        rows.append({"budget": budget_name, "scale": scale, "n_params": b.n_params(scale), "short_seed": seed,
                     "ds": ds, "dl": dl, "longppl": r["long_ppl"], "shortppl": r["short_ppl"],
                     "heads": model["n_heads"], "head_size": model.get("head_size") or model["d_model"] // model["n_heads"],
                     "short_precision": b.short_precision(scale), "unit": b.unit, "run": ld.hash, "wall_s": wall})
    results.append_records(a.out, rows, module=__spec__.name, argv=argv)
    print(n_axis_table(pd.DataFrame(rows)).to_string(index=False), flush=True)
    return 0


RECORD_KEY = ["budget", "scale", "short_seed", "ds", "dl"]


def latest_records(records: pd.DataFrame) -> pd.DataFrame:
    """One record per (budget, scale, short seed, Ds, Dl): the last written. A later command that
    names a scale again (`--scales S3 S4 S5` after `--scales S2 S3`) re-records its cached runs;
    without this a seed would count twice."""
    return records.drop_duplicates(subset=RECORD_KEY, keep="last")


def n_axis_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per (budget, adjacent scale pair, Ds, Dl) of the probe's records: the mean over
    short-stage seeds of each scale's log LongPPL, the larger minus the smaller (negative: LongPPL
    falls with N, as Eq. 1 has it), and the short-seed spread (the largest |Δ log LongPPL|
    between two seeds of one scale at that point, over both scales), and the standard error of
    the difference of the two means over the shared seeds, sqrt(s_small^2 / n + s_large^2 / n)
    with sample variances (NaN below two seeds). `seeds`: the seeds both scales share. A record
    written twice counts once (`latest_records`)."""
    out = []
    for budget, g in latest_records(records).groupby("budget", sort=False):
        scales = list(dict.fromkeys(g.sort_values("n_params")["scale"]))
        for small, large in zip(scales, scales[1:]):
            for (ds, dl), pt in g.groupby(["ds", "dl"]):
                logs = {s: np.log(pt[pt["scale"] == s].set_index("short_seed")["longppl"]) for s in (small, large)}
                seeds = sorted(set(logs[small].index) & set(logs[large].index))
                if not seeds:
                    continue
                spread = max((float(v.max() - v.min()) for v in logs.values() if len(v) > 1), default=np.nan)
                n = len(seeds)
                se = (float(np.sqrt(sum(logs[s][seeds].var(ddof=1) for s in (small, large)) / n)) if n > 1
                      else np.nan)
                out.append({"budget": budget, "pair": f"{small} -> {large}", "ds": ds, "dl": dl, "seeds": len(seeds),
                            "log LongPPL smaller": float(logs[small][seeds].mean()),
                            "log LongPPL larger": float(logs[large][seeds].mean()),
                            "larger - smaller": float(logs[large][seeds].mean() - logs[small][seeds].mean()),
                            "short-seed spread": spread, "difference SE": se})
    return pd.DataFrame(out)


def seed_noise_table(records: pd.DataFrame) -> pd.DataFrame:
    """The N axis's signal against its noise, one row per budget of the probe's records: `sigma`,
    the short-seed standard deviation of log LongPPL (sample variances over seeds, pooled over
    every (scale, Ds, Dl) with two seeds or more); `effect`, the largest scale's mean log LongPPL
    minus the smallest's, averaged over the points both have (Eq. 1 wants it negative); `steps`,
    the adjacent pairs between them; `per_step`, effect / steps; and `seeds_needed`, the short
    seeds per scale at which a step of that size lies two standard errors from zero (the SE of a
    difference of two k-seed means is sigma sqrt(2 / k), so k = ceil(8 sigma^2 / per_step^2);
    infinite when the axis does not fall)."""
    out = []
    for budget, g in latest_records(records).groupby("budget", sort=False):
        g = g.assign(y=np.log(g["longppl"]))
        var = g.groupby(["scale", "ds", "dl"])["y"].var(ddof=1).dropna()
        scales = list(dict.fromkeys(g.sort_values("n_params")["scale"]))
        if len(scales) < 2 or var.empty:
            continue
        means = g.groupby(["scale", "ds", "dl"])["y"].mean()
        small, large = means.loc[scales[0]], means.loc[scales[-1]]
        shared = small.index.intersection(large.index)
        effect = float((large[shared] - small[shared]).mean())
        sigma, steps = float(np.sqrt(var.mean())), len(scales) - 1
        per_step = effect / steps
        # 1e-9: a ratio of exactly k computed as k + 1 ulp is not rounded up to k + 1
        need = float(np.ceil(8 * sigma**2 / per_step**2 - 1e-9)) if per_step < 0 else np.inf
        n = g.groupby("scale")["n_params"].first()
        out.append({"budget": budget, "scales": f"{scales[0]} to {scales[-1]}",
                    "n_ratio": float(n[scales[-1]] / n[scales[0]]), "sigma": sigma, "effect": effect,
                    "steps": steps, "per_step": per_step,
                    "seeds_needed": need})
    return pd.DataFrame(out)


if __name__ == "__main__":
    raise SystemExit(main())
