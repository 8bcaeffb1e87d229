"""Gemma 3-style decoder: the Gemma blog's Model B (113M).

Notable features (Gemma 3 technical report, 2025; transformers' gemma3 modelling code):
- RoPE with separate local/global bases (Gemma blog uses 1e4 for both), optional YaRN on
  every layer (Gemma blog "Design choices the YaRN paper leaves open"), or a stretch of the
  global layers only (`rope_scaling_layers="global"`: Gemma 3's own choice, with linear
  position interpolation, `{"type": "linear", "factor": s}`).
- GQA: 12 query heads over 3 kv heads of size 64; QK-norm (RMSNorm over head_dim, before RoPE).
- GeGLU MLP down(gelu_tanh(gate(x)) * up(x)); sandwich RMSNorm with (1 + w) weights
  initialised at 0 and computed in fp32; tied embeddings scaled by sqrt(d).
- Sliding window W = 512 in 3 of every 4 layers: key j is visible to query i iff
  i - W < j <= i. Windowed layers run a blocked band when T > 2W and keep a W-1 ring
  buffer in the KV cache. Which layers are global (`layer_pattern`):
  - "blog", Model B's (`gemma3_113m` and every budget's pair, `nblib.budgets.pair`): layer i
    (from 0) is global iff i % global_every == 0, so Model B's twelve layers are G L L L G L L
    L G L L L with global layers 0, 4 and 8. The Gemma blog numbers layers from 0 and names
    "global layer 8" and "layer 6, a local layer", which only this layout gives with three
    global layers in twelve.
  - "hf": iff (i + 1) % global_every == 0 (L L L G ..., global layers 3, 7 and 11), the rule
    of transformers' Gemma 3 (`sliding_window_pattern`), kept for comparisons. It is the
    field's default because every run config written before the field existed (issue 65)
    lacks it and was trained with this rule: a stored run still loads as it was trained.
  The Hugging Face export writes the layout as `layer_types`, so either pattern loads back.
Shared machinery (attention, KV cache, generate, counts) lives in attention.py.
"""

from dataclasses import dataclass

import torch.nn as nn
import torch.nn.functional as F

from .base import DecoderLM
from .engine import attention
from .layers import RMSNorm, Rotary, apply_rope, check_config_ints, check_rope_scaling, init_weights


class Attention(nn.Module):
    """GQA self-attention with QK-norm and RoPE; window=None is a global layer."""

    def __init__(self, cfg, window):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim, self.window = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, window
        d, hd = cfg.d_model, cfg.head_dim
        self.q_proj = nn.Linear(d, cfg.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(d, cfg.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, cfg.n_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.n_heads * hd, d, bias=False)
        self.q_norm = RMSNorm(hd, cfg.norm_eps, unit_offset=True)
        self.k_norm = RMSNorm(hd, cfg.norm_eps, unit_offset=True)

    def forward(self, x, rope, seg=None, cache=None, layer=0):
        B, T, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(B, T, self.n_heads, self.head_dim)).transpose(1, 2)  # (B, nh, T, hd)
        k = self.k_norm(self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim)).transpose(1, 2)  # (B, nkv, T, hd)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        y = attention(q, k, v, window=self.window, seg=seg, cache=cache, layer=layer)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))


class GeGLU(nn.Module):
    """down(gelu_tanh(gate(x)) * up(x))."""

    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.up_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.down_proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class Block(nn.Module):
    """Sandwich norm: h = x + post_attn(attn(pre_attn(x))); out = h + post_mlp(mlp(pre_mlp(h)))."""

    def __init__(self, cfg, window):
        super().__init__()
        d, eps = cfg.d_model, cfg.norm_eps
        self.window = window
        self.pre_attn_norm, self.post_attn_norm = RMSNorm(d, eps, True), RMSNorm(d, eps, True)
        self.pre_mlp_norm, self.post_mlp_norm = RMSNorm(d, eps, True), RMSNorm(d, eps, True)
        self.attn = Attention(cfg, window)
        self.mlp = GeGLU(cfg)

    def forward(self, x, rope, seg=None, cache=None, layer=0):
        x = x + self.post_attn_norm(self.attn(self.pre_attn_norm(x), rope, seg, cache, layer))
        return x + self.post_mlp_norm(self.mlp(self.pre_mlp_norm(x)))


LAYER_PATTERNS = ("blog", "hf")


def global_layers(n_layers: int, global_every: int, pattern: str = "blog") -> list[int]:
    """The global layers (from 0) of a model with one global layer in `global_every`:
    "blog" puts it first in each group (i % global_every == 0: the Gemma blog's layers 0, 4, 8
    of 12), "hf" last ((i + 1) % global_every == 0: transformers' Gemma 3, layers 3, 7, 11)."""
    if pattern == "blog":
        return [i for i in range(n_layers) if i % global_every == 0]
    if pattern == "hf":
        return [i for i in range(n_layers) if (i + 1) % global_every == 0]
    raise ValueError(f"layer pattern {pattern!r} is not allowed; allowed: {', '.join(LAYER_PATTERNS)}")


def layer_pattern_of(windows) -> tuple[int, str]:
    """(global_every, layer_pattern) that give the per-layer layout `windows` (None: global,
    an int: local), e.g. read back from a Hugging Face config's `layer_types`; ValueError when
    no pattern gives it. Every layer global is global_every=1."""
    n = len(windows)
    want = [i for i, w in enumerate(windows) if w is None]
    for every in range(1, n + 1):
        for pattern in LAYER_PATTERNS:
            if global_layers(n, every, pattern) == want:
                return every, pattern
    raise ValueError(f"global layers {want} of {n} follow no layer pattern; allowed: one layer in k global, "
                     f"first in each group of k ('blog') or last ('hf')")


@dataclass(kw_only=True)
class Gemma3Config:
    vocab_size: int = 50304
    d_model: int = 768
    n_layers: int = 12
    n_heads: int = 12
    n_kv_heads: int = 3
    head_dim: int = 64
    d_ff: int = 2048
    max_seq_len: int = 1024  # nominal training context
    window: int = 512  # sliding window W (keys incl. the current one)
    global_every: int = 4  # one layer in global_every is global (where: layer_pattern)
    # "blog" (Model B's): layer i global iff i % global_every == 0 (G,L,L,L); "hf": iff (i + 1) %
    # global_every == 0 (L,L,L,G), the default only so that configs stored without the field
    # (every run before issue 65) keep the layout they were trained with
    layer_pattern: str = "hf"
    rope_local_base: float = 1e4
    rope_global_base: float = 1e4  # Gemma 3 itself uses 1e6; the Gemma blog's Model B 1e4
    norm_eps: float = 1e-6
    rope_scaling: dict | None = None  # YaRN or linear interpolation (nblib.models.layers.check_rope_scaling)
    rope_scaling_layers: str = "all"  # the layers rope_scaling stretches: "all" (Gemma blog) or "global" (Gemma 3)

    def __post_init__(self):
        check_config_ints(self, ["vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads",
                                 "head_dim", "d_ff", "max_seq_len", "window", "global_every"])
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")
        if not (self.rope_local_base > 1 and self.rope_global_base > 1):
            raise ValueError(f"RoPE bases must be > 1, got {self.rope_local_base}, {self.rope_global_base}")
        check_rope_scaling(self.rope_scaling)
        if self.layer_pattern not in LAYER_PATTERNS:
            raise ValueError(f"layer_pattern={self.layer_pattern!r} is not allowed; allowed: {', '.join(LAYER_PATTERNS)}")
        if self.rope_scaling_layers not in ("all", "global"):
            raise ValueError(f"rope_scaling_layers={self.rope_scaling_layers!r} is not allowed; allowed: all, global")

    @property
    def global_layers(self) -> list[int]:
        """The global layers (numbered from 0) of `layer_pattern`."""
        return global_layers(self.n_layers, self.global_every, self.layer_pattern)

    @property
    def layer_windows(self):
        """Per layer: W for a local layer, None for a global one."""
        g = set(self.global_layers)
        return [None if i in g else self.window for i in range(self.n_layers)]

    @classmethod
    def gemma3_113m(cls, **overrides):
        """Gemma blog's Model B: d 768, 12 layers (9 local; 3 global: layers 0, 4 and 8), 12 q / 3 kv heads of 64,
        d_ff 2048, vocab 50304, W 512, context 1024: 112,990,464 parameters (closed form in
        Gemma3's docstring), 74,356,992 non-embedding."""
        return cls(**{"layer_pattern": "blog", **overrides})


class Gemma3(DecoderLM):
    """Gemma 3-style LM (Model B of the Gemma blog). forward(idx, targets=None, doc_ids=None) -> (logits, loss).

    n_params(non_embedding=True) excludes the (tied) token embedding. Closed form:
    total = V*d + L*(2*d*nh*hd + 2*d*nkv*hd + 3*d*d_ff + 4*d + 2*hd) + d.
    """

    def __init__(self, cfg: Gemma3Config):
        super().__init__()
        self.config = cfg
        self.vocab_size, self.d_model, self.max_positions = cfg.vocab_size, cfg.d_model, None
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.layer_windows = cfg.layer_windows
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, w) for w in self.layer_windows)
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps, unit_offset=True)
        local_scaling = cfg.rope_scaling if cfg.rope_scaling_layers == "all" else None
        self.rotary_local = Rotary(cfg.head_dim, cfg.rope_local_base, local_scaling)
        self.rotary_global = Rotary(cfg.head_dim, cfg.rope_global_base, cfg.rope_scaling)
        init_weights(self, cfg.n_layers, residual_names=("o_proj", "down_proj"))

    def set_rope_base(self, global_base, local_base=None):
        """ABF (Xiong et al. 2024): new global (and optionally local) RoPE base, same weights."""
        self.rotary_global.set_base(global_base)
        self.config.rope_global_base = float(global_base)
        if local_base is not None:
            self.rotary_local.set_base(local_base)
            self.config.rope_local_base = float(local_base)

    def _hidden(self, idx, pos, seg, cache):
        x = self.embed(idx) * self.d_model ** 0.5  # (B, T, d), Gemma's scaled embedding
        rope_local, rope_global = self.rotary_local(pos, x.dtype), self.rotary_global(pos, x.dtype)
        for layer, block in enumerate(self.blocks):
            x = block(x, rope_global if block.window is None else rope_local, seg, cache, layer)
        return self.norm(x)

    def logits_from_hidden(self, h):
        """Tied LM head on final-normed hidden states (..., d) -> (..., V)."""
        return F.linear(h, self.embed.weight)

    def _embedding_params(self):
        return [self.embed.weight]
