"""Tests for nblib.data's streams and segmentation: packed, document-start and Table 9
long-mixture streams against slow, plain-Python twins; Table 9 constants against the sums
the paper states in App. A.4; determinism and resume by step."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch

from nblib.data import DocStartStream, LengthMixture, LongMixtureStream, PackedStream, TokenDocs, segment_spans
from nblib.data.streams import _segment_all


# --------------------------------------------------------------------------- segmentation


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 10, 16, 17, 18, 50])
def test_segments_overlap_by_one_and_reconstruct(n):
    T = 8
    doc = list(range(100, 100 + n))
    spans = segment_spans(n, T)
    segs = [doc[s:e] for s, e in spans]
    assert spans[0][0] == 0 and spans[-1][1] == n
    assert all(len(s) == T + 1 for s in segs[:-1]) and 1 <= len(segs[-1]) <= T + 1
    assert all(a[-1] == b[0] for a, b in zip(segs, segs[1:]))  # one-token overlap
    assert segs[0] + [t for s in segs[1:] for t in s[1:]] == doc  # every segment kept, exact
    assert len(spans) == (1 if n <= T + 1 else math.ceil((n - 1) / T))
    # every next-token pair (t, t+1) lies inside exactly one segment
    pairs = [(a, a + 1) for s, e in spans for a in range(s, e - 1)]
    assert sorted(pairs) == [(a, a + 1) for a in range(n - 1)]


def test_vectorised_segments_match_slow():
    lengths = np.array([0, 1, 5, 9, 10, 33, 64, 65, 66])
    doc, start, length = _segment_all(lengths, 8)
    slow = [(i, s, e - s) for i, n in enumerate(lengths) for s, e in segment_spans(int(n), 8)]
    assert list(zip(doc.tolist(), start.tolist(), length.tolist())) == slow


# --------------------------------------------------------------------------- streams


def _synthetic(lengths, seed=0, vocab=200) -> TokenDocs:
    rng = np.random.default_rng(seed)
    return TokenDocs.from_arrays([rng.integers(0, vocab, n) for n in lengths], eos_id=vocab, name="synthetic")


def _slow_packed(td: TokenDocs):
    """Plain-Python packed stream: tokens and doc ids, every non-empty doc followed by EOS."""
    toks, ids = [], []
    for i in range(len(td)):
        d = td.doc(i).tolist()
        if d:
            toks += d + [td.eos_id]
            ids += [i] * (len(d) + 1)
    return toks, ids


def test_packed_stream_matches_slow_twin_and_covers_epoch():
    td = _synthetic([5, 0, 17, 3, 40, 1, 22])
    T, B = 6, 4
    s = PackedStream(td, T, seed=3)
    toks, ids = _slow_packed(td)
    assert s.n_windows == (len(toks) - 1) // T
    seen = []
    for step in range(3 * s.n_windows // B + 2):  # a few epochs
        x, y, doc = s.batch(step, B)
        assert x.shape == y.shape == doc.shape == (B, T) and x.dtype == torch.long
        for b, w in enumerate(s.windows(step, B)):
            window = toks[w * T : w * T + T + 1]
            assert x[b].tolist() == window[:-1] and y[b].tolist() == window[1:]
            assert doc[b].tolist() == ids[w * T : w * T + T]
        seen += s.windows(step, B).tolist()
    n = s.n_windows
    for e in range(3):  # each epoch is a permutation of all windows
        assert sorted(seen[e * n : (e + 1) * n]) == list(range(n))
    assert seen[:n] != seen[n : 2 * n]  # epochs are shuffled differently
    # windows at stride T cover every next-token pair of the epoch exactly once
    targets = sorted(p for w in range(n) for p in range(w * T + 1, w * T + T + 1))
    assert targets == list(range(1, n * T + 1))


def test_doc_start_stream_reads_long_documents_from_their_start():
    td = _synthetic([5, 30, 12, 9, 50, 11, 3])
    T, B = 10, 3
    s = DocStartStream(td, T, seed=2)
    eligible = [i for i in range(len(td)) if len(td.doc(i)) >= T + 1]
    assert s.docs.tolist() == eligible
    seen = []
    for step in range(2 * len(eligible) // B):
        x, y, doc = s.batch(step, B)
        assert x.shape == y.shape == doc.shape == (B, T)
        for b in range(B):
            d = int(doc[b, 0])
            assert (doc[b] == d).all()
            start = td.doc(d)[: T + 1].tolist()
            assert x[b].tolist() == start[:-1] and y[b].tolist() == start[1:]
            seen.append(d)
    n = len(eligible)
    assert sorted(seen[:n]) == eligible  # each epoch uses every long document once
    assert torch.equal(DocStartStream(td, T, seed=2).batch(5, B)[0], s.batch(5, B)[0])
    with pytest.raises(ValueError, match="no document of seq_len\\+1 = 51"):
        DocStartStream(td, 50)


def test_stream_determinism_and_resume():
    td = _synthetic([300, 120, 45, 700, 90, 1000, 64, 10] * 3)
    for make in (lambda: PackedStream(td, 32, seed=1), lambda: LongMixtureStream(td, 32, seed=1, block=100)):
        a, b = make(), make()
        x1 = a.batch(7, 5)
        _ = a.batch(3, 5), a.batch(500, 5)  # other steps in between (caches) change nothing
        for t1, t2 in zip(x1, a.batch(7, 5)):
            assert torch.equal(t1, t2)
        for t1, t2 in zip(x1, b.batch(7, 5)):  # a fresh stream (a resumed run) agrees
            assert torch.equal(t1, t2)
        assert not torch.equal(x1[0], a.batch(8, 5)[0])
    assert not torch.equal(PackedStream(td, 32, seed=1).batch(0, 4)[0], PackedStream(td, 32, seed=2).batch(0, 4)[0])


def test_table9_mixtures():
    m32, m128 = LengthMixture.lccp_32k(), LengthMixture.extension_128k()
    assert math.isclose(sum(m32.weights), 1.0) and math.isclose(sum(m128.weights), 1.0)
    # App. A.4's text: <32K shares 65.11% and 50.00%; >=32K 34.89% and 50.00%
    assert math.isclose(m32.weights[0] + m32.weights[1], 0.6511, abs_tol=1e-9)
    assert math.isclose(m32.weights[2] + m32.weights[3], 0.3489, abs_tol=1e-9)
    assert math.isclose(m128.weights[0] + m128.weights[1], 0.5000, abs_tol=1e-9)
    # both mixtures use the absolute edges 16K, 32K, 128K of Table 9
    assert m32.edges_tokens(32768) == [16384, 32768, 131072] == m128.edges_tokens(131072)
    assert m32.labels(32768) == ["<16384", "16384-32768", "32768-131072", ">=131072"]
    assert m32.bucket_of([0, 16383, 16384, 32767, 32768, 131071, 131072], 32768).tolist() == [0, 0, 1, 1, 2, 2, 3]
    with pytest.raises(ValueError, match="increasing"):
        LengthMixture((1.0, 0.5), (1, 1, 1))
    with pytest.raises(ValueError, match="weights"):
        LengthMixture((1.0,), (1, 1, 1))


def _slow_mixture_sequence(s: LongMixtureStream, td: TokenDocs, sample: int):
    """Plain-Python twin: rebuild the bucket's shuffled piece stream and cut window k from it."""
    T = s.seq_len
    b, k = s.plan(sample)
    bucket_docs = [i for i in range(len(td)) if td.lengths[i] > 0 and s.mixture.bucket_of(td.lengths[i], T) == b]
    pieces = [(i, td.doc(i)[a:e].tolist()) for i in bucket_docs for a, e in segment_spans(int(td.lengths[i]), T)]
    toks, ids, epoch = [], [], 0
    while len(toks) < k * T + T + 1:
        order = np.random.default_rng([s.seed, 2, b, epoch]).permutation(len(pieces))
        for j in order:
            i, p = pieces[j]
            toks += p + [td.eos_id]
            ids += [i] * (len(p) + 1)
        epoch += 1
    return toks[k * T : k * T + T + 1], ids[k * T : k * T + T + 1]


def test_long_mixture_stream_matches_slow_twin():
    T = 16
    # buckets by source length: <8, 8-16, 16-64, >=64 tokens
    td = _synthetic([3, 5, 7, 9, 12, 15, 16, 20, 40, 63, 64, 100, 200, 0])
    s = LongMixtureStream(td, T, seed=5, block=50)
    assert [r["n_docs"] for r in s.bucket_stats()] == [3, 3, 4, 3]
    # a >=64 doc of 200 tokens gives ceil(199/16) = 13 pieces, 100 gives 7, 64 gives 4
    assert s.bucket_stats()[3]["n_pieces"] == 13 + 7 + 4
    for step in range(0, 30, 3):
        x, y, doc = s.batch(step, 4)
        assert x.shape == (4, T)
        for r in range(4):
            toks, ids = _slow_mixture_sequence(s, td, step * 4 + r)
            assert x[r].tolist() == toks[:-1] and y[r].tolist() == toks[1:] and doc[r].tolist() == ids[:-1]
            buckets = s.mixture.bucket_of(td.lengths[doc[r].numpy()], T)
            assert len(set(buckets.tolist())) == 1  # one sequence, one bucket


def test_long_mixture_windows_tile_each_bucket():
    """A bucket's samples take its windows 0, 1, 2, ... in turn: nothing skipped, nothing repeated."""
    td = _synthetic([3, 5, 7, 9, 12, 15, 16, 20, 40, 63, 64, 100, 200])
    s = LongMixtureStream(td, 16, seed=2, block=50)
    plans = [s.plan(i) for i in range(170)]  # 3.4 blocks
    for b in range(4):
        ks = [k for bb, k in plans if bb == b]
        assert ks == list(range(len(ks))) and len(ks) > 0
    # enough samples for every bucket to pass one full epoch: every document shows up
    n = 400
    _, _, doc = s.batch(0, n)
    assert set(doc.flatten().tolist()) == set(range(len(td)))
    for r in s.bucket_stats(n):
        assert r["epochs"] > 1


def test_mixture_shares_converge_to_weights():
    T = 32
    rng = np.random.default_rng(0)
    lengths = np.concatenate([rng.integers(1, 16, 60), rng.integers(16, 32, 30), rng.integers(32, 128, 20),
                              rng.integers(128, 400, 10)])
    td = _synthetic(lengths)
    mix = LengthMixture.lccp_32k()
    s = LongMixtureStream(td, T, seed=0, mixture=mix, block=1000)
    counts = np.zeros(4)
    for step in range(100):  # 1000 sequences = one block
        _, _, doc = s.batch(step, 10)
        counts += np.bincount(mix.bucket_of(td.lengths[doc[:, 0].numpy()], T), minlength=4)
    assert np.allclose(counts / counts.sum(), mix.weights, atol=1e-3)  # exact up to rounding to 1/1000
    stats = s.bucket_stats(1000)
    assert [r["n_sequences"] for r in stats] == counts.astype(int).tolist()
    # default block of 10,000: Table 9's percentages to the last digit
    realized = [r["realized"] for r in LongMixtureStream(td, T, seed=1).bucket_stats(20_000)]
    assert np.allclose(realized, mix.weights, atol=1e-12)


def test_empty_bucket_renormalised_and_logged_once(caplog):
    td = _synthetic([3, 5, 10, 12, 14, 20, 30])  # T = 16: no document reaches 64 tokens
    with caplog.at_level(logging.WARNING):
        s = LongMixtureStream(td, 16, seed=0)
        for step in range(5):
            s.batch(step, 4)
    assert len(caplog.records) == 1 and ">=64" in caplog.text
    w = np.array(LengthMixture.lccp_32k().weights[:3])
    assert np.allclose(s.weights, np.append(w / w.sum(), 0.0))


def test_too_short_corpus_errors():
    td = _synthetic([3, 4])
    with pytest.raises(ValueError, match="too short for PackedStream.*seq_len\\+1 = 17"):
        PackedStream(td, 16)
    with pytest.raises(ValueError, match="too short for LongMixtureStream"):
        LongMixtureStream(td, 16)
    with pytest.raises(ValueError, match="seq_len"):
        PackedStream(_synthetic([100]), 0)
    with pytest.raises(TypeError, match="TokenDocs"):
        PackedStream([np.arange(10)], 4)


def test_aligned_windows_are_whole_segments_each_once_per_epoch():
    """aligned=True (App. A.4): every full segment of a long document is one sequence, read whole,
    once per epoch of its bucket; shorter pieces are packed with EOS as in the unaligned stream."""
    T = 16
    td = _synthetic([3, 5, 7, 9, 12, 15, 16, 20, 40, 63, 64, 100, 200])
    s = LongMixtureStream(td, T, seed=3, block=50, aligned=True)
    assert s.config["aligned"] is True and "aligned" not in LongMixtureStream(td, T, seed=3).config
    full = {}  # (doc, start) of every full segment -> its tokens
    for i in range(len(td)):
        for a, e in segment_spans(int(td.lengths[i]), T):
            if e - a == T + 1:
                full[(i, a)] = td.doc(i)[a:e].tolist()
    seen = []
    plans = [s.plan(i) for i in range(600)]
    for n, (b, k) in enumerate(plans):
        if k >= s._n_windows[b]:  # keep to each bucket's first epoch
            continue
        toks, ids = s._sequence(n)
        if len(set(ids.tolist())) == 1 and td.eos_id not in toks.tolist():
            matches = [key for key, v in full.items() if key[0] == ids[0] and v == toks.tolist()]
            assert len(matches) == 1
            seen.append(matches[0])
    assert sorted(seen) == sorted(full)  # every full segment exactly once in its bucket's first epoch
    x1, y1, d1 = s.batch(7, 5)  # deterministic: a second stream gives the same batch
    x2, y2, d2 = LongMixtureStream(td, T, seed=3, block=50, aligned=True).batch(7, 5)
    assert torch.equal(x1, x2) and torch.equal(y1, y2) and torch.equal(d1, d2)
    assert torch.equal(x1[:, 1:], y1[:, :-1])
