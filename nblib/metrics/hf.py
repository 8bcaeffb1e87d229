"""Hugging Face transformers causal LMs behind the scoring interface (scoring.py).

The paper's reference model is Llama-3.1-8B loaded with transformers (LCCP paper §3.1);
the evaluated models may be any local causal LM folder. We run the base model
(`model.base_model`, final norm included) and apply `lm_head` only to gathered positions,
so a 32K-token document never materialises (32K, V) logits.

Special tokens: the reference implementation tokenizes the evaluator's text with the
tokenizer's defaults (Llama-3 adds <|begin_of_text|>) and the evaluated model's text with
`add_special_tokens=False`. Here the default is False for both; pass
`add_special_tokens=True` to reproduce the evaluator's BOS. Special tokens have empty
character spans, so they are never key tokens.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch

from .nll import HEAD_CHUNK_BYTES, check_ids, module_fingerprint, nll_from_hidden


def load_hf_tokenizer(path):
    """AutoTokenizer.from_pretrained(path) for a local folder; must be a fast tokenizer (offsets)."""
    from transformers import AutoTokenizer  # heavy (seconds): imported only when an HF folder is loaded

    if not Path(path).exists():
        raise ValueError(f"Hugging Face tokenizer folder not found: {str(path)!r}")
    tok = AutoTokenizer.from_pretrained(str(path))
    if not getattr(tok, "is_fast", False):
        raise ValueError(f"tokenizer at {str(path)!r} is not a fast tokenizer; character offsets need one")
    return tok


def hf_encode_with_offsets(tokenizer, text, add_special_tokens=False):
    """ids (n,) int64 and CHARACTER spans (n, 2) via `return_offsets_mapping=True`."""
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{type(tokenizer).__name__} is not a fast tokenizer; character offsets need one")
    enc = tokenizer(text, add_special_tokens=add_special_tokens, return_offsets_mapping=True,
                    return_attention_mask=False, verbose=False)  # no "longer than max length" warning
    ids = np.asarray(enc["input_ids"], dtype=np.int64)
    off = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
    return ids, off


class HFScorer:
    """A transformers causal LM + fast tokenizer as a scorer (identity, encode_with_offsets, nll).

    verify=True checks once, on a 12-token sequence, that base model + lm_head (+ Gemma-style
    final logit soft-capping when the config has it) reproduces `model(ids).logits`; a model
    whose head does more raises ValueError instead of giving wrong NLLs.
    """

    def __init__(self, model, tokenizer, add_special_tokens=False, head_chunk_bytes=HEAD_CHUNK_BYTES, verify=True):
        if not (hasattr(model, "base_model") and hasattr(model, "get_output_embeddings")):
            raise TypeError(f"model must be a transformers causal LM, got {type(model).__name__}")
        if tokenizer is None or not getattr(tokenizer, "is_fast", False):
            raise TypeError(f"tokenizer must be a transformers fast tokenizer, got {type(tokenizer).__name__}")
        self.model, self.tokenizer = model.eval(), tokenizer
        self.add_special_tokens, self.head_chunk_bytes = add_special_tokens, head_chunk_bytes
        self.lm_head = model.get_output_embeddings()
        self.softcap = getattr(model.config, "final_logit_softcapping", None)
        self.device = next(model.parameters()).device
        tok_hash = hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode()).hexdigest()[:12]
        fp = module_fingerprint(model, model.config.to_json_string(use_diff=False))
        self.identity = f"hf-{type(model).__name__}-{fp}-tok-{tok_hash}-special{int(add_special_tokens)}"
        if verify:
            self._verify()

    @classmethod
    def from_pretrained(cls, path, tokenizer=None, dtype=None, device=None, **kw):
        """Load AutoModelForCausalLM + AutoTokenizer from a local folder (no downloads)."""
        from transformers import AutoModelForCausalLM  # heavy: only when an HF model is loaded

        if not Path(path).is_dir():
            raise ValueError(f"Hugging Face model folder not found: {str(path)!r}")
        load_kw = {"local_files_only": True}
        if dtype is not None:
            load_kw["dtype"] = dtype
        model = AutoModelForCausalLM.from_pretrained(str(path), **load_kw)
        if device is not None:
            model = model.to(device)
        if tokenizer is None or isinstance(tokenizer, (str, Path)):
            tokenizer = load_hf_tokenizer(tokenizer or path)
        return cls(model, tokenizer, **kw)

    def _head(self, h):
        logits = self.lm_head(h)  # (N, V)
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def _hidden(self, ids):
        return self.model.base_model(input_ids=ids, use_cache=False).last_hidden_state  # (B, T, d)

    @torch.inference_mode()
    def _verify(self):
        V = self.lm_head.weight.size(0)
        ids = torch.arange(12, device=self.device).remainder(V)[None]  # (1, 12)
        ref = self.model(input_ids=ids, use_cache=False).logits.float()
        ours = self._head(self._hidden(ids)).float()
        if not torch.allclose(ours, ref, rtol=1e-3, atol=1e-3 * (1 + ref.abs().max().item())):
            raise ValueError(f"{type(self.model).__name__}: base_model + lm_head does not reproduce the model's "
                             f"logits (max diff {(ours - ref).abs().max().item():.3g}); this head is not supported")

    def encode_with_offsets(self, text):
        """ids (n,) int64 and character spans (n, 2)."""
        return hf_encode_with_offsets(self.tokenizer, text, self.add_special_tokens)

    @torch.inference_mode()
    def nll(self, ids, positions):
        """(B, K) float32 NLL of ids[b, positions[b, k]] (-1 = padding -> NaN); see scoring.py."""
        check_ids(ids)
        ids = ids.to(self.device)
        return nll_from_hidden(self._hidden(ids), ids, positions, self._head, self.head_chunk_bytes)
