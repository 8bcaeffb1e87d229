"""Linear-Decay against Constant LCCP past the grid's Dl (chapter 4, "Where would Linear-Decay
catch up?").

The LCCP paper's §4 finds Constant-Last4 on a par with Linear-Decay (Fig. 4b, CCC 0.98 at S4)
and Linear-Decay at or below Constant-Raw: at its scale the constant-LR iterate is
noise-limited, and decaying the LR or averaging checkpoints removes the noise. On the toy's
grid (Dl = 10-30 N(S1)) Linear-Decay trails Constant at S4 on every design tried: LCCP is still
progress-limited there, and a decay to a tenth of the rate gives up more progress than it
removes noise. This probe asks where that turns: from the grid's short-stage endpoint at
(scale, Ds), Linear-Decay runs to each Dl of `--dls` (the grid's `lccp_linear_decay` config,
its decay spread over that Dl) against one Constant trajectory (the grid's `lccp_constant`,
seed 0, extended to the largest Dl; at S5 from the largest Ds it is chapter 4's trajectory),
scored Raw and Last4 at the same Dl (and, with `--spacings`, Last4 with its checkpoints further
apart: App. B.1), through the book's trainer and LongPPL evaluator. One JSON line per (scale,
Ds, Dl, protocol) goes to data/probes/toy_protocol_horizon.jsonl. With `--no-ld` it scores the
Constant trajectory alone, Raw and Last4 at each Dl (records in toy_rate_trajectory.jsonl with
`--out`): S5's trajectory at a design's LCCP rate, for its Spearman rho.

    python -m nblib.probes protocol_horizon --scales S4 --dls 30 60 120   # the book's budget
    python -m nblib.probes protocol_horizon --budget-file data/probes/grid_designs/R.toml \\
        --scales S4 S5 --dls 30 60 120                                     # a ladder design's

(`python -m nblib.probes.design_probe --budget-file F protocol_horizon ...`, which wrote the
earlier records of ladder designs, runs the same.)

It trains what the store lacks (the short stages too) in one pool of one-thread workers.
"""

from __future__ import annotations

import argparse
import sys
import time

from nblib.budgets.budget_file import add_budget_args, budget_from_args
from nblib.lccp import experiments, grid
from nblib.lccp.evaluation import Evaluator, evaluate_many
from nblib.probes import results
from nblib.store.runstore import RunStore
from nblib.training.runner import get_or_run_many

RECORDS = ("toy_protocol_horizon.jsonl", "toy_rate_trajectory.jsonl")
# The design a bare budget name in the records stood for when its rows were written: the toy
# budget's rows (manifest lines 73-96) were written at 86d45ee, when the toy budget was grid Vb.
# Chapter 4 labels those rows with it; the book's grid has moved on since (grid_ladder.BOOK_GRID_DESIGN).
RECORDED_AS = {"toy": "Vb"}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes protocol_horizon", description=__doc__.splitlines()[0])
    add_budget_args(p, default="toy", help="the budget whose grid is probed")
    p.add_argument("--scales", nargs="+", default=["S4", "S5"])
    p.add_argument("--ds", type=float, default=0, help="short-stage budget in the budget's unit (0: its largest Ds)")
    p.add_argument("--dls", type=float, nargs="+", default=[30, 60, 120], help="LCCP budgets Dl in the budget's unit")
    p.add_argument("--spacings", type=float, nargs="*", default=[],
                   help="also score Last4 with its checkpoints this many units apart (App. B.1; records "
                        "'Last4(2N)'...), beside the budget's own spacing")
    p.add_argument("--no-ld", action="store_true",
                   help="score the Constant trajectory only (Raw and Last4 at each Dl), no Linear-Decay run: "
                        "S5's trajectory at a design's LCCP rate, for its Spearman rho (§4.2's claim)")
    p.add_argument("--run-root", default="runs", help="the run store (default: the book's)")
    p.add_argument("--out", default=RECORDS[0], help="record file (a name in data/probes, or a path)")
    return p


def constant_config(b, scale: str, ds: float, until: float):
    """The Constant trajectory the probe scores: chapter 4's long trajectory where it is the one
    asked for (S5 from the largest Ds, long enough), else the grid's seed-0 trajectory at
    (scale, Ds) extended to `until` (a trajectory's length is not part of its identity)."""
    if ds == b.ds_multiples[-1] and scale == "S5" and b.s5_trajectory >= until:
        return grid.long_trajectory(b, scale)
    return grid.lccp_constant(b, scale, ds, until, 0, ckpt_every=b.constant_ckpt_every)


def main(argv=None, *, budget=None, budget_name: str | None = None) -> int:
    """Run the probe; `budget` (with `budget_name` for the records) replaces `--budget` and
    `--budget-file`: a budget file's, read by `python -m nblib.probes.design_probe`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    a = p.parse_args(argv)
    b, budget_name = (budget, budget_name or budget.name) if budget is not None else budget_from_args(p, a)
    ds = a.ds or b.ds_multiples[-1]
    if ds not in b.ds_multiples:
        raise SystemExit(f"error: --ds {ds:g} is not one of this budget's Ds multiples {list(b.ds_multiples)}")
    if min(a.dls) < 4 * b.constant_ckpt_every:
        raise SystemExit(f"error: --dls {min(a.dls):g} leaves no room for Last4's four checkpoints "
                         f"{b.constant_ckpt_every:g} apart; allowed: Dl >= {4 * b.constant_ckpt_every:g}")
    if a.spacings and min(a.dls) <= 3 * max(a.spacings):
        raise SystemExit(f"error: --spacings {max(a.spacings):g} needs every Dl above {3 * max(a.spacings):g} "
                         f"(Last4 reaches back three spacings); got --dls {min(a.dls):g}")
    store = RunStore(a.run_root)
    ev = Evaluator.build(b, store)
    top = max(a.dls)
    plan, cfgs = [], []
    for scale in a.scales:
        short = grid.short_stage(b, scale)
        const = constant_config(b, scale, ds, top)
        lds = {} if a.no_ld else {dl: grid.lccp_linear_decay(b, scale, ds, dl) for dl in a.dls}
        cfgs += [short.trunk, short.wsd[ds], const, *lds.values()]
        plan.append((scale, const, lds))
    t0 = time.time()
    get_or_run_many(store, cfgs, desc="protocol horizon")
    jobs, meta = [], []
    for scale, const, lds in plan:
        run = store.run(const)
        spacing = b.last4_gap(b.s5_ckpt_every if const.hash == grid.long_trajectory(b, "S5").hash
                             else b.constant_ckpt_every)
        for dl in a.dls:
            if dl in lds:
                jobs.append((lds[dl].hash, "raw", "final", None, {}))
                meta.append((scale, dl, "LD", lds[dl].hash))
            jobs += [(run.hash, "raw", experiments.step_at(run, dl), None, {}),
                     (run.hash, "merged", experiments.last4_steps(run, dl, spacing), "lastM", {"m": 4})]
            meta += [(scale, dl, "Raw", run.hash), (scale, dl, "Last4", run.hash)]
            for sp in a.spacings:  # App. B.1's spacing ablation at this Dl
                jobs.append((run.hash, "merged", experiments.last4_steps(run, dl, sp), "lastM", {"m": 4}))
                meta.append((scale, dl, f"Last4({sp:g}N)", run.hash))
    res = evaluate_many(ev, jobs, desc="LongPPL (protocol horizon)")
    wall = round(time.time() - t0, 1)
    rows = [{"budget": budget_name, "scale": scale, "ds": ds, "dl": dl, "protocol": protocol,
             "longppl": r["long_ppl"], "shortppl": r["short_ppl"], "run": h, "wall_s": wall}
            for (scale, dl, protocol, h), r in zip(meta, res)]
    results.append_records(a.out, rows, module=__spec__.name, argv=argv)
    for scale, dl in dict.fromkeys((r["scale"], r["dl"]) for r in rows):
        got = {r["protocol"]: r["longppl"] for r in rows if r["scale"] == scale and r["dl"] == dl}
        print(f"{scale} Ds {ds:g} Dl {dl:g}: LongPPL " + "  ".join(f"{k} {v:.3f}" for k, v in got.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
