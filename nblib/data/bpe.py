"""A small byte-level BPE trained on a corpus's train split with Hugging Face `tokenizers`.

Why the toy budget uses it (chapter 2, "toy budget"): at byte level a 256-token context
holds 256 characters of code, a few lines; a 1,024-entry BPE holds about 2.6 characters a
token, so the same context spans about 660 characters and the loss per token carries more
information. The trained `tokenizer.json` is pinned in `data/tokenizers/` like the corpus
manifest, so every machine tokenizes identically; `python -m nblib.data.bpe` retrains it and
tests/test_data.py checks that retraining reproduces the pinned file.

Spec: "bpe:<name>" loads `data/tokenizers/<name>.json` (e.g. "bpe:stdlib-1024").
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from nblib.cli import run_cli
from nblib.data.corpus import Corpus, load_corpus, split_documents
from nblib.store.atomic import atomic_write_text
from nblib.store.provenance import REPO_ROOT

TOKENIZER_DIR = REPO_ROOT / "data" / "tokenizers"
EOS_TOKEN = "<|endoftext|>"


def train_bpe(corpus: Corpus, vocab_size: int, split: str = "train", eval_fraction: float = 0.1) -> str:
    """tokenizer.json text of a byte-level BPE (GPT-2 pre-tokenisation) with `vocab_size`
    entries, EOS included, trained on one split of `corpus` in document-id order."""
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < 257 + 1:
        raise ValueError(f"vocab_size={vocab_size!r} is not allowed; allowed: an int >= 258 "
                         f"(256 byte symbols, EOS and at least one merge)")
    docs = sorted(split_documents(corpus.docs, split, eval_fraction), key=lambda d: d.id)
    if not docs:
        raise ValueError(f"corpus {corpus.name!r} has no {split!r} documents to train a BPE on")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS_TOKEN], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator((d.text for d in docs), trainer=trainer, length=len(docs))
    return json.dumps(json.loads(tok.to_str()), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def bpe_path(name: str) -> Path:
    """Path of the pinned tokenizer "bpe:<name>"."""
    path = TOKENIZER_DIR / f"{name}.json"
    if not path.is_file():
        have = sorted(p.stem for p in TOKENIZER_DIR.glob("*.json"))
        raise ValueError(f"tokenizer 'bpe:{name}' not found at {path}; allowed: "
                         f"{', '.join('bpe:' + h for h in have) or '(none pinned)'}; "
                         f"train one with `python -m nblib.data.bpe NAME --vocab-size V`")
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m nblib.data.bpe", description=__doc__.splitlines()[0])
    p.add_argument("name", help="output name: data/tokenizers/NAME.json")
    p.add_argument("--vocab-size", type=int, default=1024)
    p.add_argument("--corpus", default="python-stdlib")
    a = p.parse_args(argv)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", a.name):
        raise ValueError(f"name={a.name!r} is not allowed; allowed: letters, digits, '.', '_', '-' (a file name)")
    text = train_bpe(load_corpus(a.corpus), a.vocab_size)
    out = TOKENIZER_DIR / f"{a.name}.json"
    atomic_write_text(out, text)
    print(f"wrote {out} ({a.vocab_size} entries, {len(text):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
