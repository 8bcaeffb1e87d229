"""Tests for nblib.data: corpora, tokenizers, token shards, streams, test-set builder.

Streams are checked against slow, plain-Python twins; offsets against per-character loops;
Table 9 constants against the sums the paper states in App. A.4.
"""

from __future__ import annotations

import hashlib
import json
import logging
import lzma
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from nblib.data import (
    ByteTokenizer,
    DocStartStream,
    Document,
    HFTokenizer,
    LengthMixture,
    LongMixtureStream,
    PackedStream,
    TokenDocs,
    build_test_set,
    find_manifest,
    load_corpus,
    load_jsonl,
    load_tokenizer,
    load_txt_folder,
    python_stdlib_corpus,
    segment_spans,
    split_documents,
    split_fraction,
    stdlib_files,
    tokenize_corpus,
    truncate_text,
    write_stdlib_manifest,
)
from nblib.data.corpus import Corpus, content_hash, python_version
from nblib.data.streams import _segment_all
from nblib.store.provenance import REPO_ROOT

SHARED = REPO_ROOT.parent / "shared" / "data"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} not present")
MULTIBYTE = "Grüße aus Köln — naïve café, 東京タワー 😀 ünïcödé!\nΩ≈ç√∫ ok"


def make_corpus(texts, name="synthetic") -> Corpus:
    docs = [Document(f"doc{i:04d}", t) for i, t in enumerate(texts)]
    return Corpus(name, docs, content_hash(docs))


# --------------------------------------------------------------------------- split


def test_split_is_deterministic_disjoint_and_stable():
    docs = [Document(f"d{i}", "x") for i in range(2000)]
    train, ev = split_documents(docs, "train"), split_documents(docs, "eval")
    assert {d.id for d in train}.isdisjoint({d.id for d in ev})
    assert len(train) + len(ev) == len(docs)
    assert split_documents(docs, "all") == docs
    assert split_documents(docs, "eval") == ev  # same answer twice
    assert 0.08 < len(ev) / len(docs) < 0.12  # ~Binomial(2000, 0.1): sd 0.0067
    # sha256 of the id, first 8 bytes as a fraction (independent recomputation)
    assert split_fraction("d7") == int(hashlib.sha256(b"d7").hexdigest()[:16], 16) / 2**64
    # removing / adding other documents leaves each document's split unchanged
    sub = docs[::3] + [Document("new-one", "y")]
    ev_sub = {d.id for d in split_documents(sub, "eval")}
    assert ev_sub - {"new-one"} == {d.id for d in ev} & {d.id for d in docs[::3]}
    # eval fraction is configurable and monotone: a larger eval split contains the smaller one
    ev2 = {d.id for d in split_documents(docs, "eval", eval_fraction=0.3)}
    assert {d.id for d in ev} <= ev2
    with pytest.raises(ValueError, match="eval_fraction"):
        split_documents(docs, "eval", eval_fraction=1.5)
    with pytest.raises(ValueError, match="split must be one of"):
        split_documents(docs, "test")


# --------------------------------------------------------------------------- stdlib manifest


def _fake_stdlib(root: Path) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "os_like.py").write_text("import sys\nprint('hello')\n")
    (root / "pkg" / "__init__.py").write_text("# é unicode comment\nX = 1\n")
    (root / "latin.py").write_bytes("# -*- coding: latin-1 -*-\ns = 'caf\xe9'\n".encode("latin-1"))
    for excluded in ("site-packages/thirdparty.py", "pkg/__pycache__/x.py", "_sysconfigdata__linux.py"):
        (root / excluded).parent.mkdir(parents=True, exist_ok=True)
        (root / excluded).write_text("nope = 1\n")


def test_manifest_verification_and_tampering(tmp_path, caplog):
    root, mdir = tmp_path / "lib", tmp_path / "manifests"
    _fake_stdlib(root)
    assert stdlib_files(root) == ["latin.py", "os_like.py", "pkg/__init__.py"]
    path = write_stdlib_manifest(root, mdir, version="9.9.9")
    manifest = json.loads(path.read_text())
    assert path.name == "python-stdlib-9.9.9.json" and manifest["n_files"] == 3
    assert manifest["files"][1] == {
        "path": "os_like.py", "bytes": len("import sys\nprint('hello')\n"), "sha256": hashlib.sha256((root / "os_like.py").read_bytes()).hexdigest()
    }

    with caplog.at_level(logging.WARNING):
        c = python_stdlib_corpus(root, path, version="9.9.9")
    assert c.info["verified"] and c.identity == manifest["sha256"] and not caplog.records
    assert [d.id for d in c] == ["latin.py", "os_like.py", "pkg/__init__.py"]
    assert "s = 'café'" in c.docs[0].text  # PEP 263 cookie honoured

    # tamper with one file: warning naming expected vs found, identity = the found hash
    tampered = tmp_path / "lib2"
    shutil.copytree(root, tampered)
    (tampered / "os_like.py").write_text("import sys\nprint('HACKED')\n")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        c2 = python_stdlib_corpus(tampered, path, version="9.9.9")
    assert not c2.info["verified"] and c2.identity != manifest["sha256"]
    msg = caplog.text
    assert "differs from the pinned manifest" in msg and "1 changed" in msg and manifest["sha256"][:16] in msg

    # same files, other interpreter version: warning with both versions, identity = content hash
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        c3 = python_stdlib_corpus(root, path, version="9.9.10")
    assert "expected Python 9.9.9" in caplog.text and "found Python 9.9.10" in caplog.text
    assert c3.identity == manifest["sha256"] and not c3.info["verified"]

    # find_manifest falls back to the closest pinned version (same major.minor first)
    write_stdlib_manifest(root, mdir, version="9.8.1")
    assert find_manifest("9.9.4", mdir).name == "python-stdlib-9.9.9.json"
    assert find_manifest("9.8.1", mdir).name == "python-stdlib-9.8.1.json"
    assert find_manifest("1.0.0", tmp_path / "empty") is None


def test_committed_manifest_matches_this_interpreter():
    pinned = REPO_ROOT / "data" / "corpus_manifests" / f"python-stdlib-{python_version()}.json"
    if not pinned.is_file():
        pytest.skip(f"no committed manifest for Python {python_version()}")
    c = load_corpus("python-stdlib")
    assert c.info["verified"], "stdlib differs from the committed manifest"
    assert c.identity == json.loads(pinned.read_text())["sha256"]
    assert len(c) > 1000 and c.n_chars > 10_000_000
    assert not any("site-packages" in d.id for d in c)


# --------------------------------------------------------------------------- loaders


def test_jsonl_and_txt_loaders(tmp_path):
    lines = [{"id": "a", "text": "first doc"}, {"text": "no id → line number"}, {"id": 7, "text": MULTIBYTE}]
    raw = "\n".join(json.dumps(x) for x in lines[:1]) + "\n\n" + "\n".join(json.dumps(x) for x in lines[1:]) + "\n"
    (tmp_path / "c.jsonl").write_text(raw, encoding="utf-8")
    with lzma.open(tmp_path / "c.jsonl.xz", "wt", encoding="utf-8") as f:
        f.write(raw)
    for name in ("c.jsonl", "c.jsonl.xz"):
        c = load_corpus(f"jsonl:{tmp_path / name}")
        assert [(d.id, d.text) for d in c] == [("a", "first doc"), ("3", "no id → line number"), ("7", MULTIBYTE)]
    assert load_jsonl(tmp_path / "c.jsonl").identity == load_jsonl(tmp_path / "c.jsonl.xz").identity
    assert len(load_jsonl(tmp_path / "c.jsonl", limit=2)) == 2

    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"txt": "wrong field"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: .*string \"text\" field"):
        load_jsonl(tmp_path / "bad.jsonl")
    (tmp_path / "dup.jsonl").write_text('{"id": 1, "text": "a"}\n{"id": 1, "text": "b"}\n')
    with pytest.raises(ValueError, match="ids must be unique"):
        load_jsonl(tmp_path / "dup.jsonl")

    folder = tmp_path / "txts"
    (folder / "sub" / "deeper").mkdir(parents=True)
    (folder / "b.txt").write_text("bee", encoding="utf-8")
    (folder / "sub" / "deeper" / "a.txt").write_text(MULTIBYTE, encoding="utf-8")
    (folder / "sub" / "bin.txt").write_bytes(b"ok \xff\xfe bytes")
    (folder / "ignored.md").write_text("not a txt")
    c = load_corpus(f"txt:{folder}")
    assert [d.id for d in c] == ["b.txt", "sub/bin.txt", "sub/deeper/a.txt"]
    assert c.docs[2].text == MULTIBYTE and c.docs[1].text == "ok \ufffd\ufffd bytes"
    assert c.info["n_decode_errors"] == 1 and len(load_txt_folder(folder, limit=1)) == 1


def test_corpus_spec_and_empty_errors(tmp_path):
    with pytest.raises(ValueError, match="allowed forms.*python-stdlib.*jsonl:.*txt:"):
        load_corpus("parquet:/x")
    with pytest.raises(ValueError, match="not found"):
        load_corpus(f"jsonl:{tmp_path / 'missing.jsonl'}")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(ValueError, match="empty.jsonl.*is empty: it has no documents"):
        load_corpus(f"jsonl:{tmp_path / 'empty.jsonl'}")
    (tmp_path / "blank.jsonl").write_text('{"text": ""}\n{"text": ""}\n')
    with pytest.raises(ValueError, match="all 2 documents have empty text"):
        load_jsonl(tmp_path / "blank.jsonl")
    (tmp_path / "nothing").mkdir()
    with pytest.raises(ValueError, match="nothing.*is empty"):
        load_txt_folder(tmp_path / "nothing")


@needs_shared
def test_shared_corpora_load():
    # document counts of the shared corpora (their README)
    gov = load_corpus(f"jsonl:{SHARED / 'govreport_leval.jsonl'}")
    sou = load_corpus(f"jsonl:{SHARED / 'state_union.jsonl'}")
    assert len(gov) == 13 and len(sou) == 65
    assert min(len(d.text) for d in gov) > 13_000 and sou.docs[0].id == "1945-Truman"
    eltec = load_corpus(f"jsonl:{SHARED / 'eltec_eng.jsonl.xz'}", limit=2)
    assert len(eltec) == 2 and all(len(d.text) > 78_000 for d in eltec)
    assert eltec.docs[0].id.startswith("ENG")


# --------------------------------------------------------------------------- tokenizers


def test_byte_tokenizer_offsets_multibyte():
    tok = ByteTokenizer()
    ids, off = tok.encode_with_offsets(MULTIBYTE)
    assert tok.vocab_size == 257 and tok.eos_id == 256
    assert np.array_equal(ids, tok.encode(MULTIBYTE)) and tok.decode(ids) == MULTIBYTE
    # slow twin: every byte of character i gets span (i, i+1)
    expect = [(i, i + 1) for i, ch in enumerate(MULTIBYTE) for _ in ch.encode("utf-8")]
    assert off.tolist() == [list(s) for s in expect]
    assert tok.decode(np.append(ids, 256)) == MULTIBYTE  # EOS dropped
    assert tok.decode(torch.tensor([0xC3])) == "\ufffd"  # half a character does not crash
    with pytest.raises(ValueError, match=r"\[0, 256\]"):
        tok.decode([300])


def _train_hf(tmp_path: Path, kind: str, specials=("<|endoftext|>",)) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    sents = [MULTIBYTE, "The quick brown fox jumps over the lazy dog.", "Émigré résumé 東京 café naïve"] * 10
    if kind == "bytelevel":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=list(specials),
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:  # whitespace-split BPE: tokens are exact substrings of the text
        tok = Tokenizer(models.BPE(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]", *specials])
    tok.train_from_iterator(sents, trainer)
    path = tmp_path / f"{kind}-{len(specials)}" / "tokenizer.json"
    path.parent.mkdir()
    tok.save(str(path))
    return path


def _check_spans(text, off):
    assert np.all(off[:, 0] <= off[:, 1]) and off.max() <= len(text)
    assert np.all(np.diff(off[:, 0]) >= 0) and np.all(np.diff(off[:, 1]) >= 0)  # monotone


def test_hf_tokenizer_offsets(tmp_path):
    text = MULTIBYTE + "  two  spaces and the fox"
    # whitespace BPE: each token's surface is exactly text[start:end]
    path = _train_hf(tmp_path, "whitespace")
    tok = load_tokenizer(f"hf:{path}")
    ids, off = tok.encode_with_offsets(text)
    _check_spans(text, off)
    surfaces = [tok._tok.id_to_token(int(i)) for i in ids]
    assert "[UNK]" not in surfaces
    assert surfaces == [text[s:e] for s, e in off]
    assert "".join(text[s:e] for s, e in off) == "".join(text.split())  # only whitespace is skipped
    assert tok.eos_id == tok._tok.token_to_id("<|endoftext|>") and tok.vocab_size == tok._tok.get_vocab_size()

    # byte-level BPE: a token may hold part of a character and then gets that character's span;
    # runs of tokens with overlapping spans decode to exactly the text of their joint span
    tok = HFTokenizer(_train_hf(tmp_path, "bytelevel").parent)  # a folder works too
    text += " 漢字 ☃ unseen characters"  # not in the training text: stay split into bytes
    ids, off = tok.encode_with_offsets(text)
    _check_spans(text, off)
    assert tok.decode(ids) == text and np.array_equal(ids, tok.encode(text))
    groups, start = [], 0
    for k in range(1, len(ids) + 1):
        if k == len(ids) or off[k, 0] >= off[k - 1, 1]:
            groups.append((start, k))
            start = k
    assert any(b - a > 1 for a, b in groups)  # the text does split characters
    for a, b in groups:
        assert tok.decode(ids[a:b]) == text[off[a, 0] : off[b - 1, 1]]
    assert "".join(text[off[a, 0] : off[b - 1, 1]] for a, b in groups) == text
    # a special-token string inside a document is plain text, not EOS
    assert tok.eos_id not in tok.encode("a <|endoftext|> b").tolist()

    # no EOS-like special token: one id past the vocabulary is reserved for EOS
    tok = HFTokenizer(_train_hf(tmp_path, "bytelevel", specials=()))
    assert tok.eos_id == tok._tok.get_vocab_size() and tok.vocab_size == tok.eos_id + 1
    assert tok.decode(np.append(tok.encode("café"), tok.eos_id)) == "café"

    with pytest.raises(ValueError, match="allowed forms"):
        load_tokenizer("sentencepiece:/x")
    with pytest.raises(ValueError, match="not found"):
        load_tokenizer(f"hf:{tmp_path / 'nope.json'}")


# --------------------------------------------------------------------------- token shards


def test_token_cache_reuse_and_corrupt_rebuild(tmp_path, caplog, monkeypatch):
    corpus = make_corpus([MULTIBYTE * (i + 1) for i in range(40)] + [""])
    tok = ByteTokenizer()
    monkeypatch.setenv("NBLIB_DATA_CACHE", str(tmp_path / "cache"))
    td = tokenize_corpus(corpus, tok, "train")
    folder = next((tmp_path / "cache").iterdir())
    assert folder.name == f"{corpus.identity[:16]}-byte-train-ef0.1"
    train_docs = corpus.split("train")
    assert isinstance(td.tokens, np.memmap) and td.tokens.dtype == np.uint16
    assert td.doc_ids == [d.id for d in train_docs]
    for i, d in enumerate(train_docs):
        assert np.array_equal(td.doc(i), tok.encode(d.text))
    mtime = (folder / "tokens.bin").stat().st_mtime_ns

    with caplog.at_level(logging.WARNING):
        again = tokenize_corpus(corpus, tok, "train")
    assert not caplog.records and (folder / "tokens.bin").stat().st_mtime_ns == mtime  # reused, not rewritten
    assert np.array_equal(again.tokens, td.tokens)
    assert tokenize_corpus(corpus, tok, "eval").n_tokens + td.n_tokens == sum(len(tok.encode(d.text)) for d in corpus)

    # a truncated token file and a missing meta.json are both detected and rebuilt
    for damage in ("truncate", "no-meta"):
        del again, td
        if damage == "truncate":
            with open(folder / "tokens.bin", "r+b") as f:
                f.truncate(100)
        else:
            (folder / "meta.json").unlink()
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            td = tokenize_corpus(corpus, tok, "train")
        assert "corrupt or partial" in caplog.text
        again = tokenize_corpus(corpus, tok, "train")
        assert np.array_equal(td.doc(3), tok.encode(train_docs[3].text))
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        [folder.name, folder.name.replace("train", "eval")]
    )  # no temporary folders left behind

    with pytest.raises(ValueError, match="no non-empty documents"):
        tokenize_corpus(make_corpus(["a"] * 1), tok, "eval", eval_fraction=0.0, cache=tmp_path / "c2")


def test_hf_tokenizer_through_cache(tmp_path):
    tok = HFTokenizer(_train_hf(tmp_path, "bytelevel"))
    corpus = make_corpus([MULTIBYTE, "the lazy dog " * 50, "東京 café"])
    td = tokenize_corpus(corpus, tok, "all", cache=tmp_path / "cache")
    assert td.meta["tokenizer_id"] == tok.tokenizer_id and td.eos_id == tok.eos_id
    for i, d in enumerate(corpus):
        assert np.array_equal(td.doc(i), tok.encode(d.text))


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


# --------------------------------------------------------------------------- test set


def test_build_test_set_truncates_and_reports():
    tok = ByteTokenizer()
    rng = np.random.default_rng(0)
    texts = ["ab" * int(n) for n in rng.integers(10, 400, 200)]  # ASCII: tokens = chars
    corpus = make_corpus(texts)
    ts = build_test_set(corpus, tok, target_len=300, n_docs=5, max_len=700, seed=1, split="all")
    src = [len(corpus.docs[int(i[3:])].text) for i in ts.ids]
    assert ts.ids == sorted(ts.ids) and all(300 <= n < 700 for n in src) and ts.source_lengths == src
    assert all(t == corpus.docs[int(i[3:])].text[:300] for i, t in zip(ts.ids, ts.texts))
    assert ts.lengths == [300] * 5 and ts.stats["n_exact_target"] == 5
    assert ts.stats["source_length"] == {"mean": np.mean(src), "median": np.median(src), "min": min(src), "max": max(src)}
    assert build_test_set(corpus, tok, 300, 5, 700, seed=1, split="all").ids == ts.ids
    assert build_test_set(corpus, tok, 300, 5, 700, seed=2, split="all").ids != ts.ids
    # eval split only (the default): every chosen id hashes into the eval split
    ev = build_test_set(corpus, tok, 100, 3)
    assert all(split_fraction(i) < 0.1 for i in ev.ids)
    n_ok = sum(len(t) >= 700 for t in texts)
    with pytest.raises(ValueError, match=f"only {n_ok} of 200 'all'-split documents.*>= 700.*n_docs=100"):
        build_test_set(corpus, tok, 700, 100, split="all")


def test_truncate_text_at_multibyte_boundary():
    tok = ByteTokenizer()
    text = "ab東京cd"  # bytes: a b [3] [3] c d
    assert truncate_text(text, tok, 3) == "ab"  # cutting inside 東 drops the partial character
    assert truncate_text(text, tok, 5) == "ab東"
    assert truncate_text(text, tok, 8) == "ab東京" and truncate_text(text, tok, 99) == text
    for n in range(1, 11):
        assert len(tok.encode(truncate_text(text, tok, n))) <= n


@needs_shared
def test_test_set_on_govreport():
    gov = load_corpus(f"jsonl:{SHARED / 'govreport_leval.jsonl'}")
    ts = build_test_set(gov, ByteTokenizer(), target_len=8192, n_docs=5, split="all")
    assert ts.stats["n_docs"] == 5 and ts.stats["length"]["max"] <= 8192 and ts.stats["source_length"]["min"] >= 8192
