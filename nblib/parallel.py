"""Run many run-store configs in parallel worker processes, parents before children.

The run grid is embarrassingly parallel apart from its dependencies (an LCCP run starts
from a short-context checkpoint; a WSD decay branches from its stable run). `run_dag`
submits every config whose parent is finished to a pool of single-thread workers.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait


def _worker_init(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    os.environ.setdefault("NBLIB_IN_WORKER", "1")


def _train_one(root: str, cfg_dict: dict) -> str:
    from nblib.runstore import RunConfig, RunStore

    run = RunStore(root).get_or_run(RunConfig.from_dict(cfg_dict), progress=False)
    return run.hash


def launch_torchrun(store, config, nproc: int, strategy: str = "fsdp") -> None:
    """Train one run with `torchrun --nproc_per_node nproc -m nblib.train` (the full budget on
    GPUs); resumes from the run's last checkpoint like any other start."""
    import json
    import subprocess
    from pathlib import Path

    run = store.run(config)
    store._write_config(run)
    cfg_path = run.path / "config.json"
    torchrun = Path(sys.executable).parent / "torchrun"
    cmd = [str(torchrun), "--nproc_per_node", str(nproc), "-m", "nblib.train", str(cfg_path), "--run-root",
           str(store.root), "--strategy", strategy]
    print("[nblib] launching:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    json.loads((run.path / "manifest.json").read_text())  # the run must have finished


def cost(config) -> float:
    """Rough training cost of a run (tokens x per-token FLOPs proxy) for scheduling."""
    m = config.model
    d, layers, vocab = m.get("d_model", 1), m.get("n_layers", 1), m.get("vocab_size", 1)
    start = config.init["step"] if config.init and config.init.get("mode") == "continue" else 0
    tokens = (config.total_steps - start) * config.tokens_per_step
    return tokens * (12 * d * d * layers + 2 * d * vocab + 4 * d * layers * config.seq_len)


def critical_path(todo: dict, deps: dict) -> dict:
    """Priority of each run: its cost plus the costliest chain of runs that wait on it."""
    children = {h: [c for c, ds in deps.items() if h in ds] for h in todo}
    memo: dict = {}

    def prio(h):
        if h not in memo:
            memo[h] = cost(todo[h].config) + max((prio(c) for c in children[h]), default=0.0)
        return memo[h]

    return {h: prio(h) for h in todo}


def default_workers() -> int:
    return max(1, int(os.environ.get("NBLIB_WORKERS", os.cpu_count() or 1)))


def run_dag(store, configs: list, workers: int | None = None, progress: bool = True, desc: str = "runs",
            threads_per_worker: int = 1) -> list:
    """Train every config (skipping finished ones); return their Runs in input order."""
    from tqdm import tqdm

    runs = [store.run(c) for c in configs]
    todo = {}
    for r in runs:
        if not r.is_complete():
            todo.setdefault(r.hash, r)
    parents = {h: (r.config.init or {}).get("run") for h, r in todo.items()}
    deps = {h: ({p} & set(todo)) for h, p in parents.items()}
    workers = workers or default_workers()
    import torch

    gpus = torch.cuda.device_count()
    if gpus and any(r.config.budget == "full" for r in todo.values()):
        # The paper's scale: one run at a time across every local GPU (multi-node: README).
        done = set()
        while len(done) < len(todo):
            ready = [h for h in todo if h not in done and deps[h] <= done]
            if not ready:
                raise RuntimeError(f"dependency cycle among runs {sorted(set(todo) - done)}")
            for h in ready:
                launch_torchrun(store, todo[h].config, gpus)
                done.add(h)
        return runs
    bar = tqdm(total=len(todo), desc=desc, unit="run", disable=not progress)
    if not todo:
        bar.close()
        return runs
    if workers == 1:
        done: set = set()
        while len(done) < len(todo):
            ready = [h for h in todo if h not in done and deps[h] <= done]
            if not ready:
                raise RuntimeError(f"dependency cycle among runs {sorted(set(todo) - done)}")
            for h in ready:
                store.get_or_run(todo[h].config, progress=False)
                done.add(h)
                bar.update(1)
        bar.close()
        return runs
    ctx = mp.get_context("spawn")
    done, running = set(), {}
    prio = critical_path(todo, deps)  # longest chain first keeps both workers busy to the end
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                             initargs=(threads_per_worker,)) as pool:
        while len(done) < len(todo):
            ready = sorted((h for h in todo if h not in done and h not in running.values() and deps[h] <= done),
                           key=lambda h: -prio[h])
            for h in ready[:max(0, workers - len(running))]:
                fut = pool.submit(_train_one, str(store.root), todo[h].config.to_dict())
                running[fut] = h
            if not running:
                raise RuntimeError(f"dependency cycle among runs {sorted(set(todo) - done)}")
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in finished:
                h = running.pop(fut)
                try:
                    fut.result()
                except Exception as e:
                    label = todo[h].config.label
                    for f in running:
                        f.cancel()
                    bar.close()
                    raise RuntimeError(f"run {h} [{label}] failed: {type(e).__name__}: {e}\n"
                                       f"log: {todo[h].path / 'train.log'}") from e
                done.add(h)
                bar.update(1)
    bar.close()
    return runs
