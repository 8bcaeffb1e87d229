"""Data layer: corpora, tokenizers, memory-mapped token shards, deterministic training streams.

    corpus = load_corpus("python-stdlib")             # Corpus(name, docs, identity)
    tok = load_tokenizer("byte")                       # or "hf:/path/tokenizer.json"
    train = tokenize_corpus(corpus, tok, "train")      # TokenDocs over np.memmap, cached
    x, y, doc_ids = PackedStream(train, 256, seed=0).batch(step, batch_size)
    x, y, doc_ids = LongMixtureStream(train, 2048, 0, LengthMixture.lccp_32k()).batch(step, batch_size)
    x, y, doc_ids = SFTPackedStream(read_sft_file(path, sha), 2048, seed=0).batch(step, batch_size)  # SFT
    test = build_test_set(corpus, tok, target_len=2048, n_docs=50)

May import nblib.store (atomic writes, the repository root) and nblib.cli; nothing that trains.
"""

from contextvars import ContextVar

import numpy as np

from nblib.data.corpus import (
    Corpus,
    Document,
    find_manifest,
    in_eval_split,
    load_corpus,
    load_jsonl,
    load_txt_folder,
    python_stdlib_corpus,
    split_documents,
    split_fraction,
    stdlib_files,
    write_stdlib_manifest,
)
from nblib.data.sft import (SFTExamples, SFTFileError, SFTPackedStream, file_sha256, read_sft_file, read_sft_info,
                            resolve_sft_path, write_sft_file)
from nblib.data.shards import TokenDocs, cache_dir, tokenize_corpus
from nblib.data.streams import (CopyMixStream, DocStartStream, LengthMixture, LongMixtureStream, PackedStream,
                                segment_spans)
from nblib.data.testset import TestSet, build_test_set, truncate_text
from nblib.data.tokenizers import ByteTokenizer, HFTokenizer, load_tokenizer

__all__ = [
    "ByteTokenizer", "CopyMixStream", "Corpus", "DocStartStream", "Document", "HFTokenizer", "LengthMixture", "LongMixtureStream", "PackedStream",
    "SFTExamples", "SFTFileError", "SFTPackedStream", "TestSet", "TokenDocs", "build_test_set", "cache_dir",
    "find_manifest", "in_eval_split", "load_corpus",
    "load_jsonl", "load_tokenizer", "load_txt_folder", "python_stdlib_corpus", "segment_spans",
    "split_documents", "split_fraction", "stdlib_files", "tokenize_corpus", "truncate_text",
    "write_stdlib_manifest", "file_sha256", "read_sft_file", "read_sft_info", "resolve_sft_path", "write_sft_file",
    "sft_stream",
]


_CORPORA: dict = {}
_TOKENIZERS: dict = {}
# Set while a budget is counted whose corpus may not be here (nblib.lccp.grid.placeholder_corpus,
# `make plan`): the identity every config names instead of the corpus' content hash. Configs
# built then (the grid's, Models A and B's, the fine-tunes') do not hash as the run store's.
CORPUS_PLACEHOLDER: ContextVar[str | None] = ContextVar("corpus_placeholder", default=None)


def get_corpus(spec: str) -> Corpus:
    """load_corpus(spec), cached per process (the grid builds many configs from one corpus)."""
    if spec not in _CORPORA:
        _CORPORA[spec] = load_corpus(spec)
    return _CORPORA[spec]


def corpus_identity(spec: str) -> str:
    """Content hash of a corpus: part of every run's identity, so results name their data
    (`CORPUS_PLACEHOLDER` instead, while it is set)."""
    if CORPUS_PLACEHOLDER.get():
        return CORPUS_PLACEHOLDER.get()
    try:
        return get_corpus(spec).identity
    except (FileNotFoundError, ValueError) as e:
        raise ValueError(f"cannot load corpus {spec!r} ({e}); the full budget trains on your own LCCP corpus "
                         f"(README, 'GPU install and the full budget')") from e


def get_tokenizer(spec: str):
    """load_tokenizer(spec), cached per process."""
    if spec not in _TOKENIZERS:
        _TOKENIZERS[spec] = load_tokenizer(spec)
    return _TOKENIZERS[spec]


MIXTURES = {"lccp_32k": LengthMixture.lccp_32k, "extension_128k": LengthMixture.extension_128k}
NATURAL = {"natural": LengthMixture.lccp_32k, "natural_128k": LengthMixture.extension_128k}


def natural_mixture(tokens, seq_len: int, like: LengthMixture) -> LengthMixture:
    """Table 9's buckets with each bucket weighted by its share of the corpus' tokens.

    For corpora whose short documents are few (the Python stdlib: 79 files under 128 bytes,
    0.02% of its bytes), Table 9's 52.57% on short documents would repeat a few kilobytes
    thousands of times. The natural mixture samples every piece equally often instead,
    and still reports Table 9's buckets (`bucket_stats`).
    """
    b = like.bucket_of(tokens.lengths, seq_len)
    mass = np.bincount(b, weights=tokens.lengths, minlength=len(like.weights)).astype(float)
    return LengthMixture(like.edges, tuple(mass + 1e-12), f"natural({like.name})")


def make_stream(data: dict, seed: int):
    """The training stream a run config's `data` section describes (nblib.store.runstore.RunConfig).

    data: {"corpus": spec, "tokenizer": spec, "split": "train",
           "stream": "packed" | "long_mixture" | "doc_starts" | "sft",
           "seq_len": T, "mixture": "lccp_32k" | "extension_128k" | "natural" | "natural_128k"
           (long_mixture only), "aligned": True (long_mixture only: a long document's segments are
           sequences of their own, LongMixtureStream), "copy_fraction": f (optional, CopyMixStream),
           "sft_file": path, "sft_sha256": hex (sft only: the example file and its hash), ...}
    """
    if data["stream"] == "sft":
        if data.get("copy_fraction"):
            raise ValueError("copy_fraction is not allowed with stream 'sft' (synthetic copy rows carry no answer)")
        return sft_stream(data, seed)
    stream = _base_stream(data, seed)
    frac = data.get("copy_fraction", 0.0)
    if not frac:
        return stream
    tok = get_tokenizer(data["tokenizer"])
    lo, hi = data.get("copy_len", (None, None))
    return CopyMixStream(stream, tok.vocab_size, tok.eos_id, frac, seed, min_len=lo, max_len=hi,
                         vocab=data.get("copy_vocab"))


def sft_stream(data: dict, seed: int) -> SFTPackedStream:
    """The SFT stream of a run config (LCCP paper §5.3, App. A.4): the example file
    data["sft_file"] (relative paths under `cache_dir()`), checked against data["sft_sha256"]
    and against the config's tokenizer, packed into rows of data["seq_len"] + 1 tokens."""
    path = resolve_sft_path(data["sft_file"], cache_dir())
    examples = read_sft_file(path, data["sft_sha256"])
    tok = get_tokenizer(data["tokenizer"])
    made_by = examples.tokenizer
    vocab_ok = examples.vocab_size <= tok.vocab_size
    if (made_by and made_by != tok.tokenizer_id) or examples.eos_id != tok.eos_id or not vocab_ok:
        raise SFTFileError(f"SFT example file {path} was tokenized by {made_by!r} (eos {examples.eos_id}, vocabulary "
                           f"{examples.vocab_size}) but the run config's tokenizer {data['tokenizer']!r} is "
                           f"{tok.tokenizer_id!r} (eos {tok.eos_id}, vocabulary {tok.vocab_size})")
    return SFTPackedStream(examples, int(data["seq_len"]), seed=seed)


def _base_stream(data: dict, seed: int):
    corpus = get_corpus(data["corpus"])
    if data.get("corpus_id") and data["corpus_id"] != corpus.identity:
        raise ValueError(f"corpus {data['corpus']!r} has identity {corpus.identity[:16]} but the run config "
                         f"expects {data['corpus_id'][:16]}: the corpus changed since the config was made")
    tokens = tokenize_corpus(corpus, get_tokenizer(data["tokenizer"]), split=data.get("split", "train"))
    kind = data["stream"]
    if kind == "packed":
        return PackedStream(tokens, int(data["seq_len"]), seed=seed)
    if kind == "doc_starts":
        return DocStartStream(tokens, int(data["seq_len"]), seed=seed)
    if kind == "long_mixture":
        name, T, aligned = data.get("mixture", "lccp_32k"), int(data["seq_len"]), bool(data.get("aligned", False))
        if name in NATURAL:
            return LongMixtureStream(tokens, T, seed=seed, mixture=natural_mixture(tokens, T, NATURAL[name]()),
                                     aligned=aligned)
        if name not in MIXTURES:
            raise ValueError(f"mixture {name!r}; allowed: {', '.join([*MIXTURES, *NATURAL])}")
        return LongMixtureStream(tokens, T, seed=seed, mixture=MIXTURES[name](), aligned=aligned)
    raise ValueError(f"stream {kind!r}; allowed: packed, long_mixture, doc_starts, sft")
