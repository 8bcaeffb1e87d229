"""nblib.training.runner.memo_many: many cached evaluations of finished runs, computed in a
pool of worker processes, give the values one process computes at one thread, in the order
asked, and are read back from the run folders afterwards."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
import torch

import subproc

from nblib.store.runstore import RunConfig, RunStore
from nblib.training.runner import MemoJob, get_or_run, memo_many
from nblib.training.threads import fixed_threads

MODEL = {"family": "llama", "vocab_size": 257, "d_model": 32, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1,
         "d_ff": 64, "max_seq_len": 128}
DATA = {"corpus": "python-stdlib", "tokenizer": "byte", "split": "train", "stream": "packed", "seq_len": 64}


def mean_logit(run, step: int, seed: int) -> dict:
    """A score that depends on the checkpoint and on the job's argument: the mean logit of
    the model at `step` on seeded random tokens, with the thread count it was computed at."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, MODEL["vocab_size"], (4, 64), generator=g)
    with torch.no_grad():
        logits = run.load_model(step)(x)
    logits = logits[0] if isinstance(logits, tuple) else logits
    return {"mean": float(logits.double().mean()), "threads": torch.get_num_threads()}


def failing(run, step: int) -> dict:
    raise ValueError(f"cannot score step {step}")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 8-step run with checkpoints at 4 and 8, in a store of its own."""
    root = tmp_path_factory.mktemp("store")
    cfg = RunConfig(model=dict(MODEL), data=dict(DATA), schedule={"kind": "constant", "lr": 1e-2, "warmup_steps": 2},
                    n_tokens=64 * 4 * 8, batch_size=4, budget="smoke", ckpt_every_tokens=64 * 4 * 4)
    with fixed_threads(1):
        return get_or_run(RunStore(root), cfg, progress=False)


def _jobs(run):
    return [MemoJob(run.hash, f"mean-{step}-{seed}", (step,), mean_logit, (step, seed))
            for step in (4, 8) for seed in (0, 1, 2)]


def _copy(run, dst):
    shutil.copytree(run.path.parent, dst)
    return RunStore(dst), RunStore(dst).by_hash(run.hash)


def test_a_pool_gives_what_one_process_gives_at_one_thread(finished, tmp_path):
    s1, r1 = _copy(finished, tmp_path / "one")
    s2, r2 = _copy(finished, tmp_path / "two")
    with fixed_threads(2):  # the kernel's threads never reach a score
        serial = memo_many(s1, _jobs(r1), workers=1, progress=False)
        assert torch.get_num_threads() == 2
    pooled = memo_many(s2, _jobs(r2), workers=2, progress=False)
    with fixed_threads(1):
        direct = [mean_logit(r1, step, seed) for step in (4, 8) for seed in (0, 1, 2)]
    assert pooled == serial == direct
    assert all(v["threads"] == 1 for v in pooled)
    assert len({v["mean"] for v in pooled}) == 6  # each job its own value, in the order asked
    assert sorted(p.name for p in (r2.path / "evals").iterdir()) == sorted(f"{j.key}.json" for j in _jobs(r2))


def test_a_stored_value_is_read_back_not_recomputed(finished, tmp_path):
    store, run = _copy(finished, tmp_path / "s")
    first = memo_many(store, _jobs(run), workers=2, progress=False)
    path = run.path / "evals" / "mean-8-1.json"
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({**stored, "mean": 123.0}))  # a marker only a read of the file can return
    again = memo_many(store, _jobs(run), workers=2, progress=False)
    assert again[4]["mean"] == 123.0 and again[:4] + again[5:] == first[:4] + first[5:]


def test_a_failing_job_raises_its_error_and_stores_nothing_for_it(finished, tmp_path):
    store, run = _copy(finished, tmp_path / "s")
    jobs = _jobs(run)[:2] + [MemoJob(run.hash, "broken", (8,), failing, (8,))]
    with pytest.raises(ValueError, match="cannot score step 8"):
        memo_many(store, jobs, workers=2, progress=False)
    assert not (run.path / "evals" / "broken.json").exists()


def test_fewer_missing_than_min_parallel_are_computed_here_without_a_pool(finished, tmp_path, monkeypatch):
    """min_parallel: below it the missing values are computed in this process (no worker
    start), and they are the values a pool computes."""
    from nblib.training import runner

    s1, r1 = _copy(finished, tmp_path / "pool")
    s2, r2 = _copy(finished, tmp_path / "here")
    pooled = memo_many(s1, _jobs(r1), workers=2, progress=False)

    def no_pool(workers):
        raise AssertionError("a pool started for fewer missing values than min_parallel")

    monkeypatch.setattr(runner, "memo_pool", no_pool)
    here = memo_many(s2, _jobs(r2), workers=2, progress=False, min_parallel=len(_jobs(r2)) + 1)
    assert here == pooled
    s3, r3 = _copy(finished, tmp_path / "at")
    with pytest.raises(AssertionError, match="a pool started"):  # at min_parallel the pool is used
        memo_many(s3, _jobs(r3), workers=2, progress=False, min_parallel=len(_jobs(r3)))


# Jupyter interrupts a kernel's process group, then shuts the kernel down (jupyter_client's
# shutdown_kernel): here a process whose memo pool has gone idle does the same to its own group
# (subproc.run starts it in a group of its own) and exits.
INTERRUPTED_KERNEL = """
import os, signal, time
from nblib.training.runner import memo_pool
if __name__ == "__main__":
    pool = memo_pool(1)
    pool.submit(time.sleep, 0.1).result()             # the worker up, then idle
    signal.signal(signal.SIGINT, lambda *a: None)     # the kernel: an interrupt while idle is no error
    os.killpg(os.getpgrp(), signal.SIGINT)
    time.sleep(1)
    print("done", flush=True)
"""


def test_idle_memo_workers_print_no_traceback_when_the_kernel_is_interrupted_and_exits(tmp_path):
    script = tmp_path / "kernel.py"
    script.write_text(INTERRUPTED_KERNEL)
    r = subproc.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "done", r.stderr
    assert "Traceback" not in r.stderr and "KeyboardInterrupt" not in r.stderr, r.stderr
