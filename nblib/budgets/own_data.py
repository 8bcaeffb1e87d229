"""A budget on a user's own data: the toy's BPE retrained on their corpus, and every model's
vocabulary following the tokenizer it reads.

The toy tokenizes with a 1,024-entry byte-level BPE trained on the Python standard library
(nblib.data.bpe, pinned in data/tokenizers/; chapter 2 says why). A budget whose corpus is
not its base's but whose tokenizer is still the base's pinned BPE gets the same BPE (same
trainer, same vocabulary size) trained on its own corpus's train split instead, pinned in
the run store as `tokenizers/bpe<V>-<corpus hash>.json` and read from there by every later
chapter: its runs name that file as their tokenizer, so their hashes say which BPE they
used. Models A and B (`pair`) are treated the same way with their own corpus and tokenizer.

A model's `vocab_size` is the size of the tokenizer it reads whenever that tokenizer is not
the base budget's (an `hf:` tokenizer.json, or the retrained BPE): the LCCP scales and the
trained LongPPL reference follow `tokenizer`, Models A and B follow `pair.tokenizer`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from nblib.budgets import Budget, get_budget
from nblib.data import get_corpus, get_tokenizer
from nblib.data.bpe import train_bpe
from nblib.store.atomic import atomic_write_text

TOKENIZER_FOLDER = "tokenizers"  # under the run store's root


def retrained_bpe(b: Budget) -> list[str]:
    """The tokenizer fields ("tokenizer", "pair.tokenizer") that keep the base budget's
    pinned BPE ("bpe:<name>") while their corpus is another one: those are retrained on it."""
    base = get_budget(b.name)
    out = []
    if b.tokenizer == base.tokenizer and b.tokenizer.startswith("bpe:") and b.corpus != base.corpus:
        out.append("tokenizer")
    if b.pair is not None and base.pair is not None and b.pair.tokenizer == base.pair.tokenizer \
            and b.pair.tokenizer.startswith("bpe:") and b.pair.corpus != base.pair.corpus:
        out.append("pair.tokenizer")
    return out


def pinned_bpe(corpus_spec: str, vocab_size: int, folder: str | Path) -> Path:
    """A byte-level BPE of `vocab_size` entries trained on the train split of `corpus_spec`
    (nblib.data.bpe.train_bpe), pinned at `folder/bpe<V>-<corpus hash>.json`: trained the
    first time, read every time after (the corpus' content hash names it, so a changed
    corpus gets a new one)."""
    corpus = get_corpus(corpus_spec)
    path = Path(folder) / f"bpe{vocab_size}-{corpus.identity[:16]}.json"
    if not path.is_file():
        print(f"[nblib] training a {vocab_size}-entry BPE on {corpus_spec} ({len(corpus)} documents), "
              f"pinned at {path}", flush=True)
        atomic_write_text(path, train_bpe(corpus, vocab_size))
    return path


def _vocab(model: dict, v: int) -> dict:
    return {**model, "vocab_size": v}


def follow_vocab(b: Budget) -> Budget:
    """`b` with every model's vocab_size set to the size of the tokenizer it reads, where
    that tokenizer is not the base budget's and can be read here (else `b` as it is)."""
    base = get_budget(b.name)
    if b.tokenizer != base.tokenizer and (v := _size(b.tokenizer)) is not None:
        scales = {s: replace(spec, model=_vocab(spec.model, v)) for s, spec in b.scales.items()}
        ref = b.reference
        if ref["kind"] == "nblib":
            ref = {**ref, "model": _vocab(ref["model"], v)}
        b = replace(b, scales=scales, reference=ref)
    if b.pair is not None and base.pair is not None and b.pair.tokenizer != base.pair.tokenizer \
            and (v := _size(b.pair.tokenizer)) is not None:
        b = replace(b, pair=replace(b.pair, model_a=_vocab(b.pair.model_a, v), model_b=_vocab(b.pair.model_b, v)))
    return b


def _size(spec: str) -> int | None:
    try:
        return get_tokenizer(spec).vocab_size
    except (ValueError, OSError):  # not here yet: `make plan` lists it as missing
        return None


def own_data(b: Budget, store_root: str | Path | None = None) -> Budget:
    """The budget a chapter runs: the base's BPE retrained on the budget's own corpus and
    pinned under `store_root` (`retrained_bpe`; skipped when store_root is None, as the plan
    does, which trains nothing), then the vocabularies following the tokenizers."""
    if store_root is not None:
        folder = Path(store_root) / TOKENIZER_FOLDER
        for field in retrained_bpe(b):
            if field == "tokenizer":
                path = pinned_bpe(b.corpus, get_tokenizer(b.tokenizer).vocab_size, folder)
                b = replace(b, tokenizer=f"hf:{path}")
            else:
                path = pinned_bpe(b.pair.corpus, get_tokenizer(b.pair.tokenizer).vocab_size, folder)
                b = replace(b, pair=replace(b.pair, tokenizer=f"hf:{path}"))
    return follow_vocab(b)
