"""Packed supervised fine-tuning data (LCCP paper §5.3, App. A.3-A.4): instruction examples
with the loss on the answer only, packed into fixed-length rows with attention kept inside
each example ("span-based attention to isolate packed documents").

    examples = SFTExamples.from_pairs([(prompt_ids, answer_ids), ...], eos_id=0, vocab_size=1024)
    write_sft_file(path, examples)                       # atomic safetensors; returns its sha256
    examples = read_sft_file(path, sha256=expected)      # a changed or corrupt file raises SFTFileError
    x, y, doc_ids = SFTPackedStream(examples, seq_len=256, seed=0).batch(step, batch_size)

An example is its prompt tokens, its answer tokens and one EOS closing the answer; `y` is
-100 everywhere except on the answer tokens and that EOS, so the trainer's cross-entropy
(`ignore_index=-100`, nblib.models.base) is the mean loss over answer tokens only (App. A.4:
"The loss is computed only on assistant turns").

Packing. Each epoch orders the examples by a permutation seeded by (seed, epoch) and places
them greedily, in that order, into rows of seq_len+1 tokens: an example goes into the open
row whose free space fits it most tightly (best fit), or opens a new row. A row never splits
an example; its unused tail is padding (EOS tokens, label -100, doc id -1). Rows keep the
order in which they were opened. Sample i of the stream is row i of the concatenated epochs,
so the batch at step s depends only on (file, seq_len, seed, s, batch size): resume and
branching are exact, as for the other streams (nblib.data.streams). Every row holds at least
one example and every example at least two supervised targets (an answer token and its EOS),
so no micro-batch has an empty loss.

doc_ids: an example's id is its index in the file, padding is -1, so adjacent spans always
differ and a model given doc_ids (doc_isolation in the run config) restarts positions at
each example and never attends across one (nblib.models.layers.doc_positions).

Too-long examples are REJECTED, not truncated: the paper filters instruction-form examples
longer than the target length "to preserve their supervision structure" (App. A.4). An
example needs len(prompt) + len(answer) + 1 <= seq_len + 1 tokens; the file builder
(nblib.lccp.sft) drops longer ones, and the stream refuses a file holding one, naming it.

File format (safetensors, written atomically with sorted metadata, so the same examples
give the same bytes and the same sha256): tensors `tokens` (int32, prompt+answer of every
example back to back, no EOS), `offsets` (int64, n+1), `prompt_len` (int64, n), `family`
(int64, n: index into the metadata's family names); metadata `format`, `tokenizer`,
`eos_id`, `vocab_size`, `families` (JSON list) and `info` (JSON, how it was built).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.numpy import load_file

from nblib.store.atomic import atomic_save_safetensors

FORMAT = "nblib-sft/1"
IGNORE = -100  # label of every position that is not an answer token (F.cross_entropy's ignore_index)
PAD_DOC = -1  # doc id of padding
_TAG_SFT = 5  # keeps this stream's seeded RNG apart from nblib.data.streams' tags


class SFTFileError(ValueError):
    """An SFT example file that is missing, empty, corrupt or not the one the run config names."""


@dataclass
class SFTExamples:
    """Tokenized instruction examples: prompt + answer of example i is
    tokens[offsets[i]:offsets[i+1]], of which the first prompt_len[i] are the prompt."""

    tokens: np.ndarray  # (n_tokens,) int
    offsets: np.ndarray  # (n + 1,) int64
    prompt_len: np.ndarray  # (n,) int64, >= 1
    eos_id: int
    vocab_size: int
    tokenizer: str = ""  # tokenizer_id of the tokenizer that made the tokens
    family: np.ndarray | None = None  # (n,) int64 index into `families`
    families: list = field(default_factory=list)
    info: dict = field(default_factory=dict)
    name: str = "examples"  # for error messages: the file path

    def __post_init__(self):
        self.tokens = np.asarray(self.tokens).reshape(-1)
        self.offsets = np.asarray(self.offsets, dtype=np.int64).reshape(-1)
        self.prompt_len = np.asarray(self.prompt_len, dtype=np.int64).reshape(-1)
        n = len(self.prompt_len)
        self.family = (np.zeros(n, np.int64) if self.family is None
                       else np.asarray(self.family, dtype=np.int64).reshape(-1))
        if not self.families:
            self.families = ["examples"]
        bad = self._problem()
        if bad:
            raise SFTFileError(f"SFT examples {self.name}: {bad}")

    def _problem(self) -> str | None:
        n, off = len(self.prompt_len), self.offsets
        if n == 0:
            return "holds no examples (an SFT stream needs at least one)"
        if len(off) != n + 1 or off[0] != 0 or off[-1] != len(self.tokens) or np.any(np.diff(off) < 0):
            return (f"offsets must have n+1 = {n + 1} entries, start at 0, be non-decreasing and end at "
                    f"{len(self.tokens)} (the token count)")
        lens = np.diff(off)
        i = np.flatnonzero((self.prompt_len < 1) | (self.prompt_len >= lens))
        if len(i):
            return (f"example {int(i[0])} has a prompt of {int(self.prompt_len[i[0]])} tokens and "
                    f"{int(lens[i[0]] - self.prompt_len[i[0]])} answer tokens; every example needs a prompt and an "
                    f"answer of at least one token each")
        if len(self.family) != n or (n and (self.family.min() < 0 or self.family.max() >= len(self.families))):
            return f"family indices must be n = {n} values in [0, {len(self.families)})"
        if len(self.tokens) and (int(self.tokens.min()) < 0 or int(self.tokens.max()) >= self.vocab_size):
            return (f"token ids must lie in [0, {self.vocab_size}) (the tokenizer's vocabulary), got "
                    f"[{int(self.tokens.min())}, {int(self.tokens.max())}]")
        if not 0 <= self.eos_id < self.vocab_size:
            return f"eos_id {self.eos_id} is outside the vocabulary [0, {self.vocab_size})"
        return None

    @classmethod
    def from_pairs(cls, pairs, eos_id: int, vocab_size: int, tokenizer: str = "", family=None,
                   families=None, info=None, name: str = "examples") -> "SFTExamples":
        """From a list of (prompt ids, answer ids): 1-D integer sequences, EOS not included."""
        prompts = [np.asarray(p, dtype=np.int64).reshape(-1) for p, _ in pairs]
        answers = [np.asarray(a, dtype=np.int64).reshape(-1) for _, a in pairs]
        lens = np.array([len(p) + len(a) for p, a in zip(prompts, answers)], dtype=np.int64)
        flat = np.concatenate([np.concatenate([p, a]) for p, a in zip(prompts, answers)]) if pairs else np.zeros(0)
        return cls(flat.astype(np.int64), np.concatenate([[0], np.cumsum(lens)]),
                   np.array([len(p) for p in prompts], dtype=np.int64), int(eos_id), int(vocab_size), tokenizer,
                   family, list(families or []), dict(info or {}), name)

    def __len__(self) -> int:
        return len(self.prompt_len)

    @property
    def lengths(self) -> np.ndarray:
        """Tokens per example as trained: prompt + answer + the closing EOS."""
        return np.diff(self.offsets) + 1

    @property
    def answer_len(self) -> np.ndarray:
        """Supervised tokens per example: the answer and its EOS."""
        return self.lengths - self.prompt_len

    def example(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(prompt ids, answer ids + EOS) of example i."""
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        t = np.asarray(self.tokens[a:b], dtype=np.int64)
        k = int(self.prompt_len[i])
        return t[:k], np.concatenate([t[k:], [self.eos_id]])


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 hex of a file's bytes: how a run config names its SFT mixture (App. A.4's fixed
    mixture, checked on every read)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_sft_file(path: str | os.PathLike, examples: SFTExamples) -> str:
    """Write `examples` to `path` atomically (App. A.4's SFT mixture as one file); returns
    the file's sha256, the value a run config names it by (data["sft_sha256"])."""
    dtype = np.int32 if examples.vocab_size <= 2**31 else np.int64
    tensors = {"tokens": torch.from_numpy(np.ascontiguousarray(examples.tokens, dtype=dtype)),
               "offsets": torch.from_numpy(np.ascontiguousarray(examples.offsets, dtype=np.int64)),
               "prompt_len": torch.from_numpy(np.ascontiguousarray(examples.prompt_len, dtype=np.int64)),
               "family": torch.from_numpy(np.ascontiguousarray(examples.family, dtype=np.int64))}
    meta = {"format": FORMAT, "tokenizer": examples.tokenizer, "eos_id": str(examples.eos_id),
            "vocab_size": str(examples.vocab_size), "families": json.dumps(list(examples.families)),
            "info": json.dumps(examples.info, sort_keys=True)}
    atomic_save_safetensors(tensors, path, metadata=meta)
    return file_sha256(path)


def read_sft_info(path: str | os.PathLike) -> dict:
    """How an SFT file was built (its metadata's `info`: App. A.4 / Table 10 counts), read from
    the header alone; {} for a missing or unreadable file."""
    try:
        meta = _header_metadata(Path(path))
        return json.loads(meta.get("info", "{}")) if meta.get("format") == FORMAT else {}
    except (OSError, ValueError, UnicodeDecodeError):
        return {}


def _header_metadata(path: Path) -> dict:
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        if not 0 < n <= 100_000_000:
            raise ValueError(f"implausible header length {n}")
        return json.loads(f.read(n)).get("__metadata__") or {}


def read_sft_file(path: str | os.PathLike, sha256: str | None = None) -> SFTExamples:
    """The examples of an SFT file (App. A.4's mixture, one fixed file for every run). With
    `sha256`, the file must hash to it: a file changed since the run config was made raises
    SFTFileError instead of training on other data."""
    path = Path(path)
    if not path.is_file():
        raise SFTFileError(f"SFT example file {path} does not exist; build it with nblib.lccp.sft.build_sft_mixture")
    if sha256 is not None:
        got = file_sha256(path)
        if got != sha256:
            raise SFTFileError(f"SFT example file {path} has sha256 {got[:16]}... but the run config expects "
                               f"{sha256[:16]}...: the file changed since the config was made; rebuild it "
                               f"(nblib.lccp.sft.build_sft_mixture) or make the config again")
    try:
        arrays = load_file(str(path))
        meta = _header_metadata(path)
    except (SafetensorError, OSError, ValueError, UnicodeDecodeError) as e:
        raise SFTFileError(f"SFT example file {path} is not a readable safetensors file ({e}); rebuild it") from None
    need = {"tokens", "offsets", "prompt_len", "family"}
    if meta.get("format") != FORMAT or not need <= set(arrays):
        raise SFTFileError(f"SFT example file {path} is not an {FORMAT} file (format {meta.get('format')!r}, tensors "
                           f"{sorted(arrays)}; need {sorted(need)})")
    try:
        families, info = json.loads(meta.get("families", "[]")), json.loads(meta.get("info", "{}"))
        eos_id, vocab = int(meta["eos_id"]), int(meta["vocab_size"])
    except (KeyError, ValueError) as e:
        raise SFTFileError(f"SFT example file {path}: bad metadata ({e})") from None
    if len(arrays["prompt_len"]) == 0:
        raise SFTFileError(f"SFT example file {path} holds no examples (an SFT stream needs at least one)")
    return SFTExamples(arrays["tokens"], arrays["offsets"], arrays["prompt_len"], eos_id, vocab,
                       meta.get("tokenizer", ""), arrays["family"], families, info, name=str(path))


def best_fit_rows(lengths: np.ndarray, order: np.ndarray, capacity: int) -> list[list[int]]:
    """Greedy best-fit packing of SFT examples into fixed-length sequences (App. A.4: "SFT
    examples are packed into sequences of 32,768 tokens"): examples in `order`, each into the
    open row whose free space fits it most tightly, else a new row. Rows (lists of example
    indices, in placement order) come in the order they were opened. Every length must be
    <= capacity."""
    rows: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (free space, row index), sorted
    for i in order:
        n = int(lengths[i])
        k = bisect.bisect_left(free, (n, -1))
        if k < len(free):
            space, r = free.pop(k)
            rows[r].append(int(i))
            space -= n
        else:
            r = len(rows)
            rows.append([int(i)])
            space = capacity - n
        if space > 0:
            bisect.insort(free, (space, r))
    return rows


class SFTPackedStream:
    """Long-context SFT stream (LCCP paper §5.3, App. A.4): packed instruction examples, loss
    on the answers only, one doc id per example. See the module docstring."""

    def __init__(self, examples: SFTExamples, seq_len: int, seed: int = 0):
        if not isinstance(examples, SFTExamples):
            raise TypeError(f"examples must be SFTExamples (read_sft_file, SFTExamples.from_pairs), "
                            f"got {type(examples).__name__}")
        for name, v, lo in (("seq_len", seq_len, 1), ("seed", seed, 0)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo:
                raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
        self.examples, self.seq_len, self.seed = examples, int(seq_len), int(seed)
        lens = examples.lengths
        too_long = np.flatnonzero(lens > self.seq_len + 1)
        if len(too_long):
            i = int(too_long[0])
            raise ValueError(
                f"SFT examples {examples.name}: {len(too_long)} example(s) do not fit one sequence of seq_len+1 = "
                f"{self.seq_len + 1} tokens (e.g. example {i}: {int(examples.prompt_len[i])} prompt + "
                f"{int(lens[i] - examples.prompt_len[i])} answer tokens incl. EOS); over-long instruction examples "
                f"are filtered, never cut (LCCP paper App. A.4): build the file for this seq_len "
                f"(nblib.lccp.sft.build_sft_mixture drops them)")
        self._counts: list[int] = []  # rows per epoch, for the epochs packed so far
        self._rows = lru_cache(maxsize=4)(self._pack_epoch)

    @property
    def config(self) -> dict:
        """What determines the batches."""
        return {"stream": "sft", "seq_len": self.seq_len, "seed": self.seed, "examples": self.examples.name,
                "n_examples": len(self.examples)}

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The example order of one epoch: a permutation seeded by (seed, epoch)."""
        return np.random.default_rng([self.seed, _TAG_SFT, int(epoch)]).permutation(len(self.examples))

    def _pack_epoch(self, epoch: int) -> list[list[int]]:
        return best_fit_rows(self.examples.lengths, self.epoch_order(epoch), self.seq_len + 1)

    def rows_in_epoch(self, epoch: int) -> int:
        while len(self._counts) <= epoch:
            self._counts.append(len(self._rows(len(self._counts))))
        return self._counts[epoch]

    def locate(self, sample: int) -> tuple[int, int]:
        """(epoch, row) of sample `sample`: the epochs' rows follow one another."""
        if not isinstance(sample, (int, np.integer)) or sample < 0:
            raise ValueError(f"sample must be an int >= 0, got {sample!r}")
        epoch, r = 0, int(sample)
        while r >= self.rows_in_epoch(epoch):
            r -= self.rows_in_epoch(epoch)
            epoch += 1
        return epoch, r

    def row_examples(self, sample: int) -> list[int]:
        """Indices (into the file) of the examples packed into sample `sample`, in order."""
        epoch, r = self.locate(sample)
        return list(self._rows(epoch)[r])

    def row(self, sample: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tokens, labels, doc ids) of one row, each of seq_len+1 entries; labels are the
        token where it is an answer token or the EOS closing an answer, else -100."""
        n = self.seq_len + 1
        tok = np.full(n, self.examples.eos_id, dtype=np.int64)
        lab = np.full(n, IGNORE, dtype=np.int64)
        doc = np.full(n, PAD_DOC, dtype=np.int64)
        at = 0
        for i in self.row_examples(sample):
            prompt, answer = self.examples.example(i)
            k, m = len(prompt), len(prompt) + len(answer)
            tok[at:at + k], tok[at + k:at + m] = prompt, answer
            lab[at + k:at + m] = answer
            doc[at:at + m] = i
            at += m
        return tok, lab, doc

    def batch(self, step: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x, y, doc_ids of shape (batch_size, seq_len) for global step `step`: y[p] is the
        label of token p+1 (-100 unless an answer token of the example token p belongs to)."""
        for name, v, lo in (("step", step, 0), ("batch_size", batch_size, 1)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo:
                raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
        rows = [self.row(int(step) * int(batch_size) + b) for b in range(int(batch_size))]
        tok, lab, doc = (torch.from_numpy(np.stack(a)) for a in zip(*rows))
        return tok[:, :-1].contiguous(), lab[:, 1:].contiguous(), doc[:, :-1].contiguous()

    def packing_stats(self, epoch: int = 0) -> dict:
        """One epoch's packing: rows, examples, the share of row tokens that hold examples
        (the rest is padding) and the share that is supervised (answers and their EOS)."""
        rows = self._rows(epoch)
        cap = len(rows) * (self.seq_len + 1)
        ex = self.examples
        return {"epoch": epoch, "rows": len(rows), "examples": len(ex), "fill": float(ex.lengths.sum() / cap),
                "supervised": float(ex.answer_len.sum() / cap), "mean_examples_per_row": len(ex) / len(rows)}


def resolve_sft_path(spec: str, root: str | os.PathLike) -> Path:
    """A run config's data["sft_file"] (the §5.3 SFT mixture): absolute, or relative to `root`
    (the data cache folder), so run hashes do not depend on where the cache is."""
    p = Path(spec)
    return p if p.is_absolute() else Path(root) / p
