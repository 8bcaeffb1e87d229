"""Running what the store describes: one run, or a whole grid in parallel worker processes.

This module sits above the run store (which only stores) and the trainer (which trains
one run): `get_or_run` takes a run's lock and trains it unless it is finished;
`get_or_run_many` trains many configs, parents before children; `memo_many` computes many
cached evaluations (`Run.memo`) of finished runs in the same kind of pool. The run grid is
embarrassingly parallel apart from its dependencies (an LCCP run starts from a
short-context checkpoint; a WSD decay branches from its stable run), so `run_dag` submits
every config whose parent is finished to a pool of single-thread workers. At the `full`
budget on a GPU machine each run goes through `torchrun` over every local GPU instead.
"""

from __future__ import annotations

import atexit
import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, as_completed, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from tqdm import tqdm

from nblib.data import get_tokenizer
from nblib.store.runstore import Run, RunConfig, RunStore, check_buildable
from nblib.training.threads import fixed_threads
from nblib.training.train import bf16_warning_said, train, warn_if_bf16_emulated


def get_or_run(store: RunStore, config: RunConfig, progress: bool = True, wait: bool = True,
               timeout: float | None = None) -> Run:
    """Return the finished run; or start it; or resume it from its last valid checkpoint.

    When another process holds the run's lock: wait for it (wait=True) or raise
    RunLockedError. A parent run named in config.init must already be complete.
    """
    run = store.run(config)
    if run.is_complete():
        return run
    check_buildable(config, get_tokenizer(config.data["tokenizer"]).vocab_size)  # before any folder exists
    store.check_parent(config)
    lock = store.lock(run)
    lock.acquire(blocking=wait, timeout=timeout)
    try:
        if run.is_complete():  # finished by the process we waited for
            return run
        store.write_config(run)
        train(run, progress=progress)
    finally:
        lock.release()
    return run


def get_or_run_many(store: RunStore, configs: list[RunConfig], workers: int | None = None, progress: bool = True,
                    desc: str = "runs") -> list[Run]:
    """get_or_run for many configs, in parallel worker processes, parents before children.

    One worker per core (tiny models train faster as two single-thread processes than as one
    two-thread process, measured on a 2-core CPU); each run trains at its own config's thread
    count (nblib.training.threads). Returns runs in the order of `configs`.
    """
    return run_dag(store, configs, workers=workers, progress=progress, desc=desc)


def _worker_init(threads: int) -> None:
    torch.set_num_threads(threads)
    bf16_warning_said()  # the DAG said it before starting its workers
    os.environ.setdefault("NBLIB_IN_WORKER", "1")


def _train_one(root: str, cfg_dict: dict) -> str:
    return get_or_run(RunStore(root), RunConfig.from_dict(cfg_dict), progress=False).hash


def launch_torchrun(store: RunStore, config: RunConfig, nproc: int, strategy: str = "fsdp") -> None:
    """Train one run with `torchrun --nproc_per_node nproc -m nblib.training.train` (the full budget on
    GPUs); resumes from the run's last checkpoint like any other start. The trainer's CLI
    takes the run's lock on rank 0."""
    run = store.run(config)
    store.write_config(run)
    torchrun = Path(sys.executable).parent / "torchrun"
    cmd = [str(torchrun), "--standalone", "--nproc_per_node", str(nproc), "-m", "nblib.training.train", str(run.path / "config.json"),
           "--run-root", str(store.root), "--strategy", strategy]
    print("[nblib] launching:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    json.loads((run.path / "manifest.json").read_text())  # the run must have finished


def cost(config: RunConfig) -> float:
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
    """Worker processes: $NBLIB_WORKERS, else one per CPU core."""
    return max(1, int(os.environ.get("NBLIB_WORKERS", os.cpu_count() or 1)))


def _in_order(todo: dict, deps: dict, start) -> None:
    """Call start(hash) for every run of `todo`, each after the runs it depends on."""
    done: set = set()
    while len(done) < len(todo):
        ready = [h for h in todo if h not in done and deps[h] <= done]
        if not ready:
            raise RuntimeError(f"dependency cycle among runs {sorted(set(todo) - done)}")
        for h in ready:
            start(h)
            done.add(h)


def run_dag(store: RunStore, configs: list, workers: int | None = None, progress: bool = True, desc: str = "runs",
            threads_per_worker: int = 1) -> list:
    """Train every config (skipping finished ones); return their Runs in input order."""
    runs = [store.run(c) for c in configs]
    todo = {}
    for r in runs:
        if not r.is_complete():
            todo.setdefault(r.hash, r)
    parents = {h: (r.config.init or {}).get("run") for h, r in todo.items()}
    deps = {h: ({p} & set(todo)) for h, p in parents.items()}
    workers = workers or default_workers()
    gpus = torch.cuda.device_count()
    if gpus and any(r.config.budget == "full" for r in todo.values()):
        # The paper's scale: one run at a time across every local GPU (multi-node: README).
        _in_order(todo, deps, lambda h: launch_torchrun(store, todo[h].config, gpus))
        return runs
    if not todo:  # everything is in the store: nothing to report
        return runs
    warn_if_bf16_emulated([r.config for r in todo.values()])  # before the bar, which it would split
    bar = tqdm(total=len(todo), desc=desc, unit="run", disable=not progress)
    if workers == 1:
        def start(h):
            get_or_run(store, todo[h].config, progress=False)
            bar.update(1)

        _in_order(todo, deps, start)
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


# ---------------------------------------------------------------------------------------
# cached evaluations of finished runs, in parallel
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoJob:
    """One cached evaluation: `fn(run, *args)` of the run `run_hash`, stored by `Run.memo`
    under `key`, reading the checkpoints `steps`. `fn` is a module-level function, so a
    worker process can be sent it."""

    run_hash: str
    key: str
    steps: tuple
    fn: Callable
    args: tuple = field(default=())


def _memo_one(root: str, job: MemoJob):
    run = RunStore(root).by_hash(job.run_hash)
    with fixed_threads(1):  # one thread wherever it is computed: a worker's value is the kernel's
        return run.memo(job.key, lambda: job.fn(run, *job.args), steps=list(job.steps))


_MEMO_POOLS: dict = {}


def _memo_worker_init(threads: int) -> None:
    """A worker of the long-lived memo pool: `_worker_init`, and deaf to SIGINT. Jupyter
    interrupts a kernel's whole process group before it shuts the kernel down, and an idle
    worker would die of it printing a `Process SpawnProcess-N:` traceback that ends in
    KeyboardInterrupt (chapters 3-5, after "ok"). An interrupt still stops the kernel's wait
    (`memo_many` cancels the jobs not started); the pool is shut down when the kernel exits."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_init(threads)


def memo_pool(workers: int) -> ProcessPoolExecutor:
    """One pool of `workers` one-thread processes for the life of this process (a chapter's
    kernel): its workers start once (importing torch takes seconds), not once per call, and
    ignore the interrupts sent to the kernel's process group (`_memo_worker_init`)."""
    if workers not in _MEMO_POOLS:
        _MEMO_POOLS[workers] = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                                                   initializer=_memo_worker_init, initargs=(1,))
        atexit.register(_MEMO_POOLS[workers].shutdown, cancel_futures=True)
    return _MEMO_POOLS[workers]


def memo_many(store: RunStore, jobs: list[MemoJob], workers: int | None = None, progress: bool = True,
              desc: str = "evaluations", min_parallel: int = 2) -> list:
    """The values of many cached evaluations (`Run.memo`), in the order of `jobs`.

    Those the store lacks are computed in a pool of single-thread worker processes (one
    per core, as `get_or_run_many` trains; the pool lives as long as this process) when at
    least `min_parallel` are missing (fewer are computed here, sparing the workers' start), then
    every value is read back through `Run.memo`, which checks it against its checkpoints. Each value is computed at one
    thread however many workers there are, so the pool's size never changes a score
    (tests/test_memo_many.py)."""
    workers = workers or default_workers()
    root = str(store.root)
    runs = {h: store.by_hash(h) for h in {j.run_hash for j in jobs}}  # each run's config read once
    missing = [j for j in jobs if not runs[j.run_hash].memo_path(j.key).exists()]
    if workers > 1 and len(missing) >= max(min_parallel, 2):
        pool = memo_pool(workers)
        futs = [pool.submit(_memo_one, root, j) for j in missing]
        try:
            for fut in tqdm(as_completed(futs), total=len(futs), desc=desc, disable=not progress):
                fut.result()
        except BrokenProcessPool:
            _MEMO_POOLS.pop(workers, None)  # a worker died: the next call starts a new pool
            raise
        except BaseException:
            for f in futs:
                f.cancel()
            raise
        missing = []
    return [_memo_one(root, j) for j in tqdm(jobs, desc=desc, disable=not (progress and missing))]
