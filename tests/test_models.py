"""Tests for nblib.models: the three decoder families and their shared attention code.

Independent truths used here: transformers' GPT-2 / Llama / Gemma 3 implementations
(weights copied over), dense-mask and repeated-head attention as slow twins of the blocked
band and GQA paths, full forwards as the twin of the KV cache, numpy brute force for mask
counts, torch's FlopCounterMode for matmul FLOPs, and known answers from the Gemma blog (KV cache
75.5 / 11.8 MB, k_bar table, RoPE clock counts, YaRN bands) and YaRN's Eqs. 17-21 (Peng et al., 2023).
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nblib.models import (GPT2, Gemma3, Gemma3Config, GPT2Config, Llama, LlamaConfig, build_model,
                          config_to_dict)
from nblib.models import engine as E
from nblib.models import layers as A
from nblib.models.hf_twin import transformers_twin

V = 97  # small vocab for random configs


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def small(family, **kw):
    """A small random fp32 model of each family (Gemma: W=8 so T=40 exercises the band)."""
    base = {
        "llama": dict(vocab_size=V, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48, max_seq_len=64),
        "gpt2": dict(vocab_size=V, d_model=32, n_layers=2, n_heads=4, max_seq_len=64),
        "gemma3": dict(vocab_size=V, d_model=32, n_layers=4, n_heads=4, n_kv_heads=2, head_dim=8, d_ff=48,
                       max_seq_len=64, window=8),
    }[family]
    torch.manual_seed(0)
    model = build_model(family, {**base, **kw}).eval()
    with torch.no_grad():  # Gemma's (1 + w) norms start at w = 0: make them non-trivial
        for name, p in model.named_parameters():
            if "norm" in name or "ln_" in name:
                p.add_(0.3 * torch.randn_like(p))
    return model


FAMILIES = ["llama", "gpt2", "gemma3"]


def dense_reference(q, k, v, window=None, seg=None, q_offset=0):
    """Slow twin of attend: repeat kv heads, explicit numpy mask, softmax by hand."""
    g = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    T, S = q.size(2), k.size(2)
    i = np.arange(T)[:, None] + q_offset
    j = np.arange(S)[None, :]
    m = (j <= i) & ((j > i - window) if window else True)
    mask = torch.from_numpy(np.broadcast_to(m, (T, S)).copy())
    if seg is not None:
        mask = mask & (seg[:, None, :, None] == seg[:, None, None, :])
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.size(-1))
    return scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v


# ---------------------------------------------------------------- attention primitives

@pytest.mark.parametrize("T,W", [(40, 8), (37, 8), (17, 8), (16, 8), (9, 4), (5, 8), (33, 1)])
def test_windowed_attention_matches_dense_mask(T, W):
    torch.manual_seed(1)
    q, k, v = torch.randn(2, 4, T, 16), torch.randn(2, 2, T, 16), torch.randn(2, 2, T, 16)
    out = A.attend(q, k, v, window=W)
    torch.testing.assert_close(out, dense_reference(q, k, v, window=W), atol=1e-5, rtol=1e-5)


def test_band_gradients_match_dense():
    torch.manual_seed(2)
    qkv = [torch.randn(1, 2, 29, 8, requires_grad=True) for _ in range(3)]
    grads = []
    for fn in (lambda q, k, v: A.attend(q, k, v, window=6), lambda q, k, v: dense_reference(q, k, v, window=6)):
        out = fn(*qkv)
        g = torch.autograd.grad((out * torch.linspace(-1, 1, 8)).sum(), qkv)
        grads.append(g)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("T,W", [(40, 8), (12, 8)])
def test_document_isolation_attention_matches_dense(T, W):
    torch.manual_seed(3)
    q, k, v = torch.randn(2, 4, T, 8), torch.randn(2, 2, T, 8), torch.randn(2, 2, T, 8)
    doc_ids = torch.zeros(2, T, dtype=torch.long)
    doc_ids[0, 5:] = 1
    doc_ids[0, 21:] = 7
    doc_ids[1, T // 2:] = 3
    _, seg = A.doc_positions(doc_ids)
    for window in (None, W):
        out = A.attend(q, k, v, window=window, seg=seg)
        torch.testing.assert_close(out, dense_reference(q, k, v, window, seg), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("window,offset,n", [(8, 7, 30), (8, 3, 1), (8, 7, 5), (None, 11, 4), (None, 11, 1)])
def test_attention_with_cached_keys_matches_dense(window, offset, n):
    torch.manual_seed(4)
    q = torch.randn(1, 4, n, 8)
    k, v = torch.randn(1, 2, offset + n, 8), torch.randn(1, 2, offset + n, 8)
    out = A.attend(q, k, v, window=window, q_offset=offset)
    torch.testing.assert_close(out, dense_reference(q, k, v, window, q_offset=offset), atol=1e-5, rtol=1e-5)


def test_gqa_equals_mha_with_repeated_kv_heads():
    torch.manual_seed(5)
    q, k, v = torch.randn(2, 6, 20, 8), torch.randn(2, 2, 20, 8), torch.randn(2, 2, 20, 8)
    for window in (None, 4):
        gqa = A.attend(q, k, v, window=window)
        mha = A.attend(q, k.repeat_interleave(3, 1), v.repeat_interleave(3, 1), window=window)
        torch.testing.assert_close(gqa, mha, atol=1e-6, rtol=1e-6)


def test_gqa_model_equals_mha_model_with_repeated_kv_weights():
    gqa = small("llama", n_kv_heads=2)
    mha = small("llama", n_kv_heads=4)
    sd = gqa.state_dict()
    for key in list(sd):
        if key.endswith(("k_proj.weight", "v_proj.weight")):  # (nkv*hd, d) -> (nh*hd, d)
            w = sd[key].view(2, 8, 32)
            sd[key] = w.repeat_interleave(2, 0).reshape(32, 32)
    mha.load_state_dict(sd)
    idx = torch.randint(0, V, (2, 20))
    torch.testing.assert_close(gqa(idx)[0], mha(idx)[0], atol=1e-5, rtol=1e-5)


def test_windowed_layers_never_score_outside_the_band(monkeypatch):
    """At T > 2W every SDPA call of a windowed layer sees at most 2W keys."""
    model = small("gemma3")
    seen = []
    real = F.scaled_dot_product_attention

    def spy(q, k, v, **kw):
        seen.append(k.size(-2))
        return real(q, k, v, **kw)

    monkeypatch.setattr(A.F, "scaled_dot_product_attention", spy)
    model(torch.randint(0, V, (1, 200)))
    windows = model.layer_windows
    assert len(seen) == len(windows)
    for w, n_keys in zip(windows, seen):
        assert n_keys == (200 if w is None else 2 * w)


def test_mean_keys_known_values_and_brute_force():
    # the Gemma blog, appendix table (W = 512)
    assert A.mean_keys(1024) == 512.5
    assert A.mean_keys(1024, 512) == 384.25
    assert A.mean_keys(131072) == 65536.5
    assert round(A.mean_keys(131072, 512), 1) == 511.0
    for T, W in [(40, 8), (37, 8), (8, 8), (5, 8), (1024, 512)]:
        i, j = np.arange(T)[:, None], np.arange(T)[None, :]
        assert ((j <= i) & (j > i - W)).sum() / T == pytest.approx(A.mean_keys(T, W), rel=1e-12)
        assert (j <= i).sum() / T == pytest.approx(A.mean_keys(T), rel=1e-12)
        assert A.window_mask(T, T, W, 0, torch.device("cpu")).sum().item() / T == pytest.approx(A.mean_keys(T, W))


# ---------------------------------------------------------------- RoPE and YaRN

def test_set_rope_base_is_abf():
    model = small("llama")
    idx = torch.randint(0, V, (1, 24))
    before_sd = {k: v.clone() for k, v in model.state_dict().items()}
    before = model(idx)[0]
    for base in (5e5, 5e6):  # the LCCP paper App. A.3: 32K and 128K stages
        model.set_rope_base(base)
        hd = model.head_dim
        np.testing.assert_allclose(model.rotary.inv_freq.double().numpy(),
                                   base ** (-2 * np.arange(hd // 2) / hd), rtol=1e-6)
        assert model.config.rope_base == base
    after_sd = model.state_dict()
    assert before_sd.keys() == after_sd.keys()
    assert all(torch.equal(before_sd[k], after_sd[k]) for k in before_sd)
    assert not torch.allclose(before, model(idx)[0])
    model.set_rope_base(1e4)
    torch.testing.assert_close(model(idx)[0], before)


def test_models_accept_yarn_scaling():
    rs = {"type": "yarn", "factor": 4, "original_max_seq_len": 16}
    for fam in ("llama", "gemma3"):
        model = small(fam, rope_scaling=rs)
        rot = model.rotary if fam == "llama" else model.rotary_global
        inv, ms = A.yarn_inv_freq(model.head_dim, 1e4, 16, 4)
        torch.testing.assert_close(rot.inv_freq, inv)
        cos, sin = rot(torch.arange(5))
        torch.testing.assert_close(cos ** 2 + sin ** 2, torch.full_like(cos, ms ** 2))
        idx = torch.randint(0, V, (1, 30))
        cache = model.init_kv_cache(1, 30)
        torch.testing.assert_close(model.prefill(idx, cache), model(idx)[0], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="rope_scaling"):
        small("llama", rope_scaling={"type": "dynamic", "factor": 2})
    with pytest.raises(ValueError, match="rope_scaling keys"):
        small("llama", rope_scaling={"type": "linear", "factor": 2, "beta_fast": 32})
    with pytest.raises(ValueError, match="scale factor"):
        small("llama", rope_scaling={"type": "yarn", "factor": 0.5, "original_max_seq_len": 16})


# ---------------------------------------------------------------- whole models vs transformers

def _randomize_all(model, std=0.1):
    torch.manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(std * torch.randn_like(p))


def test_gpt2_matches_transformers():
    pytest.importorskip("transformers")
    model = small("gpt2")
    _randomize_all(model)
    hf = transformers_twin(model, attn_implementation="eager")
    idx = torch.randint(0, V, (2, 30))
    torch.testing.assert_close(model(idx)[0], hf(idx).logits, atol=1e-5, rtol=1e-4)


def test_llama_matches_transformers():
    tf = pytest.importorskip("transformers")
    for tied in (False, True):
        model = small("llama", tie_embeddings=tied, rope_base=5e5)
        _randomize_all(model)
        hf = tf.LlamaForCausalLM(tf.LlamaConfig(
            vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=tied,
            rope_parameters={"rope_type": "default", "rope_theta": 5e5}, attn_implementation="eager")).eval()
        names = {"embed.": "model.embed_tokens.", "blocks.": "model.layers.", "attn.": "self_attn.",
                 "attn_norm": "input_layernorm", "mlp_norm": "post_attention_layernorm", "norm.weight": "norm.weight"}
        sd = {}
        for k, v in model.state_dict().items():
            hk = k
            for a, b in names.items():
                hk = hk.replace(a, b)
            if k == "norm.weight":
                hk = "model.norm.weight"
            sd[hk] = v
        if tied:
            sd["lm_head.weight"] = model.embed.weight
        hf.load_state_dict(sd, strict=True)
        idx = torch.randint(0, V, (2, 30))
        torch.testing.assert_close(model(idx)[0], hf(idx).logits, atol=1e-5, rtol=1e-4)


def test_gemma3_matches_transformers():
    pytest.importorskip("transformers")
    model = small("gemma3", rope_global_base=1e6)  # Gemma 3's own global base
    _randomize_all(model)
    hf = transformers_twin(model, attn_implementation="eager")  # strict: every weight maps one to one
    idx = torch.randint(0, V, (2, 40))  # T = 40 > 2W: our band path against HF's dense mask
    torch.testing.assert_close(model(idx)[0], hf(idx).logits, atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------- forward, loss, hidden states

@pytest.mark.parametrize("family", FAMILIES)
def test_loss_and_hidden_states(family):
    model = small(family)
    idx = torch.randint(0, V, (2, 25))
    targets = torch.randint(0, V, (2, 25))
    targets[0, :7] = -100
    logits, loss = model(idx, targets)
    assert logits.shape == (2, 25, V) and model(idx)[1] is None
    logp = logits.log_softmax(-1).gather(-1, targets.clamp(min=0)[..., None])[..., 0]
    keep = targets != -100
    assert loss.item() == pytest.approx(-(logp[keep]).mean().item(), rel=1e-5)
    h = model.hidden_states(idx)
    assert h.shape == (2, 25, model.d_model)
    torch.testing.assert_close(model.logits_from_hidden(h), logits)
    sel = h[keep]  # the LongPPL use: head only at scored positions
    torch.testing.assert_close(model.logits_from_hidden(sel), logits[keep])


@pytest.mark.parametrize("family", FAMILIES)
def test_document_isolation_equals_separate_runs(family):
    model = small(family)
    torch.manual_seed(8)
    lengths = [13, 17, 10]  # T = 40; Gemma's W = 8 so the band path runs with documents
    idx = torch.randint(0, V, (1, sum(lengths)))
    doc_ids = torch.cat([torch.full((n,), d) for d, n in zip([4, 0, 4], lengths)])[None]
    packed = model(idx, doc_ids=doc_ids)[0]
    parts, s = [], 0
    for n in lengths:
        parts.append(model(idx[:, s:s + n])[0])
        s += n
    torch.testing.assert_close(packed, torch.cat(parts, 1), atol=1e-5, rtol=1e-5)
    # a batch: row 1 is a single document and must equal a plain forward
    idx2 = torch.stack([idx[0], idx[0].flip(0)])
    doc2 = torch.stack([doc_ids[0], torch.zeros(40, dtype=torch.long)])
    out2 = model(idx2, doc_ids=doc2)[0]
    torch.testing.assert_close(out2[0], packed[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out2[1], model(idx2[1:])[0][0], atol=1e-5, rtol=1e-5)


def test_doc_positions_restart_per_document():
    doc_ids = torch.tensor([[3, 3, 3, 1, 1, 3, 3], [0, 0, 0, 0, 0, 0, 0]])
    pos, seg = A.doc_positions(doc_ids)
    assert pos.tolist() == [[0, 1, 2, 0, 1, 0, 1], list(range(7))]
    assert seg.tolist() == [[1, 1, 1, 2, 2, 3, 3], [1] * 7]


@pytest.mark.parametrize("family", FAMILIES)
def test_training_step_runs_with_finite_gradients(family):
    model = small(family).train()
    idx = torch.randint(0, V, (2, 40))
    doc_ids = (torch.arange(40) >= 19).long().expand(2, 40)
    _, loss = model(idx, idx.roll(-1, 1), doc_ids=doc_ids)
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


# ---------------------------------------------------------------- KV cache and generation

@pytest.mark.parametrize("family", FAMILIES)
def test_prefill_last_only_is_the_last_row_of_the_full_prefill(family):
    model = small(family)
    idx = torch.randint(0, V, (2, 30))
    full = model.prefill(idx, model.init_kv_cache(2, 30))
    last = model.prefill(idx, model.init_kv_cache(2, 30), last_only=True)
    assert last.shape == (2, 1, V)
    torch.testing.assert_close(last, full[:, -1:], atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("family", FAMILIES)
def test_kv_cache_logits_equal_full_forward(family):
    model = small(family)
    idx = torch.randint(0, V, (2, 40))
    full = model(idx)[0]
    cache = model.init_kv_cache(2, 40)
    steps = [model.prefill(idx[:, :13], cache)]
    steps += [model.decode_step(idx[:, t:t + 1], cache) for t in range(13, 30)]
    steps.append(model.prefill(idx[:, 30:], cache))  # a second chunk on a partly filled cache
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    assert cache.pos == 40
    # one-token-at-a-time from an empty cache (Gemma: the ring wraps many times)
    cache = model.init_kv_cache(2, 40)
    steps = [model.decode_step(idx[:, t:t + 1], cache) for t in range(40)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="cache holds"):
        model.decode_step(idx[:, :1], cache)


def test_gemma_ring_buffer_holds_window_minus_one():
    model = small("gemma3")
    cache = model.init_kv_cache(1, 40)
    for w, k in zip(model.layer_windows, cache.k):
        assert k.shape == (1, 2, 40 if w is None else 7, 8)
    nbytes = cache.nbytes()
    model.prefill(torch.randint(0, V, (1, 40)), cache)
    assert cache.nbytes() == nbytes == model.kv_cache_bytes(40)


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_generation_same_with_and_without_cache(family):
    model = small(family)
    prompt = torch.randint(0, V, (2, 5))
    with_cache = model.generate(prompt, 35, temperature=0)
    without = model.generate(prompt, 35, temperature=0, use_cache=False)
    assert with_cache.shape == (2, 40)
    assert torch.equal(with_cache, without)
    assert torch.equal(model.generate(prompt, 35, temperature=0.7, top_k=1), with_cache)
    g1 = model.generate(prompt, 10, top_k=5, generator=torch.Generator().manual_seed(3))
    g2 = model.generate(prompt, 10, top_k=5, use_cache=False, generator=torch.Generator().manual_seed(3))
    assert torch.equal(g1, g2)


def test_top_k_sampling_stays_in_top_k():
    torch.manual_seed(9)
    logits = torch.randn(4, 50)
    top3 = logits.topk(3, dim=-1).indices
    gen = torch.Generator().manual_seed(0)
    draws = torch.cat([E.sample_next(logits, 1.5, 3, gen) for _ in range(200)], 1)  # (4, 200)
    assert all(set(draws[b].tolist()) <= set(top3[b].tolist()) for b in range(4))
    assert all(len(set(draws[b].tolist())) > 1 for b in range(4))
    assert torch.equal(E.sample_next(logits, 0.0), logits.argmax(-1, keepdim=True))


def test_nucleus_sampling_matches_the_renormalised_nucleus():
    """top_p keeps the smallest most-likely set with mass >= p (Holtzman et al., 2020) and
    samples it renormalised: probs (.5, .3, .15, .05) at p = .8 -> {0: .625, 1: .375}."""
    logits = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log().repeat(4000, 1)
    gen = torch.Generator().manual_seed(0)
    draws = E.sample_next(logits, 1.0, None, gen, top_p=0.8).ravel()
    freq = torch.bincount(draws, minlength=4).double() / len(draws)
    assert freq[2] == freq[3] == 0
    assert abs(freq[0].item() - 0.625) < 4 * (0.625 * 0.375 / 4000) ** 0.5
    wider = E.sample_next(logits, 1.0, None, gen, top_p=0.81).ravel()
    assert set(wider.tolist()) == {0, 1, 2}
    assert set(E.sample_next(logits[:50], 1.0, None, gen, top_p=1e-6).ravel().tolist()) == {0}


@pytest.mark.parametrize("family", FAMILIES)
def test_sampling_is_reproducible_for_a_seed(family):
    model = small(family)
    prompt = torch.randint(0, V, (2, 5))
    kw = dict(temperature=0.8, top_k=20, top_p=0.9)
    g1 = model.generate(prompt, 30, generator=torch.Generator().manual_seed(11), **kw)
    g2 = model.generate(prompt, 30, generator=torch.Generator().manual_seed(11), **kw)
    g3 = model.generate(prompt, 30, use_cache=False, generator=torch.Generator().manual_seed(11), **kw)
    g4 = model.generate(prompt, 30, generator=torch.Generator().manual_seed(12), **kw)
    assert torch.equal(g1, g2) and torch.equal(g1, g3)
    assert not torch.equal(g1, g4)


@pytest.mark.parametrize("bad, match", [(dict(temperature=-1), "temperature=-1"), (dict(top_k=0), "top_k=0"),
                                        (dict(top_p=0.0), "top_p=0.0"), (dict(top_p=1.5), "top_p=1.5")])
def test_generate_rejects_bad_sampling_parameters(bad, match):
    with pytest.raises(ValueError, match=match):
        small("gpt2").generate(torch.zeros(1, 3, dtype=torch.long), 2, **bad)


def test_gpt2_position_table_limit():
    model = small("gpt2")  # max_seq_len 64
    with pytest.raises(ValueError, match="position table"):
        model(torch.zeros(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match="position table"):
        model.generate(torch.zeros(1, 60, dtype=torch.long), 10)


def test_kv_cache_bytes_seed_numbers():
    """the Gemma blog: 75.5 MB (Model A) vs 11.8 MB (Model B) at 1024 tokens fp32, 6.4x smaller."""
    with torch.device("meta"):
        a, b = GPT2(GPT2Config.gpt2_124m()), Gemma3(Gemma3Config.gemma3_113m())
    sizes = []
    for model in (a, b):
        cache = model.init_kv_cache(1, 1024, torch.float32, device="cpu")
        assert cache.nbytes() == model.kv_cache_bytes(1024)
        sizes.append(cache.nbytes())
        bf16 = model.init_kv_cache(2, 100, torch.bfloat16, device="cpu")
        assert bf16.nbytes() == model.kv_cache_bytes(100, batch_size=2, bytes_per_el=2)
    assert round(sizes[0] / 1e6, 1) == 75.5 and round(sizes[1] / 1e6, 1) == 11.8
    assert round(sizes[0] / sizes[1], 1) == 6.4
    # the closed form, written out: 2 * n_kv * h * b * sum_l T_l
    assert sizes[0] == 2 * 12 * 64 * 4 * (12 * 1024)
    assert sizes[1] == 2 * 3 * 64 * 4 * (3 * 1024 + 9 * 511)


# ---------------------------------------------------------------- parameter and FLOP counts

def test_gpt2_124m_parameter_count_matches_transformers():
    tf = pytest.importorskip("transformers")
    with torch.device("meta"):
        ours = GPT2(GPT2Config.gpt2_124m())
        hf = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12))
    assert ours.n_params(non_embedding=False) == 124_439_808
    assert ours.n_params(non_embedding=False) == sum(p.numel() for p in hf.parameters())
    V_, d, L, T = 50257, 768, 12, 1024
    assert ours.n_params() == 124_439_808 - V_ * d - T * d == L * (12 * d * d + 13 * d) + 2 * d


def test_gemma3_113m_parameter_count():
    with torch.device("meta"):
        model = Gemma3(Gemma3Config.gemma3_113m())
    c = model.config
    per_layer = (2 * c.d_model * c.n_heads * c.head_dim + 2 * c.d_model * c.n_kv_heads * c.head_dim
                 + 3 * c.d_model * c.d_ff + 4 * c.d_model + 2 * c.head_dim)
    closed = c.vocab_size * c.d_model + c.n_layers * per_layer + c.d_model
    assert model.n_params(non_embedding=False) == closed == 112_990_464  # "113M" (Gemma blog)
    assert model.n_params() == closed - c.vocab_size * c.d_model == 74_356_992
    # the blog's layout: global layers 0, 4 and 8 ("global layer 8", "layer 6, a local layer")
    assert model.layer_windows.count(None) == 3 and model.layer_windows[:4] == [None, 512, 512, 512]


@pytest.mark.parametrize("tied", [False, True])
def test_llama_parameter_count_closed_form(tied):
    model = small("llama", tie_embeddings=tied)
    d, L, nh, nkv, hd, ff = 32, 2, 4, 2, 8, 48
    blocks = L * (2 * d * nh * hd + 2 * d * nkv * hd + 3 * d * ff + 2 * d) + d
    assert model.n_params() == blocks
    assert model.n_params(non_embedding=False) == blocks + V * d * (1 if tied else 2)


@pytest.mark.parametrize("family", FAMILIES)
def test_flops_matmul_part_matches_flop_counter(family):
    from torch.utils.flop_counter import FlopCounterMode
    model = small(family)
    T = 40
    with FlopCounterMode(display=False) as fc:
        model(torch.randint(0, V, (1, T)))
    counts = fc.get_flop_counts()["Global"]
    # linear layers run as mm/addmm; attention (SDPA, or bmm inside its math path) is excluded
    matmul = sum(n for op, n in counts.items() if str(op) in ("aten.mm", "aten.addmm"))
    d_attn = model.n_heads * model.head_dim
    attn = sum(4 * d_attn * A.mean_keys(T, w) for w in model.layer_windows)
    assert matmul / T == pytest.approx(model.flops_per_token(T, training=False) - attn)
    assert model.flops_per_token(T) == pytest.approx(3 * model.flops_per_token(T, training=False))


def test_flops_seed_numbers():
    """the Gemma blog: attention per layer 2d(T+1) per token; Model B does ~9% fewer FLOPs than A."""
    with torch.device("meta"):
        a, b = GPT2(GPT2Config.gpt2_124m()), Gemma3(Gemma3Config.gemma3_113m())
    d = 768
    for T in (1024, 131072):
        attn_a = a.flops_per_token(T, False) - a.flops_per_token(1, False) + 12 * 2 * d * 2
        assert attn_a == pytest.approx(12 * 2 * d * (T + 1))
    assert round(1 - b.flops_per_token(1024, False) / a.flops_per_token(1024, False), 2) == 0.09
    # Model B's windowed layers level off: attention at 128k is 3 global layers plus 9 * 4d * k_bar_W
    attn_b = b.flops_per_token(131072, False) - b.flops_per_token(1, False) + 12 * 4 * d * 1
    assert attn_b == pytest.approx(3 * 2 * d * 131073 + 9 * 4 * d * A.mean_keys(131072, 512))


# ---------------------------------------------------------------- registry, configs, init

def test_registry_round_trip_and_errors():
    model = small("gemma3", rope_scaling={"type": "yarn", "factor": 2, "original_max_seq_len": 32})
    cfg = config_to_dict(model.config)
    again = build_model("gemma3", cfg)
    assert again.config == model.config and isinstance(again, Gemma3)
    with torch.device("meta"):
        assert isinstance(build_model("gpt2", {}), GPT2)  # GPT-2 124M defaults
    with pytest.raises(ValueError, match="unknown model family"):
        build_model("mamba", {})
    with pytest.raises(ValueError, match="unknown llama config keys.*'dmodel'"):
        build_model("llama", {"dmodel": 3})
    with pytest.raises(ValueError, match="missing llama config keys"):
        build_model("llama", {"vocab_size": 10})
    with pytest.raises(TypeError):
        build_model("llama", [1, 2])
    with pytest.raises(TypeError):
        config_to_dict({"a": 1})


@pytest.mark.parametrize("family,bad", [
    ("llama", dict(n_heads=3)), ("llama", dict(n_kv_heads=3)), ("llama", dict(d_model=0)),
    ("llama", dict(rope_base=1.0)), ("gpt2", dict(n_heads=5)), ("gpt2", dict(n_layers=2.0)),
    ("gemma3", dict(head_dim=7)), ("gemma3", dict(window=0)), ("gemma3", dict(n_kv_heads=3)),
])
def test_bad_configs_raise(family, bad):
    with pytest.raises(ValueError):
        small(family, **bad)


def test_bad_inputs_raise():
    model = small("llama")
    with pytest.raises(ValueError, match="idx"):
        model(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="doc_ids"):
        model(torch.zeros(1, 5, dtype=torch.long), doc_ids=torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="targets"):
        model(torch.zeros(1, 5, dtype=torch.long), torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="temperature"):
        model.generate(torch.zeros(1, 5, dtype=torch.long), 2, temperature=-1)


def test_init_scales():
    torch.manual_seed(0)
    model = Llama(LlamaConfig(vocab_size=512, d_model=256, n_layers=8, n_heads=4, n_kv_heads=4, d_ff=512,
                              max_seq_len=64))
    assert model.embed.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.blocks[0].attn.q_proj.weight.std().item() == pytest.approx(0.02, rel=0.05)
    for w in (model.blocks[3].attn.o_proj.weight, model.blocks[3].mlp.down_proj.weight):
        assert w.std().item() == pytest.approx(0.02 / math.sqrt(16), rel=0.05)
    gem = Gemma3(Gemma3Config(vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8,
                              d_ff=48, window=8))
    assert all((p == 0).all() for n, p in gem.named_parameters() if "norm" in n)


def test_llama_head_size_decoupled_from_width_matches_transformers():
    """LlamaConfig.head_size (toy S2: heads of 32 on d48) is transformers' LlamaConfig.head_dim:
    q/o project d_model <-> n_heads * head_size; logits and N's closed form agree."""
    pytest.importorskip("transformers")
    for hs in (12, 4):  # attention wider and narrower than d_model = 32
        model = small("llama", head_size=hs, smear_keys=False)
        assert model.blocks[0].attn.q_proj.weight.shape == (4 * hs, 32)
        _randomize_all(model)
        hf = transformers_twin(model, attn_implementation="eager")
        idx = torch.randint(0, V, (2, 30))
        torch.testing.assert_close(model(idx)[0], hf(idx).logits, atol=1e-5, rtol=1e-4)
        L, d, nh, nkv, ff = 2, 32, 4, 2, 48
        assert model.n_params(non_embedding=False) == 2 * V * d + L * (2 * d * nh * hs + 2 * d * nkv * hs + 3 * d * ff
                                                                       + 2 * d) + d


def test_llama_head_size_must_be_even():
    for bad in (7, 0, True, 3.0):
        with pytest.raises(ValueError, match=f"head_size must be None or an even int >= 2, got {bad!r}"):
            build_model("llama", dict(vocab_size=V, d_model=32, n_layers=1, n_heads=4, n_kv_heads=2, d_ff=48,
                                      max_seq_len=64, head_size=bad))
