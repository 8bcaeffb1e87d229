"""The toy-fidelity levers: the pinned BPE, the copy-mix stream, the context probes, and
where each budget's figures go.

Known answers: a model with uniform logits has loss ln V everywhere and copy gain 0; an
oracle that copies from the previous occurrence has zero loss on the second copy; the
copy-mix stream's synthetic rows are periodic with a period in the allowed range, and its
share of rows matches the configured fraction within a binomial bound.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nblib.data import CopyMixStream, Document, PackedStream, TokenDocs, load_tokenizer
from nblib.data.bpe import bpe_path, train_bpe
from nblib.data.corpus import _make_corpus
from nblib.metrics.probes import copy_gain, position_loss, random_repeats


# ----------------------------------------------------------------------------- BPE
def _tiny_corpus():
    docs = [Document(f"d{i}", f"def f{i}(x):\n    return x * {i} + helper_{i % 3}(x)\n" * 20) for i in range(40)]
    return _make_corpus("tiny", docs, {})


def test_bpe_training_is_deterministic_and_sized():
    a, b = train_bpe(_tiny_corpus(), 300), train_bpe(_tiny_corpus(), 300)
    assert a == b
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(a)
    assert tok.get_vocab_size() <= 300 and tok.token_to_id("<|endoftext|>") is not None


@pytest.mark.parametrize("bad", [0, 257, "1024", 3.5, True])
def test_bpe_rejects_bad_vocab_size(bad):
    with pytest.raises(ValueError, match="vocab_size"):
        train_bpe(_tiny_corpus(), bad)


def test_pinned_bpe_round_trips_and_spans_more_than_bytes():
    tok = load_tokenizer("bpe:stdlib-1024")
    assert tok.vocab_size == 1024
    text = "class Foo(Base):\n    def method(self, x):\n        return self._cache.get(x, None)\n"
    ids, off = tok.encode_with_offsets(text)
    assert tok.decode(ids) == text
    assert all(text[s:e] for s, e in off)  # every token covers characters
    assert len(text) / len(ids) > 2.0  # code compresses: more than two characters a token


def test_retraining_the_pinned_bpe_reproduces_it():
    from nblib.data import get_corpus

    corpus = get_corpus("python-stdlib")
    if not corpus.info.get("verified"):
        pytest.skip("this interpreter's stdlib differs from the pinned manifest the tokenizer was trained on")
    assert train_bpe(corpus, 1024) == bpe_path("stdlib-1024").read_text(encoding="utf-8")


def test_unknown_bpe_names_allowed_ones():
    with pytest.raises(ValueError, match="bpe:stdlib-1024"):
        load_tokenizer("bpe:nope")
    assert bpe_path("stdlib-1024").is_file()


# ----------------------------------------------------------------------------- copy mix
def _base(seq_len=32):
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 99, rng.integers(50, 400)) for _ in range(30)]
    return PackedStream(TokenDocs.from_arrays(docs, eos_id=99, vocab_size=100), seq_len, seed=0)


def test_copy_mix_share_period_and_determinism():
    s = CopyMixStream(_base(), vocab_size=100, eos_id=99, fraction=0.3, seed=1)
    n_copy, rows = 0, 0
    for step in range(50):
        x, y, doc = s.batch(step, 8)
        x2, _, _ = s.batch(step, 8)
        assert torch.equal(x, x2)  # same step, same batch: resume and branching stay exact
        for i in range(8):
            rows += 1
            if doc[i, 0] < 0:
                n_copy += 1
                seq = torch.cat([x[i], y[i, -1:]]).numpy()
                assert (seq != 99).all()  # never EOS
                period = next(p for p in range(1, 17) if (seq[p:] == seq[:-p]).all())
                assert s.min_len <= period <= s.max_len
    p, n = 0.3, rows
    assert abs(n_copy / n - p) < 4 * math.sqrt(p * (1 - p) / n)


def test_copy_mix_fraction_zero_is_the_base_stream():
    base = _base()
    s = CopyMixStream(base, vocab_size=100, eos_id=99, fraction=0.0)
    for step in range(5):
        assert all(torch.equal(a, b) for a, b in zip(s.batch(step, 4), base.batch(step, 4)))


@pytest.mark.parametrize("kw", [{"fraction": 1.5}, {"fraction": -0.1}, {"fraction": 0.2, "max_len": 20},
                                {"fraction": 0.2, "min_len": 9, "max_len": 8}])
def test_copy_mix_bad_settings_are_named(kw):
    with pytest.raises(ValueError, match="copy"):
        CopyMixStream(_base(), vocab_size=100, eos_id=99, **kw)


# ----------------------------------------------------------------------------- probes
class _Copier(torch.nn.Module):
    """An oracle that copies from `offset` tokens back (a perfect copier at that distance)."""

    def __init__(self, vocab, offset):
        super().__init__()
        self.vocab, self.offset = vocab, offset

    def forward(self, x):
        out = torch.zeros(*x.shape, self.vocab)
        for t in range(self.offset - 1, x.shape[1]):
            out[torch.arange(x.shape[0]), t, x[:, t + 1 - self.offset]] = 50.0
        return out, None


def test_copy_gain_known_answers(uniform_model):
    V = 50
    u = copy_gain(uniform_model(V), V, eos_id=V - 1, seg_len=16, n_seqs=4)
    assert u["first"] == pytest.approx(math.log(V)) and u["gain"] == pytest.approx(0.0, abs=1e-6)
    c = copy_gain(_Copier(V, 8), V, eos_id=V - 1, seg_len=8, n_seqs=4)
    assert c["first"] == pytest.approx(math.log(V)) and c["last"] < 1e-6
    assert len(c["curve"]) == 15
    x = random_repeats(V, V - 1, 8, 3, 5)
    assert x.shape == (5, 24) and torch.equal(x[:, :8], x[:, 16:]) and (x != V - 1).all()


def test_position_loss_uniform_model_is_ln_v_everywhere(uniform_model):
    tok = load_tokenizer("byte")
    texts = ["abcdefgh" * 20] * 3
    buckets = position_loss(uniform_model(tok.vocab_size), texts, tok, 64, (0, 16, 32, 64))
    assert buckets == pytest.approx([math.log(tok.vocab_size)] * 3)
    with pytest.raises(ValueError, match="64 tokens"):
        position_loss(uniform_model(tok.vocab_size), ["short"], tok, 64)


# ----------------------------------------------------------------------------- figures
def test_only_the_toy_budget_writes_to_figures(monkeypatch):
    from nblib.chapters.figures import figures_root
    from nblib.store.provenance import REPO_ROOT

    monkeypatch.delenv("NBLIB_FIGURES_DIR", raising=False)
    assert figures_root("toy") == REPO_ROOT / "figures"
    assert figures_root("smoke") == REPO_ROOT / "_build" / "smoke" / "figures"
    assert figures_root("full") == REPO_ROOT / "_build" / "full" / "figures"
    monkeypatch.setenv("NBLIB_FIGURES_DIR", "/tmp/elsewhere")
    assert str(figures_root("smoke")) == "/tmp/elsewhere"
