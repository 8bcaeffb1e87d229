"""Llama-style decoder: the paper's model family at scales S1-S5 (LCCP paper §3.1, App. A.3).

Notable features:
- RoPE (rotate-half; dims j and j + hd/2 form band j), base 1e4 / 5e5 / 5e6 for the
  4K / 32K / 128K stages; `set_rope_base` is ABF (Xiong et al. 2024): new base, same weights.
- Grouped-query attention (n_kv_heads <= n_heads), SwiGLU MLP, pre-norm RMSNorm, no biases.
- Optional YaRN (`rope_scaling={"type": "yarn", "factor": s, "original_max_seq_len": L}`).
- Optional smeared keys (`smear_keys=True`; Olsson et al. 2022, "In-context Learning and
  Induction Heads", the smeared-key architecture): before RoPE each key becomes
  s_h * k_t + (1 - s_h) * k_{t-1}, s_h = sigmoid(a_h), one learned a_h per KV head
  (initialised at 0), never across a document boundary. Not the paper's model: off at
  `full`, on in the toy and smoke budgets, where it lets two-layer models learn to copy
  (chapter 2). transformers has no such layer, so a smeared model has no Hugging Face twin.
Shared machinery: attention, the KV cache and generation in engine.py; the base class and counts in base.py.
"""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .base import DecoderLM
from .engine import attention, smeared_keys
from .layers import RMSNorm, Rotary, apply_rope, check_config_ints, check_rope_scaling, init_weights


class Attention(nn.Module):
    """Causal GQA self-attention with RoPE, optionally with smeared keys (`k_smear`: the
    logits a_h, one per KV head, initialised at 0 so s_h = 1/2)."""

    def __init__(self, cfg):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        d, hd = cfg.d_model, cfg.head_dim
        self.q_proj = nn.Linear(d, cfg.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(d, cfg.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, cfg.n_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.n_heads * hd, d, bias=False)
        self.k_smear = nn.Parameter(torch.zeros(cfg.n_kv_heads)) if cfg.smear_keys else None

    def qkv(self, x, rope, seg=None, cache=None, layer=0):
        """(q, k, v) of x (B, T, d) as attention sees them: q (B, nh, T, hd), k and v
        (B, nkv, T, hd), keys smeared (when the config asks) and RoPE applied to q and k.
        With a KV cache the smear reads and updates the cache's last raw key of `layer`."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, nkv, T, hd)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        if self.k_smear is not None:  # before RoPE, so k_{t-1} is mixed in unrotated
            k = smeared_keys(k, self.k_smear, seg, cache, layer)
        return apply_rope(q, *rope), apply_rope(k, *rope), v

    def forward(self, x, rope, seg=None, cache=None, layer=0):
        B, T, _ = x.shape
        q, k, v = self.qkv(x, rope, seg, cache, layer)
        y = attention(q, k, v, seg=seg, cache=cache, layer=layer)  # (B, nh, T, hd)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)) (Shazeer 2020)."""

    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.up_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.down_proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    """Pre-norm block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = SwiGLU(cfg)

    def forward(self, x, rope, seg=None, cache=None, layer=0):
        x = x + self.attn(self.attn_norm(x), rope, seg, cache, layer)
        return x + self.mlp(self.mlp_norm(x))


@dataclass(kw_only=True)
class LlamaConfig:
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    rope_base: float = 1e4  # the LCCP paper App. A.3: 1e4 (4K), 5e5 (32K), 5e6 (128K)
    max_seq_len: int  # nominal training context; RoPE itself has no hard limit
    norm_eps: float = 1e-5
    tie_embeddings: bool = False
    rope_scaling: dict | None = None  # {"type": "yarn", "factor": s, "original_max_seq_len": L}
    # Smeared keys (Olsson et al. 2022): not the paper's Llama; nblib.budgets turns it on at toy and smoke
    smear_keys: bool = False
    # Width of one attention head; None: d_model // n_heads, Llama's. Set where a width does not
    # split into heads of the size the other scales have (toy S2: d48 with one head of 32);
    # q/o project d_model <-> n_heads * head_size as in transformers' LlamaConfig.head_dim.
    head_size: int | None = None

    def __post_init__(self):
        check_config_ints(self, ["vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads",
                                 "d_ff", "max_seq_len"])
        if self.head_size is None:
            if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
                raise ValueError(f"d_model ({self.d_model}) must split into n_heads ({self.n_heads}) "
                                 f"heads of even size, or head_size must be set")
        elif isinstance(self.head_size, bool) or not isinstance(self.head_size, int) or self.head_size < 2 \
                or self.head_size % 2:
            raise ValueError(f"LlamaConfig.head_size must be None or an even int >= 2, got {self.head_size!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        if not self.rope_base > 1:
            raise ValueError(f"rope_base must be > 1, got {self.rope_base}")
        check_rope_scaling(self.rope_scaling)
        if not isinstance(self.smear_keys, bool):
            raise ValueError(f"LlamaConfig.smear_keys must be True or False, got {self.smear_keys!r}")

    @property
    def head_dim(self):
        return self.d_model // self.n_heads if self.head_size is None else self.head_size


class Llama(DecoderLM):
    """Llama-style LM. forward(idx, targets=None, doc_ids=None) -> (logits, loss).

    n_params(non_embedding=True) excludes the token embedding and, when untied, the
    output head (both count as embedding parameters); the paper's N (LCCP paper Table 1).
    Closed form: total = V*d*(1 if tied else 2) + L*(2*d*nh*hd + 2*d*nkv*hd + 3*d*d_ff + 2*d) + d,
    plus L*nkv with smeared keys (one logit per KV head and layer).
    """

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.config = cfg
        self.vocab_size, self.d_model, self.max_positions = cfg.vocab_size, cfg.d_model, None
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.layer_windows = [None] * cfg.n_layers
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.lm_head = None if cfg.tie_embeddings else nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.rotary = Rotary(cfg.head_dim, cfg.rope_base, cfg.rope_scaling)
        init_weights(self, cfg.n_layers, residual_names=("o_proj", "down_proj"))

    def set_rope_base(self, new_base):
        """ABF (Xiong et al. 2024; the LCCP paper App. A.3): theta_j = new_base^(-2j/hd), weights unchanged."""
        self.rotary.set_base(new_base)
        self.config.rope_base = float(new_base)

    def _hidden(self, idx, pos, seg, cache):
        x = self.embed(idx)  # (B, T, d)
        rope = self.rotary(pos, x.dtype)
        for layer, block in enumerate(self.blocks):
            x = block(x, rope, seg, cache, layer)
        return self.norm(x)

    def logits_from_hidden(self, h):
        """LM head on final-normed hidden states (..., d) -> (..., V)."""
        return F.linear(h, self.embed.weight) if self.lm_head is None else self.lm_head(h)

    def _embedding_params(self):
        return [self.embed.weight] + ([] if self.lm_head is None else [self.lm_head.weight])


def expand_kv_heads(weights: dict, n_kv_from: int, n_kv_to: int, head_dim: int) -> dict:
    """Llama weights with `n_kv_from` KV heads per layer rewritten for `n_kv_to`: each KV head's
    key and value rows (and smear logit) repeated for the query heads that shared it, in the
    order grouped-query attention pairs them (query head h reads KV head h // group, as SDPA's
    `enable_gqa` does). The expanded model computes exactly what the original did; training
    then lets the copies diverge. The reverse of the usual GQA conversion by mean-pooling
    (Ainslie et al. 2023, "GQA", §2.1); used to give LCCP a key set per query head while keeping
    the short stage's shared keys."""
    if n_kv_to % n_kv_from:
        raise ValueError(f"n_kv_to={n_kv_to} is not allowed: a multiple of n_kv_from={n_kv_from}")
    group = n_kv_to // n_kv_from
    out = dict(weights)
    for name, w in weights.items():
        if name.endswith(("attn.k_proj.weight", "attn.v_proj.weight")):
            if w.shape[0] != n_kv_from * head_dim:
                raise ValueError(f"{name} has {w.shape[0]} rows; expected n_kv_from * head_dim = {n_kv_from * head_dim}")
            out[name] = w.view(n_kv_from, head_dim, -1).repeat_interleave(group, 0).reshape(n_kv_to * head_dim, -1)
        elif name.endswith("attn.k_smear"):
            out[name] = w.repeat_interleave(group, 0)
    return out
