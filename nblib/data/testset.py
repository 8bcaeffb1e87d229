"""LongPPL / ShortPPL test set (App. A.1, Table 2): long documents truncated to the target length.

The paper takes GovReport documents of 32,768-39,999 tokens (reference tokenizer) and
truncates each to at most 32,768 tokens. Here: documents of one split with
target_len <= n_tokens (< max_len when given), a seeded choice of n_docs of them, each cut
to the text of its first target_len tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from nblib.data.corpus import Corpus, Document, split_documents


@dataclass
class TestSet:
    """The truncated test documents and Table 2's statistics (App. A.1)."""

    __test__ = False  # not a pytest test class

    ids: list[str]
    texts: list[str]  # truncated texts
    source_lengths: list[int]  # tokens of the full source document
    lengths: list[int]  # tokens of the truncated text, re-encoded (<= target_len)
    target_len: int
    max_len: int | None
    tokenizer_id: str
    corpus_name: str
    stats: dict = field(default_factory=dict)


def _describe(x: Sequence[int]) -> dict:
    a = np.asarray(x, dtype=np.float64)
    return {"mean": float(a.mean()), "median": float(np.median(a)), "min": int(a.min()), "max": int(a.max())}


def truncate_text(text: str, tokenizer, n_tokens: int) -> str:
    """Text of the first n_tokens tokens: the character span up to the last kept token's end.

    When the first dropped token shares a character with the last kept one (a multi-byte
    character split across byte tokens), the cut moves back to that character's start, so
    re-encoding the result never gives more than n_tokens tokens for a byte tokenizer.
    """
    ids, off = tokenizer.encode_with_offsets(text)
    if len(ids) <= n_tokens:
        return text
    cut = int(off[n_tokens - 1, 1])
    cut = min(cut, int(off[n_tokens, 0]))
    return text[:cut]


def build_test_set(
    corpus_docs: Corpus | Sequence[Document],
    tokenizer,
    target_len: int,
    n_docs: int,
    max_len: int | None = None,
    seed: int = 0,
    split: str = "eval",
    eval_fraction: float = 0.1,
) -> TestSet:
    """Build the LongPPL test set (App. A.1): n_docs documents of >= target_len tokens, truncated.

    Candidates are the `split` documents ("eval" by default; "all" for a corpus kept apart
    from training, like GovReport) with target_len <= tokens (< max_len when given, e.g. the
    paper's 32,768-39,999). A seeded permutation picks n_docs; they are listed by id.
    `stats` holds Table 2's rows: document count, source-length and truncated-length
    mean/median/min/max, and how many truncated sequences have exactly target_len tokens.
    """
    for name, v in (("target_len", target_len), ("n_docs", n_docs)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if max_len is not None and (not isinstance(max_len, int) or max_len <= target_len):
        raise ValueError(f"max_len must be None or an int > target_len={target_len}, got {max_len!r}")
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    name = corpus_docs.name if isinstance(corpus_docs, Corpus) else "<documents>"
    docs = split_documents(list(corpus_docs), split, eval_fraction)
    lengths = [len(ids) for ids in tokenizer.encode_batch([d.text for d in docs])]
    ok = [i for i, n in enumerate(lengths) if n >= target_len and (max_len is None or n < max_len)]
    if len(ok) < n_docs:
        band = f">= {target_len}" if max_len is None else f"in [{target_len}, {max_len})"
        raise ValueError(
            f"corpus {name!r}: only {len(ok)} of {len(docs)} {split!r}-split documents have a token length {band} "
            f"under tokenizer {tokenizer.tokenizer_id!r} (longest: {max(lengths, default=0)}); asked for n_docs={n_docs}"
        )
    ok.sort(key=lambda i: docs[i].id)
    chosen = [ok[k] for k in np.random.default_rng([seed]).permutation(len(ok))[:n_docs]]
    chosen.sort(key=lambda i: docs[i].id)
    texts = [truncate_text(docs[i].text, tokenizer, target_len) for i in chosen]
    kept = [len(ids) for ids in tokenizer.encode_batch(texts)]
    src = [lengths[i] for i in chosen]
    stats = {
        "n_docs": len(chosen),
        "n_candidates": len(ok),
        "source_length": _describe(src),
        "length": _describe(kept),
        "n_exact_target": int(sum(k == target_len for k in kept)),
    }
    return TestSet([docs[i].id for i in chosen], texts, src, kept, target_len, max_len,
                   tokenizer.tokenizer_id, name, stats)
