"""LongPPL along a Constant LCCP trajectory at several LCCP learning rates (chapter 2, "The toy
grid: each choice and the measurement behind it"; was benchmarks/toy_lccp_lr_probe.py).

The LCCP paper starts LCCP at a tenth of the short stage's LR (App. A.3, Table 7) and finds that
LongPPL falls with the LCCP budget Dl (§3.2, Fig. 2). At toy, a tenth was measured to give
a LongPPL that bottoms out after a few N(S1) of LCCP tokens and then rises while ShortPPL
keeps falling, so the grid's Dl would sit on the wrong side of the minimum. This probe
measures it: from the grid's short-stage endpoint at (scale, Ds), one constant-LR LCCP
trajectory per LR fraction (the grid's `lccp_constant` config on the budget with that
`lccp_lr_frac`), through the real run store, trainer and LongPPL evaluator, scored at Dl = 0
(the short-stage weights with the LCCP RoPE base) and at checkpoints up to the budget's
largest Dl. One JSON line per trajectory goes to data/probes/toy_lccp_lr_probe.jsonl.

    python -m nblib.probes lccp_lr --scales S1 S3 S4 --ds 270 --lr-fracs 0.1 0.03 0.01

It trains the short stages it needs (the grid's own configs) when the store lacks them.
--rope-bases and --weight-decay probe other LCCP settings (the next rung of chapter 2's ladder);
their records go to toy_lccp_rope_probe.jsonl (--heads and --head-size give the probed scales
another head layout, records in toy_s2_heads_probe.jsonl):

    python -m nblib.probes lccp_lr --scales S1 --rope-bases 100000 5000000 50000000 \\
        --lr-fracs 0.03 0.1 --out toy_lccp_rope_probe.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

from nblib.budgets.budget_file import add_budget_args, budget_from_args
from nblib.lccp import grid
from nblib.lccp.evaluation import Evaluator
from nblib.probes import results
from nblib.store.runstore import RunStore
from nblib.training.runner import get_or_run, get_or_run_many

RECORDS = ("toy_lccp_lr_probe.jsonl", "toy_lccp_rope_probe.jsonl", "toy_s2_heads_probe.jsonl")
DL_POINTS = (1, 2, 3, 4, 6, 8, 10, 15, 20, 25, 30)


def trajectory_config(b, scale: str, ds: float, lr_frac: float, rope_base: float | None = None):
    """The grid's Constant trajectory at (scale, ds) to the largest Dl on budget `b` with LCCP at
    lr_frac x the short stage's LR and (rope_base) another LCCP RoPE base than its ABF target."""
    probed = dataclasses.replace(b, lccp_lr_frac=lr_frac,
                                 rope_bases=b.rope_bases if rope_base is None else
                                 (b.rope_bases[0], rope_base, *b.rope_bases[2:]))
    cfg = grid.lccp_constant(probed, scale, ds, b.dl_multiples[-1], 0)
    return dataclasses.replace(cfg, label=f"{cfg.label} LCCP-LR probe {lr_frac:g}"
                               + (f" base {rope_base:g}" if rope_base is not None else ""))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes lccp_lr", description=__doc__.splitlines()[0])
    add_budget_args(p, default="F", grids=True,
                    help="the grid probed (F: budgets.grid_f, the grid its records were taken on)")
    p.add_argument("--scales", nargs="+", default=["S1", "S3", "S4"])
    p.add_argument("--ds", type=float, default=270)
    p.add_argument("--lr-fracs", type=float, nargs="+", default=[0.1, 0.03])
    p.add_argument("--rope-bases", type=float, nargs="+", default=[0.0],
                   help="LCCP RoPE bases to probe (0: the budget's ABF target)")
    p.add_argument("--weight-decay", type=float, default=None,
                   help="LCCP weight decay (default: the trainer's, the paper's 0.1)")
    p.add_argument("--dl-max", type=float, default=0, help="last Dl point (0: the budget's largest Dl)")
    p.add_argument("--heads", type=int, default=0, help="query heads of the probed scales (0: the budget's)")
    p.add_argument("--head-size", type=int, default=0, help="their width (0: the budget's, d / heads)")
    results.add_probe_args(p, RECORDS, run_root="runs", threads=1, run_root_help="the run store (default: the book's)")
    return p


def main(argv=None) -> int:
    p = parser()
    argv, a = results.parse_probe_args(p, argv)
    b, name = budget_from_args(p, a)
    ds = int(a.ds) if float(a.ds).is_integer() else a.ds
    if a.heads or a.head_size:  # another head layout for the probed scales (chapter 2's S2 probe)
        for scale in a.scales:
            b = b.with_model(scale, n_heads=a.heads or b.scale(scale).model["n_heads"],
                             **({"head_size": a.head_size} if a.head_size else {}))
    store = RunStore(a.run_root)
    ev = Evaluator.build(b, store)
    for scale in a.scales:
        short = grid.short_stage(b, scale)
        get_or_run_many(store, [short.trunk, short.wsd[ds]], workers=1, progress=False)
        for rope in a.rope_bases:
            rope = rope or b.rope_bases[1]
            start = store.run(short.wsd[ds]).load_model()
            start.set_rope_base(rope)  # the short-stage weights with the LCCP base: the Dl = 0 point
            zero = ev._evaluate(start)
            for frac in a.lr_fracs:
                cfg = trajectory_config(b, scale, ds, frac, None if rope == b.rope_bases[1] else rope)
                if a.weight_decay is not None:
                    cfg = dataclasses.replace(cfg, optimizer={**cfg.optimizer, "weight_decay": a.weight_decay},
                                              label=f"{cfg.label} wd {a.weight_decay:g}")
                if a.dl_max:
                    cfg = dataclasses.replace(cfg, n_tokens=grid.checkpoint_step(cfg, a.dl_max) * cfg.tokens_per_step)
                t0 = time.time()
                run = get_or_run(store, cfg, progress=False)
                wall = time.time() - t0
                points = [{"dl_mult": 0, "longppl": zero["long_ppl"], "shortppl": zero["short_ppl"]}]
                for dl in (d for d in DL_POINTS if d <= (a.dl_max or b.dl_multiples[-1])):
                    r = ev.run(run, grid.checkpoint_step(run.config, dl))
                    points.append({"dl_mult": dl, "longppl": r["long_ppl"], "shortppl": r["short_ppl"]})
                model = b.scale(scale).model
                out = {"budget": name, "scale": scale, "ds_mult": ds, "lr_frac": frac, "lr": cfg.schedule["lr"],
                       "rope_base": rope, "weight_decay": cfg.optimizer.get("weight_decay", 0.1), "unit": b.unit,
                       "unit_tokens": b.n_tokens(scale, 1), "heads": model["n_heads"],
                       "head_size": model.get("head_size") or model["d_model"] // model["n_heads"],
                       "n_params": b.n_params(scale), "run": cfg.hash, "wall_s": round(wall, 1), "points": points}
                print(json.dumps(out), flush=True)
                results.append_record(a.out, out, module=__spec__.name, argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
