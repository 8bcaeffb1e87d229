"""The run store and every CLI fail clearly, never train twice at once, and lose nothing.

Each case is one a careless colleague (or a shared disk) produces: malformed configs and
tables (fuzzed with hypothesis), a second writer, corrupt checkpoints of the same size,
symbolic links where logs go, leftovers of killed writes, a full disk. The contract: exit
status 2, one line naming the bad value and what is allowed, no traceback, nothing left
behind, and corruption detected wherever a checkpoint is used.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import subproc
from subproc import LOCAL_GLOO_ENV, LOCAL_TORCHRUN
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from nblib import cli
from nblib.lccp import merge as M
from nblib.lccp.scaling import __main__ as scaling_cli
from nblib.store.atomic import append_jsonl
from nblib.store.checkpoint import CKPT_DIR, CorruptCheckpointError, list_checkpoints, verify_checkpoint
from nblib.store.lock import RunLock, RunLockedError
from nblib.store.runstore import ConfigError, RunConfig, RunStore
from nblib.training import train as T
from nblib.training.runner import get_or_run

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
MODEL = {"family": "llama", "vocab_size": 257, "d_model": 16, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1,
         "d_ff": 32, "max_seq_len": 64}
DATA = {"corpus": "python-stdlib", "tokenizer": "byte", "split": "train", "stream": "packed", "seq_len": 32}


def good_config(steps=12, every=3, **kw) -> dict:
    return RunConfig(model=dict(MODEL), data=dict(DATA), schedule={"kind": "constant", "lr": 1e-2, "warmup_steps": 2},
                     n_tokens=32 * 4 * steps, batch_size=4, budget="smoke", ckpt_every_tokens=32 * 4 * every,
                     **kw).to_dict()


def run_module(module: str, *args, timeout=300, env=None):
    """`python -m module args`: (exit status, stdout, stderr)."""
    p = subproc.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env=env or ENV, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def assert_user_error(code, err, *needles):
    """Exit 2, one `error:` line naming what is wrong, and no traceback."""
    assert code == 2, err
    assert "Traceback" not in err
    lines = [x for x in err.splitlines() if x.startswith("error: ")]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def call_cli(main, argv) -> int:
    try:
        return cli.run_cli(main, argv)
    except SystemExit as e:  # argparse's own usage errors exit 2 too
        return e.code


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One finished constant-LR run with checkpoints every 3 steps (12 steps), and its store."""
    root = tmp_path_factory.mktemp("store")
    torch.set_num_threads(1)
    run = get_or_run(RunStore(root), RunConfig.from_dict(good_config()), progress=False)
    return run


def copy_run(run, dst: Path):
    """A private copy of the trained run's store (tests corrupt their own copy)."""
    import shutil

    shutil.copytree(run.path.parent, dst)
    return RunStore(dst).by_hash(run.hash)


def flip_byte(path: Path, offset: int = -10) -> None:
    """Overwrite one byte in place: same size, different content."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    with open(path, "r+b") as f:
        f.write(data)


# --------------------------------------------------------------------------- configs

def _mutations():
    """(path into the config, a bad value) pairs: wrong types, out of range, unknown keys."""
    junk = st.one_of(st.none(), st.booleans(), st.integers(-5, 0), st.floats(allow_nan=True), st.text(max_size=5),
                     st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
    paths = st.sampled_from([("schedule", "lr"), ("schedule", "kind"), ("schedule", "warmup_steps"), ("seed",),
                             ("data", "seq_len"), ("data", "stream"), ("model",), ("n_tokens",), ("batch_size",),
                             ("log_every",), ("budget",), ("ckpt_every_tokens",), ("micro_batch_size",),
                             ("optimizer", "clip"), ("optimizer", "weight_decay"), ("optimizer", "nesterov"),
                             ("schedule", "gamma"), ("keep_optimizer",), ("init",), ("data", "tokenizer")])
    return st.tuples(paths, junk)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations())
def test_fuzzed_configs_fail_with_the_field_named_or_pass(mutation):
    (path, value) = mutation
    d = good_config()
    target = d
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = value
    try:
        c = RunConfig.from_dict(d)
    except ConfigError as e:
        name = ".".join(path) if path[-1] not in ("nesterov", "gamma") else f"{path[0]} keys"
        assert name in str(e) and "allowed" in str(e)
        return
    # accepted: then it must be a legitimate value of that field
    assert c.to_dict() is not None


BAD_CONFIGS = {
    "lr <= 0": (("schedule", "lr"), -1.0, "schedule.lr=-1.0"),
    "lr a string": (("schedule", "lr"), "fast", "schedule.lr='fast'"),
    "seed a string": (("seed",), "abc", "seed='abc'"),
    "seq_len 0": (("data", "seq_len"), 0, "data.seq_len=0"),
    "model null": (("model",), None, "model=None"),
    "vocab too small": (("model", "vocab_size"), 100, "model.vocab_size=100"),
    "log_every 0": (("log_every",), 0, "log_every=0"),
    "unknown schedule key": (("schedule", "gamma"), 0.5, "schedule keys=['gamma']"),
    "budget huge": (("budget",), "huge", "budget='huge'"),
    "negative ckpt_every_tokens": (("ckpt_every_tokens",), -5, "ckpt_every_tokens=-5"),
    "micro_batch_size 0": (("micro_batch_size",), 0, "micro_batch_size=0"),
    "unknown optimizer key": (("optimizer", "nesterov"), True, "optimizer keys=['nesterov']"),
    "clip -1": (("optimizer", "clip"), -1.0, "optimizer.clip=-1.0"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_train_cli_rejects_bad_configs_with_exit_2_and_no_run_folder(tmp_path, case):
    path, value, needle = BAD_CONFIGS[case]
    d = good_config()
    target = d
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = value
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(d))
    root = tmp_path / "runs"
    code = call_cli(T.main, [str(cfg), "--run-root", str(root), "--no-progress"])
    assert code == 2
    assert not root.exists() or list(root.iterdir()) == []  # nothing left in the store


def test_train_cli_unreadable_config_and_missing_parent(tmp_path, capsys):
    cfg = tmp_path / "cfg.json"
    cfg.write_text("{not json")
    assert call_cli(T.main, [str(cfg), "--run-root", str(tmp_path / "r")]) == 2
    assert "cannot read run config" in capsys.readouterr().err
    cfg.write_text(json.dumps(good_config(init={"run": "0" * 16, "step": 3, "mode": "weights"})))
    assert call_cli(T.main, [str(cfg), "--run-root", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "no run 0000000000000000" in err and "Traceback" not in err


def test_internal_errors_say_so_and_exit_1(capsys):
    def boom(argv):
        raise KeyError("a bug")

    assert cli.run_cli(boom, []) == 1
    assert "internal error: KeyError" in capsys.readouterr().err


def test_os_errors_become_hints():
    assert "disk is full" in cli.user_message(OSError(errno.ENOSPC, "No space left on device", "/x"))
    assert "read-only" in cli.user_message(OSError(errno.EROFS, "Read-only file system", "/x"))
    assert cli.user_message(KeyError("k")) is None


def test_disk_full_during_training_exits_2_and_is_written_to_train_log(tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(good_config(steps=6, every=3)))

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "runs"))

    monkeypatch.setattr(T, "save_checkpoint", full)
    code = cli.run_cli(T.main, [str(cfg), "--run-root", str(tmp_path / "runs"), "--no-progress"],
                       on_error=T._log_cli_error)
    assert code == 2
    assert "disk is full" in capsys.readouterr().err
    log = next((tmp_path / "runs").glob("*/train.log")).read_text()
    assert "No space left on device" in log and "disk is full" in log


# --------------------------------------------------------------------------- two writers

def _hold_lock(lock_path: Path):
    code = (f"import time, sys; from pathlib import Path; from nblib.store.lock import RunLock; "
            f"l = RunLock(Path({str(lock_path)!r})); l.acquire(); print('held', flush=True); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=ENV)
    assert p.stdout.readline().strip() == "held"
    return p


@pytest.fixture
def locked_run(tmp_path):
    """(config file, run store root, run, the process holding the run's lock)."""
    cfg_dict = good_config(steps=6, every=3)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(cfg_dict))
    root = tmp_path / "runs"
    run = RunStore(root).run(RunConfig.from_dict(cfg_dict))
    holder = _hold_lock(run.path / "LOCK")
    yield cfg, root, run, holder
    holder.kill()
    holder.wait()


def test_second_trainer_refuses_or_waits_visibly_and_names_the_holder(locked_run):
    cfg, root, run, holder = locked_run
    code, _, err = run_module("nblib.training.train", cfg, "--run-root", root, "--no-wait", "--no-progress")
    assert_user_error(code, err, f"pid {holder.pid}", socket.gethostname(), "since")
    t0 = time.time()
    code, _, err = run_module("nblib.training.train", cfg, "--run-root", root, "--lock-timeout", "1", "--no-progress")
    assert_user_error(code, err, f"pid {holder.pid}")
    assert "waiting for it to finish (up to 1 s)" in err and time.time() - t0 >= 1
    assert not (run.path / "ckpt").exists()  # the refused trainers wrote nothing


@pytest.mark.slow
def test_torchrun_trainer_refuses_a_locked_run(locked_run):
    cfg, root, run, holder = locked_run
    torchrun = Path(sys.executable).parent / "torchrun"
    p = subproc.run([str(torchrun), *LOCAL_TORCHRUN, "--nproc_per_node", "2", "-m", "nblib.training.train", str(cfg), "--run-root",
                        str(root), "--no-wait", "--no-progress"], capture_output=True, text=True,
                    env={**ENV, **LOCAL_GLOO_ENV}, timeout=300)
    assert p.returncode != 0
    assert f"is being written by pid {holder.pid}" in p.stderr
    assert not (run.path / "ckpt").exists()


def test_lock_refuses_a_symlink_and_leaves_its_target_alone(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "LOCK").symlink_to(victim)
    with pytest.raises(RunLockedError, match="symbolic link"):
        RunLock(run_dir / "LOCK").acquire()
    assert victim.read_text() == "precious"


def test_logs_never_write_through_a_symlink(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "metrics.jsonl").symlink_to(victim)
    with pytest.raises(OSError) as e:
        append_jsonl(tmp_path / "metrics.jsonl", {"step": 1})
    assert e.value.errno == errno.ELOOP
    assert victim.read_text() == "precious"
    assert "symbolic link" in cli.user_message(e.value)


# --------------------------------------------------------------------------- corruption

def test_same_size_corruption_is_detected_by_complete_resume_merge_monitor_and_evaluation(trained, tmp_path):
    run = copy_run(trained, tmp_path / "store")
    final = run.checkpoint("final")
    assert run.is_complete()
    flip_byte(final.weights)
    # is_complete: a finished run with a corrupt final checkpoint is not complete
    with pytest.warns(UserWarning, match="does not match its sha256"):
        assert not run.is_complete()
    # evaluation reads weights through load_weights, which verifies them
    with pytest.raises(CorruptCheckpointError, match="sha256"):
        run.load_model("final")
    # merge (the API the Evaluator and the monitor use) refuses the corrupt input, naming it
    inputs = [c.weights for c in run.checkpoints()[-4:]]
    with pytest.raises(CorruptCheckpointError, match=str(final.path)):
        M.merge("lastM", inputs, m=4)
    code, _, err = run_module("nblib.lccp.merge", "--method", "lastM", *inputs, "-o", tmp_path / "m.safetensors")
    assert_user_error(code, err, "does not match its sha256")
    assert not (tmp_path / "m.safetensors").exists()
    code, _, err = run_module("nblib.lccp.monitor", run.path, "--eval-every", "1")
    assert_user_error(code, err, "does not match its sha256")
    # resume: the corrupt newest checkpoint is quarantined, training resumes from the one before, loudly
    get_or_run(RunStore(run.path.parent), run.config, progress=False)
    log = (run.path / "train.log").read_text()
    assert "skipping corrupt checkpoint" in log, log
    assert f"resuming from step {final.step - 3}, not from the newer unusable checkpoint(s)" in log, log
    assert run.is_complete()


def test_cached_evaluation_is_redone_when_the_checkpoint_changes(trained, tmp_path):
    run = copy_run(trained, tmp_path / "store")
    calls = []

    def evaluate():
        calls.append(1)
        return {"long_ppl": float(len(calls))}

    assert run.memo("k", evaluate, steps=[3]) == {"long_ppl": 1.0}
    assert run.memo("k", evaluate, steps=[3]) == {"long_ppl": 1.0} and len(calls) == 1  # cached
    ck = run.checkpoint(3)
    record = json.loads((ck.path / "COMPLETE.json").read_text())
    w = load_file(str(ck.weights))
    w[next(iter(w))] += 1.0  # new weights, recorded properly (as a retrained checkpoint would be)
    save_file(w, str(ck.weights))
    from nblib.store.checkpoint import file_sha256 as _sha256

    record["files"]["model.safetensors"] = {"sha256": _sha256(ck.weights), "bytes": ck.weights.stat().st_size}
    (ck.path / "COMPLETE.json").write_text(json.dumps(record))
    assert run.memo("k", evaluate, steps=[3]) == {"long_ppl": 2.0}  # evaluated anew, not reused


def test_empty_complete_record_is_corrupt_and_resume_falls_back(trained, tmp_path):
    run = copy_run(trained, tmp_path / "store")
    newest = run.checkpoints()[-1]
    (newest.path / "COMPLETE.json").write_text("{}")
    with pytest.raises(CorruptCheckpointError, match="COMPLETE.json lacks"):
        verify_checkpoint(newest.path)
    with pytest.warns(UserWarning):
        assert newest.step not in [c.step for c in list_checkpoints(run.path)]
    # two checkpoints keep optimizer state, so losing the newest never means step 0
    cfg = run.config.with_tokens(run.config.n_tokens + 3 * run.config.tokens_per_step)  # extend the trajectory
    with pytest.warns(UserWarning):
        get_or_run(RunStore(run.path.parent), cfg, progress=False)
    log = (run.path / "train.log").read_text()
    assert f"resuming from step {newest.step - 3}" in log and "restarts from the start" not in log


def test_leftovers_of_killed_writes_are_removed_on_the_next_start(trained, tmp_path):
    run = copy_run(trained, tmp_path / "store")
    tmp_ckpt = run.path / CKPT_DIR / ".step_00000099.tmp-123-456"
    tmp_ckpt.mkdir()
    (tmp_ckpt / "model.safetensors").write_bytes(b"x" * 100)
    stray = run.path / ".manifest.json.abcd.tmp"
    stray.write_text("half")
    cfg = run.config.with_tokens(run.config.n_tokens + 3 * run.config.tokens_per_step)
    get_or_run(RunStore(run.path.parent), cfg, progress=False)
    assert not tmp_ckpt.exists() and not stray.exists()
    assert "interrupted checkpoint write" in (run.path / "train.log").read_text()


def test_killed_checkpoint_write_then_restart_leaves_no_temporary_folder(tmp_path):
    cfg = tmp_path / "cfg.json"
    # a checkpoint every 2 steps: 30 chances to catch one being assembled (the restart then
    # trains what is left and writes the rest, so fewer steps make the test shorter)
    cfg.write_text(json.dumps(good_config(steps=60, every=2)))
    root = tmp_path / "runs"
    p = subprocess.Popen([sys.executable, "-m", "nblib.training.train", str(cfg), "--run-root", str(root), "--no-progress"],
                         env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, caught = time.time() + 120, []
    while time.time() < deadline and not (caught := list(root.glob("*/ckpt/.step_*.tmp-*"))) and p.poll() is None:
        time.sleep(0.002)  # kill while a checkpoint folder is being assembled
    p.kill()
    p.wait()
    assert caught, "no checkpoint write was caught before the trainer finished; give it more steps"
    assert call_cli(T.main, [str(cfg), "--run-root", str(root), "--no-progress"]) == 0
    assert list(root.glob("*/ckpt/.step_*")) == [] and list(root.glob("*/.*.tmp")) == []


# --------------------------------------------------------------------------- merge CLI

def test_merge_cli_inputs_and_outputs(trained, tmp_path, capsys):
    # the bad inputs in this process through the CLI's one error path (`python -m
    # nblib.lccp.merge` is run_cli(main) too); one real process writes a merge
    from nblib.lccp.merge.cli import main as merge_main

    def merge_cli(*args):
        code = call_cli(merge_main, [str(a) for a in args])
        return code, capsys.readouterr().err

    run = copy_run(trained, tmp_path / "store")
    ckpts = run.checkpoints()[-4:]
    good = [c.weights for c in ckpts]
    bad = {"truncated": tmp_path / "t.safetensors", "empty": tmp_path / "e.safetensors",
           "not safetensors": tmp_path / "n.safetensors"}
    bad["truncated"].write_bytes(good[0].read_bytes()[:-100])
    bad["empty"].write_bytes(b"")
    bad["not safetensors"].write_text("hello, world")
    for name, path in bad.items():
        code, err = merge_cli("--method", "lastM", "--m", "2", good[0], path, "-o", tmp_path / "o.safetensors")
        assert_user_error(code, err, str(path))
    code, err = merge_cli("--method", "lastM", *good, "-o", tmp_path)
    assert_user_error(code, err, "is a folder")
    code, err = merge_cli("--method", "lastM", *good, "-o", good[-1])
    assert_user_error(code, err, "is also an input")
    # checkpoint folders are inputs too; the output is byte-reproducible (a process and this
    # one write the same bytes) and gets the usual mode
    outs = [tmp_path / f"m{i}.safetensors" for i in range(2)]
    code, _, err = run_module("nblib.lccp.merge", "--method", "lastM", *[c.path for c in ckpts], "-o", outs[0])
    assert code == 0, err
    code, err = merge_cli("--method", "lastM", *[c.path for c in ckpts], "-o", outs[1])
    assert code == 0, err
    assert outs[0].read_bytes() == outs[1].read_bytes()
    umask = os.umask(0)
    os.umask(umask)
    for f in (outs[0], ckpts[-1].weights):
        assert (f.stat().st_mode & 0o777) == (0o666 & ~umask), f
    # non-finite weights: refused, never written
    w = load_file(str(good[0]))
    w[next(iter(w))][0] = float("nan")
    save_file(w, str(tmp_path / "nan.safetensors"), metadata={"step": "1"})
    code, err = merge_cli("--method", "lastM", "--m", "2", tmp_path / "nan.safetensors", good[-1],
                          "-o", tmp_path / "x.safetensors")
    assert_user_error(code, err, "NaN or inf")
    assert not (tmp_path / "x.safetensors").exists()
    assert [p.name for p in tmp_path.glob(".*.tmp")] == []


# --------------------------------------------------------------------------- monitor CLI

def test_monitor_cli_errors(trained, tmp_path, capsys):
    # in this process through the CLI's one error path: `python -m nblib.lccp.monitor` is
    # run_cli(main) too, and a subprocess per case only added its start-up time
    from nblib.lccp import monitor

    def monitor_cli(*args):
        code = call_cli(monitor.main, [str(a) for a in args])
        return code, capsys.readouterr().err

    run = copy_run(trained, tmp_path / "store")
    folder = tmp_path / "plain"
    folder.mkdir()
    for c in run.checkpoints():
        (folder / f"step_{c.step:06d}.safetensors").write_bytes(c.weights.read_bytes())
    mc = tmp_path / "model.json"
    mc.write_text(json.dumps(MODEL))
    common = ["--model-config", mc, "--tokens-per-step", 128, "--eval-every", 1]
    code, err = monitor_cli(folder, *common, "--budget", "huge", "--run-root", run.path.parent)
    assert_user_error(code, err, "budget='huge'", "smoke, toy, full")
    code, err = monitor_cli(folder, *common, "--budget", "smoke", "--run-root", tmp_path / "empty")
    assert_user_error(code, err, "no LongPPL reference for budget 'smoke'", "--train-reference")
    assert not (tmp_path / "empty").exists() or not list((tmp_path / "empty").glob("*/ckpt"))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**MODEL, "d_model": 24}))
    code, err = monitor_cli(folder, "--model-config", other, "--tokens-per-step", 128, "--eval-every", 1,
                            "--budget", "smoke", "--train-reference", "--run-root", tmp_path / "s")
    assert_user_error(code, err, "not weights of the --model-config model")
    first = sorted(folder.iterdir())[0]
    first.write_bytes(first.read_bytes()[:-50])
    code, err = monitor_cli(folder, *common, "--budget", "smoke", "--run-root", tmp_path / "s")
    assert_user_error(code, err, str(first))


# --------------------------------------------------------------------------- scaling CLI

def _table(rng, n=24):
    scales = rng.choice(["S1", "S2", "S3"], n)
    N = np.where(scales == "S1", 1e6, np.where(scales == "S2", 3e6, 1e7))
    return pd.DataFrame({"scale": scales, "N": N, "Ds": rng.uniform(1e7, 1e9, n), "Dl": rng.uniform(1e6, 1e8, n),
                         "longppl": rng.uniform(2, 20, n)})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.data())
def test_fuzzed_tables_give_a_fit_or_exit_2_never_a_traceback(tmp_path, capsys, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 10_000)))
    df = _table(rng)
    col = data.draw(st.sampled_from(["N", "Ds", "Dl", "longppl", "scale", None]))
    if col is not None:
        df[col] = df[col].astype(object)
        idx = data.draw(st.integers(0, len(df) - 1))
        df.loc[idx, col] = data.draw(st.sampled_from([-1, 0, "x", float("nan"), float("inf"), None, 1e300]))
    if data.draw(st.booleans()):
        df = df.drop(columns=[data.draw(st.sampled_from(list(df.columns)))])
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    holdout = data.draw(st.sampled_from([[], ["S3"], ["S1", "S2", "S3"], ["S9"]]))
    args = ["fit", str(path), "--bootstrap", "0", "--n-starts", "1"] + (["--holdout", *holdout] if holdout else [])
    code = call_cli(scaling_cli.main, args)
    err = capsys.readouterr().err
    assert code in (0, 2), err
    assert "Traceback" not in err and "internal error" not in err
    if code == 2:
        assert err.startswith("error: ") or "usage:" in err


def test_scaling_cli_named_errors(tmp_path, capsys):
    rng = np.random.default_rng(0)
    df = _table(rng)
    equal = tmp_path / "equal.csv"
    df.assign(longppl=5.0).to_csv(equal, index=False)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(bytes(range(256)) * 4)
    good = tmp_path / "good.csv"
    df.to_csv(good, index=False)
    cases = [(["fit", str(equal), "--bootstrap", "0"], "every longppl"),
             (["fit", str(binary), "--bootstrap", "0"], "not a text CSV file"),
             (["fit", str(good), "--bootstrap", "0", "--out", str(tmp_path / "no" / "such" / "p.csv")], "--out"),
             (["fit", str(good), "--bootstrap", "0", "--holdout", "S1", "S2", "S3"], "names every scale")]
    for argv, needle in cases:
        assert call_cli(scaling_cli.main, argv) == 2
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err
