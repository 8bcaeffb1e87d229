"""The trainer: exact resume after SIGKILL, branched WSD = separate runs, DDP/FSDP = one process,
clear errors for NaN loss and corrupt checkpoints, extensible constant-LR trajectories."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import subproc
from subproc import LOCAL_GLOO_ENV, LOCAL_TORCHRUN
import torch

from nblib.budgets import get_budget
from nblib.lccp import grid
from nblib.store.checkpoint import load_weights
from nblib.store.runstore import RunConfig, RunStore
from nblib.training.runner import get_or_run, get_or_run_many
from nblib.training.train import NonFiniteLossError

MODEL = {"family": "llama", "vocab_size": 257, "d_model": 16, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1,
         "d_ff": 32, "max_seq_len": 64}
DATA = {"corpus": "python-stdlib", "tokenizer": "byte", "split": "train", "stream": "packed", "seq_len": 32}
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def cfg(steps, kind="wsd", every=None, **kw):
    sched = {"kind": kind, "lr": 1e-2}
    if kind != "linear_decay":
        sched["warmup_steps"] = 3
    return RunConfig(model=MODEL, data=DATA, schedule=sched, n_tokens=32 * 4 * steps, batch_size=4,
                     budget="smoke", ckpt_every_tokens=None if every is None else 32 * 4 * every, **kw)


def final_weights(run):
    return load_weights(run.checkpoint("final"))


def assert_bitwise(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_resume_after_sigkill_is_bitwise_identical(tmp_path):
    # 200 steps: after the first checkpoint (step 20) the trainer has 180 steps to go while
    # the test sends SIGKILL; the assertion below says so if a machine is ever that fast
    c = cfg(200, every=20, keep_optimizer="last")
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(c.to_dict()))
    cmd = [sys.executable, "-m", "nblib.training.train", str(path), "--no-progress"]
    # uninterrupted, in this process (one thread, like the trainer's processes: the same bits)
    get_or_run(RunStore(tmp_path / "a"), c, progress=False)
    # killed with SIGKILL once it has written a checkpoint, then restarted
    root_b = tmp_path / "b"
    proc = subprocess.Popen(cmd + ["--run-root", str(root_b)], env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    ck = root_b / c.hash / "ckpt"
    deadline = time.time() + 120
    while time.time() < deadline and not (ck.exists() and any(p.name.startswith("step_") for p in ck.iterdir())):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run_b = RunStore(root_b).run(c)
    assert not run_b.is_complete(), "the run finished before it could be killed; make it longer"
    get_or_run(RunStore(root_b), c, progress=False)  # the restart, here: it takes the dead process's lock
    assert "resuming from step_" in (root_b / c.hash / "train.log").read_text()
    assert_bitwise(final_weights(RunStore(tmp_path / "a").run(c)), final_weights(run_b))


def test_branched_wsd_equals_separate_runs(tmp_path):
    b = get_budget("smoke")
    stage = grid.short_stage(b, "S2", ds_multiples=b.ds_multiples[:2])
    store = RunStore(tmp_path / "branched")
    get_or_run_many(store, stage.all(), workers=1, progress=False)
    separate = RunStore(tmp_path / "separate")
    for m, branch in stage.wsd.items():
        alone = grid.wsd_config(b, "S2", m)
        assert alone.init is None and branch.init["mode"] == "continue"
        assert alone.total_steps == branch.total_steps and branch.init["step"] < branch.total_steps
        assert_bitwise(final_weights(store.run(branch)), final_weights(get_or_run(separate, alone, progress=False)))


def test_extending_a_constant_trajectory_trains_only_new_tokens(tmp_path):
    store = RunStore(tmp_path / "s")
    short = get_or_run(store, cfg(40, kind="constant", every=10), progress=False)
    long_cfg = cfg(70, kind="constant", every=10)
    assert long_cfg.hash == short.hash  # one trajectory
    run = get_or_run(store, long_cfg, progress=False)
    log = (run.path / "train.log").read_text()
    assert "resuming from step_00000040" in log and "training steps 40->70" in log
    assert [c.step for c in run.checkpoints()] == [10, 20, 30, 40, 50, 60, 70]
    fresh = get_or_run(RunStore(tmp_path / "fresh"), long_cfg, progress=False)
    assert_bitwise(final_weights(run), final_weights(fresh))
    assert run.manifest["realized_tokens"] == 70 * 128


def test_get_or_run_never_retrains(tmp_path):
    store = RunStore(tmp_path)
    run = get_or_run(store, cfg(10), progress=False)
    stamp = (run.path / "manifest.json").stat().st_mtime_ns
    again = get_or_run(store, cfg(10), progress=False)
    assert (again.path / "manifest.json").stat().st_mtime_ns == stamp


def test_corrupt_latest_checkpoint_is_skipped_and_result_unchanged(tmp_path):
    store = RunStore(tmp_path / "s")
    c40 = cfg(40, kind="constant", every=10, keep_optimizer="all")
    run = get_or_run(store, c40, progress=False)
    weights = run.path / "ckpt" / "step_00000040" / "optim.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # truncated
    with pytest.warns(UserWarning, match="step_00000040"):
        run_c = get_or_run(store, cfg(60, kind="constant", every=10, keep_optimizer="all"), progress=False)
    log = (run_c.path / "train.log").read_text()
    assert "corrupt" in log and "resuming from step_00000030" in log
    ref = get_or_run(RunStore(tmp_path / "ref"), cfg(60, kind="constant", every=10), progress=False)
    assert_bitwise(final_weights(run_c), final_weights(ref))


def test_nan_loss_stops_with_clear_error_and_keeps_last_good_checkpoint(tmp_path, monkeypatch):
    import nblib.training.train as T

    real_build = T.build_model_from_config
    calls = {"n": 0}

    def poisoned(model_cfg):
        model = real_build(model_cfg)
        forward = model.forward

        def fwd(*a, **kw):
            logits, loss = forward(*a, **kw)
            calls["n"] += 1
            if calls["n"] == 13:  # step index 12
                loss = loss * float("nan")
            return logits, loss

        model.forward = fwd
        return model

    monkeypatch.setattr(T, "build_model_from_config", poisoned)
    store = RunStore(tmp_path)
    c = cfg(30, every=5)
    with pytest.raises(NonFiniteLossError, match=r"non-finite loss \(nan\) at step 12.*Last good checkpoint: step 10"):
        get_or_run(store, c, progress=False)
    run = store.run(c)
    assert [k.step for k in run.checkpoints()] == [5, 10] and run.manifest is None


def _torchrun(tmp_path, c, root, strategy):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(c.to_dict()))
    torchrun = Path(sys.executable).parent / "torchrun"
    subproc.run([str(torchrun), *LOCAL_TORCHRUN, "--nproc_per_node", "2", "-m", "nblib.training.train", str(path), "--run-root", str(root),
                    "--strategy", strategy, "--no-progress"], check=True, env={**ENV, **LOCAL_GLOO_ENV}, capture_output=True,
                timeout=300)
    return RunStore(root).run(c)


# 12 steps, a checkpoint at each: 3 compared weight for weight, 9 more for the loss curves
TWO_PROCESS = cfg(12, every=1)


@pytest.fixture(scope="module")
def single_process_run(tmp_path_factory):
    """The one-process reference both strategies are compared with (trained once; at the
    config's thread count, which the trainer sets itself)."""
    return get_or_run(RunStore(tmp_path_factory.mktemp("one")), TWO_PROCESS, progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_process_run_matches_single_process(tmp_path, strategy, single_process_run):
    """Same global batch on 2 CPU processes (gloo): the weights match a single process to fp
    tolerance at every early step; later, Muon's bf16 Newton-Schulz amplifies the last-bit
    differences of reduction order, so the loss curves are compared with a looser tolerance."""
    c, single = TWO_PROCESS, single_process_run
    multi = _torchrun(tmp_path, c, tmp_path / "two", strategy)
    for step in (1, 2, 3):
        a, b = load_weights(single.checkpoint(step)), load_weights(multi.checkpoint(step))
        for k in a:
            torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-6)
    la, lb = single.metrics(), multi.metrics()
    torch.testing.assert_close(torch.tensor(la["loss"].values), torch.tensor(lb["loss"].values), rtol=0.02, atol=0)


def test_cli_rejects_bad_config(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"model": {}, "nonsense": 1}))
    proc = subproc.run([sys.executable, "-m", "nblib.training.train", str(bad)], capture_output=True, text=True,
                       timeout=120)
    assert proc.returncode == 2 and "nonsense" in proc.stderr


def test_muon_is_torch_muon_up_to_the_newton_schulz_dtype(monkeypatch):
    """nblib.training.optim.Muon = torch.optim.Muon when both orthogonalise in bf16 (torch's choice)."""
    import nblib.training.optim as O

    real = O.newton_schulz
    monkeypatch.setattr(O, "newton_schulz", lambda G, c, s, e, dtype=None: real(G, c, s, e, dtype=torch.bfloat16))
    g = torch.Generator().manual_seed(0)
    p1 = [torch.nn.Parameter(torch.randn(16, 48, generator=g)), torch.nn.Parameter(torch.randn(32, 8, generator=g))]
    p2 = [torch.nn.Parameter(p.detach().clone()) for p in p1]
    o1 = O.Muon(p1, lr=0.02, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    o2 = torch.optim.Muon(p2, lr=0.02, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    for _ in range(3):
        grads = [torch.randn(p.shape, generator=g) for p in p1]
        for a, b, gr in zip(p1, p2, grads):
            a.grad, b.grad = gr.clone(), gr.clone()
        o1.step()
        o2.step()
    for a, b in zip(p1, p2):
        assert torch.equal(a, b)


def test_muon_row_blocks_equal_separate_matrices():
    """A (3d, d) parameter marked muon_row_blocks = 3 (GPT-2's fused c_attn) gets exactly the
    updates of three separate (d, d) parameters: W_q, W_k and W_v orthogonalised alone."""
    from nblib.training.optim import Muon

    g = torch.Generator().manual_seed(0)
    fused = torch.nn.Parameter(torch.randn(24, 8, generator=g))
    fused.muon_row_blocks = 3
    parts = [torch.nn.Parameter(t.detach().clone()) for t in fused.detach().chunk(3, 0)]
    whole = torch.nn.Parameter(fused.detach().clone())
    o1 = Muon([fused], lr=0.02, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    o2 = Muon(parts, lr=0.02, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    o3 = Muon([whole], lr=0.02, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    for _ in range(3):
        grad = torch.randn(24, 8, generator=g)
        fused.grad, whole.grad = grad.clone(), grad.clone()
        for p, gr in zip(parts, grad.chunk(3, 0)):
            p.grad = gr.clone()
        o1.step(), o2.step(), o3.step()
    torch.testing.assert_close(fused.detach(), torch.cat([p.detach() for p in parts]))
    assert not torch.allclose(fused, whole)  # the whole-matrix update differs
    from nblib.models import build_model

    gpt2 = build_model("gpt2", dict(vocab_size=11, max_seq_len=8, d_model=8, n_layers=1, n_heads=2))
    assert gpt2.blocks[0].attn.c_attn.weight.muon_row_blocks == 3


def test_fp32_newton_schulz_matches_a_float64_iteration():
    from nblib.training.optim import newton_schulz

    G = torch.randn(40, 24, generator=torch.Generator().manual_seed(1))
    coeffs = (3.4445, -4.775, 2.0315)
    X32 = newton_schulz(G, coeffs, 5, 1e-7, dtype=torch.float32)
    X64 = newton_schulz(G.double(), coeffs, 5, 1e-7, dtype=torch.float64)
    torch.testing.assert_close(X32.double(), X64, atol=1e-5, rtol=0)
    s = torch.linalg.svdvals(X64)
    assert s.min() > 0.5 and s.max() < 1.3  # "orthogonalised": singular values near 1 (US'V^T)


def test_a_finished_run_asked_for_a_new_checkpoint_retrains_to_the_same_weights(tmp_path):
    store = RunStore(tmp_path / "s")
    first = get_or_run(store, cfg(20, every=10), progress=False)
    before = final_weights(first)
    wider = dataclasses.replace(cfg(20, every=10), ckpt_steps=(7,), keep_optimizer="all")
    assert wider.hash == first.hash and not store.run(wider).is_complete()
    run = get_or_run(store, wider, progress=False)
    assert run.is_complete() and 7 in [c.step for c in run.checkpoints()]
    assert "that the run never kept: retraining from step 0" in (run.path / "train.log").read_text()
    assert_bitwise(before, final_weights(run))


def test_a_chapter_asking_for_a_run_another_is_training_waits_then_reads_it(tmp_path):
    """What two chapters executed at the same time do (`python -m nblib.book test` runs one
    per core) when both need one run: the second waits on the run's lock, says so, and then
    reads the run the first trained; it is trained once, bit-identical to a run trained alone."""
    c = cfg(12, every=4)
    store = RunStore(tmp_path / "shared")
    lock = store.lock(store.run(c))
    lock.acquire()  # "chapter A" is training the run
    (tmp_path / "cfg.json").write_text(json.dumps(c.to_dict()))
    code = ("import sys; from nblib.store.runstore import RunConfig, RunStore; "
            "from nblib.training.runner import get_or_run_many; import json; "
            "c = RunConfig.from_dict(json.load(open(sys.argv[1]))); "
            "print(get_or_run_many(RunStore(sys.argv[2]), [c], workers=1, progress=False)[0].hash)")
    other = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "cfg.json"), str(store.root)], env=ENV,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waiting = other.stderr.readline()  # "chapter B" blocks on the lock and says so
        assert "is being written by pid" in waiting and "waiting for it" in waiting, waiting
    finally:
        lock.release()
    get_or_run(store, c, progress=False)  # A trains it (or waits in turn if B got the lock first)
    out, err = other.communicate(timeout=300)
    assert other.returncode == 0 and out.split() == [c.hash], err[-2000:]
    log = (store.run(c).path / "train.log").read_text()
    assert log.count("training steps ") == 1, log  # trained by one process only
    assert_bitwise(final_weights(store.run(c)), final_weights(get_or_run(RunStore(tmp_path / "alone"), c,
                                                                             progress=False)))


def test_emulated_bf16_is_said_once_before_the_progress_bar(tmp_path, monkeypatch):
    """On a CPU without bf16 matmuls, a DAG of bf16 runs warns once, before its progress bar
    starts, and not again for each run it trains: a warning printed inside a bar splits it over
    two lines, and the book's browser check fails a chapter that shows a bar twice. A worker
    the DAG spawns is told the warning was said."""
    import warnings

    from nblib.training import runner
    from nblib.training import train as T

    monkeypatch.setattr(T, "cpu_has_native_bf16", lambda: False)
    monkeypatch.setitem(T._bf16_warning, "said", False)
    said_before_bar = []

    def bar(*a, **k):
        said_before_bar.append(sum(T.BF16_EMULATED in str(x.message) for x in caught))
        return real_tqdm(*a, **k)

    real_tqdm = runner.tqdm
    monkeypatch.setattr(runner, "tqdm", bar)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runner.run_dag(RunStore(tmp_path), [cfg(3, precision="bf16"), cfg(4, precision="bf16")], workers=1,
                       progress=False)
    assert said_before_bar == [1]
    assert sum(T.BF16_EMULATED in str(x.message) for x in caught) == 1
    monkeypatch.setitem(T._bf16_warning, "said", False)
    runner._worker_init(torch.get_num_threads())
    assert T._bf16_warning["said"]


def test_bf16_autocast_trains_resumes_exactly_and_stays_near_fp32(tmp_path):
    """`precision="bf16"` (CPU autocast, the budget's long_precision) is part of a run's identity,
    changes the weights it trains (autocast is applied), keeps fp32 master weights, resumes
    bit-identically, and lands near the fp32 run (a closed loop's loss, not a different model)."""
    fp32 = cfg(30, kind="constant", every=10)
    bf16_20, bf16_30 = cfg(20, kind="constant", every=10, precision="bf16"), cfg(30, kind="constant", every=10,
                                                                                  precision="bf16")
    assert fp32.hash != bf16_30.hash == bf16_20.hash
    assert cfg(30, kind="constant", every=10, precision="fp32").hash == fp32.hash  # one spelling, one hash
    store = RunStore(tmp_path / "s")
    get_or_run(store, bf16_20, progress=False)
    extended = get_or_run(store, bf16_30, progress=False)  # resumes from step 20
    assert "resuming from step_00000020" in (extended.path / "train.log").read_text()
    fresh = get_or_run(RunStore(tmp_path / "fresh"), bf16_30, progress=False)
    assert_bitwise(final_weights(extended), final_weights(fresh))
    w16, w32 = final_weights(fresh), final_weights(get_or_run(store, fp32, progress=False))
    assert all(v.dtype == torch.float32 for v in w16.values())
    assert any(not torch.equal(w16[k], w32[k]) for k in w32)
    loss = lambda run: [json.loads(l)["loss"] for l in (run.path / "metrics.jsonl").read_text().splitlines()][-1]
    assert abs(loss(fresh) - loss(store.run(fp32))) < 0.05 * loss(store.run(fp32))


def test_bad_precision_is_refused_by_name():
    with pytest.raises(ValueError, match=r"precision.*'fp16'.*bf16"):
        cfg(10, precision="fp16")
