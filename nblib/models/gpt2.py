"""GPT-2 as nanoGPT ships it: the Gemma blog's Model A (124M).

Notable features:
- Learned position embeddings (a table of max_seq_len rows, GPT-2's n_ctx), full
  multi-head attention in every layer, GELU(tanh) MLP of width 4d.
- Pre-norm LayerNorm with biases, biases on every linear layer, tied input/output embeddings.
- Parameter names follow nanoGPT (wte, wpe, c_attn, c_proj, c_fc, ln_1, ln_2, ln_f).
Shared machinery (attention, KV cache, generate, counts) lives in attention.py.
"""

from dataclasses import dataclass

import torch.nn as nn
import torch.nn.functional as F

from .base import DecoderLM
from .engine import attention
from .layers import check_config_ints, init_weights


class Attention(nn.Module):
    """Causal multi-head self-attention, fused qkv projection (nanoGPT)."""

    def __init__(self, cfg):
        super().__init__()
        self.n_heads, self.head_dim = cfg.n_heads, cfg.head_dim
        self.c_attn = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.c_attn.weight.muon_row_blocks = 3  # W_q, W_k, W_v stacked: Muon treats each alone (nblib.training.optim)
        self.c_proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x, seg=None, cache=None, layer=0):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hd)
        y = attention(q, k, v, seg=seg, cache=cache, layer=layer)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    """c_proj(gelu_tanh(c_fc(x))), hidden width 4d."""

    def __init__(self, cfg):
        super().__init__()
        self.c_fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.c_proj = nn.Linear(4 * cfg.d_model, cfg.d_model)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        self.attn = Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, seg=None, cache=None, layer=0):
        x = x + self.attn(self.ln_1(x), seg, cache, layer)
        return x + self.mlp(self.ln_2(x))


@dataclass(kw_only=True)
class GPT2Config:
    vocab_size: int = 50257  # nanoGPT pads to 50304 for speed
    max_seq_len: int = 1024  # GPT-2's n_ctx: rows of the position table
    d_model: int = 768
    n_layers: int = 12
    n_heads: int = 12
    norm_eps: float = 1e-5

    def __post_init__(self):
        check_config_ints(self, ["vocab_size", "max_seq_len", "d_model", "n_layers", "n_heads"])
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")

    @property
    def head_dim(self):
        return self.d_model // self.n_heads

    @classmethod
    def gpt2_124m(cls, **overrides):
        """GPT-2 small: vocab 50257, n_ctx 1024, d 768, 12 layers, 12 heads: 124,439,808
        parameters (tied embeddings counted once; the count transformers reports)."""
        return cls(**{**dict(vocab_size=50257, max_seq_len=1024, d_model=768, n_layers=12, n_heads=12),
                      **overrides})


class GPT2(DecoderLM):
    """GPT-2 LM (Model A of the Gemma blog). forward(idx, targets=None, doc_ids=None) -> (logits, loss).

    n_params(non_embedding=True) excludes token and position embeddings (the tied output
    head is the token embedding). Closed form: total = V*d + n_ctx*d + L*(12*d^2 + 13*d) + 2*d;
    non-embedding 124M = 85,056,000.
    With doc_ids, positions restart at 0 at every document start.
    """

    def __init__(self, cfg: GPT2Config):
        super().__init__()
        self.config = cfg
        self.vocab_size, self.d_model, self.max_positions = cfg.vocab_size, cfg.d_model, cfg.max_seq_len
        self.n_heads = self.n_kv_heads = cfg.n_heads
        self.head_dim = cfg.head_dim
        self.layer_windows = [None] * cfg.n_layers
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        init_weights(self, cfg.n_layers, residual_names=("c_proj",))

    def _hidden(self, idx, pos, seg, cache):
        x = self.wte(idx) + self.wpe(pos)  # (B, T, d); pos (T,) or (B, T)
        for layer, block in enumerate(self.blocks):
            x = block(x, seg, cache, layer)
        return self.ln_f(x)

    def logits_from_hidden(self, h):
        """Tied LM head on final-normed hidden states (..., d) -> (..., V)."""
        return F.linear(h, self.wte.weight)

    def _embedding_params(self):
        return [self.wte.weight, self.wpe.weight]
