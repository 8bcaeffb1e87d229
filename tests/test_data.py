"""Tests for nblib.data: corpora, tokenizers, token shards, test-set builder (streams and
segmentation: tests/test_streams.py).

Offsets are checked against per-character loops, the stdlib manifest against tampering.
"""

from __future__ import annotations

import hashlib
import json
import logging
import lzma
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from nblib.data import (
    ByteTokenizer,
    Document,
    HFTokenizer,
    build_test_set,
    find_manifest,
    load_corpus,
    load_jsonl,
    load_tokenizer,
    load_txt_folder,
    python_stdlib_corpus,
    split_documents,
    split_fraction,
    stdlib_files,
    tokenize_corpus,
    truncate_text,
    write_stdlib_manifest,
)
from nblib.data.corpus import Corpus, content_hash, python_version
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
