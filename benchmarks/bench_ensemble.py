"""Runs per hour of the batched ensemble trainer against the same runs trained one after the other.

    python -m benchmarks.bench_ensemble [--budget toy | --budget-file F.toml]
        [--members 4] [--steps 40] [--threads 2] [--repeats 2]

At every scale of the budget (S1-S5, short-stage shape: the scale's model, batch_short and
short_seq_len), K WSD runs that differ in seed and LR (so each member follows its own
schedule) are trained from scratch twice, each time in a fresh run store: as one ensemble
(`nblib.training.ensemble.train_ensemble`), and one after the other with the solo runner
(`nblib.training.runner.get_or_run`). Wall time covers everything a run does (locks, logs,
metrics, the final checkpoint and its sha256, the manifest); the two ways alternate and
the faster of `--repeats` timings counts, so a noisy machine hits both alike. Tokens come
from the byte tokenizer over the budget's corpus: the timing needs the toy's shapes (its
1,024-entry vocabulary included), not its BPE token cache. The largest loss difference
between a member and its solo run is recorded as a check, and CPU time beside wall time
(on a shared machine wall time mostly measures the neighbours). `--threads 1` is how the
runner's workers train (one thread each); with more threads than free cores, OpenMP
waits dominate both ways and the ratio measures contention more than batching.

Writes benchmarks/results/bench_ensemble.json and .md, and bench_ensemble.manifest.json (the
command, commit, time and machine).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks import markdown_table, run_facts, write_results
from nblib.budgets.budget_file import add_budget_args, budget_from_args
from nblib.lccp import grid
from nblib.store.runstore import RunConfig, RunStore
from nblib.training.ensemble import can_ensemble, train_ensemble
from nblib.training.runner import get_or_run
from nblib.training.train import stream_for



def member_configs(b, scale: str, members: int, steps: int) -> list[RunConfig]:
    """K short-stage WSD runs of one scale: seeds 0..K-1, LR spread +-10% around the scale's."""
    spec = b.scale(scale)
    data = {**grid.data_config(b, "short"), "tokenizer": "byte"}
    out = []
    for k in range(members):
        lr = spec.lr * (0.9 + 0.2 * k / max(members - 1, 1))
        out.append(RunConfig(model=grid.model_config(b, scale), data=data,
                             schedule={"kind": "wsd", "lr": lr, "warmup_steps": min(spec.warmup_steps, steps // 4),
                                       "decay_frac": 1 / 9, "final_lr_frac": 0.1},
                             n_tokens=steps * spec.batch_short * b.short_seq_len, batch_size=spec.batch_short, seed=k,
                             budget=b.name, label=f"bench {scale} seed {k}", log_every=1))
    ok, why = can_ensemble(out)
    assert ok, why
    return out


def timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of fn()."""
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def bench_scale(b, scale: str, members: int, steps: int, repeats: int, scratch: Path) -> dict:
    configs = member_configs(b, scale, members, steps)
    for c in configs:
        stream_for(c.data, c.seed)  # build the (cached) streams outside the timings
    best = {"ensemble": float("inf"), "solo": float("inf")}
    cpu = {"ensemble": float("inf"), "solo": float("inf")}
    loss_diff = 0.0
    for rep in range(repeats):
        order = ("ensemble", "solo") if rep % 2 == 0 else ("solo", "ensemble")
        stores = {}
        for mode in order:
            root = scratch / f"{scale}-{mode}-{rep}"
            store = stores[mode] = RunStore(root)
            if mode == "ensemble":
                wall, used = timed(lambda: train_ensemble([store.run(c) for c in configs], progress=False))
            else:
                wall, used = timed(lambda: [get_or_run(store, c, progress=False) for c in configs])
            best[mode], cpu[mode] = min(best[mode], wall), min(cpu[mode], used)
        for c in configs:
            la, lb = (stores[m].run(c).metrics()["loss"].values for m in ("ensemble", "solo"))
            loss_diff = max(loss_diff, float(np.max(np.abs(la - lb) / np.abs(lb))))
        for root in (scratch / f"{scale}-{m}-{rep}" for m in order):
            shutil.rmtree(root, ignore_errors=True)
    spec = b.scale(scale)
    tokens = members * steps * spec.batch_short * b.short_seq_len
    return {"scale": scale, "members": members, "steps": steps, "batch": spec.batch_short, "seq_len": b.short_seq_len,
            "d_model": spec.model["d_model"], "n_params_non_emb": b.n_params(scale),
            "wall_s_ensemble": best["ensemble"], "wall_s_solo": best["solo"],
            "runs_per_hour_ensemble": members / best["ensemble"] * 3600,
            "runs_per_hour_solo": members / best["solo"] * 3600,
            "tok_s_ensemble": tokens / best["ensemble"], "tok_s_solo": tokens / best["solo"],
            "speedup": best["solo"] / best["ensemble"], "cpu_s_ensemble": cpu["ensemble"], "cpu_s_solo": cpu["solo"],
            "cpu_speedup": cpu["solo"] / cpu["ensemble"], "max_rel_loss_diff": loss_diff}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_ensemble", description=__doc__.splitlines()[0])
    add_budget_args(ap, default="toy", help="the budget whose scales are timed")
    ap.add_argument("--members", type=int, default=4, help="runs per ensemble (K)")
    ap.add_argument("--steps", type=int, default=30, help="optimizer steps per run")
    ap.add_argument("--threads", type=int, default=2, help="torch threads, for both ways")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scales", nargs="*", default=None, help="default: every scale of the budget")
    return ap


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = parser()
    args = ap.parse_args(argv)
    b, name = budget_from_args(ap, args)
    torch.set_num_threads(args.threads)
    scales = args.scales or list(b.scales)
    load0 = os.getloadavg()
    t_start = time.time()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_ensemble_") as tmp:
        for scale in scales:
            r = bench_scale(b, scale, args.members, args.steps, args.repeats, Path(tmp))
            rows.append(r)
            print(f"{scale}: ensemble of {r['members']} {r['runs_per_hour_ensemble']:>7,.0f} runs/h "
                  f"({r['tok_s_ensemble']:>7,.0f} tok/s), one after the other {r['runs_per_hour_solo']:>7,.0f} runs/h "
                  f"({r['tok_s_solo']:>7,.0f} tok/s): {r['speedup']:.2f}x (CPU time {r['cpu_speedup']:.2f}x); "
                  f"max rel loss diff {r['max_rel_loss_diff']:.1e}", flush=True)
    summary = [f"{r['scale']}: {r['speedup']:.2f}x ({r['runs_per_hour_ensemble']:,.0f} vs {r['runs_per_hour_solo']:,.0f} "
               f"runs/h of {r['steps']} steps)" for r in rows]
    data = {"benchmark": "ensemble_throughput", "budget": b.name,
            **({"budget_file": name} if args.budget_file else {}), "threads": args.threads, "members": args.members,
            "steps": args.steps, "repeats": args.repeats, "rows": rows, "summary": summary,
            **run_facts(load0, t_start)}
    md = markdown_table(["scale", "d_model", "batch x seq", "runs/h ensemble", "runs/h one by one", "speedup (wall)",
                         "speedup (CPU time)", "max rel loss diff"],
                        [[r["scale"], r["d_model"], f"{r['batch']} x {r['seq_len']}",
                          f"{r['runs_per_hour_ensemble']:,.0f}", f"{r['runs_per_hour_solo']:,.0f}",
                          f"{r['speedup']:.2f}x", f"{r['cpu_speedup']:.2f}x", f"{r['max_rel_loss_diff']:.1e}"]
                         for r in rows])
    head = (f"Ensemble of {args.members} against {args.members} solo runs one after the other, {args.steps} steps "
            f"each, {args.threads} thread(s), best of {args.repeats}; load average {load0[0]:.1f} at start "
            f"({os.cpu_count()} CPUs)\n\n")
    write_results("bench_ensemble", data, head + md, argv)
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
