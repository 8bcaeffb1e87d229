"""Smeared keys in the Llama (Olsson et al. 2022, "In-context Learning and Induction Heads", the
smeared-key architecture): k'_t = s_h k_t + (1 - s_h) k_{t-1}, s_h = sigmoid(a_h), before RoPE.

Checked against independent truth: a hand-written loop over t, the plain model (the limit
s_h -> 1), a packed document against that document alone, the full forward against the KV
cache, and the training machinery (resume, merging, the batched ensemble, the attention
probes, the Hugging Face export) keeping or refusing the scalars as they should.
"""

import json
import math
import re
from pathlib import Path

import pytest
import torch

from nblib import cli
from nblib.budgets import LLAMA_VARIANTS, BudgetError, get_budget, llama_variant
from nblib.lccp import merge as M
from nblib.metrics import attention_maps as AM
from nblib.models import build_model
from nblib.models.hf_twin import check_hf_mappable
from nblib.models.layers import apply_rope, smear_previous_key
from nblib.store.checkpoint import load_weights
from nblib.store.runstore import RunConfig, RunStore
from nblib.training import ensemble as E
from nblib.training.runner import get_or_run

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

REPO = Path(__file__).resolve().parents[1]
SHAPE = dict(vocab_size=61, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48, max_seq_len=128)
DATA = {"corpus": "python-stdlib", "tokenizer": "byte", "split": "train", "stream": "packed", "seq_len": 32}
SMALL = {"family": "llama", "vocab_size": 257, "d_model": 16, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1,
         "d_ff": 32, "max_seq_len": 64, "smear_keys": True}


def smeared_model(seed=0, logit_scale=1.0, **kw):
    """A smeared Llama with random weights and random smear logits (so s_h differs per head)."""
    torch.manual_seed(seed)
    m = build_model("llama", {**SHAPE, "smear_keys": True, **kw})
    with torch.no_grad():
        for blk in m.blocks:
            blk.attn.k_smear.copy_(torch.randn_like(blk.attn.k_smear) * logit_scale)
    return m.eval()


def loop_smear(k, a, seg=None):
    """The definition, one position at a time: k'_t = s k_t + (1 - s) k_{t-1}, k_{-1} = 0, and
    k_{t-1} = 0 where t starts a new document."""
    B, H, T, _ = k.shape
    out = torch.empty_like(k)
    for b in range(B):
        for h in range(H):
            s = 1.0 / (1.0 + math.exp(-a[h].item()))
            for t in range(T):
                prev = k[b, h, t - 1] if t > 0 and (seg is None or seg[b, t] == seg[b, t - 1]) else 0 * k[b, h, t]
                out[b, h, t] = s * k[b, h, t] + (1 - s) * prev
    return out


# ---------------------------------------------------------------------------------------- the smear
def test_smear_equals_the_loop_over_t():
    g = torch.Generator().manual_seed(0)
    k, a = torch.randn(2, 3, 9, 4, generator=g, dtype=torch.float64), torch.randn(3, generator=g, dtype=torch.float64)
    torch.testing.assert_close(smear_previous_key(k, a), loop_smear(k, a))
    seg = torch.tensor([[1, 1, 1, 2, 2, 2, 2, 3, 3], [1, 2, 2, 2, 2, 2, 2, 2, 2]])
    torch.testing.assert_close(smear_previous_key(k, a, seg=seg), loop_smear(k, a, seg))
    # a given previous key replaces k_{-1} = 0 at the first position only
    prev = torch.randn(2, 3, 1, 4, generator=g, dtype=torch.float64)
    s = torch.sigmoid(a)[:, None]
    got = smear_previous_key(k, a, prev=prev)
    torch.testing.assert_close(got[:, :, 0], s * k[:, :, 0] + (1 - s) * prev[:, :, 0])
    torch.testing.assert_close(got[:, :, 1:], smear_previous_key(k, a)[:, :, 1:])


def test_smear_rejects_logits_of_the_wrong_shape():
    with pytest.raises(ValueError, match=r"shape \(3,\) \(one per KV head\), got \(2,\)"):
        smear_previous_key(torch.zeros(1, 3, 4, 2), torch.zeros(2))


def test_layer_keys_are_the_projection_smeared_then_rotated():
    m = smeared_model()
    attn, x = m.blocks[0].attn, torch.randn(2, 10, 32)
    rope = m.rotary(torch.arange(10))
    q, k, v = attn.qkv(x, rope)
    raw = attn.k_proj(x).view(2, 10, 2, 8).transpose(1, 2)
    torch.testing.assert_close(k, apply_rope(loop_smear(raw, attn.k_smear.detach()), *rope))


def test_logits_start_at_zero_and_are_learned():
    m = build_model("llama", {**SHAPE, "smear_keys": True})
    assert [tuple(b.attn.k_smear.shape) for b in m.blocks] == [(2,), (2,)]
    assert all(torch.equal(b.attn.k_smear.detach(), torch.zeros(2)) for b in m.blocks)  # s_h = 1/2
    _, loss = m(torch.randint(0, 61, (2, 16)), targets=torch.randint(0, 61, (2, 16)))
    loss.backward()
    assert all(b.attn.k_smear.grad.abs().sum() > 0 for b in m.blocks)
    plain = build_model("llama", SHAPE)
    assert m.n_params() == plain.n_params() + SHAPE["n_layers"] * SHAPE["n_kv_heads"]


def test_s_to_one_is_the_plain_model_with_the_same_weights():
    torch.manual_seed(0)
    plain = build_model("llama", SHAPE).eval()
    m = build_model("llama", {**SHAPE, "smear_keys": True}).eval()
    missing, unexpected = m.load_state_dict(plain.state_dict(), strict=False)
    assert sorted(missing) == ["blocks.0.attn.k_smear", "blocks.1.attn.k_smear"] and not unexpected
    idx = torch.randint(0, 61, (2, 24))
    with torch.no_grad():
        for b in m.blocks:
            b.attn.k_smear.fill_(40.0)  # sigmoid(40) = 1 - 4e-18
        torch.testing.assert_close(m(idx)[0], plain(idx)[0], atol=1e-6, rtol=0)
        for b in m.blocks:
            b.attn.k_smear.fill_(0.0)
        assert (m(idx)[0] - plain(idx)[0]).abs().max() > 1e-4  # s = 1/2 does change the model (1e-3 at init)


def test_config_rejects_a_non_bool():
    with pytest.raises(ValueError, match=r"LlamaConfig.smear_keys must be True or False, got 1"):
        build_model("llama", {**SHAPE, "smear_keys": 1})


# ---------------------------------------------------------------------------------------- packed documents
def test_a_packed_second_document_equals_that_document_alone():
    m = smeared_model()
    g = torch.Generator().manual_seed(1)
    a, b = torch.randint(0, 61, (1, 11), generator=g), torch.randint(0, 61, (1, 14), generator=g)
    packed = torch.cat((a, b), dim=1)
    doc_ids = torch.tensor([[0] * 11 + [1] * 14])
    with torch.no_grad():
        got = m(packed, doc_ids=doc_ids)[0]
        torch.testing.assert_close(got[:, 11:], m(b)[0], atol=1e-5, rtol=0)
        torch.testing.assert_close(got[:, :11], m(a)[0], atol=1e-5, rtol=0)
        # without isolation the second document's first key smears with the first's last one
        assert (m(packed)[0][:, 11:] - m(b)[0]).abs().max() > 1e-3


# ---------------------------------------------------------------------------------------- the KV cache
@pytest.mark.parametrize("chunks", [[9], [4, 3, 2], [1, 1, 1]], ids=["prefill", "chunked-prefill", "token-by-token"])
def test_cache_gives_the_logits_of_a_full_forward(chunks):
    m = smeared_model(logit_scale=2.0)
    idx = torch.randint(0, 61, (3, 9 + 7), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = m(idx)[0]
    cache = m.init_kv_cache(3, idx.size(1))
    outs, p = [], 0
    for n in chunks:  # the prompt, in one or several prefill calls
        outs.append(m.prefill(idx[:, p:p + n], cache))
        p += n
    while p < idx.size(1):  # then one decode step per token
        outs.append(m.decode_step(idx[:, p:p + 1], cache))
        p += 1
    torch.testing.assert_close(torch.cat(outs, dim=1), full, atol=1e-5, rtol=0)
    raw = m.blocks[1].attn.k_proj  # the cache keeps each layer's last raw key, what the next key needs
    assert cache.last_k[0].shape == (3, 2, 1, 8) and cache.last_k[1] is not None and raw is not None


def test_generation_with_and_without_the_cache_agree():
    m = smeared_model(logit_scale=2.0)
    idx = torch.randint(0, 61, (2, 6), generator=torch.Generator().manual_seed(3))
    a = m.generate(idx, 12, temperature=0, use_cache=True)
    b = m.generate(idx, 12, temperature=0, use_cache=False)
    assert torch.equal(a, b)


# ---------------------------------------------------------------------------------------- probes, export
def test_attention_probes_see_the_smeared_keys():
    """probabilities @ values equal the model's own attention output (the probes recompute
    the layer's q, k, v through the layer itself, smear included)."""
    m = smeared_model(logit_scale=2.0)
    idx = torch.randint(0, 61, (2, 20))
    got, hooks = {}, []
    for layer in range(2):
        proj = AM._output_projection(m, layer)
        hooks.append(proj.register_forward_pre_hook(lambda mod, a, l=layer: got.__setitem__(l, a[0].clone())))
    with torch.no_grad():
        m(idx)
    for h in hooks:
        h.remove()
    probs, qkv = AM.attention_probs(m, idx), AM.queries_keys_values(m, idx)
    for layer, p in probs.items():
        v = qkv[layer][2].repeat_interleave(2, dim=1)
        torch.testing.assert_close((p @ v).transpose(1, 2).reshape(2, 20, -1), got[layer], atol=1e-5, rtol=1e-4)


def test_hugging_face_mapping_refuses_a_smeared_model(tmp_path, capsys):
    check_hf_mappable("llama", {**SHAPE})  # plain: fine
    with pytest.raises(ValueError, match=r"model.smear_keys=True has no Hugging Face counterpart .*allowed: "
                                         r"smear_keys=False"):
        check_hf_mappable("llama", {**SHAPE, "smear_keys": True})
    pytest.importorskip("transformers")
    from nblib import export as X
    from nblib.models.hf_twin import transformers_twin
    with pytest.raises(ValueError, match="smear_keys"):
        transformers_twin(smeared_model())
    # the command line: one line naming the field, before any checkpoint is read
    c = RunConfig(model=dict(SMALL), data=DATA, schedule={"kind": "constant", "lr": 1e-2}, n_tokens=32 * 4 * 2,
                  batch_size=4, budget="smoke")
    run_dir = tmp_path / c.hash
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(c.to_dict()))
    capsys.readouterr()
    assert cli.run_cli(X.main, [str(run_dir), str(tmp_path / "hf")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(err) == 1 and "model.smear_keys=True" in err[0] and c.hash in err[0], err
    assert not (tmp_path / "hf").exists()


# ---------------------------------------------------------------------------------------- training machinery
def _cfg(steps, seed=0, **kw):
    return RunConfig(model=dict(SMALL), data=DATA, schedule={"kind": "constant", "lr": 1e-2, "warmup_steps": 2},
                     n_tokens=32 * 4 * steps, batch_size=4, seed=seed, budget="smoke",
                     ckpt_every_tokens=32 * 4 * 5, **kw)


def test_resume_keeps_the_scalars_bit_for_bit(tmp_path):
    """A constant-LR run trained to 10 steps and resumed to 20 (checkpoint weights and AdamW
    state) ends bit-identical to the run trained to 20 at once; the scalars moved from 0."""
    store = RunStore(tmp_path / "a")
    get_or_run(store, _cfg(10), progress=False)
    resumed = get_or_run(store, _cfg(20), progress=False)
    assert "resuming from step_00000010" in (resumed.path / "train.log").read_text()
    fresh = get_or_run(RunStore(tmp_path / "b"), _cfg(20), progress=False)
    a, b = load_weights(resumed.checkpoint("final")), load_weights(fresh.checkpoint("final"))
    assert a.keys() == b.keys() and {"blocks.0.attn.k_smear", "blocks.1.attn.k_smear"} <= set(a)
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert a["blocks.0.attn.k_smear"].abs().max() > 0
    model = resumed.load_model()
    assert torch.equal(model.blocks[1].attn.k_smear.detach(), a["blocks.1.attn.k_smear"])


def test_merging_averages_the_scalars(tmp_path):
    run = get_or_run(RunStore(tmp_path), _cfg(20), progress=False)
    paths = [c.path for c in run.checkpoints()]
    assert len(paths) == 4
    merged = M.last_m_merge(paths, m=4)
    sds = [load_weights(p) for p in paths]
    for k in ("blocks.0.attn.k_smear", "blocks.1.attn.k_smear"):
        torch.testing.assert_close(merged[k], sum(sd[k] for sd in sds) / 4)
    model = run.load_model(state_dict=merged)  # the merge loads as a smeared model
    assert torch.equal(model.blocks[0].attn.k_smear.detach(), merged["blocks.0.attn.k_smear"])


def test_batched_ensemble_members_equal_their_solo_runs(tmp_path):
    configs = [_cfg(12, seed=0), _cfg(10, seed=1)]
    ens = RunStore(tmp_path / "ens")
    E.train_ensemble([ens.run(c) for c in configs], progress=False)
    for c in configs:
        solo = get_or_run(RunStore(tmp_path / "solo"), c, progress=False)
        a, b = load_weights(ens.run(c).checkpoint("final")), load_weights(solo.checkpoint("final"))
        for k in a:
            torch.testing.assert_close(a[k], b[k], atol=1e-5, rtol=0)
        assert a["blocks.0.attn.k_smear"].abs().max() > 0


# ---------------------------------------------------------------------------------------- budgets
def test_budgets_turn_the_smear_on_at_toy_and_smoke_only():
    for name in ("toy", "smoke"):
        b = get_budget(name)
        assert all(b.scale(s).model.get("smear_keys") is True for s in b.scales), name
    # the toy's LongPPL reference has smeared keys too (chapter 3 checks it is stronger than every
    # grid model past the local chunk); smoke's stays the plain Llama
    assert get_budget("toy").reference["model"].get("smear_keys") is True
    assert "smear_keys" not in get_budget("smoke").reference["model"]
    full = get_budget("full")
    assert all("smear_keys" not in full.scale(s).model for s in full.scales)  # the paper's model, hashes unchanged
    for b in (get_budget(n) for n in ("smoke", "toy", "full")):  # Part 2 reproduces the Gemma blog as it is
        assert "smear_keys" not in b.pair.model_a and "smear_keys" not in b.pair.model_b


def test_every_part1_stage_keeps_the_scales_smear():
    """Short stage, Linear-Decay and Constant LCCP and the 4x extension all train the scale's
    model (smeared at smoke); the LongPPL reference is the plain Llama."""
    from nblib.lccp import grid
    from nblib.lccp.post_training import extension_config
    b = get_budget("smoke")
    stage = grid.short_stage(b, "S2")
    ld = grid.lccp_linear_decay(b, "S2", b.ds_multiples[0], b.dl_multiples[0])
    const = grid.lccp_constant(b, "S2", b.ds_multiples[0], b.dl_multiples[-1])
    ext = extension_config(b, "S2", const, {"step": 1, "average_steps": None, "dl": b.dl_multiples[0],
                                            "protocol": "Raw"})
    for c in (*stage.all(), ld, const, ext):
        assert c.model["smear_keys"] is True, c.label
    assert "smear_keys" not in grid.reference_config(b).model


def test_variants_are_named_and_plain_adds_nothing():
    assert llama_variant("plain") == {} and llama_variant("smeared") == {"smear_keys": True}
    assert set(LLAMA_VARIANTS) == {"plain", "smeared"}
    with pytest.raises(BudgetError, match=r"variant='smear' is not allowed; allowed values: plain, smeared"):
        llama_variant("smear")


def test_only_models_and_budgets_name_the_flag():
    """The smear is a model's business: outside nblib/models/ and nblib/budgets/ no library
    module, notebook, benchmark or probe record names the config field (they pick variants by name)."""
    allowed = {REPO / "nblib" / "budgets" / "__init__.py"}
    offenders = []
    for folder in ("nblib", "notebooks", "benchmarks", "data/probes"):
        for path in sorted((REPO / folder).rglob("*")):
            if not path.is_file() or path.suffix not in (".py", ".ipynb", ".md", ".json", ".jsonl"):
                continue
            if path in allowed or (REPO / "nblib" / "models") in path.parents:
                continue
            if re.search(r"smear_keys", path.read_text(errors="replace")):
                offenders.append(str(path.relative_to(REPO)))
    assert offenders == []
