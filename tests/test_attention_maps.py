"""Attention probabilities, head ablation and the per-head measures (nblib.metrics.attention_maps)
against the model's own fused attention, hand computations and constructed patterns."""

import numpy as np
import pytest
import torch

from nblib.metrics import attention_maps as M
from nblib.models import build_model

SHAPES = {
    "gpt2": dict(vocab_size=53, max_seq_len=64, d_model=32, n_layers=2, n_heads=4),
    "gemma3": dict(vocab_size=53, d_model=32, n_layers=4, n_heads=4, n_kv_heads=1, head_dim=8, d_ff=48,
                   max_seq_len=64, window=8),
}


def model_of(family, seed=0):
    torch.manual_seed(seed)
    m = build_model(family, SHAPES[family])
    with torch.no_grad():
        for p in m.parameters():  # random norms and biases too, so every path matters
            p.add_(torch.randn_like(p) * 0.1)
    return m.eval()


def attention_outputs(model, idx):
    """{layer: the input of the output projection}, i.e. the model's own attention output."""
    got, hooks = {}, []
    for layer in range(len(model.blocks)):
        proj = M._output_projection(model, layer)
        hooks.append(proj.register_forward_pre_hook(lambda m, a, l=layer: got.__setitem__(l, a[0].clone())))
    model(idx)
    for h in hooks:
        h.remove()
    return got


@pytest.mark.parametrize("family", ["gpt2", "gemma3"])
def test_probabilities_times_values_equal_the_models_attention(family):
    """A second implementation: explicit softmax(q k / sqrt(h)) with the model's masks, times
    the values, equals the fused SDPA output of every layer (window included, T > 2W)."""
    model = model_of(family)
    idx = torch.randint(0, 53, (2, 30), generator=torch.Generator().manual_seed(0))
    probs = M.attention_probs(model, idx)
    qkv = M.queries_keys_values(model, idx)
    want = attention_outputs(model, idx)
    for layer, p in probs.items():
        v = qkv[layer][2].repeat_interleave(model.n_heads // qkv[layer][2].size(1), dim=1)
        y = (p @ v.float()).transpose(1, 2).reshape(2, 30, -1)
        torch.testing.assert_close(y, want[layer], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(p.sum(-1), torch.ones(2, model.n_heads, 30))
        assert (p.triu(1) == 0).all()
        w = model.layer_windows[layer]
        if w is not None:  # nothing W or more positions back
            assert (p.tril(-w) == 0).all()


@pytest.mark.parametrize("family", ["gpt2", "gemma3"])
def test_ablating_a_head_changes_only_that_heads_output(family):
    model = model_of(family)
    idx = torch.randint(0, 53, (2, 20))
    hd = model.head_dim
    before_layer1 = attention_outputs(model, idx)[1]
    with M.head_ablation(model, {1: [2]}):
        out = {}
        h = M._output_projection(model, 1).register_forward_pre_hook(
            lambda m, a: out.__setitem__("in", a[0].clone()))
        logits_ablated = model(idx)[0]
        h.remove()
    # what reaches the output projection: head 2's slice is zero, every other head's is unchanged
    want = before_layer1.clone()
    want[..., 2 * hd:3 * hd] = 0
    assert torch.equal(out["in"], want)
    assert not torch.equal(before_layer1[..., 2 * hd:3 * hd], want[..., 2 * hd:3 * hd])
    assert not torch.allclose(logits_ablated, model(idx)[0])  # and the model's output changes
    assert torch.equal(model(idx)[0], model(idx)[0])  # hooks are gone after the block
    with pytest.raises(ValueError, match="out of range"):
        with M.head_ablation(model, {0: [model.n_heads]}):
            pass


def test_induction_score_hand_computation():
    """A constructed pattern: in the repeat (block of n=4 at 0, distance 6), query t puts 0.7
    on t - 6 + 1 in head 0 and 0.2 in head 1 (for t = 6, 7, 8): scores 0.7 and 0.2."""
    T, n, D = 10, 4, 6
    p = torch.zeros(1, 2, T, T)
    for t in range(T):
        p[0, :, t, 0] = 1.0
    for t in range(D, D + n - 1):
        p[0, :, t] = 0
        p[0, 0, t, t - D + 1], p[0, 0, t, 0] = 0.7, 0.3
        p[0, 1, t, t - D + 1], p[0, 1, t, t] = 0.2, 0.8
    s = M.induction_scores(p, start=0, distance=D, n=n)
    torch.testing.assert_close(s, torch.tensor([0.7, 0.2]))


def test_distance_and_sink_measures_hand_computation():
    p = torch.zeros(1, 1, 4, 4)
    p[0, 0, 0, 0] = 1
    p[0, 0, 1] = torch.tensor([0.5, 0.5, 0, 0])
    p[0, 0, 2] = torch.tensor([0.25, 0.25, 0.5, 0])
    p[0, 0, 3] = torch.tensor([0.1, 0.0, 0.4, 0.5])
    # distances: q=0: 0; q=1: .5; q=2: .5+.25 = .75; q=3: .3 + .4 = .7
    assert M.attention_distance(p).item() == pytest.approx((0 + 0.5 + 0.75 + 0.7) / 4)
    assert M.attention_distance(p, q_from=2).item() == pytest.approx((0.75 + 0.7) / 2)
    assert M.first_position_share(p, q_from=1).item() == pytest.approx((0.5 + 0.25 + 0.1) / 3)
    idx = torch.tensor([[5, 9, 5, 7]])
    assert M.separator_share(p, idx, sep_id=9, q_from=2).item() == pytest.approx((0.25 + 0.0) / 2)
    assert torch.isnan(M.separator_share(p, idx, sep_id=8)).all()


def test_repeated_blocks_and_kl():
    x, s = M.repeated_block_sequences(50, 49, n=8, distance=20, n_seqs=3)
    assert x.shape == (3, 28) and s == 0 and torch.equal(x[:, :8], x[:, 20:28]) and (x != 49).all()
    la = torch.log(torch.tensor([[0.5, 0.5]]))
    lb = torch.log(torch.tensor([[0.9, 0.1]]))
    want = 0.5 * np.log(0.5 / 0.9) + 0.5 * np.log(0.5 / 0.1)
    assert M.kl_divergence(la, lb).item() == pytest.approx(want)
    assert M.kl_divergence(la, la).item() == 0


def test_previous_token_score_and_labels():
    p = torch.zeros(1, 2, 5, 5)
    p[0, :, 0, 0] = 1
    for q in range(1, 5):
        p[0, 0, q, q - 1] = 1.0  # a clean previous-token head
        p[0, 1, q, 0], p[0, 1, q, q - 1] = 0.75, 0.25
    torch.testing.assert_close(M.previous_token_scores(p), torch.tensor([1.0, 0.25]))

    class Tok:  # character-level: one token per character, emoji split in two
        def encode_with_offsets(self, text):
            ids, spans = [], []
            for i, c in enumerate(text):
                n = 2 if ord(c) > 0xFFFF else 1
                ids += [ord(c) % 50] * n
                spans += [(i, i + 1)] * n
            return np.array(ids), np.array(spans)

    ids, labels = M.token_labels(Tok(), "a\n🤗")
    assert labels == ["a", "↵", "🤗¹", "🤗²"] and ids.shape == (1, 4)
    _, labels = M.token_labels(Tok(), "a🤗", renderable=lambda c: ord(c) < 0x10000)
    assert labels == ["a", "U+1F917¹", "U+1F917²"]


def test_retrieval_hits_count_a_constructed_map():
    """Three answer tokens; head 0 attends to their twins in the needle (3 hits), head 1
    to the right token outside the needle once and to wrong tokens in it twice (0 hits),
    head 2 to its twin once (1 hit)."""
    ids = torch.tensor([5, 7, 8, 9, 4, 7, 8, 9])  # needle tokens 1..3, answer 5..7 repeats them
    T = len(ids)
    p = torch.zeros(3, T, T)
    queries, targets = [4, 5, 6], [7, 8, 9]
    for i, q in enumerate(queries):
        p[0, q, 1 + i] = 1.0
        p[1, q, 0 if i == 0 else 1 + (i + 1) % 3] = 1.0
        p[2, q, 1 + i if i == 2 else 0] = 1.0
    hits = M.retrieval_hits(p, ids, queries, targets, (1, 4))
    assert hits.tolist() == [3, 0, 1]


def test_llama_probabilities_match_its_attention():
    torch.manual_seed(0)
    m = build_model("llama", dict(vocab_size=53, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48,
                                  max_seq_len=64)).eval()
    idx = torch.randint(0, 53, (2, 20))
    probs, qkv, want = M.attention_probs(m, idx), M.queries_keys_values(m, idx), attention_outputs(m, idx)
    for layer, p in probs.items():
        v = qkv[layer][2].repeat_interleave(2, dim=1)
        torch.testing.assert_close((p @ v).transpose(1, 2).reshape(2, 20, -1), want[layer], atol=1e-5, rtol=1e-4)
