"""Run store foundations: atomic writes, checkpoint verification, locks, run identity."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from nblib.store.atomic import atomic_path, atomic_write_json
from nblib.store.checkpoint import (CorruptCheckpointError, list_checkpoints, load_training_state, load_weights,
                                    save_checkpoint, verify_checkpoint)
from nblib.store.lock import RunLock, RunLockedError
from nblib.store.runstore import RunConfig


def _cfg(**kw):
    base = dict(model={"family": "llama", "d_model": 8}, data={"stream": "packed", "seq_len": 16, "corpus": "x", "tokenizer": "byte"},
                schedule={"kind": "wsd", "lr": 1e-2, "warmup_steps": 2}, n_tokens=1000, batch_size=4)
    base.update(kw)
    return RunConfig(**base)


def test_atomic_write_keeps_old_content_on_failure(tmp_path):
    p = tmp_path / "a.json"
    atomic_write_json(p, {"v": 1})
    with pytest.raises(RuntimeError):
        with atomic_path(p) as tmp:
            tmp.write_text('{"v": 2, "trunc')
            raise RuntimeError("crash mid-write")
    assert json.loads(p.read_text()) == {"v": 1}
    assert [x.name for x in tmp_path.iterdir()] == ["a.json"]  # no temp file left behind


def test_atomic_write_survives_sigkill(tmp_path):
    """A writer killed at a random moment leaves either the old or the new complete file."""
    p = tmp_path / "big.json"
    atomic_write_json(p, {"gen": -1, "data": []})
    code = textwrap.dedent(f"""
        from nblib.store.atomic import atomic_write_json
        i = 0
        while True:
            atomic_write_json({str(p)!r}, {{"gen": i, "data": list(range(200000))}})
            i += 1
    """)
    proc = subprocess.Popen([sys.executable, "-c", code])
    time.sleep(1.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    d = json.loads(p.read_text())  # must parse: never half-written
    assert d["gen"] == -1 or len(d["data"]) == 200000


def _state(seed):
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(4, 4, generator=g), "b": torch.randn(4, generator=g)}


def test_checkpoint_roundtrip_with_optimizer(tmp_path):
    p = torch.nn.Parameter(torch.randn(3, 3))
    opt = torch.optim.AdamW([p], lr=0.1)
    p.sum().backward()
    opt.step()
    ck = save_checkpoint(tmp_path, 5, 500, _state(0), {"adamw": opt.state_dict()})
    w, ostates, state = load_training_state(ck)
    assert torch.equal(w["w"], _state(0)["w"]) and state["step"] == 5 and state["tokens"] == 500
    opt2 = torch.optim.AdamW([torch.nn.Parameter(p.detach().clone())], lr=0.1)
    opt2.load_state_dict(ostates["adamw"])
    assert torch.equal(opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])


def test_corrupt_checkpoint_is_detected_reported_and_skipped(tmp_path):
    for s in (1, 2, 3):
        save_checkpoint(tmp_path, s, s * 10, _state(s))
    last = tmp_path / "ckpt" / "step_00000003" / "model.safetensors"
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])  # truncated
    messages = []
    cks = list_checkpoints(tmp_path, report=messages.append)
    assert [c.step for c in cks] == [1, 2]
    assert messages and "step_00000003" in messages[0] and "truncated" in messages[0]
    with pytest.raises(CorruptCheckpointError):
        load_weights(tmp_path / "ckpt" / "step_00000003")
    # same size, different bytes: only the deep (sha256) check catches it
    mid = tmp_path / "ckpt" / "step_00000002" / "model.safetensors"
    b = bytearray(mid.read_bytes())
    b[-1] ^= 0xFF
    mid.write_bytes(bytes(b))
    verify_checkpoint(mid.parent, deep=False)
    with pytest.raises(CorruptCheckpointError, match="sha256"):
        verify_checkpoint(mid.parent, deep=True)


def test_half_written_checkpoint_folder_is_not_taken(tmp_path):
    save_checkpoint(tmp_path, 1, 10, _state(1))
    # a temp folder from a killed writer, and a step folder without its COMPLETE marker
    (tmp_path / "ckpt" / ".step_00000002.tmp-123-456").mkdir()
    half = tmp_path / "ckpt" / "step_00000003"
    half.mkdir()
    (half / "model.safetensors").write_bytes(b"\x00" * 10)
    msgs = []
    assert [c.step for c in list_checkpoints(tmp_path, report=msgs.append)] == [1]
    assert any("COMPLETE" in m for m in msgs)


def test_lock_contention(tmp_path):
    lockfile = tmp_path / "run" / "LOCK"
    code = textwrap.dedent(f"""
        import time, sys
        from pathlib import Path
        from nblib.store.lock import RunLock  # no torch: the holder starts at once
        l = RunLock(Path({str(lockfile)!r})); l.acquire()
        print("locked", flush=True); time.sleep(30)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match=str(proc.pid)):
            RunLock(lockfile).acquire(blocking=False)
        with pytest.raises(RunLockedError):
            RunLock(lockfile).acquire(blocking=True, timeout=0.3, poll=0.05)
    finally:
        proc.kill()
        proc.wait()
    lock = RunLock(lockfile)
    lock.acquire(blocking=False)  # the holder died: the lock is free again
    lock.release()


def test_run_identity():
    a = _cfg()
    assert a.hash == _cfg(label="other", log_every=99, ckpt_every_tokens=50).hash  # not identity
    assert a.hash != _cfg(seed=1).hash and a.hash != _cfg(budget="smoke").hash
    assert a.hash != _cfg(n_tokens=2000).hash
    # constant-LR trajectories are extensible: their length is not part of the identity
    c1 = _cfg(schedule={"kind": "constant", "lr": 1e-2}, n_tokens=1000)
    assert c1.hash == _cfg(schedule={"kind": "constant", "lr": 1e-2}, n_tokens=5000).hash
    assert a.total_steps == round(1000 / 64) and a.realized_tokens == a.total_steps * 64


def test_run_config_rejects_bad_values():
    with pytest.raises(ValueError, match="data.stream='bogus'"):
        _cfg(data={"stream": "bogus", "seq_len": 4, "corpus": "x", "tokenizer": "byte"})
    with pytest.raises(ValueError, match="init.mode='copy'"):
        _cfg(init={"run": "0123456789abcdef", "step": 1, "mode": "copy"})
    with pytest.raises(ValueError, match=r"run config fields=\['lr'\]"):
        RunConfig.from_dict({**_cfg().to_dict(), "lr": 3})


def test_the_lock_module_imports_no_torch():
    """A process that only holds or reads a run's lock (another trainer's stand-in in the tests)
    starts in a tenth of a second: nblib.store.lock must not import torch (2-3 s)."""
    r = subprocess.run([sys.executable, "-c", "import sys, nblib.store.lock; print('torch' in sys.modules)"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
