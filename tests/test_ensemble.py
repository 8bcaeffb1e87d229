"""The batched ensemble trainer (nblib.training.ensemble): each member trains as its solo run
would, writes the solo trainer's checkpoints, and a killed ensemble resumes bit-identically."""

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import nblib.training.ensemble as E
from nblib.budgets import get_budget
from nblib.lccp import grid
from nblib.store.checkpoint import list_checkpoints, load_training_state, load_weights, verify_checkpoint
from nblib.store.runstore import RunConfig, RunStore
from nblib.training.optim import newton_schulz
from nblib.training.runner import get_or_run
from nblib.training.train import NonFiniteLossError, _ckpt_steps

MODEL = {"family": "llama", "vocab_size": 257, "d_model": 32, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1,
         "d_ff": 64, "max_seq_len": 64}
DATA = {"corpus": "python-stdlib", "tokenizer": "byte", "split": "train", "stream": "packed", "seq_len": 32}
TOKENS_PER_STEP = 32 * 4
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def cfg(steps, seed=0, lr=1e-2, every=None, kind="wsd", **kw):
    sched = {"kind": kind, "lr": lr, "warmup_steps": 3}
    return RunConfig(model=MODEL, data=DATA, schedule=sched, n_tokens=TOKENS_PER_STEP * steps, batch_size=4, seed=seed,
                     budget="smoke", ckpt_every_tokens=None if every is None else TOKENS_PER_STEP * every, **kw)


def final_weights(run):
    return load_weights(run.checkpoint("final"))


def assert_bitwise(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def train_losses(run):
    m = run.metrics()
    return m[m["kind"] == "train"].set_index("step")


# ---------------------------------------------------------------------------------------
# numerics: a member is its solo run
# ---------------------------------------------------------------------------------------
def test_members_match_their_solo_runs(tmp_path):
    """Three members (different seeds, LRs and total steps, so different WSD schedules):
    each one's loss over its first 100 steps matches the same run trained alone to 1e-4
    relative, and its final weights to 1e-5 absolute. (Measured here at one thread: equal
    bit for bit, the whole checkpoint included.)"""
    configs = [cfg(110, seed=0, log_every=1), cfg(120, seed=1, lr=2e-2, log_every=1), cfg(100, seed=2, log_every=1)]
    ens = RunStore(tmp_path / "ens")
    E.train_ensemble([ens.run(c) for c in configs], progress=False)
    solo = RunStore(tmp_path / "solo")
    for c in configs:
        a, b = train_losses(ens.run(c)), train_losses(get_or_run(solo, c, progress=False))
        assert list(a.index) == list(b.index) == list(range(1, c.total_steps + 1))
        la, lb = a["loss"].values[:100], b["loss"].values[:100]
        rel = np.abs(la - lb) / np.abs(lb)
        assert rel.max() <= 1e-4, rel.max()
        np.testing.assert_allclose(a["lr"].values, b["lr"].values, rtol=1e-12)  # each member's own schedule
        wa, wb = final_weights(ens.run(c)), final_weights(solo.run(c))
        worst = max((wa[k] - wb[k]).abs().max().item() for k in wa)
        assert worst <= 1e-5, worst
        print(f"{c.hash}: max rel loss diff {rel.max():.2e}, max |dw| {worst:.2e}")


@pytest.mark.parametrize("model", [
    {"family": "gpt2", "vocab_size": 257, "d_model": 32, "n_layers": 2, "n_heads": 2, "max_seq_len": 64},
    {"family": "gemma3", "vocab_size": 257, "d_model": 32, "n_layers": 4, "n_heads": 4, "n_kv_heads": 1,
     "head_dim": 8, "d_ff": 64, "max_seq_len": 64, "window": 8}], ids=["gpt2", "gemma3"])
def test_other_families_match_their_solo_runs(tmp_path, model):
    """GPT-2 (fused c_attn: Muon row blocks) and Gemma 3 (sliding windows, QK-norm). Their
    norm-weight gradients are summed in another order under vmap (1e-10 apart), so these
    agree to rounding, not bit for bit. GPT-2's key bias is left out of the weight check:
    softmax ignores it, so its gradient is rounding noise that AdamW's m/sqrt(v) turns into
    LR-sized steps, different for any two roundings (measured 3e-4 apart); the models'
    outputs are compared instead."""
    configs = [RunConfig(model=model, data=DATA, schedule={"kind": "wsd", "lr": 1e-2, "warmup_steps": 3},
                         n_tokens=TOKENS_PER_STEP * steps, batch_size=4, seed=seed, budget="smoke", log_every=1)
               for seed, steps in ((0, 30), (1, 25))]
    ens = RunStore(tmp_path / "ens")
    E.train_ensemble([ens.run(c) for c in configs], progress=False)
    x = torch.randint(0, 257, (4, 32), generator=torch.Generator().manual_seed(0))
    for c in configs:
        run, ref = ens.run(c), get_or_run(RunStore(tmp_path / "solo"), c, progress=False)
        a, b = train_losses(run), train_losses(ref)
        np.testing.assert_allclose(a["loss"].values, b["loss"].values, rtol=1e-4, atol=0)
        # Logits of size ~5 after 25-30 steps: measured 2e-6 (GPT-2) and 2.5e-5 (Gemma 3) on one
        # machine, 3.8e-4 (Gemma 3) on another of the same kind, where the same rounding
        # differences are amplified by training. The loss curves above are the contract.
        with torch.no_grad():
            torch.testing.assert_close(run.load_model()(x)[0], ref.load_model()(x)[0], atol=2e-3, rtol=0)
        wa, wb = final_weights(run), final_weights(ref)
        for k in wa:
            if k.endswith("c_attn.bias"):
                k_part = slice(model["d_model"], 2 * model["d_model"])  # [q | k | v]: drop the key bias
                wa[k], wb[k] = wa[k].clone(), wb[k].clone()
                wa[k][k_part] = wb[k][k_part] = 0
            torch.testing.assert_close(wa[k], wb[k], atol=1e-5, rtol=0)


def test_wsd_branches_starting_at_different_steps_train_side_by_side(tmp_path):
    """Init mode 'continue' branches of one stable trunk (grid.short_stage) start at their
    own decay steps; in the ensemble they run side by side (tick 0 = each one's start) and
    end as the same branches trained alone."""
    b = get_budget("smoke")
    stage = grid.short_stage(b, "S2", ds_multiples=b.ds_multiples[:2])
    branches = list(stage.wsd.values())
    assert len({c.init["step"] for c in branches}) == 2
    store, solo = RunStore(tmp_path / "ens"), RunStore(tmp_path / "solo")
    for s in (store, solo):
        get_or_run(s, stage.trunk, progress=False)
    E.train_ensemble([store.run(c) for c in branches], progress=False)
    for c in branches:
        run, ref = store.run(c), get_or_run(solo, c, progress=False)
        assert run.is_complete() and [k.step for k in run.checkpoints()] == [k.step for k in ref.checkpoints()]
        assert f"continuing from run {stage.trunk.hash} step {c.init['step']}" in (run.path / "train.log").read_text()
        wa, wb = final_weights(run), final_weights(ref)
        for k in wa:
            torch.testing.assert_close(wa[k], wb[k], atol=1e-5, rtol=0)


def test_batched_newton_schulz_equals_per_member_newton_schulz():
    g = torch.Generator().manual_seed(0)
    coeffs, steps, eps = (3.4445, -4.775, 2.0315), 5, 1e-7
    for shape in [(3, 16, 48), (3, 48, 16), (4, 32, 32), (2, 24, 8), (1, 8, 24)]:
        G = torch.randn(*shape, generator=g)
        G[0] *= 100  # members are normalised apart
        batched = E.newton_schulz_batched(G, coeffs, steps, eps)
        alone = torch.stack([newton_schulz(m, coeffs, steps, eps) for m in G])
        torch.testing.assert_close(batched, alone, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="stack of matrices"):
        E.newton_schulz_batched(torch.randn(4, 4), coeffs, steps, eps)


# ---------------------------------------------------------------------------------------
# checkpoints are the solo trainer's
# ---------------------------------------------------------------------------------------
def test_checkpoints_are_those_of_solo_runs_and_need_no_retraining(tmp_path):
    configs = [cfg(40, seed=0, every=10), cfg(36, seed=1, every=12), cfg(30, seed=2)]
    store = RunStore(tmp_path / "ens")
    runs = E.train_ensemble([store.run(c) for c in configs], progress=False)
    solo = RunStore(tmp_path / "solo")
    for run, c in zip(runs, configs):
        assert run.is_complete()
        cks = list_checkpoints(run.path)
        for ck in cks:
            verify_checkpoint(ck.path, deep=True)  # every file matches its sha256 in COMPLETE.json
            assert not E.is_resume_point(ck)
        ref = get_or_run(solo, c, progress=False)
        ref_cks = list_checkpoints(ref.path)
        assert [ck.step for ck in cks] == [ck.step for ck in ref_cks] == sorted(_ckpt_steps(c))
        assert [ck.has_optimizer for ck in cks] == [ck.has_optimizer for ck in ref_cks]
        w, o, s = load_training_state(cks[-1])
        rw, ro, rs = load_training_state(ref_cks[-1])
        assert s["step"] == rs["step"] and s["tokens"] == rs["tokens"]
        assert o["all"]["param_groups"] == ro["all"]["param_groups"]
        assert set(o["all"]["state"]) == set(ro["all"]["state"])
        assert torch.equal(s["rng_torch_cpu"], rs["rng_torch_cpu"])
        for k in w:
            torch.testing.assert_close(w[k], rw[k], atol=1e-5, rtol=0)
        manifest = run.manifest
        assert set(manifest) == set(ref.manifest) and manifest["steps"] == c.total_steps
        # the solo runner finds the run complete and trains nothing
        stamp = (run.path / "manifest.json").stat().st_mtime_ns
        log = (run.path / "train.log").read_text()
        assert get_or_run(store, c, progress=False).hash == run.hash
        assert (run.path / "manifest.json").stat().st_mtime_ns == stamp
        assert (run.path / "train.log").read_text() == log
    # and so does the ensemble
    stamps = [(r.path / "manifest.json").stat().st_mtime_ns for r in runs]
    E.train_ensemble(runs, progress=False)
    assert stamps == [(r.path / "manifest.json").stat().st_mtime_ns for r in runs]


# ---------------------------------------------------------------------------------------
# kill and resume
# ---------------------------------------------------------------------------------------
class Killed(BaseException):
    """Stands in for SIGKILL: no except clause of the trainer catches it."""


KILL_CONFIGS = [cfg(60, seed=0, every=20, log_every=1), cfg(45, seed=1, every=15, log_every=1),
                cfg(50, seed=2, log_every=1)]  # checkpoint ticks 15, 20, 30, 40, 45, 50, 60


def _kill_in_save(monkeypatch, nth):
    real, calls = E.save_checkpoint, {"n": 0}

    def save(*a, **kw):
        calls["n"] += 1
        if calls["n"] == nth:
            raise Killed
        return real(*a, **kw)

    monkeypatch.setattr(E, "save_checkpoint", save)


def _kill_at_step(monkeypatch, step):
    real = E.append_jsonl

    def log(path, record):
        if record.get("step") == step:
            raise Killed
        return real(path, record)

    monkeypatch.setattr(E, "append_jsonl", log)


@pytest.mark.parametrize("kill, resume_step", [("in the 2nd member's checkpoint write at tick 30", 20),
                                               ("at step 37, between checkpoints", 30)])
def test_killed_ensemble_resumes_bit_identically(tmp_path, monkeypatch, kill, resume_step):
    """Every member restarts at the latest tick at which all of them have a checkpoint (a
    half-written tick does not count), then ends bit-identical to an uninterrupted ensemble."""
    whole = RunStore(tmp_path / "whole")
    E.train_ensemble([whole.run(c) for c in KILL_CONFIGS], progress=False)
    store = RunStore(tmp_path / "killed")
    with monkeypatch.context() as mp:
        if kill.startswith("in"):
            _kill_in_save(mp, 8)  # writes: 3 at tick 15, 3 at tick 20, then member 0's at 30, member 1's at 30
        else:
            _kill_at_step(mp, 37)
        with pytest.raises(Killed):
            E.train_ensemble([store.run(c) for c in KILL_CONFIGS], progress=False)
    assert not any(store.run(c).is_complete() for c in KILL_CONFIGS)
    if resume_step == 20:  # member 0 wrote its tick-30 checkpoint, member 1 did not: said, then set aside
        with pytest.warns(UserWarning, match=r"resumes it at step 20, .* not from its newer checkpoint\(s\) \[30\]"):
            E.train_ensemble([store.run(c) for c in KILL_CONFIGS], progress=False)
    else:
        E.train_ensemble([store.run(c) for c in KILL_CONFIGS], progress=False)
    for c in KILL_CONFIGS:
        run = store.run(c)
        assert run.is_complete()
        assert f"resuming from step_{resume_step:08d}" in (run.path / "train.log").read_text()
        assert [ck.step for ck in run.checkpoints()] == sorted(_ckpt_steps(c))  # resume points are gone
        assert_bitwise(final_weights(whole.run(c)), final_weights(run))


def test_sigkilled_ensemble_resumes_bit_identically(tmp_path):
    configs = [cfg(200, seed=0, every=40), cfg(160, seed=1, every=40)]
    whole = RunStore(tmp_path / "whole")
    E.train_ensemble([whole.run(c) for c in configs], progress=False)
    root = tmp_path / "killed"
    (tmp_path / "cfgs.json").write_text(json.dumps([c.to_dict() for c in configs]))
    code = ("import json, sys; from nblib.store.runstore import RunConfig, RunStore; "
            "from nblib.training.ensemble import train_ensemble; "
            "s = RunStore(sys.argv[2]); "
            "train_ensemble([s.run(RunConfig.from_dict(d)) for d in json.load(open(sys.argv[1]))], progress=False)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "cfgs.json"), str(root)], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ck = [root / c.hash / "ckpt" for c in configs]
    deadline = time.time() + 180
    while time.time() < deadline and not all(p.exists() and any(q.name.startswith("step_") for q in p.iterdir())
                                             for p in ck):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = RunStore(root)
    assert not all(store.run(c).is_complete() for c in configs), "finished before the kill; make it longer"
    E.train_ensemble([store.run(c) for c in configs], progress=False)  # the dead process's locks are free
    for c in configs:
        assert store.run(c).is_complete()
        assert_bitwise(final_weights(whole.run(c)), final_weights(store.run(c)))


def test_solo_trainer_resumes_a_member_the_ensemble_left(tmp_path, monkeypatch):
    whole = RunStore(tmp_path / "whole")
    E.train_ensemble([whole.run(c) for c in KILL_CONFIGS], progress=False)
    store = RunStore(tmp_path / "killed")
    with monkeypatch.context() as mp:
        _kill_at_step(mp, 37)
        with pytest.raises(Killed):
            E.train_ensemble([store.run(c) for c in KILL_CONFIGS], progress=False)
    for c in KILL_CONFIGS:
        run = get_or_run(store, c, progress=False)
        assert run.is_complete()
        assert "resuming from step_" in (run.path / "train.log").read_text()
        a, b = final_weights(whole.run(c)), final_weights(run)
        for k in a:
            torch.testing.assert_close(a[k], b[k], atol=1e-5, rtol=0)


def test_a_member_with_a_non_finite_loss_stops_and_the_others_finish(tmp_path, monkeypatch):
    configs = [cfg(30, seed=0, every=5), cfg(30, seed=1, every=5), cfg(25, seed=2)]
    real = torch.nn.functional
    calls = {"n": 0}

    def log_softmax(x, dim):  # one call per step over every member's rows
        out = real.log_softmax(x, dim=dim)
        calls["n"] += 1
        if calls["n"] == 13:  # step index 12: member 1's rows become NaN
            poison = torch.zeros(3, 1, 1)
            poison[1] = float("nan")
            out = (out.view(3, -1, out.size(-1)) + poison).view_as(out)
        return out

    monkeypatch.setattr(E, "F", SimpleNamespace(log_softmax=log_softmax, nll_loss=real.nll_loss))
    store = RunStore(tmp_path / "ens")
    with pytest.raises(NonFiniteLossError, match=r"non-finite loss \(nan\) at step 12 .*Last good checkpoint: step 10"):
        E.train_ensemble([store.run(c) for c in configs], progress=False)
    bad = store.run(configs[1])
    assert not bad.is_complete() and [ck.step for ck in bad.checkpoints()] == [5, 10]
    solo = RunStore(tmp_path / "solo")
    for c in (configs[0], configs[2]):
        assert store.run(c).is_complete()
        a, b = final_weights(store.run(c)), final_weights(get_or_run(solo, c, progress=False))
        for k in a:
            torch.testing.assert_close(a[k], b[k], atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------------------
# who may share an ensemble
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("change, field", [
    (dict(model={**MODEL, "d_model": 48}), "model.d_model"),
    (dict(model={**MODEL, "n_layers": 3}), "model.n_layers"),
    (dict(data={**DATA, "seq_len": 64}), "data.seq_len"),
    (dict(batch_size=8, n_tokens=8 * 32 * 20), "batch_size"),
    (dict(optimizer={"name": "muon+adamw", "weight_decay": 0.0}), "optimizer.weight_decay"),
    (dict(schedule={"kind": "constant", "lr": 1e-2}), "schedule.kind"),
    (dict(micro_batch_size=2), "micro_batch_size"),
    (dict(precision="bf16"), "precision"),  # the ensemble trains in fp32 only
])
def test_can_ensemble_rejects_a_mismatch_naming_the_field(tmp_path, change, field):
    base = cfg(20)
    other = RunConfig(**{**{k: getattr(base, k) for k in ("model", "data", "schedule", "n_tokens", "batch_size")},
                         "seed": 1, "budget": "smoke", **change})
    ok, why = E.can_ensemble([base, other])
    assert not ok and field in why and "member 1" in why, why
    store = RunStore(tmp_path)
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        E.train_ensemble([store.run(base), store.run(other)], progress=False)
    assert not (tmp_path / base.hash).exists()  # refused before any run folder was made


def test_can_ensemble_accepts_what_members_may_differ_in():
    members = [cfg(20), cfg(30, seed=1), cfg(25, seed=2, lr=3e-2), cfg(20, seed=3, every=5, log_every=1)]
    assert E.can_ensemble(members) == (True, "")
    assert not E.can_ensemble([cfg(20), cfg(20)])[0]  # the same run twice
    assert not E.can_ensemble([])[0]
