"""Copy gain along the S5 Constant trajectory: is the late rise of its LongPPL a loss of copying?
(chapter 4's S5 trajectory; was benchmarks/toy_trajectory_copy_probe.py; no chapter reads its
records yet).

At toy, constant-LR LCCP (3% of the short LR, RoPE base 5e7) takes S5's LongPPL to a minimum
near Dl = 35 N(S1) and back up by Dl = 120 while ShortPPL keeps falling (chapter 4's monitor
table); the paper's trajectory keeps falling to 120N (LCCP paper §4.2, Fig. 6). This probe
measures the random-segment copy gain (`nblib.metrics.probes.copy_gain`, chapter 3's) of the
trajectory's checkpoints at several distances. One JSON line per checkpoint goes to
data/probes/toy_trajectory_copy_probe.jsonl. It reads the book's store (run chapters 1-4).

    python -m nblib.probes trajectory_copy --points 10 35 60 90 120
"""

from __future__ import annotations

import argparse

from nblib.budgets.budget_file import add_budget_args, budget_from_args
from nblib.data import get_tokenizer
from nblib.lccp import experiments, grid
from nblib.metrics.probes import copy_gain_table
from nblib.probes import results
from nblib.store.runstore import RunStore

RECORDS = ("toy_trajectory_copy_probe.jsonl",)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes trajectory_copy", description=__doc__.splitlines()[0])
    add_budget_args(p, default="F", grids=True,
                    help="the grid probed (F: budgets.grid_f, the grid its records were taken on)")
    p.add_argument("--scale", default="S5")
    p.add_argument("--points", type=float, nargs="+", default=[10, 35, 60, 90, 120], help="Dl/N of the checkpoints")
    p.add_argument("--distances", type=int, nargs="+", default=[32, 128, 256, 512])
    results.add_probe_args(p, RECORDS, run_root="runs", threads=2)
    return p


def main(argv=None) -> int:
    p = parser()
    argv, a = results.parse_probe_args(p, argv)
    b, name = budget_from_args(p, a)
    tok = get_tokenizer(b.tokenizer)
    run = RunStore(a.run_root).run(grid.long_trajectory(b, a.scale))
    if not run.is_complete():
        raise SystemExit(f"error: the {a.scale} trajectory ({run.hash}) is not in {a.run_root}; run chapters 1-4 first")
    for dl in a.points:
        step = experiments.step_at(run, dl)
        gains = copy_gain_table({dl: run.load_model(step)}, tok.vocab_size, tok.eos_id, a.distances).iloc[0]
        rec = {"budget": name, "scale": a.scale, "run": run.hash, "dl": dl, "step": step,
               "gain": {str(d): float(gains[f"gain @{d}"]) for d in a.distances}}
        results.append_record(a.out, rec, module=__spec__.name, argv=argv)
        print(rec, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
