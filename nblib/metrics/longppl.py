"""LongPPL and ShortPPL (LCCP paper §3.1, §4.1, App. A.1; Fang et al. 2025, PKU-ML/LongPPL).

Two steps, as in the paper ("We precompute token annotations ... and keep them fixed for
every evaluated model", App. A.1):

1. `annotate(ref_model, ref_tokenizer, texts, spec)`: the reference model's full-context
   NLL ℓ_full(x_t) and local-chunk NLL ℓ_chunk(x_t), Δ_t = ℓ_chunk - ℓ_full, and the key
   tokens
       K_long  = {t : ℓ_full < 2, Δ_t > 2}     (§3.1)
       K_short = {t : ℓ_full < 2, Δ_t < 0}     (§4.1)
   stored as merged CHARACTER intervals per document (an `Annotation`, saved as JSON, with
   the per-token ℓ_full and Δ in an .npz next to it).
2. `evaluate(model, tokenizer, texts, annotation)`: retokenize with the evaluated model's
   tokenizer, map the intervals to its tokens (a token counts only if its character span
   lies wholly inside a key interval), and aggregate token-weighted over the whole set:
       LongPPL = exp(sum_{t in K_long} ℓ_M(x_t) / |K_long|)   (App. A.1, not a mean of per-doc PPLs)

Conventions:
- NLL "of token t" = loss of predicting token t from tokens < t, i.e. from the output at
  position t - 1 (the loss index shifts by one). Token 0 has none and is never scored.
- Local chunks follow the reference implementation: windows ids[s : s + trunc_len + W]
  for s = 0, W, 2W, ... < n - trunc_len (the last one cut at n), each scoring only its
  positions >= s + trunc_len. A token t >= trunc_len therefore sees the t - s tokens
  ids[s:t], between trunc_len and trunc_len + W - 1 of them; tokens t < trunc_len are
  never scored and can never be key tokens.
- The first window (s = 0) gives token t exactly its full context, so Δ_t = 0 by
  definition: we copy ℓ_full there instead of recomputing it. (Recomputing, as the
  reference code does, turns Δ into floating-point noise of either sign, and ShortPPL's
  Δ < 0 would pick about half of those tokens at random.)
- Comparisons are strict, as in the paper: ℓ_full == 2, Δ == 2 and Δ == 0 select nothing.
- No key tokens: the metric is NaN and a RuntimeWarning says so; an empty text list raises.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from nblib.budgets import LongPPLSpec
from nblib.store.atomic import atomic_path, atomic_write_json

from .scoring import as_encoder, as_scorer

FORMAT = "nblib-longppl-annotation"
VERSION = 1
SETS = ("long", "short", "all")

# --------------------------------------------------------------------------------------
# Inputs


def _check_texts(texts) -> list[str]:
    if isinstance(texts, str) or not hasattr(texts, "__iter__"):
        raise TypeError(f"texts must be a list of str, got {type(texts).__name__}")
    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty: LongPPL needs at least one document")
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise TypeError(f"texts must all be str; item {bad[0]} is {type(texts[bad[0]]).__name__}")
    return texts


def _check_spec(spec) -> LongPPLSpec:
    if isinstance(spec, dict):
        spec = LongPPLSpec(**spec)
    if not isinstance(spec, LongPPLSpec):
        raise TypeError(f"spec must be a LongPPLSpec (nblib.budgets), got {type(spec).__name__}")
    for name in ("trunc_len", "sliding_window"):
        v = getattr(spec, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"LongPPLSpec.{name} must be an int >= 1, got {v!r}")
    for name in ("full_loss_max", "long_delta_min", "short_delta_max"):
        v = getattr(spec, name)
        if not (isinstance(v, (int, float)) and math.isfinite(v)):
            raise ValueError(f"LongPPLSpec.{name} must be a finite number, got {v!r}")
    return spec


def _check_positive_int(name, v, allow_none=False, minimum=1):
    if v is None and allow_none:
        return
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}{' or None' if allow_none else ''}, got {v!r}")


def hash_texts(texts) -> str:
    """sha256 over the ordered documents (each hashed as UTF-8): identifies a test set."""
    h = hashlib.sha256(str(len(texts)).encode())
    for t in texts:
        h.update(hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest())
    return h.hexdigest()


# --------------------------------------------------------------------------------------
# Token selection and character intervals


def chunk_windows(n_tokens: int, trunc_len: int, sliding_window: int) -> list[tuple[int, int]]:
    """Local-chunk windows (start, end) of the reference implementation (App. A.1).

    start = 0, W, 2W, ... < n - trunc_len; end = min(start + trunc_len + W, n). Window
    (s, e) scores positions s + trunc_len .. e - 1, so positions trunc_len .. n - 1 are each
    scored exactly once and positions < trunc_len never.
    """
    return [(s, min(s + trunc_len + sliding_window, n_tokens))
            for s in range(0, max(n_tokens - trunc_len, 0), sliding_window)]


def select_key_tokens(loss_full, loss_chunk, spec: LongPPLSpec):
    """Key-token masks (LCCP paper §3.1 and §4.1), strict inequalities, NaN selects nothing.

    loss_full, loss_chunk: float arrays of the same shape (per-token ℓ_full, ℓ_chunk).
    Returns (long_mask, short_mask, delta) with delta = loss_chunk - loss_full (float32):
    long = ℓ_full < full_loss_max and Δ > long_delta_min; short = ℓ_full < full_loss_max
    and Δ < short_delta_max.
    """
    spec = _check_spec(spec)
    full = np.asarray(loss_full, dtype=np.float32)
    chunk = np.asarray(loss_chunk, dtype=np.float32)
    if full.shape != chunk.shape:
        raise ValueError(f"loss_full {full.shape} and loss_chunk {chunk.shape} must have the same shape")
    delta = chunk - full
    return (*_masks(full, delta, spec), delta)


def _masks(full, delta, spec):
    with np.errstate(invalid="ignore"):  # NaN (unscored) compares False
        easy = full < spec.full_loss_max
        return easy & (delta > spec.long_delta_min), easy & (delta < spec.short_delta_max)


def merge_intervals(spans) -> np.ndarray:
    """Merge character spans (k, 2) [start, end) into sorted disjoint intervals.

    Empty spans (special tokens) are dropped; touching (end == next start) or overlapping
    spans merge, as the reference implementation's `merge_intervals` does for adjacent
    key tokens.
    """
    s = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    s = s[s[:, 1] > s[:, 0]]
    if len(s) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    s = s[np.lexsort((s[:, 1], s[:, 0]))]
    reach = np.maximum.accumulate(s[:, 1])  # furthest end seen so far
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:, 0] > reach[:-1]
    starts = s[new, 0]
    ends = reach[np.r_[np.flatnonzero(new)[1:] - 1, len(s) - 1]]
    return np.stack([starts, ends], axis=1)


def key_token_positions(offsets, intervals) -> np.ndarray:
    """Tokens of another tokenizer that fall in key intervals (App. A.1 cross-tokenizer map).

    offsets (n, 2): character span per token; intervals (k, 2): sorted disjoint [start, end).
    A token counts iff its span is non-empty and lies wholly inside one interval. Returns
    the token indices, ascending.
    """
    off = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    iv = np.asarray(intervals, dtype=np.int64).reshape(-1, 2)
    if len(off) == 0 or len(iv) == 0:
        return np.zeros(0, dtype=np.int64)
    if np.any(iv[1:, 0] < iv[:-1, 1]) or np.any(iv[:, 1] <= iv[:, 0]):
        raise ValueError("intervals must be non-empty, sorted and disjoint (use merge_intervals)")
    j = np.searchsorted(iv[:, 0], off[:, 0], side="right") - 1  # last interval starting <= token start
    ok = (j >= 0) & (off[:, 1] > off[:, 0])
    ok[ok] = off[ok, 1] <= iv[j[ok], 1]
    return np.flatnonzero(ok)


# --------------------------------------------------------------------------------------
# The annotation


@dataclass
class Annotation:
    """Fixed key-token annotation of one test set by one reference model (App. A.1).

    Per document: n_ref_tokens (reference tokenizer), long/short key intervals (k, 2)
    int64 character [start, end), key-token counts under the reference tokenizer, and,
    when available, loss_full and delta (float32, one entry per position trunc_len .. n-1;
    loss_full[j] is the NLL of token trunc_len + j).
    """

    spec: LongPPLSpec
    texts_hash: str
    reference_id: str
    n_ref_tokens: list[int]
    long_intervals: list[np.ndarray]
    short_intervals: list[np.ndarray]
    n_long_ref: list[int]
    n_short_ref: list[int]
    loss_full: list[np.ndarray] | None = None
    delta: list[np.ndarray] | None = None

    @property
    def n_docs(self) -> int:
        return len(self.n_ref_tokens)

    def intervals(self, which: str) -> list[np.ndarray]:
        """Key intervals per document for which = "long" or "short"."""
        if which not in ("long", "short"):
            raise ValueError(f"which must be 'long' or 'short', got {which!r}")
        return self.long_intervals if which == "long" else self.short_intervals

    def per_token(self) -> dict:
        """Concatenated per-token arrays over the set (for the Δ histogram): loss_full,
        delta, long and short masks (recomputed from the spec), doc index."""
        if self.loss_full is None:
            raise ValueError("this annotation has no per-token arrays (its .npz was not found)")
        full = np.concatenate(self.loss_full) if self.loss_full else np.zeros(0, np.float32)
        delta = np.concatenate(self.delta) if self.delta else np.zeros(0, np.float32)
        long, short = _masks(full, delta, self.spec)
        doc = np.concatenate([np.full(len(x), i) for i, x in enumerate(self.loss_full)]) if self.loss_full else []
        return {"loss_full": full, "delta": delta, "long": long, "short": short, "doc": np.asarray(doc, np.int64)}

    # ---- checks

    def check(self, texts=None, spec=None, reference=None) -> None:
        """Raise ValueError unless texts, spec and reference (a scorer or its identity
        string) match what this annotation was computed on (each check only when given)."""
        if texts is not None:
            texts = _check_texts(texts)
            if len(texts) != self.n_docs:
                raise ValueError(f"annotation covers {self.n_docs} documents, got {len(texts)} texts")
            if hash_texts(texts) != self.texts_hash:
                raise ValueError("texts differ from the ones this annotation was computed on (hash "
                                 f"{hash_texts(texts)[:12]} != {self.texts_hash[:12]}); re-annotate this test set")
        if spec is not None:
            a, b = dataclasses.asdict(_check_spec(spec)), dataclasses.asdict(self.spec)
            if a != b:
                diff = {k: (b[k], a[k]) for k in a if a[k] != b[k]}
                raise ValueError(f"spec differs from the annotation's (field: (annotation, given)): {diff}")
        if reference is not None:
            rid = reference if isinstance(reference, str) else reference.identity
            if rid != self.reference_id:
                raise ValueError(f"reference model {rid!r} is not the one this annotation was computed with "
                                 f"({self.reference_id!r})")

    # ---- persistence

    def save(self, path) -> None:
        """Write the annotation JSON at `path` (atomic) and the per-token arrays next to it
        (same name, .npz), arrays first so the JSON never points at a missing file."""
        path = Path(path)
        if path.suffix != ".json":
            raise ValueError(f"annotation path must end in .json, got {str(path)!r}")
        npz = None
        if self.loss_full is not None:
            npz = path.with_suffix(".npz")
            ptr = np.cumsum([0] + [len(x) for x in self.loss_full]).astype(np.int64)
            with atomic_path(npz) as tmp, open(tmp, "wb") as f:
                np.savez(f, loss_full=np.concatenate(self.loss_full).astype(np.float32),
                         delta=np.concatenate(self.delta).astype(np.float32),
                         doc_ptr=ptr, n_ref_tokens=np.asarray(self.n_ref_tokens, np.int64))
        docs = [{"n_ref_tokens": int(n), "n_long": int(nl), "n_short": int(ns),
                 "long": np.asarray(li).tolist(), "short": np.asarray(si).tolist()}
                for n, nl, ns, li, si in zip(self.n_ref_tokens, self.n_long_ref, self.n_short_ref,
                                             self.long_intervals, self.short_intervals)]
        atomic_write_json(path, {
            "format": FORMAT, "version": VERSION, "spec": dataclasses.asdict(self.spec),
            "texts_hash": self.texts_hash, "reference_id": self.reference_id, "n_docs": self.n_docs,
            "per_token_file": npz.name if npz else None, "docs": docs,
        }, indent=None)

    @classmethod
    def load(cls, path, texts=None, spec=None, reference=None) -> "Annotation":
        """Read an annotation written by `save`; with texts/spec/reference given, check
        that they match (ValueError naming the mismatch)."""
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"annotation file not found: {str(path)!r}")
        obj = json.loads(path.read_text(encoding="utf-8"))
        if obj.get("format") != FORMAT or obj.get("version") != VERSION:
            raise ValueError(f"{str(path)!r} is not a {FORMAT} v{VERSION} file "
                             f"(format={obj.get('format')!r}, version={obj.get('version')!r})")
        docs = obj["docs"]

        def iv(x):
            return np.asarray(x, dtype=np.int64).reshape(-1, 2)

        ann = cls(spec=LongPPLSpec(**obj["spec"]), texts_hash=obj["texts_hash"], reference_id=obj["reference_id"],
                  n_ref_tokens=[d["n_ref_tokens"] for d in docs], long_intervals=[iv(d["long"]) for d in docs],
                  short_intervals=[iv(d["short"]) for d in docs], n_long_ref=[d["n_long"] for d in docs],
                  n_short_ref=[d["n_short"] for d in docs])
        if obj.get("per_token_file") and (path.parent / obj["per_token_file"]).is_file():
            with np.load(path.parent / obj["per_token_file"]) as z:
                ptr = z["doc_ptr"]
                if len(ptr) != ann.n_docs + 1:
                    raise ValueError(f"per-token file {obj['per_token_file']!r} has {len(ptr) - 1} documents, "
                                     f"the annotation {ann.n_docs}")
                ann.loss_full = [z["loss_full"][a:b] for a, b in zip(ptr[:-1], ptr[1:])]
                ann.delta = [z["delta"][a:b] for a, b in zip(ptr[:-1], ptr[1:])]
        ann.check(texts=texts, spec=spec, reference=reference)
        return ann


# --------------------------------------------------------------------------------------
# Batched scoring


def _score_batched(scorer, seqs, max_items, max_tokens=None):
    """NLL at chosen positions of many sequences, several per forward pass.

    seqs: list of (ids (L,), positions (K,)). Sequences are sorted by length (longest
    first) and grouped into right-padded batches of at most max_items sequences and
    max_tokens padded tokens (always at least one). Right padding cannot change a causal
    model's outputs at earlier positions. Returns one float32 array (K,) per sequence.
    """
    out = [np.zeros(0, np.float32) for _ in seqs]
    order = sorted((i for i, (_, p) in enumerate(seqs) if len(p)), key=lambda i: -len(seqs[i][0]))
    i = 0
    while i < len(order):
        L = len(seqs[order[i]][0])
        j = i + 1
        while j < len(order) and j - i < max_items and (max_tokens is None or (j - i + 1) * L <= max_tokens):
            j += 1
        batch = order[i:j]
        K = max(len(seqs[b][1]) for b in batch)
        ids = torch.zeros((len(batch), L), dtype=torch.long)  # pad id 0: any valid id
        pos = torch.full((len(batch), K), -1, dtype=torch.long)
        for r, b in enumerate(batch):
            x, p = seqs[b]
            ids[r, :len(x)] = torch.from_numpy(np.asarray(x, dtype=np.int64))
            pos[r, :len(p)] = torch.from_numpy(np.asarray(p, dtype=np.int64))
        nll = scorer.nll(ids, pos)
        for r, b in enumerate(batch):
            out[b] = nll[r, :len(seqs[b][1])].numpy().astype(np.float32)
        i = j
    return out


# --------------------------------------------------------------------------------------
# Step 1: annotate


def annotate(ref_model, ref_tokenizer, texts, spec, batch_size=8, docs_per_group=256) -> Annotation:
    """Key tokens of a test set under a reference model (LCCP paper §3.1, §4.1, App. A.1).

    ref_model/ref_tokenizer: anything `as_scorer` takes (an nblib model + tokenizer, a
    transformers model + fast tokenizer, a model folder path + None, or a scorer + None).
    ℓ_full(x_t): one full-context pass per document; ℓ_chunk(x_t): the reference
    implementation's windows (`chunk_windows`). Both score only positions >= trunc_len.
    batch_size: windows per forward pass; the full-context pass groups documents under the
    same token budget (batch_size * (trunc_len + sliding_window) tokens, at least one).
    Documents are tokenized and scored docs_per_group at a time, which bounds host memory.
    """
    texts, spec = _check_texts(texts), _check_spec(spec)
    _check_positive_int("batch_size", batch_size)
    _check_positive_int("docs_per_group", docs_per_group)
    scorer = as_scorer(ref_model, ref_tokenizer)
    parts = [_annotate_group(scorer, texts[i:i + docs_per_group], spec, batch_size)
             for i in range(0, len(texts), docs_per_group)]
    cols = {k: [x for p in parts for x in p[k]] for k in parts[0]}
    return Annotation(spec=spec, texts_hash=hash_texts(texts), reference_id=scorer.identity, **cols)


def _annotate_group(scorer, texts, spec, batch_size) -> dict:
    T, W = spec.trunc_len, spec.sliding_window
    encs = [scorer.encode_with_offsets(t) for t in texts]
    budget = batch_size * (T + W)

    # full context: NLL of tokens T .. n-1 of each document
    full = _score_batched(scorer, [(ids, np.arange(T, len(ids))) for ids, _ in encs], batch_size, budget)

    # local chunks; window s = 0 has the full context, so its Δ is 0 by definition (module doc)
    seqs, where = [], []
    for d, (ids, _) in enumerate(encs):
        for s, e in chunk_windows(len(ids), T, W):
            if s > 0:
                seqs.append((ids[s:e], np.arange(T, e - s)))
                where.append((d, s, e))
    local = _score_batched(scorer, seqs, batch_size, budget)
    chunk = [f.copy() for f in full]  # positions of window 0 keep ℓ_full
    for (d, s, e), vals in zip(where, local):
        chunk[d][s:e - T] = vals  # positions s+T .. e-1 sit at index s .. e-T-1

    out = {k: [] for k in ("n_ref_tokens", "long_intervals", "short_intervals", "n_long_ref", "n_short_ref",
                           "loss_full", "delta")}
    for (ids, off), f, c in zip(encs, full, chunk):
        long, short, delta = select_key_tokens(f, c, spec)
        out["n_ref_tokens"].append(len(ids))
        out["long_intervals"].append(merge_intervals(off[T + np.flatnonzero(long)]))
        out["short_intervals"].append(merge_intervals(off[T + np.flatnonzero(short)]))
        out["n_long_ref"].append(int(long.sum()))
        out["n_short_ref"].append(int(short.sum()))
        out["loss_full"].append(f.astype(np.float32))
        out["delta"].append(delta)
    return out


def load_or_annotate(path, ref_model, ref_tokenizer, texts, spec, batch_size=8) -> Annotation:
    """Annotate once per test set: load `path` if it exists (checking texts, spec and
    reference model; ValueError on a mismatch), else `annotate` and save it there."""
    texts, spec = _check_texts(texts), _check_spec(spec)
    scorer = as_scorer(ref_model, ref_tokenizer)
    if Path(path).exists():
        return Annotation.load(path, texts=texts, spec=spec, reference=scorer)
    ann = annotate(scorer, None, texts, spec, batch_size=batch_size)
    ann.save(path)
    return ann


# --------------------------------------------------------------------------------------
# Step 2: evaluate any model


def _mapped_positions(offsets, intervals):
    """Key positions of one document for the evaluated tokenizer; token 0 has no NLL."""
    pos = key_token_positions(offsets, intervals)
    return pos[pos >= 1]


def _ppl(nll_sum, n, name):
    if n == 0:
        warnings.warn(f"no {name} tokens in the evaluated set: {name}_ppl is NaN", RuntimeWarning, stacklevel=3)
        return float("nan")
    return math.exp(nll_sum / n)


def evaluate(model, tokenizer, texts, annotation: Annotation, max_len=None, batch_size=8,
             sets=("long", "short")) -> dict:
    """LongPPL and ShortPPL of any model on an annotated test set (LCCP paper §3.1, §4.1, App. A.1).

    Each text is retokenized with the evaluated tokenizer, truncated to max_len tokens, its
    key intervals mapped to tokens (`key_token_positions`; token 0 excluded), and the model's
    full-context NLL is computed at those positions only (batch_size documents per forward).
    Token-weighted over the whole set: long_ppl = exp(nll_long_sum / n_long). sets may add
    "all" (plain PPL over tokens 1..n-1: ppl, n_all, nll_all_sum). A set with no tokens
    gives NaN with a RuntimeWarning. Returns long_ppl, short_ppl, n_long, n_short,
    nll_long_sum, nll_short_sum, n_tokens (evaluated tokens after truncation), n_docs.
    """
    texts = _check_texts(texts)
    if not isinstance(annotation, Annotation):
        raise TypeError(f"annotation must be an Annotation, got {type(annotation).__name__}")
    annotation.check(texts=texts)
    _check_positive_int("max_len", max_len, allow_none=True, minimum=2)
    _check_positive_int("batch_size", batch_size)
    sets = tuple(sets)
    if not sets or any(s not in SETS for s in sets):
        raise ValueError(f"sets must be a non-empty subset of {SETS}, got {sets!r}")
    scorer = as_scorer(model, tokenizer)

    seqs, per_doc, n_tokens = [], [], 0
    for d, text in enumerate(texts):
        ids, off = scorer.encode_with_offsets(text)
        ids, off = ids[:max_len], off[:max_len]
        n_tokens += len(ids)
        pos = {s: np.arange(1, len(ids)) if s == "all" else _mapped_positions(off, annotation.intervals(s)[d])
               for s in sets}
        union = np.unique(np.concatenate(list(pos.values()))).astype(np.int64)
        seqs.append((ids, union))
        per_doc.append({s: np.searchsorted(union, p) for s, p in pos.items()})
    nll = _score_batched(scorer, seqs, batch_size)

    out = {"n_tokens": int(n_tokens), "n_docs": len(texts)}
    for s in sets:
        vals = [v[idx[s]].astype(np.float64) for v, idx in zip(nll, per_doc)]
        total, n = float(sum(v.sum() for v in vals)), int(sum(len(v) for v in vals))
        out[f"nll_{s}_sum"], out[f"n_{s}"] = total, n
        out["ppl" if s == "all" else f"{s}_ppl"] = _ppl(total, n, s)
    return out


def tail_nll(model, tokenizer, texts, start: int, max_len=None, batch_size=8) -> float:
    """Mean NLL of every token at positions [start, max_len) of the texts under any scorer
    (a model with its tokenizer, or a reference scorer with its cache model; `as_scorer`):
    how well a model predicts what lies beyond a local chunk of `start` tokens."""
    texts = _check_texts(texts)
    _check_positive_int("start", start)
    scorer = as_scorer(model, tokenizer)
    seqs = []
    for text in texts:
        ids, _ = scorer.encode_with_offsets(text)
        ids = ids[:max_len]
        if len(ids) > start:
            seqs.append((ids, np.arange(start, len(ids))))
    if not seqs:
        raise ValueError(f"no text is longer than start={start} tokens")
    nll = _score_batched(scorer, seqs, batch_size)
    return float(sum(v.astype(np.float64).sum() for v in nll) / sum(len(v) for v in nll))


def long_ppl(model, tokenizer, texts, annotation, max_len=None, batch_size=8) -> float:
    """LongPPL (LCCP paper §3.1): exp of the mean NLL over all long key tokens of the set."""
    return evaluate(model, tokenizer, texts, annotation, max_len, batch_size, sets=("long",))["long_ppl"]


def short_ppl(model, tokenizer, texts, annotation, max_len=None, batch_size=8) -> float:
    """ShortPPL (LCCP paper §4.1): exp of the mean NLL over all short key tokens of the set."""
    return evaluate(model, tokenizer, texts, annotation, max_len, batch_size, sets=("short",))["short_ppl"]


# --------------------------------------------------------------------------------------
# Table 2: test-set statistics


def _describe(x) -> dict:
    a = np.asarray(x, dtype=np.float64)
    return {"mean": float(a.mean()), "median": float(np.median(a)), "min": int(a.min()), "max": int(a.max())}


def testset_stats(annotation: Annotation, texts=None, tokenizer=None, max_len=None) -> dict:
    """Statistics of the PPL test set, as in the LCCP paper Table 2 (App. A.1).

    Document length is under the reference tokenizer. The token and key-token rows use the
    evaluated tokenizer after truncation at max_len when `tokenizer` (and texts) are
    given, as the paper does; otherwise the reference tokenizer's own counts.
    """
    ref = annotation.n_ref_tokens
    stats = {"n_docs": annotation.n_docs, "ref_length": _describe(ref)}
    if tokenizer is None:
        n_tok, n_long, n_short = int(sum(ref)), int(sum(annotation.n_long_ref)), int(sum(annotation.n_short_ref))
        stats["counted_with"] = "reference tokenizer"
    else:
        if texts is None:
            raise ValueError("testset_stats with a tokenizer needs the texts to retokenize")
        texts = _check_texts(texts)
        annotation.check(texts=texts)
        _check_positive_int("max_len", max_len, allow_none=True, minimum=2)
        enc = as_encoder(tokenizer)
        lengths, n_long, n_short = [], 0, 0
        for d, text in enumerate(texts):
            _, off = enc(text)
            off = off[:max_len]
            lengths.append(len(off))
            n_long += len(_mapped_positions(off, annotation.long_intervals[d]))
            n_short += len(_mapped_positions(off, annotation.short_intervals[d]))
        n_tok = int(sum(lengths))
        stats["counted_with"] = "evaluated tokenizer" + (f", truncated at {max_len}" if max_len else "")
        stats["eval_length"] = _describe(lengths)
        if max_len:
            stats["n_at_max_len"] = int(sum(n == max_len for n in lengths))
    stats.update(n_tokens=n_tok, n_long=n_long, n_short=n_short,
                 pct_long=100.0 * n_long / n_tok if n_tok else float("nan"),
                 pct_short=100.0 * n_short / n_tok if n_tok else float("nan"))
    return stats


testset_stats.__test__ = False  # a name pytest would otherwise collect


def format_testset_stats(stats: dict) -> str:
    """A markdown table of `testset_stats` in Table 2's layout (print it in a chapter)."""
    r = stats["ref_length"]
    rows = [("Documents", f"{stats['n_docs']:,}"),
            ("Length (reference tokenizer), mean / median", f"{r['mean']:,.0f} / {r['median']:,.0f}"),
            ("Length (reference tokenizer), min / max", f"{r['min']:,} / {r['max']:,}")]
    if "eval_length" in stats:
        e = stats["eval_length"]
        rows.append(("Length (evaluated tokenizer), mean / median", f"{e['mean']:,.0f} / {e['median']:,.0f}"))
    if "n_at_max_len" in stats:
        rows.append(("Sequences at the length cap", f"{stats['n_at_max_len']:,}"))
    rows += [(f"Evaluated tokens ({stats['counted_with']})", f"{stats['n_tokens']:,}"),
             ("Long key tokens", f"{stats['n_long']:,} ({stats['pct_long']:.2f}%)"),
             ("Short key tokens", f"{stats['n_short']:,} ({stats['pct_short']:.2f}%)")]
    return "\n".join(["| Statistic | Value |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows])
