"""The toy budget's copy-augmented LongPPL reference (nblib.metrics.copy)."""

import numpy as np
import pytest
import torch

from nblib.metrics.copy import CopyAugmentedScorer, calibrate, copy_predictions


def slow_copy(ids, lo, hi):
    """Brute force: longest L in [lo, hi] whose suffix occurred earlier; the most recent one."""
    T = len(ids)
    pred, length = np.full(T, -1), np.zeros(T, int)
    for t in range(1, T):
        for L in range(min(hi, t), lo - 1, -1):
            ends = [j for j in range(L, t) if list(ids[j - L:j]) == list(ids[t - L:t])]
            if ends:
                pred[t], length[t] = ids[max(ends)], L
                break
    return pred, length


def test_copy_predictions_match_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(20):
        ids = rng.integers(0, 4, size=60)
        p, l = copy_predictions(ids, 2, 6)
        q, m = slow_copy(ids, 2, 6)
        np.testing.assert_array_equal(l, m)
        np.testing.assert_array_equal(p, q)


def test_copy_finds_a_distant_repeat():
    a = list(b"def frobnicate(x):")
    ids = np.array(a + list(b" " * 50) + a[:6])
    p, l = copy_predictions(ids, 4, 32)
    t = len(ids) - 1  # the final "r" follows the suffix "def f", last seen 60 bytes earlier
    assert l[t] >= 4 and p[t] == a[5]


def test_calibrated_precision_is_a_frequency():
    seqs = [np.array(list(b"abcdabcdabcd"))]
    prec = calibrate(seqs, 2, 4)
    assert all(0 < v < 1 for v in prec.values())
    assert prec[4] > 0.5  # a 4-byte match in a periodic string always guesses right


class FixedScorer:
    identity = "fixed"

    def encode_with_offsets(self, text):
        ids = np.frombuffer(text.encode(), np.uint8).astype(np.int64)
        return ids, np.stack([np.arange(len(ids)), np.arange(1, len(ids) + 1)], 1)

    def nll(self, ids, positions):
        out = torch.full(positions.shape, float("nan"))
        out[positions >= 1] = float(np.log(257))  # a uniform LM
        return out


def test_mixture_nll_closed_form():
    text = "abcdefgh" * 3
    base = FixedScorer()
    prec = {L: 0.9 for L in range(4, 9)}
    s = CopyAugmentedScorer(base, prec, 4, 8)
    ids, _ = base.encode_with_offsets(text)
    pos = torch.arange(1, len(ids))[None]
    nll = s.nll(torch.from_numpy(ids)[None], pos)[0].numpy()
    pred, length = copy_predictions(ids, 4, 8)
    for k, t in enumerate(range(1, len(ids))):
        p = 1 / 257 if length[t] == 0 else 0.9 * (pred[t] == ids[t]) + 0.1 / 257
        assert nll[k] == pytest.approx(-np.log(p), rel=1e-5)
    # the cache only helps after the first period: far lower NLL in the repeats
    assert nll[12:].mean() < 0.5 < nll[:7].mean()
