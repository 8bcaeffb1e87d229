"""Tokenizers with one small API: vocab_size, eos_id, tokenizer_id, encode, decode, encode_with_offsets.

Offsets are CHARACTER spans (Python str indices), one (start, end) per token. LongPPL maps
key tokens between tokenizers through these spans (App. A.1: "the fixed character
intervals are mapped to that model's token positions"), so they must be exact.

Specs (`load_tokenizer`):
    "byte"                    UTF-8 bytes 0-255 plus EOS = 256
    "hf:/path/tokenizer.json" any Hugging Face tokenizer.json (or a folder holding one)
    "bpe:<name>"              a BPE pinned in data/tokenizers/<name>.json (nblib.data.bpe)
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer as _HFTokenizerImpl

from nblib.data.bpe import bpe_path

TOKENIZER_FORMS = ('"byte"', '"hf:/path/tokenizer.json"', '"bpe:<name>"')
# Special tokens that mean end-of-document, in order of preference.
EOS_NAMES = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eos|>", "[EOS]", "<|im_end|>", "<|eot_id|>")


def _as_id_array(ids) -> np.ndarray:
    if hasattr(ids, "detach"):  # torch tensor
        ids = ids.detach().cpu().numpy()
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"decode expects a 1-D sequence of token ids, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"token ids must be integers, got dtype {arr.dtype}")
    return arr.astype(np.int64)


class ByteTokenizer:
    """UTF-8 bytes as tokens 0-255, plus EOS = 256 (vocab_size 257)."""

    vocab_size = 257
    eos_id = 256
    tokenizer_id = "byte"

    def encode(self, text: str) -> np.ndarray:
        """UTF-8 bytes of `text` as int64 ids, shape (n_bytes,)."""
        # surrogatepass: lone surrogates (rare, from lossy decoding) encode instead of raising
        return np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8).astype(np.int64)

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        """encode() of each text."""
        return [self.encode(t) for t in texts]

    def encode_with_offsets(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """ids (n,) and character spans (n, 2): every byte of a multi-byte character gets its character's span."""
        b = np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
        is_lead = (b & 0xC0) != 0x80  # continuation bytes are 10xxxxxx
        char_idx = np.cumsum(is_lead) - 1  # (n,) character index of each byte
        offsets = np.stack([char_idx, char_idx + 1], axis=1).astype(np.int64)
        return b.astype(np.int64), offsets

    def decode(self, ids) -> str:
        """Bytes back to text; EOS is dropped and invalid UTF-8 becomes U+FFFD."""
        arr = _as_id_array(ids)
        if arr.size and (arr.min() < 0 or arr.max() > self.eos_id):
            raise ValueError(f"byte token ids must be in [0, {self.eos_id}], got min {arr.min()} max {arr.max()}")
        return arr[arr != self.eos_id].astype(np.uint8).tobytes().decode("utf-8", errors="replace")

    def __repr__(self) -> str:
        return "ByteTokenizer(vocab_size=257, eos_id=256)"


class HFTokenizer:
    """A Hugging Face `tokenizer.json` loaded with the `tokenizers` library, behind the same API.

    No special tokens are added when encoding, and special-token strings inside a document
    are tokenized as plain text (a corpus must not inject EOS). `eos_id` is the first of
    EOS_NAMES the tokenizer has; when it has none, one id past the vocabulary is reserved
    for EOS (vocab_size grows by one, like ByteTokenizer's 256).
    """

    def __init__(self, path: str | Path):
        path = Path(path)
        if path.is_dir():
            path = path / "tokenizer.json"
        if not path.is_file():
            raise ValueError(f"tokenizer.json not found: {str(path)!r}")
        self.path = path
        raw = path.read_bytes()
        self._tok = _HFTokenizerImpl.from_str(raw.decode("utf-8"))
        if hasattr(self._tok, "encode_special_tokens"):
            self._tok.encode_special_tokens = True
        self.tokenizer_id = "hf-" + hashlib.sha256(raw).hexdigest()[:12]
        base = self._tok.get_vocab_size(with_added_tokens=True)
        self.eos_token = next((t for t in EOS_NAMES if self._tok.token_to_id(t) is not None), None)
        if self.eos_token is not None:
            self.eos_id, self.vocab_size = self._tok.token_to_id(self.eos_token), base
        else:
            self.eos_id, self.vocab_size = base, base + 1

    def encode(self, text: str) -> np.ndarray:
        """Token ids of `text` (no special tokens added), int64, shape (n,)."""
        return np.asarray(self._tok.encode(text, add_special_tokens=False).ids, dtype=np.int64)

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        """Encode many texts at once (the library parallelises over them)."""
        encs = self._tok.encode_batch(list(texts), add_special_tokens=False)
        return [np.asarray(e.ids, dtype=np.int64) for e in encs]

    def encode_with_offsets(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """ids (n,) and character spans (n, 2) as the library reports them (char offsets)."""
        enc = self._tok.encode(text, add_special_tokens=False)
        offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)
        return np.asarray(enc.ids, dtype=np.int64), offsets

    def decode(self, ids) -> str:
        """Ids back to text; special tokens (EOS included) are skipped."""
        arr = _as_id_array(ids)
        if arr.size and (arr.min() < 0 or arr.max() >= self.vocab_size):
            raise ValueError(f"token ids must be in [0, {self.vocab_size}), got min {arr.min()} max {arr.max()}")
        return self._tok.decode(arr[arr != self.eos_id].tolist(), skip_special_tokens=True)

    def __repr__(self) -> str:
        return f"HFTokenizer({str(self.path)!r}, vocab_size={self.vocab_size}, eos_id={self.eos_id})"


Tokenizer = ByteTokenizer | HFTokenizer


def load_tokenizer(spec: str) -> Tokenizer:
    """Resolve a tokenizer spec: "byte", "hf:/path/tokenizer.json" or "bpe:<name>"."""
    if not isinstance(spec, str):
        raise TypeError(f"tokenizer spec must be a str, got {type(spec).__name__}; allowed: {', '.join(TOKENIZER_FORMS)}")
    if spec == "byte":
        return ByteTokenizer()
    if spec.startswith("hf:") and len(spec) > 3:
        return HFTokenizer(spec[3:])
    if spec.startswith("bpe:") and len(spec) > 4:
        return HFTokenizer(bpe_path(spec[4:]))
    raise ValueError(f"unknown tokenizer spec {spec!r}; allowed forms: {', '.join(TOKENIZER_FORMS)}")
