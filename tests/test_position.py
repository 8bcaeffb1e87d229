"""RoPE clocks and learned-position measures (nblib.gemma.position) against closed forms and
direct computations."""

import numpy as np
import pytest
import torch

from nblib.gemma import position as P
from nblib.models import build_model
from nblib.models.layers import rope_inv_freq

GEMMA = dict(vocab_size=61, d_model=32, n_layers=4, n_heads=4, n_kv_heads=2, head_dim=16, d_ff=48,
             max_seq_len=48, window=16)


def trained_looking_gemma(seed=0):
    """A small Gemma3 with random (not initial) weights everywhere, norms included, so every
    gain and projection row matters."""
    torch.manual_seed(seed)
    model = build_model("gemma3", GEMMA)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * (0.3 if p.dim() == 1 else 0.2))
    return model.eval()


def test_blog_band_groups_at_h64_base1e4_L1024():
    """The Gemma blog: 6 fast, 12 middle, 14 slow bands; 18 of 32 complete a full turn; the
    fastest turns in 2 pi positions and the slowest in about 47,000."""
    b = P.rope_bands(64, 1e4, 1024)
    assert b.group.value_counts().to_dict() == {"slow": 14, "middle": 12, "fast": 6}
    assert (b.turns >= 1).sum() == 18
    assert b.wavelength.iloc[0] == pytest.approx(2 * np.pi)
    assert b.wavelength.iloc[-1] == pytest.approx(2 * np.pi * 1e4 ** (62 / 64))
    assert 46_000 < b.wavelength.iloc[-1] < 48_000
    assert list(b.group) == sorted(b.group, key=["fast", "middle", "slow"].index)


def test_thetas_are_the_models_own_frequencies():
    for h, base in ((64, 1e4), (32, 1e4), (128, 5e5)):
        np.testing.assert_allclose(P.rope_thetas(h, base), rope_inv_freq(h, base).double().numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="head_dim=7"):
        P.rope_thetas(7, 1e4)


@pytest.mark.parametrize("layer, head", [(0, 0), (1, 3), (3, 2)])
def test_band_scores_sum_to_the_direct_mean_score(layer, head):
    """The per-band shares S_j(Delta) add up to the head's mean pre-softmax score at every
    distance, computed directly from the model's rotated queries and keys (within 1e-5)."""
    model = trained_looking_gemma()
    x = torch.randint(0, 61, (3, 40), generator=torch.Generator().manual_seed(1))
    q, k = P.qk_pre_rope(model, x, layer)
    kv = head // (model.n_heads // model.n_kv_heads)
    rotary = model.rotary_global if model.layer_windows[layer] is None else model.rotary_local
    cos, sin = rotary(torch.arange(40))
    direct = P.mean_score_by_distance(q[:, head], k[:, kv], cos, sin)
    bands = P.band_scores(q[:, head], k[:, kv], rotary.inv_freq.double().numpy())
    assert bands.shape == (8, 40)
    np.testing.assert_allclose(bands.sum(0), direct, atol=1e-5)
    assert np.abs(direct).max() > 1e-2  # not a vacuous match


def test_band_scores_equal_a_brute_force_loop():
    torch.manual_seed(3)
    q, k = torch.randn(2, 9, 6, dtype=torch.float64), torch.randn(2, 9, 6, dtype=torch.float64)
    th = np.array([1.0, 0.3, 0.01])
    got = P.band_scores(q, k, th, max_delta=5)
    want = np.zeros((3, 5))
    for j in range(3):
        zq = q[..., j].numpy() + 1j * q[..., j + 3].numpy()
        zk = k[..., j].numpy() + 1j * k[..., j + 3].numpy()
        for d in range(5):
            per_window = [np.mean([(zq[b, n + d] * np.conj(zk[b, n]) * np.exp(1j * d * th[j])).real
                                   for n in range(9 - d)]) for b in range(2)]
            want[j, d] = np.mean(per_window) / np.sqrt(6)
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_qk_pre_rope_are_the_normed_projections():
    model = trained_looking_gemma()
    x = torch.randint(0, 61, (2, 12))
    q, k = P.qk_pre_rope(model, x, 0)
    assert q.shape == (2, 4, 12, 16) and k.shape == (2, 2, 12, 16)
    blk = model.blocks[0]
    h = blk.pre_attn_norm(model.embed(x) * model.d_model ** 0.5)
    want = blk.attn.q_norm(blk.attn.q_proj(h).view(2, 12, 4, 16)).transpose(1, 2)
    torch.testing.assert_close(q, want)


def test_band_weights_closed_form():
    """A head whose query and key rows are nonzero only in band 3 puts its whole weight
    there; shares of every head sum to 1; the QK-norm gain scales its band's share."""
    model = trained_looking_gemma()
    h = model.head_dim
    blk = model.blocks[2]
    with torch.no_grad():
        for norm in (blk.pre_attn_norm, blk.attn.q_norm, blk.attn.k_norm):
            norm.weight.zero_()  # gains of exactly 1
        blk.attn.q_proj.weight.zero_()
        blk.attn.k_proj.weight.zero_()
        for rows in (blk.attn.q_proj.weight[0:h], blk.attn.k_proj.weight[0:h]):  # head 0 / kv head 0
            rows[2, 0], rows[2 + h // 2, 1] = 3.0, 4.0  # band 3: norm 5
            rows[5, 2] = 1.0  # band 6: norm 1
    bands = P.rope_bands(h, 1e4, 48)
    w = P.band_weights(model, bands)
    sums = w.groupby(["layer", "head"]).share.sum(min_count=1)
    assert np.allclose(sums.drop([(2, 1), (2, 2), (2, 3)]), 1.0)
    assert sums.loc[[(2, 1), (2, 2), (2, 3)]].isna().all()  # a head with no q.k weight has no shares
    head0 = w[(w["layer"] == 2) & (w["head"] == 0)].set_index("band").share
    assert head0[3] == pytest.approx(25 / 26) and head0[6] == pytest.approx(1 / 26)
    with torch.no_grad():
        blk.attn.q_norm.weight[5] = 1.0  # gain 2 on dim 5 (band 6): w_6 = 2 * 1 -> 2 / 27
    head0 = P.band_weights(model, bands).query("layer == 2 and head == 0").set_index("band").share
    assert head0[6] == pytest.approx(2 / 27)
    slow = P.slow_band_weight(P.band_weights(model, bands))
    assert len(slow) == 16 and slow.slow_weight.dropna().between(0, 1).all()


def test_distance_r2_is_one_for_a_distance_only_table_and_small_for_noise():
    L, d = 64, 32
    m = np.arange(L)[:, None]
    freqs = np.linspace(0.01, 0.5, d // 2)[None, :]
    table = np.concatenate([np.cos(m * freqs), np.sin(m * freqs)], 1)  # p_m . p_n depends on m - n only
    sim = P.position_similarity(table)
    assert P.distance_r2(sim) == pytest.approx(1.0, abs=1e-12)
    noise = np.random.default_rng(0).standard_normal((L, 256))
    noise_sim = P.position_similarity(noise)
    assert abs(P.distance_r2(noise_sim)) < 0.05
    # with the diagonal (1 by construction) counted, noise looks explained: 64 ones against
    # 4032 entries of variance 1/256 -> R^2 about 64 / (64 + 4032 / 256)
    assert P.distance_r2(noise_sim, include_diagonal=True) == pytest.approx(64 / (64 + 4032 / 256), abs=0.05)
    by = P.similarity_by_distance(sim)
    assert by["mean"].iloc[0] == pytest.approx(1.0) and len(by) == L
    assert (by["p10"] <= by["mean"] + 1e-12).all() and (by["mean"] <= by["p90"] + 1e-12).all()


def test_position_pcs_recover_a_planted_direction():
    L = 50
    rng = np.random.default_rng(0)
    direction = rng.standard_normal(16)
    direction /= np.linalg.norm(direction)
    wave = np.cos(np.pi * np.arange(L) / L)
    table = 10 * wave[:, None] * direction[None] + 0.01 * rng.standard_normal((L, 16))
    pcs, share = P.position_pcs(table, k=3)
    assert pcs.shape == (L, 3) and share[0] > 0.99 and share.sum() <= 1 + 1e-12
    assert abs(np.corrcoef(pcs[:, 0], wave)[0, 1]) > 0.999


def test_rope_similarity_closed_form():
    s = P.rope_similarity(64, 1e4, [0, 1, 10])
    assert s[0] == pytest.approx(1.0)
    theta = 1e4 ** (-np.arange(0, 64, 2) / 64)
    assert s[2] == pytest.approx(np.cos(10 * theta).mean())
