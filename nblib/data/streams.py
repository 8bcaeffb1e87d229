"""Deterministic training streams: the batch at global step s depends only on (seed, s, config).

So an interrupted run resumes exactly, and a run branched from another at step s sees the
same data as a run started separately. Both streams return `batch(step, batch_size) ->
(x, y, doc_ids)`, LongTensors of shape (B, T): y is x shifted by one, and doc_ids gives the
source-document index of every input position (EOS separators belong to the document they
end), so a model can keep packed documents apart. (In LongMixtureStream two segments of one
long document that the shuffle happens to put into the same sequence share that id.)

- PackedStream: short-context stage (Sec. 3.1, the 4K stage). Documents in corpus order,
  each followed by EOS, form one long stream cut into windows of T+1 tokens at stride T
  (adjacent windows share one token, so every next-token pair is trained on once per epoch).
  A permutation seeded by (seed, epoch) orders the windows; each is used once per epoch.
- LongMixtureStream: LCCP stage (App. A.4). Documents longer than T+1 are split into
  consecutive segments of T+1 tokens with one-token overlap, every segment kept (the last,
  shorter one too). Pieces are bucketed by SOURCE-document length (Table 9), and training
  sequences are drawn from the buckets by weight. With `aligned=True` every full segment is
  one training sequence (App. A.4: "split into consecutive segments of the target length"),
  and only the shorter pieces are packed together.
- DocStartStream: long documents only, one per sequence, read from its start (the Gemma
  blog's YaRN fine-tune: "only pages at least 4096 tokens long, one page per sequence").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from nblib.data.shards import TokenDocs

log = logging.getLogger(__name__)

_TAG_PACKED, _TAG_BLOCK, _TAG_BUCKET = 0, 1, 2  # keep the seeded RNG streams apart
_TAG_DOCSTART = 4
_TAG_ALIGNED = 5


def _check_int(name: str, value, minimum: int) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def segment_spans(n_tokens: int, seq_len: int) -> list[tuple[int, int]]:
    """Split a document of n_tokens into [start, end) segments of seq_len+1 tokens (App. A.4).

    Segments start at 0, 0+seq_len, 0+2*seq_len, ... so adjacent segments overlap by one
    token; every segment is kept, the final shorter remainder included. A document of at most
    seq_len+1 tokens is one segment. Concatenating seg_0 + seg_1[1:] + seg_2[1:] + ...
    reconstructs the document.
    """
    n_tokens, seq_len = _check_int("n_tokens", n_tokens, 0), _check_int("seq_len", seq_len, 1)
    if n_tokens == 0:
        return []
    n_seg = max(1, -(-(n_tokens - 1) // seq_len))  # ceil((n-1)/T)
    return [(k * seq_len, min(k * seq_len + seq_len + 1, n_tokens)) for k in range(n_seg)]


def _segment_all(lengths: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised segment_spans over all documents: (doc index, start in doc, length) per piece."""
    lengths = np.asarray(lengths, dtype=np.int64)
    n_seg = np.where(lengths > 0, np.maximum(1, -(-(lengths - 1) // seq_len)), 0)
    doc = np.repeat(np.arange(len(lengths)), n_seg)
    first = np.concatenate([[0], np.cumsum(n_seg)[:-1]])
    k = np.arange(n_seg.sum()) - np.repeat(first, n_seg)  # segment number within its document
    start = k * seq_len
    length = np.minimum(start + seq_len + 1, lengths[doc]) - start
    return doc, start, length


@dataclass
class _Pieces:
    """Pieces laid end to end, each followed by one EOS: piece j occupies [end[j]-len[j]-1, end[j])."""

    src: np.ndarray  # (n,) start of each piece in the flat token array
    length: np.ndarray  # (n,) tokens per piece (>= 1)
    doc: np.ndarray  # (n,) source-document index
    end: np.ndarray  # (n,) cumulative (length + 1): exclusive end of piece j and its EOS

    @classmethod
    def build(cls, src, length, doc) -> "_Pieces":
        src, length, doc = (np.asarray(a, dtype=np.int64) for a in (src, length, doc))
        return cls(src, length, doc, np.cumsum(length + 1))

    @property
    def total(self) -> int:
        return int(self.end[-1]) if len(self.end) else 0

    def gather(self, tokens: np.ndarray, eos_id: int, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token and document index at stream positions `pos` (any shape, values in [0, total))."""
        j = np.searchsorted(self.end, pos, side="right")
        within = pos - (self.end[j] - self.length[j] - 1)
        is_eos = within == self.length[j]
        idx = self.src[j] + np.minimum(within, self.length[j] - 1)
        tok = np.where(is_eos, eos_id, np.asarray(tokens[idx.reshape(-1)]).reshape(idx.shape).astype(np.int64))
        return tok, self.doc[j]


def _to_batch(tok: np.ndarray, doc: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, T+1) tokens and doc ids -> x (B, T), y (B, T), doc_ids (B, T) as LongTensors."""
    tok, doc = torch.from_numpy(np.ascontiguousarray(tok, np.int64)), torch.from_numpy(np.ascontiguousarray(doc, np.int64))
    return tok[:, :-1].contiguous(), tok[:, 1:].contiguous(), doc[:, :-1].contiguous()


def _check_stream_args(tokens, seq_len, seed):
    if not isinstance(tokens, TokenDocs):
        raise TypeError(f"tokens must be a TokenDocs (see tokenize_corpus / TokenDocs.from_arrays), got {type(tokens).__name__}")
    return _check_int("seq_len", seq_len, 1), _check_int("seed", seed, 0)


class PackedStream:
    """Short-context stage stream (Sec. 3.1): packed documents, epoch-wise shuffled windows of seq_len+1."""

    def __init__(self, tokens: TokenDocs, seq_len: int, seed: int = 0):
        self.seq_len, self.seed = _check_stream_args(tokens, seq_len, seed)
        self.tokens = tokens
        lens = tokens.lengths
        keep = np.flatnonzero(lens > 0)  # empty documents would only add a lone EOS
        self._pieces = _Pieces.build(tokens.offsets[keep], lens[keep], keep)
        total = self._pieces.total  # tokens + one EOS per document
        self.n_windows = (total - 1) // self.seq_len if total else 0
        if self.n_windows < 1:
            raise ValueError(
                f"corpus {tokens.name!r} is too short for PackedStream: {tokens.n_tokens} tokens "
                f"(+{len(keep)} EOS) but one sequence needs seq_len+1 = {self.seq_len + 1} tokens"
            )
        self._order = lru_cache(maxsize=2)(self._window_order)

    @property
    def config(self) -> dict:
        """What determines the batches, for run configs."""
        return {"stream": "packed", "seq_len": self.seq_len, "seed": self.seed, "tokens": self.tokens.name,
                "n_windows": self.n_windows}

    @property
    def tokens_per_epoch(self) -> int:
        """Trained-on (predicted) tokens in one epoch: n_windows * seq_len."""
        return self.n_windows * self.seq_len

    def _window_order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, _TAG_PACKED, epoch]).permutation(self.n_windows)

    def windows(self, step: int, batch_size: int) -> np.ndarray:
        """(B,) window indices of a step: sample i = step*B + b is window order(epoch)[i mod n_windows]."""
        step, batch_size = _check_int("step", step, 0), _check_int("batch_size", batch_size, 1)
        sample = step * batch_size + np.arange(batch_size)
        epoch, r = np.divmod(sample, self.n_windows)
        return np.array([self._order(int(e))[int(k)] for e, k in zip(epoch, r)], dtype=np.int64)

    def batch(self, step: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x, y, doc_ids of shape (batch_size, seq_len) for global step `step`."""
        w = self.windows(step, batch_size)
        pos = w[:, None] * self.seq_len + np.arange(self.seq_len + 1)  # (B, T+1)
        tok, doc = self._pieces.gather(self.tokens.tokens, self.tokens.eos_id, pos)
        return _to_batch(tok, doc)


class DocStartStream:
    """Sequences that are each the first seq_len+1 tokens of one document with at least that
    many tokens (Gemma blog, YaRN fine-tune: long pages only, one page per sequence, so every
    position p has p earlier tokens of the same page). A permutation seeded by (seed, epoch)
    orders the eligible documents; each is used once per epoch. One doc id per row."""

    def __init__(self, tokens: TokenDocs, seq_len: int, seed: int = 0):
        self.seq_len, self.seed = _check_stream_args(tokens, seq_len, seed)
        self.tokens = tokens
        self.docs = np.flatnonzero(tokens.lengths >= self.seq_len + 1)
        if not len(self.docs):
            raise ValueError(f"corpus {tokens.name!r} has no document of seq_len+1 = {self.seq_len + 1} tokens or "
                             f"more (longest: {int(tokens.lengths.max()) if len(tokens.lengths) else 0}); "
                             "DocStartStream needs at least one")
        self._order = lru_cache(maxsize=2)(self._doc_order)

    @property
    def config(self) -> dict:
        return {"stream": "doc_starts", "seq_len": self.seq_len, "seed": self.seed, "tokens": self.tokens.name,
                "n_docs": len(self.docs)}

    def _doc_order(self, epoch: int) -> np.ndarray:
        return self.docs[np.random.default_rng([self.seed, _TAG_DOCSTART, epoch]).permutation(len(self.docs))]

    def batch(self, step: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x, y, doc_ids of shape (batch_size, seq_len) for global step `step`."""
        step, batch_size = _check_int("step", step, 0), _check_int("batch_size", batch_size, 1)
        sample = step * batch_size + np.arange(batch_size)
        epoch, r = np.divmod(sample, len(self.docs))
        docs = np.array([self._order(int(e))[int(k)] for e, k in zip(epoch, r)], dtype=np.int64)
        pos = self.tokens.offsets[docs][:, None] + np.arange(self.seq_len + 1)
        tok = np.asarray(self.tokens.tokens[pos.reshape(-1)]).reshape(pos.shape)
        return _to_batch(tok, np.repeat(docs[:, None], self.seq_len + 1, axis=1))


@dataclass(frozen=True)
class LengthMixture:
    """Length buckets relative to the target length and their sampling weights (App. A.4, Table 9).

    Bucket b holds source documents with edges[b-1]*T <= n_tokens < edges[b]*T (edges in
    multiples of the stream's seq_len T; the first bucket starts at 0, the last is open).
    Weights are normalised to sum to 1.
    """

    edges: tuple[float, ...]
    weights: tuple[float, ...]
    name: str = "custom"

    def __post_init__(self):
        edges, weights = tuple(float(e) for e in self.edges), tuple(float(w) for w in self.weights)
        if not edges or any(e <= 0 for e in edges) or any(b <= a for a, b in zip(edges, edges[1:])):
            raise ValueError(f"edges must be positive and strictly increasing, got {self.edges!r}")
        if len(weights) != len(edges) + 1:
            raise ValueError(f"need len(edges)+1 = {len(edges) + 1} weights (one per bucket), got {len(weights)}")
        if any(w < 0 or not np.isfinite(w) for w in weights) or sum(weights) <= 0:
            raise ValueError(f"weights must be finite, >= 0 and not all 0, got {self.weights!r}")
        total = sum(weights)
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "weights", tuple(w / total for w in weights))

    @classmethod
    def lccp_32k(cls) -> "LengthMixture":
        """Table 9, 32K LCCP mixture: <16K 52.57%, 16K-32K 12.54%, 32K-128K 19.80%, >=128K 15.09% (T = 32K)."""
        return cls((0.5, 1.0, 4.0), (52.57, 12.54, 19.80, 15.09), "lccp_32k")

    @classmethod
    def extension_128k(cls) -> "LengthMixture":
        """Table 9, 128K extension: <16K 40.60%, 16K-32K 9.40%, 32K-128K 28.38%, >=128K 21.62%.

        Same absolute edges as the 32K mixture (16K, 32K, 128K), here in multiples of the
        extension's own target T = 128K: 1/8, 1/4, 1. Use it with seq_len = 4x the LCCP length.
        """
        return cls((0.125, 0.25, 1.0), (40.60, 9.40, 28.38, 21.62), "extension_128k")

    def edges_tokens(self, seq_len: int) -> list[int]:
        """Bucket edges in tokens for target length seq_len (rounded up: n < edge*T  <=>  n < ceil(edge*T))."""
        return [int(np.ceil(e * seq_len)) for e in self.edges]

    def labels(self, seq_len: int) -> list[str]:
        """Bucket names in tokens, e.g. ["<16384", "16384-32768", "32768-131072", ">=131072"]."""
        e = self.edges_tokens(seq_len)
        return [f"<{e[0]}"] + [f"{a}-{b}" for a, b in zip(e, e[1:])] + [f">={e[-1]}"]

    def bucket_of(self, n_tokens, seq_len: int) -> np.ndarray:
        """Bucket index of each source-document length."""
        return np.searchsorted(np.asarray(self.edges_tokens(seq_len)), np.asarray(n_tokens), side="right")


def _quotas(weights: np.ndarray, block: int) -> np.ndarray:
    """Integer counts per bucket summing to `block`, proportional to weights (largest remainder)."""
    q = weights * block
    c = np.floor(q).astype(np.int64)
    rest = block - c.sum()
    order = np.lexsort((np.arange(len(q)), -(q - c)))  # largest fraction first, ties by bucket index
    c[order[:rest]] += 1
    return c


class LongMixtureStream:
    """LCCP stream (App. A.4): segmented long documents, length buckets by source-document length.

    Every training sequence has exactly seq_len+1 tokens and comes from one bucket: a bucket's
    pieces, shuffled per (seed, bucket, epoch) and separated by EOS, are cut into windows of
    seq_len+1 at stride seq_len (a bucket's epochs follow one another, so no window is ever
    short). Which bucket feeds sample i is fixed in blocks of `block` samples: each block holds
    exactly round(weight*block) samples of each bucket (largest remainder) in a seeded random
    order, so realized shares match the weights to 1/block per block. Buckets without documents
    have their weight renormalised away (logged once).

    aligned=False: a bucket's windows are cut from its pieces laid end to end, so a window
    usually holds the tail of one piece and the head of an unrelated one. aligned=True: each
    full piece (seq_len+1 tokens, a segment of a long document) is a window of its own, so every
    position of it sees only its own document; the shorter pieces (document tails, short
    documents) are laid end to end and cut as before. An epoch of a bucket is its full pieces
    and its packed windows in one seeded order.
    """

    def __init__(self, tokens: TokenDocs, seq_len: int, seed: int = 0, mixture: LengthMixture | None = None,
                 block: int = 10_000, aligned: bool = False):
        self.seq_len, self.seed = _check_stream_args(tokens, seq_len, seed)
        self.tokens = tokens
        self.mixture = mixture if mixture is not None else LengthMixture.lccp_32k()
        if not isinstance(self.mixture, LengthMixture):
            raise TypeError(f"mixture must be a LengthMixture, got {type(self.mixture).__name__}")
        self.block = _check_int("block", block, 1)
        total = tokens.n_tokens + int((tokens.lengths > 0).sum())
        if total < self.seq_len + 1:
            raise ValueError(
                f"corpus {tokens.name!r} is too short for LongMixtureStream: {tokens.n_tokens} tokens "
                f"(+EOS) but one sequence needs seq_len+1 = {self.seq_len + 1} tokens"
            )
        doc, start, length = _segment_all(tokens.lengths, self.seq_len)
        self.piece_bucket = self.mixture.bucket_of(tokens.lengths[doc], self.seq_len)  # by SOURCE length
        n_b = len(self.mixture.weights)
        self._buckets = [
            _Pieces.build((tokens.offsets[doc] + start)[m], length[m], doc[m])
            for m in (self.piece_bucket == b for b in range(n_b))
        ]
        w = np.array(self.mixture.weights)
        empty = [b for b in range(n_b) if len(self._buckets[b].length) == 0]
        w[empty] = 0.0
        if w.sum() == 0:
            raise ValueError(f"corpus {tokens.name!r}: every bucket with a positive weight in {self.mixture} is empty")
        self.weights = w / w.sum()  # effective weights
        if any(self.mixture.weights[b] > 0 for b in empty):
            labels = self.mixture.labels(self.seq_len)
            log.warning(
                "LongMixtureStream on %s (seq_len %d): buckets %s have no documents; their weight %.4f is "
                "renormalised over the others (effective weights %s)",
                tokens.name, self.seq_len, [labels[b] for b in empty], sum(self.mixture.weights[b] for b in empty),
                np.round(self.weights, 4).tolist(),
            )
        self.quota = _quotas(self.weights, self.block)  # (n_b,) samples per block
        self._block_plan = lru_cache(maxsize=4)(self._make_block_plan)
        self._epoch = lru_cache(maxsize=16)(self._make_epoch)
        self.aligned = bool(aligned)
        if self.aligned:
            self._full, self._full_doc, self._short, self._n_windows = [], [], [], []
            for p in self._buckets:
                full = p.length == self.seq_len + 1
                self._full.append(p.src[full])
                self._full_doc.append(p.doc[full])
                short = _Pieces.build(p.src[~full], p.length[~full], p.doc[~full])
                self._short.append(short)
                n_packed = max(1, (short.total - 1) // self.seq_len) if short.total else 0
                self._n_windows.append(int(full.sum()) + n_packed)
            self._aligned_epoch = lru_cache(maxsize=16)(self._make_aligned_epoch)

    @property
    def config(self) -> dict:
        """What determines the batches, for run configs."""
        out = {"stream": "long_mixture", "seq_len": self.seq_len, "seed": self.seed, "tokens": self.tokens.name,
               "mixture": self.mixture.name, "edges": list(self.mixture.edges),
               "weights": list(self.mixture.weights), "block": self.block}
        return {**out, "aligned": True} if self.aligned else out

    def _make_block_plan(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Bucket of each sample in block j and its rank among that bucket's samples in the block."""
        base = np.repeat(np.arange(len(self.quota)), self.quota)
        bucket = np.random.default_rng([self.seed, _TAG_BLOCK, j]).permutation(base)
        rank = np.zeros(self.block, dtype=np.int64)
        for b in range(len(self.quota)):
            where = np.flatnonzero(bucket == b)
            rank[where] = np.arange(len(where))
        return bucket, rank

    def _make_epoch(self, b: int, epoch: int) -> _Pieces:
        p = self._buckets[b]
        order = np.random.default_rng([self.seed, _TAG_BUCKET, b, epoch]).permutation(len(p.length))
        return _Pieces.build(p.src[order], p.length[order], p.doc[order])

    def plan(self, sample: int) -> tuple[int, int]:
        """(bucket, k): sample i is window k of bucket `bucket`'s stream."""
        j, r = divmod(_check_int("sample", sample, 0), self.block)
        bucket, rank = self._block_plan(j)
        b = int(bucket[r])
        return b, j * int(self.quota[b]) + int(rank[r])

    def _make_aligned_epoch(self, b: int, epoch: int) -> tuple[np.ndarray, _Pieces]:
        """Window order of bucket b's epoch (full pieces first in index, then packed windows)
        and that epoch's shuffled short pieces."""
        rng = np.random.default_rng([self.seed, _TAG_ALIGNED, b, epoch])
        order = rng.permutation(self._n_windows[b])
        s = self._short[b]
        perm = rng.permutation(len(s.length))
        return order, _Pieces.build(s.src[perm], s.length[perm], s.doc[perm])

    def _aligned_sequence(self, b: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        epoch, w = divmod(k, self._n_windows[b])
        order, short = self._aligned_epoch(b, epoch)
        i, n_full = int(order[w]), len(self._full[b])
        if i < n_full:  # one segment of one long document, read whole
            src = int(self._full[b][i])
            tok = np.asarray(self.tokens.tokens[src:src + self.seq_len + 1]).astype(np.int64)
            return tok, np.full(self.seq_len + 1, self._full_doc[b][i], dtype=np.int64)
        pos = ((i - n_full) * self.seq_len + np.arange(self.seq_len + 1)) % short.total
        return short.gather(self.tokens.tokens, self.tokens.eos_id, pos)

    def _sequence(self, sample: int) -> tuple[np.ndarray, np.ndarray]:
        b, k = self.plan(sample)
        if self.aligned:
            return self._aligned_sequence(b, k)
        pos = k * self.seq_len + np.arange(self.seq_len + 1)  # positions in the bucket's endless stream
        period = self._buckets[b].total  # one epoch of the bucket: its tokens plus one EOS per piece
        epoch, q = np.divmod(pos, period)
        tok, doc = np.empty_like(pos), np.empty_like(pos)
        for e in np.unique(epoch):  # a tiny bucket can wrap more than once
            m = epoch == e
            tok[m], doc[m] = self._epoch(b, int(e)).gather(self.tokens.tokens, self.tokens.eos_id, q[m])
        return tok, doc

    def batch(self, step: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x, y, doc_ids of shape (batch_size, seq_len) for global step `step`."""
        step, batch_size = _check_int("step", step, 0), _check_int("batch_size", batch_size, 1)
        rows = [self._sequence(step * batch_size + i) for i in range(batch_size)]
        return _to_batch(np.stack([t for t, _ in rows]), np.stack([d for _, d in rows]))

    def bucket_stats(self, n_sequences: int | None = None) -> list[dict]:
        """Per bucket: pool size, configured and effective weight, and (given n_sequences) realized shares.

        Realized share = fraction of the first n_sequences training sequences (equal to the
        token share, every sequence having seq_len+1 tokens); `epochs` = tokens drawn / pool
        tokens (with EOS), i.e. how often that bucket's data repeats.
        """
        labels = self.mixture.labels(self.seq_len)
        counts = None
        if n_sequences is not None:
            n_sequences = _check_int("n_sequences", n_sequences, 1)
            full, r = divmod(n_sequences, self.block)
            counts = full * self.quota.astype(np.int64)
            if r:
                counts = counts + np.bincount(self._block_plan(full)[0][:r], minlength=len(self.quota))
        out = []
        for b, p in enumerate(self._buckets):
            row = {
                "bucket": labels[b],
                "configured": self.mixture.weights[b],
                "effective": float(self.weights[b]),
                "n_docs": int(len(np.unique(p.doc))),
                "n_pieces": int(len(p.length)),
                "n_tokens": int(p.length.sum()),
            }
            if counts is not None:
                row["n_sequences"] = int(counts[b])
                row["realized"] = float(counts[b] / n_sequences)
                row["epochs"] = float(counts[b] * self.seq_len / p.total) if p.total else 0.0
            out.append(row)
        return out


_TAG_COPY = 3


class CopyMixStream:
    """A training stream with a fixed share of synthetic repeated-segment sequences mixed in.

    Why (chapter 2, "toy budget"): small models trained on natural code for a few thousand
    steps never form the induction ("look back and copy") circuit that long-context
    modelling builds on; local n-gram prediction takes the gradient. A sequence made of a
    random segment repeated until the window is full rewards copying by several nats per
    token, and the circuit forms within a few hundred steps (Olsson et al., 2022, "In-context
    learning and induction heads"). Real long-context corpora (books, whole repositories)
    carry such repeats naturally; the toy mixes them in explicitly.

    Sample i of the base stream is replaced when a seeded draw for i falls under `fraction`;
    its segment length is uniform in [min_len, max_len] (max_len <= seq_len // 2, so every
    synthetic sequence holds at least two copies) and its tokens are uniform over the
    vocabulary without `eos_id`. Batches depend only on (seed, step, batch size), so resume
    and branching stay exact. doc_ids of a synthetic row are one id, -1 - i.
    """

    def __init__(self, base, vocab_size: int, eos_id: int, fraction: float, seed: int = 0,
                 min_len: int | None = None, max_len: int | None = None, vocab: int | None = None):
        if not (isinstance(fraction, (int, float)) and 0.0 <= fraction <= 1.0):
            raise ValueError(f"copy fraction={fraction!r} is not allowed; allowed: a number in [0, 1]")
        self.base, self.seq_len, self.seed = base, base.seq_len, seed
        self.vocab_size, self.eos_id, self.fraction = int(vocab_size), int(eos_id), float(fraction)
        self.draw = _check_int("copy vocab", vocab, 2) if vocab is not None else self.vocab_size - 1
        self.max_len = _check_int("max_len", max_len if max_len is not None else self.seq_len // 2, 1)
        self.min_len = _check_int("min_len", min_len if min_len is not None else max(2, self.seq_len // 16), 1)
        if not self.min_len <= self.max_len <= (self.seq_len + 1) // 2:
            raise ValueError(f"copy segment lengths [{self.min_len}, {self.max_len}] not allowed at seq_len "
                             f"{self.seq_len}; allowed: 1 <= min_len <= max_len <= {(self.seq_len + 1) // 2}")

    @property
    def config(self) -> dict:
        return {**self.base.config, "copy_fraction": self.fraction, "copy_len": [self.min_len, self.max_len],
                "copy_seed": self.seed, "copy_vocab": self.draw}

    def is_copy(self, sample: int) -> bool:
        return bool(np.random.default_rng([self.seed, _TAG_COPY, sample]).random() < self.fraction)

    def copy_sequence(self, sample: int) -> np.ndarray:
        """The seq_len+1 tokens of synthetic sample `sample`: one random segment, repeated."""
        rng = np.random.default_rng([self.seed, _TAG_COPY, sample, 1])
        n = int(rng.integers(self.min_len, self.max_len + 1))
        seg = rng.integers(0, self.draw, n)
        seg = seg + (seg >= self.eos_id)  # skip EOS
        return np.resize(seg, self.seq_len + 1)

    def batch(self, step: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The base stream's batch with the synthetic samples of this step substituted."""
        x, y, doc = self.base.batch(step, batch_size)
        if self.fraction == 0:
            return x, y, doc
        for i in range(batch_size):
            sample = step * batch_size + i
            if self.is_copy(sample):
                seq = torch.from_numpy(self.copy_sequence(sample).astype(np.int64))
                x[i], y[i], doc[i] = seq[:-1], seq[1:], -1 - sample
        return x, y, doc

    def __getattr__(self, name):  # bucket_stats, tokens_per_epoch, ... of the base stream
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)
