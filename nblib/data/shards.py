"""Tokenized storage: one memory-mapped token file per (corpus, tokenizer, split), built once.

Layout under the cache folder (default <repo>/data/cache, env NBLIB_DATA_CACHE overrides):

    <corpus_hash16>-<tokenizer_id>-<split>/
        tokens.bin        all documents' tokens back to back, uint16 (vocab < 65536) else uint32
        doc_offsets.npy   int64 (n_docs + 1,): document i is tokens[off[i]:off[i+1]]
        meta.json         written last: counts, dtype, ids, corpus identity, tokenizer id

The folder is written under a temporary name and renamed into place, so a reader sees a
complete folder or none. A folder that fails the checks (missing meta, size mismatch) is
rebuilt with a warning. Every budget uses this one path, the tiny ones included.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from nblib.data.corpus import Corpus, split_documents
from nblib.store.atomic import atomic_write_json
from nblib.store.provenance import REPO_ROOT

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
PROGRESS_MIN_CHARS = 50_000_000  # show a tqdm bar for corpora larger than this


def cache_dir() -> Path:
    """Cache folder for token shards: $NBLIB_DATA_CACHE, else <repo>/data/cache."""
    env = os.environ.get("NBLIB_DATA_CACHE")
    return Path(env) if env else REPO_ROOT / "data" / "cache"


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (vocab_size <= 65536), else uint32."""
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.uint32)


@dataclass
class TokenDocs:
    """Tokenized documents: a flat token array (often an np.memmap) plus document offsets."""

    tokens: np.ndarray  # (n_tokens,) uint16 / uint32
    offsets: np.ndarray  # (n_docs + 1,) int64
    eos_id: int
    vocab_size: int
    name: str = "tokens"  # for error messages: corpus name and split
    doc_ids: list[str] | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        off = np.asarray(self.offsets)
        if off.ndim != 1 or off.size < 1 or off[0] != 0 or off[-1] != len(self.tokens) or np.any(np.diff(off) < 0):
            raise ValueError(
                f"{self.name}: offsets must be 1-D, start at 0, be non-decreasing and end at n_tokens={len(self.tokens)}"
            )
        self.offsets = off.astype(np.int64)

    @classmethod
    def from_arrays(cls, docs, eos_id: int, vocab_size: int | None = None, name: str = "arrays") -> "TokenDocs":
        """In-memory TokenDocs from a list of 1-D integer arrays (tests, small experiments)."""
        arrays = [np.asarray(d, dtype=np.int64).reshape(-1) for d in docs]
        vocab_size = vocab_size if vocab_size is not None else eos_id + 1
        lens = np.array([len(a) for a in arrays], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        flat = np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
        return cls(flat.astype(token_dtype(vocab_size)), offsets, eos_id, vocab_size, name)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_tokens(self) -> int:
        """Tokens over all documents (no EOS)."""
        return int(self.offsets[-1])

    @property
    def lengths(self) -> np.ndarray:
        """(n_docs,) token count of each document."""
        return np.diff(self.offsets)

    def doc(self, i: int) -> np.ndarray:
        """Tokens of document i."""
        return np.asarray(self.tokens[self.offsets[i] : self.offsets[i + 1]])


def _split_label(split: str, eval_fraction: float) -> str:
    """Cache-folder label of a split: "all", or e.g. "train-ef0.1" (the fraction changes the split)."""
    return "all" if split == "all" else f"{split}-ef{eval_fraction:g}"


def _cache_problem(folder: Path) -> str | None:
    """Why a cache folder cannot be used, or None when it is complete and consistent."""
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        return "meta.json is missing"
    try:
        meta = json.loads(meta_path.read_text())
        dtype = np.dtype(meta["dtype"])
        n_tokens, n_docs = int(meta["n_tokens"]), int(meta["n_docs"])
    except (ValueError, KeyError, TypeError) as e:
        return f"meta.json is unreadable ({e})"
    if meta.get("format_version") != FORMAT_VERSION:
        return f"format_version {meta.get('format_version')} != {FORMAT_VERSION}"
    tok_path = folder / "tokens.bin"
    if not tok_path.is_file() or tok_path.stat().st_size != n_tokens * dtype.itemsize:
        size = tok_path.stat().st_size if tok_path.is_file() else "missing"
        return f"tokens.bin size {size} != {n_tokens} tokens x {dtype.itemsize} bytes"
    try:
        off = np.load(folder / "doc_offsets.npy")
    except (OSError, ValueError) as e:
        return f"doc_offsets.npy is unreadable ({e})"
    if off.shape != (n_docs + 1,) or off[0] != 0 or off[-1] != n_tokens or np.any(np.diff(off) < 0):
        return "doc_offsets.npy does not match meta.json"
    return None


def _open_cache(folder: Path) -> TokenDocs:
    meta = json.loads((folder / "meta.json").read_text())
    dtype = np.dtype(meta["dtype"])
    tokens = np.memmap(folder / "tokens.bin", dtype=dtype, mode="r", shape=(meta["n_tokens"],))
    offsets = np.load(folder / "doc_offsets.npy")
    name = f"{meta['corpus_name']} [{meta['split']}]"
    return TokenDocs(tokens, offsets, meta["eos_id"], meta["vocab_size"], name, meta["doc_ids"], meta)


def _write_cache(folder: Path, docs, tokenizer, meta: dict, progress: bool) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
    try:
        dtype = token_dtype(tokenizer.vocab_size)
        offsets = [0]
        with open(tmp / "tokens.bin", "wb") as f, tqdm(
            total=len(docs), desc=f"tokenize {folder.name}", unit="doc", disable=not progress
        ) as bar:
            chunk = 256  # documents per encode_batch call
            for i in range(0, len(docs), chunk):
                for ids in tokenizer.encode_batch([d.text for d in docs[i : i + chunk]]):
                    f.write(ids.astype(dtype).tobytes())
                    offsets.append(offsets[-1] + len(ids))
                bar.update(min(chunk, len(docs) - i))
            f.flush()
            os.fsync(f.fileno())
        np.save(tmp / "doc_offsets.npy", np.asarray(offsets, dtype=np.int64))
        meta = dict(meta, dtype=dtype.name, n_tokens=offsets[-1], n_docs=len(docs), format_version=FORMAT_VERSION)
        atomic_write_json(tmp / "meta.json", meta, indent=None)  # last: its presence marks completeness
        if folder.exists():
            shutil.rmtree(folder)
        try:
            os.rename(tmp, folder)
        except OSError:
            if _cache_problem(folder) is None:  # another process finished the same folder first
                return
            raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def tokenize_corpus(
    corpus: Corpus,
    tokenizer,
    split: str = "train",
    eval_fraction: float = 0.1,
    cache: str | Path | None = None,
    progress: bool | None = None,
) -> TokenDocs:
    """Tokenize one split of a corpus once into memory-mapped shards (reused when present).

    Returns TokenDocs over np.memmap tokens; the cache key is (corpus identity, tokenizer id,
    split, eval_fraction). `progress` None shows a tqdm bar only for corpora over 50M chars.
    """
    docs = split_documents(corpus.docs, split, eval_fraction)
    if not any(d.text for d in docs):
        raise ValueError(
            f"split {split!r} of corpus {corpus.name!r} has no non-empty documents "
            f"({len(docs)} of {len(corpus)} documents at eval_fraction={eval_fraction}); "
            "tokenizing needs at least one non-empty document"
        )
    label = _split_label(split, eval_fraction)
    folder = Path(cache) if cache is not None else cache_dir()
    folder = folder / f"{corpus.identity[:16]}-{tokenizer.tokenizer_id}-{label}"
    if folder.exists():
        problem = _cache_problem(folder)
        if problem is None:
            return _open_cache(folder)
        log.warning("token cache %s is corrupt or partial (%s); rebuilding it", folder, problem)
    if progress is None:
        progress = sum(len(d.text) for d in docs) > PROGRESS_MIN_CHARS
    meta = {
        "corpus_name": corpus.name,
        "corpus_identity": corpus.identity,
        "tokenizer_id": tokenizer.tokenizer_id,
        "vocab_size": tokenizer.vocab_size,
        "eos_id": tokenizer.eos_id,
        "split": split,
        "eval_fraction": eval_fraction,
        "doc_ids": [d.id for d in docs],
    }
    _write_cache(folder, docs, tokenizer, meta, progress)
    return _open_cache(folder)
