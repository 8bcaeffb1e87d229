"""Errors from the environment, not the code: a full disk, a read-only run root, a missing
permission and a device out of memory each give one line naming the folder (or batch) and
what to do, and training resumes cleanly afterwards.

The disk-full and read-only cases use a real small tmpfs (mounting needs root: skipped
elsewhere); the trainer runs as the command-line tool a user runs.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import subproc
import torch

from nblib import cli
from nblib.models.base import DecoderLM
from nblib.store.checkpoint import list_checkpoints, verify_checkpoint
from nblib.store.runstore import RunConfig, RunStore
from nblib.training import train as T
from nblib.training.runner import get_or_run

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
MODEL = {"family": "llama", "vocab_size": 257, "d_model": 32, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1,
         "d_ff": 64, "max_seq_len": 64}
DATA = {"corpus": "python-stdlib", "tokenizer": "byte", "split": "train", "stream": "packed", "seq_len": 32}
STEPS, EVERY = 24, 4


def config(**kw) -> RunConfig:
    return RunConfig(model=dict(MODEL), data=dict(DATA), schedule={"kind": "constant", "lr": 1e-2, "warmup_steps": 2},
                     n_tokens=32 * 4 * STEPS, batch_size=4, budget="smoke", ckpt_every_tokens=32 * 4 * EVERY, **kw)


def train_cli(cfg_path: Path, root: Path):
    p = subproc.run([sys.executable, "-m", "nblib.training.train", str(cfg_path), "--run-root", str(root),
                        "--no-progress", "--no-wait"], capture_output=True, text=True, timeout=600, env=ENV,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stderr


def one_error_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [x for x in err.splitlines() if x.startswith("error: ")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def tmpfs(tmp_path):
    """mount(size, ro=False) -> a fresh tmpfs folder; unmounted at the end."""
    mounts = []

    def mount(size: str, ro: bool = False) -> Path:
        where = tmp_path / f"fs{len(mounts)}"
        where.mkdir()
        opts = f"size={size}" + (",ro" if ro else "")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], capture_output=True, text=True)
        if r.returncode:
            pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}): needs root")
        mounts.append(where)
        return where

    yield mount
    for m in mounts:
        subprocess.run(["umount", "-l", str(m)], capture_output=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The run trained without interruption, in this process (the trainer the command line runs;
    a process of its own would only add torch's start-up): its final weights and the size of one
    checkpoint."""
    root = tmp_path_factory.mktemp("ref")
    run = get_or_run(RunStore(root / "runs"), config(), progress=False)
    ckpts = list_checkpoints(run.path)
    size = max(sum(f.stat().st_size for f in c.path.iterdir()) for c in ckpts)
    return run.load_model().state_dict(), size


def test_disk_full_names_the_folder_and_resumes_to_the_same_weights(tmpfs, tmp_path, reference):
    weights, ckpt_bytes = reference
    fs = tmpfs("16m")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(config().to_dict()))
    # leave room for the run's small files and about two checkpoints, then fill the rest
    free = shutil.disk_usage(fs).free
    room = int(2.5 * ckpt_bytes) + 64 * 1024
    ballast = fs / "ballast"
    with open(ballast, "wb") as f:
        f.write(b"\0" * max(0, free - room))
    code, err = train_cli(cfg, fs / "runs")
    assert code == 2, err
    line = one_error_line(err)
    run = RunStore(fs / "runs").run(config())
    assert "the disk is full" in line and str(fs / "runs") in line and "resumes" in line
    done = list_checkpoints(run.path)
    assert done, "the first checkpoints fit: the disk filled later"
    for c in done:  # every checkpoint marked complete is whole
        verify_checkpoint(c.path)
    ballast.unlink()  # space freed: the same command again
    code, err = train_cli(cfg, fs / "runs")
    assert code == 0, err
    after = run.load_model().state_dict()
    for k, v in weights.items():
        assert torch.equal(after[k], v), k


def test_read_only_run_root_is_one_line(tmpfs, tmp_path):
    fs = tmpfs("1m", ro=True)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(config().to_dict()))
    code, err = train_cli(cfg, fs / "runs")
    assert code == 2
    line = one_error_line(err)
    assert "read-only" in line and str(fs) in line and "NBLIB_RUN_ROOT" in line


def test_permission_denied_names_the_folder():
    msg = cli.user_message(PermissionError(errno.EACCES, "Permission denied", "/srv/runs/abc/ckpt/x.tmp"))
    assert msg.startswith("permission denied in /srv/runs/abc/ckpt:") and "NBLIB_RUN_ROOT" in msg


def test_safetensors_io_errors_become_os_errors(tmpfs):
    from nblib.store.atomic import save_safetensors
    fs = tmpfs("64k")
    with pytest.raises(OSError) as e:
        save_safetensors({"w": torch.zeros(64, 1024)}, fs / "w.safetensors")
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(fs / "w.safetensors")
    assert "disk is full" in cli.user_message(e.value)


def test_out_of_memory_names_the_batch_and_resumes(tmp_path, monkeypatch, reference):
    """A device OOM (raised here where a GPU would raise it, inside the forward pass) stops
    the run with the micro-batch that was tried and the setting to change; the next start
    resumes from the last checkpoint to the uninterrupted run's weights."""
    weights, _ = reference
    store = RunStore(tmp_path / "runs")
    run = store.run(config())
    store.write_config(run)
    calls = {"n": 0}
    forward = DecoderLM.forward

    def oom_at_step_10(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 10 + 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return forward(self, *a, **k)

    monkeypatch.setattr(DecoderLM, "forward", oom_at_step_10)
    with pytest.raises(T.OutOfMemory) as e:
        T.train(run, progress=False)
    msg = cli.user_message(e.value)
    assert "out of memory" in msg and "micro-batches of 4 x 32 tokens" in msg and "micro_batch_size to 2" in msg
    assert [c.step for c in list_checkpoints(run.path)][-1] == 8
    monkeypatch.setattr(DecoderLM, "forward", forward)
    T.train(run, progress=False)
    after = run.load_model().state_dict()
    for k, v in weights.items():
        assert torch.equal(after[k], v), k
