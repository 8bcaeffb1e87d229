"""Scoring models: one small interface for "NLL of chosen tokens", whatever the model is.

LongPPL (seed 000 §3.1, App. A.1) needs a reference model and evaluated models that may be
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

import hashlib
import json

import numpy as np
import torch
import torch.nn.functional as F

HEAD_CHUNK_BYTES = 64 << 20  # fp32 logits held at once by the chunked LM head


def nll_from_hidden(hidden, ids, positions, head, head_chunk_bytes=HEAD_CHUNK_BYTES):
    """NLL of ids[b, positions[b, k]] given ids[b, :positions[b, k]] (seed 000 §3.1 ℓ(x_t)).

    hidden (B, T, d): final-normed hidden states; ids (B, T); positions (B, K) int with
    -1 for padding (any other value must be in [1, T)); head: (N, d) -> (N, V) logits.
    The head runs on the gathered rows hidden[b, t - 1] only, in chunks. Returns (B, K)
    float32 on the CPU, NaN at padding.
    """
    B, T = ids.shape
    positions = torch.as_tensor(positions, dtype=torch.long, device=hidden.device)
    if positions.dim() != 2 or positions.size(0) != B:
        raise ValueError(f"positions must have shape (B={B}, K), got {tuple(positions.shape)}")
    bad = (positions != -1) & ((positions < 1) | (positions >= T))
    if bad.any():
        raise ValueError(f"positions must be -1 (padding) or in [1, {T}); got {positions[bad][:5].tolist()}")
    out = torch.full(positions.shape, float("nan"), dtype=torch.float32)
    bi, ki = (positions >= 1).nonzero(as_tuple=True)
    if bi.numel() == 0:
        return out
    t = positions[bi, ki]
    h = hidden[bi, t - 1]  # (N, d): the output at t - 1 predicts token t
    y = ids.to(hidden.device)[bi, t]  # (N,)
    vocab = head(h[:1]).size(-1)
    rows = max(1, head_chunk_bytes // (4 * vocab))
    vals = torch.empty(h.size(0), dtype=torch.float32, device=h.device)
    for i in range(0, h.size(0), rows):
        logits = head(h[i:i + rows]).float()  # (rows, V)
        vals[i:i + rows] = F.cross_entropy(logits, y[i:i + rows], reduction="none")
    out[bi.cpu(), ki.cpu()] = vals.cpu()
    return out


def _check_ids(ids):
    if not (torch.is_tensor(ids) and ids.dim() == 2 and not ids.is_floating_point()):
        raise ValueError(f"ids must be a (B, T) integer tensor, got {getattr(ids, 'shape', ids)!r}")


def module_fingerprint(module, extra="") -> str:
    """Short hash of a torch module's identity: class, parameter names/shapes/dtypes and
    per-tensor float64 sum and sum of squares (8 significant digits), plus `extra`.

    Cheap even for an 8B model on a GPU (one reduction per tensor, no copy to the CPU),
    and any trained or re-initialised weights change it.
    """
    h = hashlib.sha256()
    h.update(type(module).__name__.encode())
    h.update(extra.encode())
    with torch.no_grad():
        for name, p in module.state_dict().items():
            x = p.detach().double()
            h.update(f"{name}|{tuple(p.shape)}|{p.dtype}|{x.sum().item():.8g}|{(x * x).sum().item():.8g}".encode())
    return h.hexdigest()[:16]


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
        cfg_json = json.dumps(getattr(cfg, "__dict__", {}), sort_keys=True, default=str)
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
        _check_ids(ids)
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
    from pathlib import Path

    if _is_scorer(model):
        if tokenizer is not None:
            raise ValueError("a scorer carries its own tokenizer; pass tokenizer=None")
        return model
    if isinstance(model, (str, Path)):
        from .hf import HFScorer

        return HFScorer.from_pretrained(model, tokenizer=tokenizer)
    if hasattr(model, "hidden_states") and hasattr(model, "logits_from_hidden"):
        if tokenizer is None:
            raise ValueError("an nblib model needs its tokenizer (ByteTokenizer, HFTokenizer, ...)")
        return NblibScorer(model, tokenizer)
    if hasattr(model, "base_model") and hasattr(model, "get_output_embeddings"):
        from .hf import HFScorer

        return HFScorer(model, tokenizer)
    raise TypeError(f"cannot score with {type(model).__name__}; allowed: a scorer, an nblib model + tokenizer, "
                    f"a transformers causal LM + tokenizer, or a path to a Hugging Face model folder")


def as_encoder(tokenizer):
    """text -> (ids, character offsets) for an nblib tokenizer, a scorer, a transformers
    fast tokenizer or a path to a Hugging Face tokenizer folder."""
    from pathlib import Path

    if hasattr(tokenizer, "encode_with_offsets"):
        def enc(text):
            ids, off = tokenizer.encode_with_offsets(text)
            return np.asarray(ids, dtype=np.int64), np.asarray(off, dtype=np.int64).reshape(-1, 2)
        return enc
    from .hf import hf_encode_with_offsets, load_hf_tokenizer

    if isinstance(tokenizer, (str, Path)):
        tokenizer = load_hf_tokenizer(tokenizer)
    if hasattr(tokenizer, "backend_tokenizer") or hasattr(tokenizer, "is_fast"):
        return lambda text: hf_encode_with_offsets(tokenizer, text)
    raise TypeError(f"cannot get character offsets from {type(tokenizer).__name__}; allowed: an nblib tokenizer, "
                    f"a scorer, a transformers fast tokenizer or a tokenizer folder path")
