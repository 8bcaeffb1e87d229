"""Chapter 5's downstream evaluations: one after the other in the kernel, against a pool of
one-thread workers (`nblib.training.runner.memo_many`).

    python -m benchmarks.bench_evals [--budget toy | --budget-file F.toml] [--scale S5] [--models 4] [--repeats 2]

`--models` finished runs of the scale's shape at the long context (one optimizer step each
from different seeds: a greedy decode costs the same whatever the weights, since RULER's
predictions run to a fixed length) are scored on the budget's RULER suite and on its code
needles, the evaluations chapter 5 runs along the S5 trajectory and after the extension.
Two ways, each in a fresh copy of the store: in this process at the kernel's two threads,
model after model (how chapter 5 evaluated before the pool); and `memo_many` with one worker
per core at one thread each (how it evaluates now). The faster of `--repeats` timings counts,
the two ways alternating. Wall time covers loading, scoring and caching; the pool's start-up
(its workers importing torch, once per chapter kernel) is timed apart.

Writes benchmarks/results/bench_evals.json and .md, and bench_evals.manifest.json (the
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

from benchmarks import markdown_table, run_facts, write_results
from nblib.budgets.budget_file import add_budget_args, budget_from_args
from nblib.data import get_tokenizer
from nblib.lccp import downstream, grid
from nblib.store.runstore import RunConfig, RunStore
from nblib.training.runner import MemoJob, default_workers, get_or_run, memo_many, memo_pool
from nblib.training.threads import KERNEL_THREADS, fixed_threads


def model_configs(b, scale: str, models: int) -> list[RunConfig]:
    """`models` one-step runs of `scale`'s model at the long context, seeds 0..models-1."""
    return [RunConfig(model=grid.model_config(b, scale), data=grid.data_config(b, "long"), budget=b.name, seed=seed,
                      schedule={"kind": "constant", "lr": 1e-3, "warmup_steps": 0},
                      n_tokens=b.long_seq_len, batch_size=1, label=f"bench_evals {scale} seed={seed}")
            for seed in range(models)]


def suites(b) -> dict:
    """{name: (suite, scores)}: chapter 5's RULER suite and its code needles."""
    return {"RULER": (downstream.ruler_suite(b), downstream.ruler_scores),
            "code needles": (downstream.code_needle_suite(b), downstream.needle_scores)}


def in_kernel(b, store: RunStore, runs, suite, scores) -> None:
    tok = get_tokenizer(b.tokenizer)
    with fixed_threads(KERNEL_THREADS):
        for r in runs:
            scores(r.load_model(), tok, suite, b.ruler_max_new)


def in_pool(b, store: RunStore, runs, suite, scores, name: str) -> None:
    jobs = [MemoJob(r.hash, f"bench-{name}", (r.config.total_steps,), downstream.checkpoint_scores,
                    ((r.config.total_steps,), scores, suite, b.tokenizer, b.ruler_max_new)) for r in runs]
    memo_many(store, jobs, progress=False)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_evals", description=__doc__.splitlines()[0])
    add_budget_args(ap, default="toy", help="the budget whose models and suites are timed")
    ap.add_argument("--scale", default="S5")
    ap.add_argument("--models", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    return ap


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = parser()
    args = ap.parse_args(argv)
    b, name = budget_from_args(ap, args)
    load0, t_start = os.getloadavg(), time.time()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_evals_") as tmp:
        seed_root = Path(tmp) / "models"
        with fixed_threads(1):
            [get_or_run(RunStore(seed_root), c, progress=False) for c in model_configs(b, args.scale, args.models)]
        t = time.perf_counter()
        pool = memo_pool(default_workers())
        [f.result() for f in [pool.submit(time.sleep, 0.1) for _ in range(2 * default_workers())]]  # all up
        startup = time.perf_counter() - t
        print(f"pool start-up: {startup:.1f} s", flush=True)
        for name, (suite, scores) in suites(b).items():
            best = {"kernel": float("inf"), "pool": float("inf")}
            for rep in range(args.repeats):
                for way in (("kernel", "pool") if rep % 2 == 0 else ("pool", "kernel")):
                    root = Path(tmp) / f"{name}-{way}-{rep}"
                    shutil.copytree(seed_root, root)
                    store = RunStore(root)
                    runs = [store.run(c) for c in model_configs(b, args.scale, args.models)]
                    t = time.perf_counter()
                    in_kernel(b, store, runs, suite, scores) if way == "kernel" else in_pool(b, store, runs, suite,
                                                                                            scores, name)
                    best[way] = min(best[way], time.perf_counter() - t)
                    shutil.rmtree(root, ignore_errors=True)
            prompts = sum(len(v) for v in suite.values() if isinstance(v, list))
            rows.append({"suite": name, "models": args.models, "prompts_per_model": prompts,
                         "wall_s_kernel": best["kernel"], "wall_s_pool": best["pool"],
                         "speedup": best["kernel"] / best["pool"]})
            print(f"{name}: {args.models} models x {prompts} prompts: kernel ({KERNEL_THREADS} threads) "
                  f"{best['kernel']:.1f} s, pool ({default_workers()} x 1 thread) {best['pool']:.1f} s: "
                  f"{rows[-1]['speedup']:.2f}x", flush=True)
    summary = [f"{r['suite']}: {r['speedup']:.2f}x ({r['wall_s_kernel']:.1f} s -> {r['wall_s_pool']:.1f} s for "
               f"{r['models']} models)" for r in rows]
    data = {"benchmark": "downstream_evaluations", "budget": b.name,
            **({"budget_file": name} if args.budget_file else {}), "scale": args.scale,
            "d_model": b.scale(args.scale).model["d_model"], "kernel_threads": KERNEL_THREADS,
            "pool_workers": default_workers(), "pool_startup_s": round(startup, 2), "repeats": args.repeats,
            "rows": rows, "summary": summary, **run_facts(load0, t_start)}
    md = markdown_table(["suite", "models", "prompts per model", "kernel, 2 threads (s)", "pool, 2 x 1 thread (s)",
                         "speedup"],
                        [[r["suite"], r["models"], r["prompts_per_model"], f"{r['wall_s_kernel']:.1f}",
                          f"{r['wall_s_pool']:.1f}", f"{r['speedup']:.2f}x"] for r in rows])
    head = (f"Chapter 5's evaluations of {args.models} {args.scale} models ({b.name} budget): in the kernel one "
            f"after the other against `memo_many`'s pool, best of {args.repeats}; load average {load0[0]:.1f} at "
            f"start ({os.cpu_count()} CPUs)\n\n")
    write_results("bench_evals", data, head + md, argv)
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
