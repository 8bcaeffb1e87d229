"""What every decoder LM in nblib shares: the loss, the KV-cache entry points (engine.py)
and the parameter, FLOP and KV-cache-byte counts (LCCP paper §3.1's N; the Gemma blog's formulas).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import engine
from .engine import check_idx
from .layers import doc_positions, mean_keys


class DecoderLM(nn.Module):
    """Base of the three model families. A subclass sets `config`, `blocks`,
    `layer_windows` (per layer: None = global, W = sliding window), `n_heads`,
    `n_kv_heads`, `head_dim`, `d_model`, `vocab_size`, `max_positions` (None unless
    positions are a learned table) and implements `_hidden(idx, pos, seg, cache)`,
    `logits_from_hidden(h)` and `_embedding_params()`."""

    # ---- forward passes

    def hidden_states(self, idx, doc_ids=None):
        """Final-normed hidden states (B, T, d). doc_ids (B, T): isolate packed documents."""
        check_idx(self, idx)
        if doc_ids is None:
            return self._hidden(idx, torch.arange(idx.size(1), device=idx.device), None, None)
        if not (torch.is_tensor(doc_ids) and doc_ids.shape == idx.shape and not doc_ids.is_floating_point()):
            raise ValueError(f"doc_ids must be an integer tensor of shape {tuple(idx.shape)}, "
                             f"got {getattr(doc_ids, 'shape', doc_ids)!r}")
        pos, seg = doc_positions(doc_ids)
        return self._hidden(idx, pos, seg, None)

    def forward(self, idx, targets=None, doc_ids=None):
        """Returns (logits (B, T, V), loss): loss is the mean next-token cross-entropy over
        targets != -100, or None when targets is None (nanoGPT convention)."""
        logits = self.logits_from_hidden(self.hidden_states(idx, doc_ids))
        if targets is None:
            return logits, None
        if targets.shape != idx.shape:
            raise ValueError(f"targets shape {tuple(targets.shape)} must equal idx shape {tuple(idx.shape)}")
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-100)
        return logits, loss

    # ---- KV-cache inference (engine.py)

    def init_kv_cache(self, batch_size, max_len, dtype=None, device=None):
        """Preallocated cache for up to max_len positions (Gemma blog "What a KV cache stores")."""
        return engine.init_kv_cache(self, batch_size, max_len, dtype, device)

    def prefill(self, idx, cache, last_only: bool = False):
        """engine.prefill: run idx (B, n) from position cache.pos on; logits (B, n, V), or
        only the last position's with last_only=True."""
        return engine.prefill(self, idx, cache, last_only)

    def decode_step(self, idx_last, cache):
        """engine.decode_step: idx_last (B, 1) -> logits (B, 1, V)."""
        return engine.decode_step(self, idx_last, cache)

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, use_cache=True, generator=None, top_p=None):
        """engine.generate: append max_new_tokens tokens to idx (B, T), with or without the
        cache; greedy, top-k and/or nucleus (top_p) sampling."""
        return engine.generate(self, idx, max_new_tokens, temperature, top_k, use_cache, generator, top_p)

    # ---- counts

    def n_params(self, non_embedding=True):
        """Unique parameters (tied weights once). non_embedding=True drops token (and learned
        position) embeddings and an untied output head: the paper's N (LCCP paper §3.1)."""
        total = sum(p.numel() for p in self.parameters())
        if non_embedding:
            emb = {id(p): p for p in self._embedding_params()}
            total -= sum(p.numel() for p in emb.values())
        return total

    def kv_cache_bytes(self, seq_len, batch_size=1, bytes_per_el=4):
        """Closed form 2 * n_kv * h * b * sum_l T_l per sequence, times batch_size (Gemma blog;
        engine.kv_cache_bytes)."""
        return engine.kv_cache_bytes(self.layer_windows, self.n_kv_heads, self.head_dim, seq_len, batch_size,
                                     bytes_per_el)

    def flops_breakdown(self, seq_len):
        """Forward FLOPs per token at context seq_len, in two parts (Gemma blog "FLOPs at long
        contexts" and App.): "linear", 2 * the weights of every linear layer (LM head included;
        norms, biases, softmax not counted), and "attention", per layer 4 * d_attn * k_bar
        (scores and values), k_bar from `mean_keys`: the only part that grows with context."""
        linear = sum(m.weight.numel() for m in self.blocks.modules() if isinstance(m, nn.Linear))
        linear += self.vocab_size * self.d_model
        d_attn = self.n_heads * self.head_dim
        attn = sum(4 * d_attn * mean_keys(seq_len, w) for w in self.layer_windows)
        return {"linear": 2 * linear, "attention": attn}

    def flops_per_token(self, seq_len, training=True):
        """Analytic FLOPs per token at context seq_len: `flops_breakdown` summed; training=True
        is 3x the forward (backward = 2x forward)."""
        f = self.flops_breakdown(seq_len)
        return (f["linear"] + f["attention"]) * (3 if training else 1)
