"""Scoring models: one small interface for "NLL of chosen tokens", whatever the model is.

LongPPL (LCCP paper §3.1, App. A.1) needs a reference model and evaluated models that may be
nblib models (with an nblib tokenizer) or Hugging Face causal LMs (hf.py). Both sit behind

    scorer.identity                      # str: stable fingerprint of weights + tokenizer
    scorer.encode_with_offsets(text)     # ids (n,) int64, CHARACTER spans (n, 2)
    scorer.nll(ids, positions)           # (B, K) float32 NLL, see below

Convention (used everywhere in nblib.metrics): the NLL "of token t" is the loss of
predicting ids[t] from ids[:t], i.e. it comes from the output at position t - 1 (the loss
index shifts by one, as in the reference implementation's `loss_overall[i - 1]`). Token 0
has no NLL.

Cost: the LM head is applied only to the gathered positions, in row chunks of at most
`head_chunk_bytes` of fp32 logits, so full-vocabulary logits of unscored positions are
never built and logit memory does not grow with sequence length.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from .hf import HFScorer, hf_encode_with_offsets, load_hf_tokenizer
from .nll import HEAD_CHUNK_BYTES, check_ids, module_fingerprint, nll_from_hidden

LATER_FIELDS = ("head_size",)  # LlamaConfig.head_size: None means d_model // n_heads, as before it existed


class NblibScorer:
    """A `nblib.models` decoder (hidden_states + logits_from_hidden) and an nblib tokenizer
    (encode_with_offsets) behind the scoring interface. Puts the model in eval mode."""

    def __init__(self, model, tokenizer, head_chunk_bytes=HEAD_CHUNK_BYTES):
        for attr in ("hidden_states", "logits_from_hidden"):
            if not hasattr(model, attr):
                raise TypeError(f"model {type(model).__name__} has no {attr}(); expected an nblib.models decoder")
        if not hasattr(tokenizer, "encode_with_offsets"):
            raise TypeError(f"tokenizer {type(tokenizer).__name__} has no encode_with_offsets(text)")
        self.model, self.tokenizer, self.head_chunk_bytes = model.eval(), tokenizer, head_chunk_bytes
        cfg = getattr(model, "config", None)
        # a config field added later (LATER_FIELDS) at its default None is the old behaviour: left
        # out, so the identity of every model that does not set it stays what it was
        fields = {k: v for k, v in getattr(cfg, "__dict__", {}).items() if not (k in LATER_FIELDS and v is None)}
        cfg_json = json.dumps(fields, sort_keys=True, default=str)
        tok_id = getattr(tokenizer, "tokenizer_id", type(tokenizer).__name__)
        self.identity = f"nblib-{type(model).__name__}-{module_fingerprint(model, cfg_json)}-tok-{tok_id}"
        self.device = next(model.parameters()).device

    def encode_with_offsets(self, text):
        """ids (n,) int64 and character spans (n, 2) from the nblib tokenizer."""
        ids, off = self.tokenizer.encode_with_offsets(text)
        return np.asarray(ids, dtype=np.int64), np.asarray(off, dtype=np.int64).reshape(-1, 2)

    @torch.inference_mode()
    def nll(self, ids, positions):
        """(B, K) float32 NLL of ids[b, positions[b, k]] (-1 = padding -> NaN); see module doc."""
        check_ids(ids)
        ids = ids.to(self.device)
        hidden = self.model.hidden_states(ids)  # (B, T, d)
        return nll_from_hidden(hidden, ids, positions, self.model.logits_from_hidden, self.head_chunk_bytes)


def _is_scorer(obj):
    return all(hasattr(obj, a) for a in ("nll", "encode_with_offsets", "identity"))


def as_scorer(model, tokenizer=None):
    """Wrap what the caller has into a scorer.

    - a scorer (has identity, encode_with_offsets, nll): returned as is (tokenizer None);
    - a str / Path: a Hugging Face model folder, loaded with `HFScorer.from_pretrained`;
    - a transformers PreTrainedModel + its (fast) tokenizer: `HFScorer`;
    - an nblib.models decoder + an nblib tokenizer: `NblibScorer`.
    """
    if _is_scorer(model):
        if tokenizer is not None:
            raise ValueError("a scorer carries its own tokenizer; pass tokenizer=None")
        return model
    if isinstance(model, (str, Path)):
        return HFScorer.from_pretrained(model, tokenizer=tokenizer)
    if hasattr(model, "hidden_states") and hasattr(model, "logits_from_hidden"):
        if tokenizer is None:
            raise ValueError("an nblib model needs its tokenizer (ByteTokenizer, HFTokenizer, ...)")
        return NblibScorer(model, tokenizer)
    if hasattr(model, "base_model") and hasattr(model, "get_output_embeddings"):
        return HFScorer(model, tokenizer)
    raise TypeError(f"cannot score with {type(model).__name__}; allowed: a scorer, an nblib model + tokenizer, "
                    f"a transformers causal LM + tokenizer, or a path to a Hugging Face model folder")


def as_encoder(tokenizer):
    """text -> (ids, character offsets) for an nblib tokenizer, a scorer, a transformers
    fast tokenizer or a path to a Hugging Face tokenizer folder."""
    if hasattr(tokenizer, "encode_with_offsets"):
        def enc(text):
            ids, off = tokenizer.encode_with_offsets(text)
            return np.asarray(ids, dtype=np.int64), np.asarray(off, dtype=np.int64).reshape(-1, 2)
        return enc
    if isinstance(tokenizer, (str, Path)):
        tokenizer = load_hf_tokenizer(tokenizer)
    if hasattr(tokenizer, "backend_tokenizer") or hasattr(tokenizer, "is_fast"):
        return lambda text: hf_encode_with_offsets(tokenizer, text)
    raise TypeError(f"cannot get character offsets from {type(tokenizer).__name__}; allowed: an nblib tokenizer, "
                    f"a scorer, a transformers fast tokenizer or a tokenizer folder path")
