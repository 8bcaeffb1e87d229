"""RoPE and YaRN frequencies (nblib.models.layers) against known answers: the Gemma blog's
"RoPE as 32 clocks" counts, the rotate-half convention, scores that depend only on distance,
and YaRN's Eqs. 17-21 (Peng et al., 2023) against transformers' own YaRN."""

import math

import numpy as np
import pytest
import torch

from nblib.models import layers as A

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_rope_frequencies_and_clock_counts():
    inv = A.rope_inv_freq(64, 1e4).double().numpy()
    np.testing.assert_allclose(inv, 1e4 ** (-2 * np.arange(32) / 64), rtol=1e-6)
    wavelength = 2 * np.pi / inv
    # the Gemma blog "RoPE as 32 clocks": fastest band 1 rad/position, slowest ~1/7500, ~47000 positions
    assert inv[0] == 1.0 and round(1 / inv[-1], -2) == 7500 and round(wavelength[-1], -3) == 47000
    assert (wavelength <= 1024).sum() == 18  # "only 18 of the 32 clocks complete a full turn"
    # the Gemma blog "Position at longer contexts", hd = 128 at 128k: slowest ~54,000 at base 1e4;
    # bases 5e5 (Llama 3) and 1e6 (Gemma 3) leave 15 and 17 bands slower than the context
    wl128 = {b: 2 * np.pi / A.rope_inv_freq(128, b).double().numpy() for b in (1e4, 5e5, 1e6)}
    assert round(wl128[1e4][-1], -3) == 54000 and (wl128[1e4] <= 131072).all()
    assert (wl128[5e5] > 131072).sum() == 15 and (wl128[1e6] > 131072).sum() == 17


def test_rope_rotate_half_convention():
    """Band j rotates dims (j, j + hd/2) by p * theta_j."""
    hd, p, j = 16, 7, 3
    rot = A.Rotary(hd, 1e4)
    cos, sin = rot(torch.tensor([p]))
    x = torch.zeros(1, 1, 1, hd)
    x[..., j], x[..., j + hd // 2] = 0.6, -1.3
    y = A.apply_rope(x, cos, sin)
    ang = p * 1e4 ** (-2 * j / hd)
    expect = torch.zeros(hd)
    expect[j] = 0.6 * math.cos(ang) + 1.3 * math.sin(ang)
    expect[j + hd // 2] = 0.6 * math.sin(ang) - 1.3 * math.cos(ang)
    torch.testing.assert_close(y.flatten(), expect, atol=1e-6, rtol=1e-6)


def test_rope_score_depends_only_on_distance():
    torch.manual_seed(6)
    rot = A.Rotary(32, 1e4)
    q, k = torch.randn(1, 1, 1, 32), torch.randn(1, 1, 1, 32)

    def score(m, n):
        cq, sq = rot(torch.tensor([m]))
        ck, sk = rot(torch.tensor([n]))
        return (A.apply_rope(q, cq, sq) * A.apply_rope(k, ck, sk)).sum().item()

    for m, n in [(5, 2), (17, 17), (40, 3)]:
        for shift in (1, 13, 250):
            assert score(m + shift, n + shift) == pytest.approx(score(m, n), rel=1e-4, abs=1e-4)
    assert abs(score(9, 2) - score(9, 5)) > 1e-3  # and it does depend on the distance


def test_yarn_known_answer_and_seed_bands():
    theta = A.rope_inv_freq(64, 1e4)
    inv, mscale = A.yarn_inv_freq(64, 1e4, 1024, 4)
    assert round(mscale, 4) == 1.1386  # sqrt(1/t) = 0.1 ln s + 1 at s = 4 (YaRN, Peng et al. 2023)
    ratio = (inv / theta).numpy()
    unchanged = np.isclose(ratio, 1.0, rtol=1e-6)
    full = np.isclose(ratio, 0.25, rtol=1e-6)
    # low = 5, high = 18: pairs 0..5 kept, 18..31 divided by s, 12 blended (Gemma blog: 6 / 14 / 12)
    assert unchanged.nonzero()[0].tolist() == list(range(6))
    assert full.nonzero()[0].tolist() == list(range(18, 32))
    assert ((ratio > 0.25) & (ratio < 1)).sum() == 12
    # the Gemma blog: without YaRN 2x/4x/8x contexts add 3/5/7 bands turning once; with YaRN (s=4)
    # the bands turning within 4096 are the 18 that turned within 1024
    wl = 2 * np.pi / theta.double().numpy()
    assert [(wl <= 1024 * x).sum() - 18 for x in (2, 4, 8)] == [3, 5, 7]
    assert (2 * np.pi / inv.double().numpy() <= 4096).sum() == 18


def test_yarn_matches_transformers():
    tf = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    for hd, base, L, s in [(64, 1e4, 1024, 4.0), (128, 5e5, 4096, 8.0), (32, 1e4, 256, 2.0)]:
        cfg = tf.LlamaConfig(hidden_size=hd * 2, num_attention_heads=2, head_dim=hd, max_position_embeddings=int(L * s),
                             rope_parameters={"rope_type": "yarn", "rope_theta": base, "factor": s,
                                              "original_max_position_embeddings": L})
        ref_inv, ref_ms = ROPE_INIT_FUNCTIONS["yarn"](cfg, "cpu")
        inv, ms = A.yarn_inv_freq(hd, base, L, s)
        torch.testing.assert_close(inv, ref_inv.float(), rtol=1e-6, atol=0)
        assert ms == pytest.approx(ref_ms)
