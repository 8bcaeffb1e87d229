"""Tests for nblib.metrics: LongPPL / ShortPPL (LCCP paper §3.1, §4.1, App. A.1).

Independent truths used here: hand-built loss tables and a stub scorer whose NLLs encode
the context it was given; a literal transcription of the reference implementation's window
loop; slow twins that run one sequence per forward pass with full-vocabulary logits
(per-token local context, per-document evaluation with a brute-force interval check);
transformers' own forward for the HF adapter; and exp(mean NLL) computed directly.
"""

import json
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nblib.budgets import LongPPLSpec
from nblib.data.tokenizers import ByteTokenizer
from nblib.metrics import (Annotation, annotate, chunk_windows, evaluate, format_testset_stats, hash_texts,
                           key_token_positions, load_or_annotate, long_ppl, merge_intervals, nll_from_hidden,
                           select_key_tokens, short_ppl, testset_stats)
from nblib.models import build_model

NAN = float("nan")
WORDS = ["the", "report", "café", "naïve", "東京", "budget", "agency", "—", "data", "x=1;", "GAO", "über"]


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def make_texts(lengths, seed=0, ascii_only=False):
    rng = np.random.default_rng(seed)
    words = [w for w in WORDS if w.isascii()] if ascii_only else WORDS
    out = []
    for n in lengths:
        s = ""
        while len(s) < n:
            s += words[rng.integers(len(words))] + " "
        out.append(s[:n])
    return out


def spec_of(T=8, W=4, **kw):
    return LongPPLSpec(trunc_len=T, sliding_window=W, n_docs=1, min_doc_len=1, max_doc_len=None, **kw)


LOOSE = dict(full_loss_max=100.0, long_delta_min=0.0, short_delta_max=0.0)  # random models: keys exist


@pytest.fixture(scope="module")
def byte_model():
    torch.manual_seed(0)
    return build_model("llama", dict(vocab_size=257, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=64,
                                     max_seq_len=256))


# --------------------------------------------------------------------------------------
# A stub scorer: token ids are absolute positions, so nll() knows which context it saw.


class StubScorer:
    """Text of n characters -> ids 0..n-1, spans (i, i+1). NLL of token t in a sequence whose
    first id is s: full(t) when s == 0, else local(t, s)."""

    identity = "stub"

    def __init__(self, full, local):
        self.full, self.local, self.calls, self.rows = full, local, 0, []

    def encode_with_offsets(self, text):
        n = len(text)
        return np.arange(n, dtype=np.int64), np.stack([np.arange(n), np.arange(n) + 1], 1)

    def nll(self, ids, positions):
        self.calls += 1
        out = torch.full(positions.shape, NAN)
        for b in range(ids.size(0)):
            s = int(ids[b, 0])
            self.rows.append((s, int(positions[b].max()) + 1))  # (first token, scored span end)
            for k, p in enumerate(positions[b].tolist()):
                if p >= 0:
                    t = int(ids[b, p])
                    out[b, k] = self.full(t) if s == 0 else self.local(t, s)
        return out


# --------------------------------------------------------------------------------------
# Windows and key-token selection


def reference_windows(max_len, trunc_len, internal):
    """The reference implementation's loop (PKU-ML/LongPPL find_key_token), transcribed:
    returns (window start, window end, scored token positions) per window."""
    out = []
    for start_token in range(0, max_len - trunc_len, internal):
        if start_token + trunc_len + internal > max_len:
            internal = max_len - start_token - trunc_len
        out.append((start_token, start_token + trunc_len + internal,
                    list(range(start_token + trunc_len, start_token + trunc_len + internal))))
    return out


@pytest.mark.parametrize("n,T,W", [(40, 8, 4), (37, 8, 4), (8, 8, 4), (9, 8, 4), (5, 8, 4), (100, 16, 7),
                                   (33, 4, 1), (4096 + 3 * 1024 + 5, 4096, 1024)])
def test_chunk_windows_match_reference_loop(n, T, W):
    ref = reference_windows(n, T, W)
    assert chunk_windows(n, T, W) == [(s, e) for s, e, _ in ref]
    scored = [p for _, _, ps in ref for p in ps]
    assert scored == list(range(T, n))  # every position >= T exactly once, none below


def test_select_key_tokens_hand_case_and_boundaries():
    full = [NAN, 1.0, 2.0, 1.75, 0.5, 0.5, 0.5, 1.0, 2.0, 1.5]
    chunk = [NAN, 3.5, 5.0, 3.875, 2.5, 0.5, 0.25, 3.0, 1.0, NAN]
    # delta:  -   2.5  3.0  2.125  2.0  0.0  -0.25  2.0  -1.0  -
    long, short, delta = select_key_tokens(full, chunk, spec_of())
    assert np.flatnonzero(long).tolist() == [1, 3]  # loss_full == 2 (idx 2) and delta == 2 (4, 7) excluded
    assert np.flatnonzero(short).tolist() == [6]  # delta == 0 (5) excluded; loss_full == 2 (8) excluded
    assert delta.dtype == np.float32 and delta[4] == 2.0
    assert not (long & short).any()
    # thresholds come from the spec
    long2, short2, _ = select_key_tokens(full, chunk, spec_of(full_loss_max=2.5, long_delta_min=2.0,
                                                              short_delta_max=0.5))
    assert np.flatnonzero(long2).tolist() == [1, 2, 3] and np.flatnonzero(short2).tolist() == [5, 6, 8]


def test_annotate_stub_context_geometry():
    """loss_chunk reveals the context length each token was scored with."""
    T, W = 8, 4
    stub = StubScorer(full=lambda t: 0.01 * t, local=lambda t, s: 100.0 + (t - s))
    lengths = [5, 8, 9, 37, 50, 12]
    ann = annotate(stub, None, ["x" * n for n in lengths], spec_of(T, W), batch_size=3, docs_per_group=4)
    assert ann.n_ref_tokens == lengths
    for n, f, d in zip(lengths, ann.loss_full, ann.delta):
        t = np.arange(T, n)
        assert len(f) == max(n - T, 0)
        np.testing.assert_allclose(f, 0.01 * t, rtol=1e-6)
        s = ((t - T) // W) * W  # window start of each token
        want = np.where(s == 0, 0.0, 100.0 + (t - s) - 0.01 * t).astype(np.float32)
        np.testing.assert_allclose(d, want, rtol=1e-6)
        assert (d[s == 0] == 0).all()  # window 0: same context, delta exactly 0
        assert ((t - s)[s > 0] >= T).all() and ((t - s) <= T + W - 1).all()
    # forward rows: one full-context row per document longer than T, one per window with s > 0
    # (window 0 is never recomputed), each window sent as ids[s:e]
    want_rows = [(0, n) for n in lengths if n > T]
    want_rows += [(s, e - s) for n in lengths for s, e in chunk_windows(n, T, W) if s > 0]
    assert sorted(stub.rows) == sorted(want_rows)


def test_annotate_stub_selection_by_hand():
    T, W, n = 8, 4, 40
    long_t, short_t = {9, 14, 15, 16, 20, 30}, {22, 23, 35}
    full = lambda t: 2.0 if t == 30 else 0.5  # noqa: E731
    local = lambda t, s: 3.0 if t in long_t else (0.25 if t in short_t else 0.5)  # noqa: E731
    # every token < T would be a key token if it were ever scored; window 0 tokens (8..11) have delta 0
    ann = annotate(StubScorer(full, local), None, ["y" * n], spec_of(T, W))
    # 9 is in window 0 (delta 0), 30 has loss_full == 2: neither is selected
    assert ann.long_intervals[0].tolist() == [[14, 17], [20, 21]]
    assert ann.short_intervals[0].tolist() == [[22, 24], [35, 36]]
    assert (ann.n_long_ref, ann.n_short_ref) == ([4], [3])
    pt = ann.per_token()
    assert (T + np.flatnonzero(pt["long"])).tolist() == [14, 15, 16, 20]


def test_positions_below_trunc_len_never_selected():
    T, W = 8, 4
    stub = StubScorer(full=lambda t: 0.1, local=lambda t, s: 9.0)
    ann = annotate(stub, None, ["z" * 30, "z" * 7], spec_of(T, W))
    # everything after window 0 is a long key token; nothing at t < T + W
    assert ann.long_intervals[0].tolist() == [[T + W, 30]]
    assert ann.long_intervals[1].tolist() == [] and ann.n_long_ref == [30 - T - W, 0]


# --------------------------------------------------------------------------------------
# Intervals and the cross-tokenizer map


def brute_force_positions(offsets, intervals):
    return [k for k, (s, e) in enumerate(offsets) if s < e and any(a <= s and e <= b for a, b in intervals)]


def test_merge_intervals():
    spans = [[7, 8], [0, 3], [3, 5], [7, 8], [10, 10], [12, 15], [13, 14], [14, 16], [20, 21]]
    assert merge_intervals(spans).tolist() == [[0, 5], [7, 8], [12, 16], [20, 21]]
    assert merge_intervals(np.zeros((0, 2))).shape == (0, 2)
    assert merge_intervals([[4, 4]]).shape == (0, 2)


def test_key_token_positions_random_vs_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(50):
        starts = np.sort(rng.integers(0, 60, 30))
        off = np.stack([starts, starts + rng.integers(0, 4, 30)], 1)  # overlapping, some empty
        iv = merge_intervals([[a, a + rng.integers(1, 6)] for a in rng.integers(0, 60, 6)])
        assert key_token_positions(off, iv).tolist() == brute_force_positions(off, iv.tolist())
    with pytest.raises(ValueError, match="disjoint"):
        key_token_positions([[0, 1]], [[0, 5], [3, 8]])


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory):
    """A locally trained byte-level BPE, and tiny random Llama and GPT-2 saved with it."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    transformers.logging.set_verbosity_error()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(make_texts([400] * 30, seed=7), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    V, eos = len(fast), fast.eos_token_id
    torch.manual_seed(1)
    out = {}
    for name, model in {
        "llama": LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                              num_attention_heads=4, num_key_value_heads=2,
                                              max_position_embeddings=512, bos_token_id=eos, eos_token_id=eos)),
        "gpt2": GPT2LMHeadModel(GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=512,
                                           bos_token_id=eos, eos_token_id=eos)),
    }.items():
        d = tmp_path_factory.mktemp(name)
        model.save_pretrained(d)
        fast.save_pretrained(d)
        out[name] = d
    return out


def test_cross_tokenizer_bpe_and_bytes(hf_dirs):
    from nblib.metrics.hf import hf_encode_with_offsets, load_hf_tokenizer

    bpe = load_hf_tokenizer(hf_dirs["llama"])
    text = "the café and 東京 report — naïve über budget"
    _, off = hf_encode_with_offsets(bpe, text)
    _, boff = ByteTokenizer().encode_with_offsets(text)
    # a BPE token spanning several characters: its own span counts, a span one char short does not
    k = next(i for i, (s, e) in enumerate(off) if e - s >= 3)
    s, e = off[k]
    assert k in key_token_positions(off, [[s, e]]).tolist()
    assert k not in key_token_positions(off, [[s, e - 1]]).tolist()
    assert k not in key_token_positions(off, [[s + 1, e + 5]]).tolist()
    # two adjacent key intervals merge, so a token straddling them counts (reference behaviour)
    assert k in key_token_positions(off, merge_intervals([[s, s + 1], [s + 1, e]])).tolist()
    # a multi-byte character: every byte token of 'é' carries its character span
    c = text.index("é")
    bytes_of_e = [i for i, (a, b) in enumerate(boff) if (a, b) == (c, c + 1)]
    assert len(bytes_of_e) == 2
    assert key_token_positions(boff, [[c, c + 1]]).tolist() == bytes_of_e
    assert key_token_positions(boff, [[c - 1, c]]).tolist() == [c - 1]
    # and random intervals against brute force, both tokenizers
    rng = np.random.default_rng(3)
    for _ in range(30):
        iv = merge_intervals([[a, a + rng.integers(1, 8)] for a in rng.integers(0, len(text), 5)])
        for o in (off, boff):
            assert key_token_positions(o, iv).tolist() == brute_force_positions(o.tolist(), iv.tolist())


# --------------------------------------------------------------------------------------
# Slow twins on real (tiny, random) models


def slow_token_nll(model, ids, t, start):
    """NLL of ids[t] given ids[start:t], one forward with full logits."""
    logits, _ = model(torch.as_tensor(ids[start:t])[None])
    return -F.log_softmax(logits[0, -1].float(), -1)[ids[t]].item()


def test_chunked_local_loss_matches_slow_per_token(byte_model):
    T, W = 8, 4
    texts = make_texts([23, 30, 8, 14], seed=2)  # includes multi-byte characters
    ann = annotate(byte_model, ByteTokenizer(), texts, spec_of(T, W), batch_size=3)
    for text, f, d in zip(texts, ann.loss_full, ann.delta):
        ids = ByteTokenizer().encode(text)
        assert len(f) == max(len(ids) - T, 0)
        for j, t in enumerate(range(T, len(ids))):
            s = ((t - T) // W) * W
            assert f[j] == pytest.approx(slow_token_nll(byte_model, ids, t, 0), abs=1e-4)
            assert f[j] + d[j] == pytest.approx(slow_token_nll(byte_model, ids, t, s), abs=1e-4)


def naive_evaluate(model_fn, encode, texts, ann, max_len):
    """One document per forward, full (T, V) logits, brute-force interval membership."""
    sums, counts, n_tokens = {"long": 0.0, "short": 0.0}, {"long": 0, "short": 0}, 0
    for d, text in enumerate(texts):
        ids, off = encode(text)
        ids, off = ids[:max_len], off[:max_len]
        n_tokens += len(ids)
        logp = F.log_softmax(model_fn(torch.as_tensor(ids)[None])[0].double(), -1)  # (T, V)
        for which in ("long", "short"):
            for k in brute_force_positions(off.tolist(), ann.intervals(which)[d].tolist()):
                if k >= 1:
                    sums[which] -= logp[k - 1, ids[k]].item()
                    counts[which] += 1
    return sums, counts, n_tokens


@pytest.mark.parametrize("evaluated", ["nblib-byte", "hf-llama-bpe"])
def test_batched_evaluate_matches_naive(byte_model, hf_dirs, evaluated):
    from nblib.metrics.hf import HFScorer

    texts = make_texts([60, 45, 90, 20, 75], seed=4)
    ann = annotate(byte_model, ByteTokenizer(), texts, spec_of(16, 8, **LOOSE), batch_size=4)
    assert sum(ann.n_long_ref) > 0 and sum(ann.n_short_ref) > 0
    if evaluated == "nblib-byte":
        model, tok, max_len = byte_model, ByteTokenizer(), 70
        scorer = None
        model_fn, encode = (lambda x: byte_model(x)[0]), ByteTokenizer().encode_with_offsets
    else:
        scorer = HFScorer.from_pretrained(hf_dirs["llama"])
        model, tok, max_len = str(hf_dirs["llama"]), None, 18
        model_fn, encode = (lambda x: scorer.model(x).logits), scorer.encode_with_offsets
    res = evaluate(model, tok, texts, ann, max_len=max_len, batch_size=2)
    sums, counts, n_tokens = naive_evaluate(model_fn, encode, texts, ann, max_len)
    assert res["n_tokens"] == n_tokens and res["n_docs"] == len(texts)
    for which in ("long", "short"):
        assert res[f"n_{which}"] == counts[which] > 0
        assert res[f"nll_{which}_sum"] == pytest.approx(sums[which], rel=1e-5)
        assert res[f"{which}_ppl"] == pytest.approx(math.exp(sums[which] / counts[which]), rel=1e-5)
    assert long_ppl(model, tok, texts, ann, max_len, 3) == pytest.approx(res["long_ppl"], rel=1e-6)
    assert short_ppl(model, tok, texts, ann, max_len, 3) == pytest.approx(res["short_ppl"], rel=1e-6)


def test_token_zero_is_never_scored(byte_model):
    """A key interval over the first characters: token 0 has no prediction, tokens 1.. do."""
    text = "abcdefghij"
    ann = Annotation(spec=spec_of(), texts_hash=hash_texts([text]), reference_id="hand", n_ref_tokens=[10],
                     long_intervals=[np.array([[0, 3]])], short_intervals=[np.array([[5, 6]])],
                     n_long_ref=[3], n_short_ref=[1])
    res = evaluate(byte_model, ByteTokenizer(), [text], ann)
    ids = torch.as_tensor(ByteTokenizer().encode(text))
    logp = F.log_softmax(byte_model(ids[None])[0][0].double(), -1)
    assert res["n_long"] == 2 and res["nll_long_sum"] == pytest.approx(-(logp[0, ids[1]] + logp[1, ids[2]]).item(),
                                                                       rel=1e-5)
    assert res["n_short"] == 1 and res["nll_short_sum"] == pytest.approx(-logp[4, ids[5]].item(), rel=1e-5)


def test_own_reference_equals_direct_mean(byte_model):
    """Same model and tokenizer as the reference: LongPPL = exp(mean ℓ_full over K_long)."""
    T, W = 16, 8
    texts = make_texts([70, 55, 90], seed=5, ascii_only=True)  # one byte per character
    ann = annotate(byte_model, ByteTokenizer(), texts, spec_of(T, W, **LOOSE))
    res = evaluate(byte_model, ByteTokenizer(), texts, ann, sets=("long", "short", "all"))
    pt = ann.per_token()
    for which in ("long", "short"):
        assert res[f"n_{which}"] == pt[which].sum() > 0  # the interval round trip recovers every token
        assert res[f"{which}_ppl"] == pytest.approx(math.exp(pt["loss_full"][pt[which]].astype(np.float64).mean()),
                                                    rel=1e-5)
    # and directly from one forward per document
    nll = []
    for text in texts:
        ids = torch.as_tensor(ByteTokenizer().encode(text))
        logp = F.log_softmax(byte_model(ids[None])[0][0].double(), -1)
        nll.append(-logp[torch.arange(len(ids) - 1), ids[1:]])
    nll = torch.cat(nll)
    assert res["ppl"] == pytest.approx(math.exp(nll.mean().item()), rel=1e-5) and res["n_all"] == len(nll)


# --------------------------------------------------------------------------------------
# The transformers adapter


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_hf_adapter_matches_direct_forward(hf_dirs, family):
    from transformers import AutoModelForCausalLM

    from nblib.metrics import as_scorer

    scorer = as_scorer(str(hf_dirs[family]))
    direct = AutoModelForCausalLM.from_pretrained(str(hf_dirs[family])).eval()
    texts = make_texts([50, 30], seed=6)
    encs = [scorer.encode_with_offsets(t) for t in texts]
    for (ids, off), text in zip(encs, texts):  # offsets are character spans covering the text
        covered = np.zeros(len(text), dtype=bool)
        for s, e in off:
            covered[s:e] = True
        assert covered.all() and off.min() >= 0 and off.max() <= len(text)
        assert scorer.tokenizer.decode(ids) == text
    L = max(len(ids) for ids, _ in encs)
    batch = torch.zeros((2, L), dtype=torch.long)
    pos = torch.full((2, L - 1), -1)
    for b, (ids, _) in enumerate(encs):
        batch[b, :len(ids)] = torch.as_tensor(ids)
        pos[b, :len(ids) - 1] = torch.arange(1, len(ids))
    got = scorer.nll(batch, pos)
    for b, (ids, _) in enumerate(encs):
        with torch.no_grad():
            logp = F.log_softmax(direct(torch.as_tensor(ids)[None]).logits[0].float(), -1)
        want = -logp[torch.arange(len(ids) - 1), torch.as_tensor(ids[1:])]
        torch.testing.assert_close(got[b, :len(ids) - 1], want, rtol=1e-4, atol=1e-5)
        assert torch.isnan(got[b, len(ids) - 1:]).all()
    assert as_scorer(str(hf_dirs[family])).identity == scorer.identity


def test_hf_adapter_rejects_unsupported_head(hf_dirs):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from nblib.metrics.hf import HFScorer

    model = AutoModelForCausalLM.from_pretrained(str(hf_dirs["llama"]))
    model.config.final_logit_softcapping = 0.5  # our head would cap, the model's does not
    with pytest.raises(ValueError, match="not supported"):
        HFScorer(model, AutoTokenizer.from_pretrained(str(hf_dirs["llama"])))


def test_hf_reference_annotation_matches_direct(hf_dirs):
    from transformers import AutoModelForCausalLM

    T, W = 6, 3
    texts = make_texts([60, 40], seed=8)
    ann = annotate(str(hf_dirs["gpt2"]), None, texts, spec_of(T, W), batch_size=2)
    direct = AutoModelForCausalLM.from_pretrained(str(hf_dirs["gpt2"])).eval()
    from nblib.metrics.hf import hf_encode_with_offsets, load_hf_tokenizer

    tok = load_hf_tokenizer(hf_dirs["gpt2"])
    for text, f, d in zip(texts, ann.loss_full, ann.delta):
        ids, _ = hf_encode_with_offsets(tok, text)
        for j, t in enumerate(range(T, len(ids))):
            s = ((t - T) // W) * W
            for start, got in ((0, f[j]), (s, f[j] + d[j])):
                with torch.no_grad():
                    logits = direct(torch.as_tensor(ids[start:t])[None]).logits[0, -1]
                assert got == pytest.approx(-F.log_softmax(logits, -1)[ids[t]].item(), abs=1e-4)


def test_nll_from_hidden_chunking_and_checks(byte_model):
    ids = torch.randint(0, 257, (2, 20), generator=torch.Generator().manual_seed(0))
    pos = torch.tensor([[1, 5, 19, -1], [3, 4, 7, 8]])
    with torch.no_grad():
        h = byte_model.hidden_states(ids)
        big = nll_from_hidden(h, ids, pos, byte_model.logits_from_hidden)
        tiny = nll_from_hidden(h, ids, pos, byte_model.logits_from_hidden, head_chunk_bytes=1)  # one row per chunk
        logp = F.log_softmax(byte_model(ids)[0].float(), -1)
    torch.testing.assert_close(big, tiny, equal_nan=True)
    assert torch.isnan(big[0, 3])
    assert big[1, 2].item() == pytest.approx(-logp[1, 6, ids[1, 7]].item(), abs=1e-5)
    with pytest.raises(ValueError, match="positions"):
        nll_from_hidden(h, ids, torch.tensor([[0], [1]]), byte_model.logits_from_hidden)
    with pytest.raises(ValueError, match="positions"):
        nll_from_hidden(h, ids, torch.tensor([[20], [1]]), byte_model.logits_from_hidden)


# --------------------------------------------------------------------------------------
# Persistence, statistics, bad input


def test_annotation_save_load_round_trip(byte_model, tmp_path):
    texts = make_texts([50, 40, 10], seed=9)
    spec = spec_of(8, 4, **LOOSE)
    ann = annotate(byte_model, ByteTokenizer(), texts, spec)
    path = tmp_path / "ann.json"
    ann.save(path)
    assert (tmp_path / "ann.npz").is_file() and json.loads(path.read_text())["n_docs"] == 3
    back = Annotation.load(path, texts=texts, spec=spec, reference=ann.reference_id)
    assert back.spec == spec and back.texts_hash == hash_texts(texts) and back.reference_id == ann.reference_id
    for a, b in zip(ann.long_intervals + ann.short_intervals, back.long_intervals + back.short_intervals):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(ann.loss_full + ann.delta, back.loss_full + back.delta):
        np.testing.assert_array_equal(a, b)
    assert (back.n_long_ref, back.n_short_ref, back.n_ref_tokens) == (ann.n_long_ref, ann.n_short_ref,
                                                                      ann.n_ref_tokens)
    with pytest.raises(ValueError, match="texts differ"):
        Annotation.load(path, texts=texts[:2] + ["another document"])
    with pytest.raises(ValueError, match="covers 3 documents"):
        Annotation.load(path, texts=texts[:2])
    with pytest.raises(ValueError, match="trunc_len"):
        Annotation.load(path, spec=spec_of(16, 4, **LOOSE))
    with pytest.raises(ValueError, match="reference model"):
        Annotation.load(path, reference="some-other-model")
    with pytest.raises(ValueError, match="texts differ"):
        evaluate(byte_model, ByteTokenizer(), texts[:2] + ["x"], back)
    # without the .npz, intervals still load (per-token arrays are diagnostics only)
    (tmp_path / "ann.npz").unlink()
    assert Annotation.load(path).loss_full is None


def test_load_or_annotate_computes_once(tmp_path):
    stub = StubScorer(full=lambda t: 0.5, local=lambda t, s: 3.0)
    texts, spec, path = ["q" * 30], spec_of(8, 4), tmp_path / "a.json"
    first = load_or_annotate(path, stub, None, texts, spec)
    calls = stub.calls
    second = load_or_annotate(path, stub, None, texts, spec)
    assert stub.calls == calls and second.long_intervals[0].tolist() == first.long_intervals[0].tolist() == [[12, 30]]
    with pytest.raises(ValueError, match="spec differs"):
        load_or_annotate(path, stub, None, texts, spec_of(8, 2))


def test_testset_stats(byte_model):
    texts = make_texts([70, 55, 90], seed=5, ascii_only=True)
    ann = annotate(byte_model, ByteTokenizer(), texts, spec_of(16, 8, **LOOSE))
    ref = testset_stats(ann)
    assert ref["n_docs"] == 3 and ref["n_tokens"] == 215 and ref["ref_length"] == {"mean": 215 / 3, "median": 70.0,
                                                                                   "min": 55, "max": 90}
    assert ref["n_long"] == sum(ann.n_long_ref) and ref["pct_long"] == pytest.approx(100 * ref["n_long"] / 215)
    same = testset_stats(ann, texts, ByteTokenizer())  # ASCII + same tokenizer: identical counts
    assert (same["n_tokens"], same["n_long"], same["n_short"]) == (ref["n_tokens"], ref["n_long"], ref["n_short"])
    cut = testset_stats(ann, texts, ByteTokenizer(), max_len=60)
    assert cut["n_tokens"] == 60 + 55 + 60 and cut["n_at_max_len"] == 2
    res = evaluate(byte_model, ByteTokenizer(), texts, ann, max_len=60)
    assert (res["n_long"], res["n_short"], res["n_tokens"]) == (cut["n_long"], cut["n_short"], cut["n_tokens"])
    table = format_testset_stats(cut)
    assert "Long key tokens" in table and f"{cut['n_long']:,} ({cut['pct_long']:.2f}%)" in table


def test_bad_input_and_no_key_tokens(byte_model):
    tok = ByteTokenizer()
    with pytest.raises(ValueError, match="empty"):
        annotate(byte_model, tok, [], spec_of())
    with pytest.raises(TypeError, match="list of str"):
        annotate(byte_model, tok, "just one string", spec_of())
    with pytest.raises(ValueError, match="trunc_len"):
        annotate(byte_model, tok, ["abc"], spec_of(T=0))
    with pytest.raises(TypeError, match="LongPPLSpec"):
        annotate(byte_model, tok, ["abc"], (8, 4))
    with pytest.raises(ValueError, match="needs its tokenizer"):
        annotate(byte_model, None, ["abc"], spec_of())
    short_texts = ["tiny", "docs"]  # shorter than trunc_len: no token is ever a key token
    ann = annotate(byte_model, tok, short_texts, spec_of(8, 4))
    assert ann.n_long_ref == [0, 0] and ann.long_intervals[0].shape == (0, 2)
    with pytest.raises(ValueError, match="empty"):
        evaluate(byte_model, tok, [], ann)
    with pytest.raises(ValueError, match="max_len"):
        evaluate(byte_model, tok, short_texts, ann, max_len=0)
    with pytest.raises(ValueError, match="sets"):
        evaluate(byte_model, tok, short_texts, ann, sets=("medium",))
    with pytest.warns(RuntimeWarning) as rec:
        res = evaluate(byte_model, tok, short_texts, ann)
    assert sorted(str(w.message).split(":")[0] for w in rec) == ["no long tokens in the evaluated set",
                                                                 "no short tokens in the evaluated set"]
    assert math.isnan(res["long_ppl"]) and math.isnan(res["short_ppl"]) and res["n_long"] == 0
    assert res["n_tokens"] == 8
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a set with tokens gives no warning
        assert evaluate(byte_model, tok, short_texts, ann, sets=("all",))["n_all"] == 6
