"""What inference costs Models A and B and their scaled-up recipes (the Gemma blog, "What a
KV cache stores", "The KV cache of a larger model", "FLOPs at long contexts").

- `measured_cache_bytes`: the bytes of the KV-cache tensors a model really allocates, next
  to the closed form 2 * n_kv * h * b * sum_l T_l (`nblib.models.engine.kv_cache_bytes`).
- `kv_cache_table`: that formula for a 7B-class model (32 layers, 32 heads of 128, bf16)
  under three layouts: full multi-head attention, GQA with 8 key/value heads, and GQA
  plus sliding windows of 1024 in all but one layer in six.
- `gpt2_recipe`, `gemma3_recipe`: Model A's and Model B's proportions at any width and
  depth (the blog scales both recipes to 7B- and 14B-class models), and
  `long_context_flops`: their forward FLOPs per token at 1k and 128k, and the share of the
  attention scores.
- `profiler_flops`: PyTorch's FlopCounterMode on one real forward pass against the analytic
  linear term.
Everything else is computed on PyTorch's meta device (shapes, no memory) or from the
formulas; the measured cache tensors and the profiled forward passes are real.
"""

from __future__ import annotations

import math

import pandas as pd
import torch
from torch.utils.flop_counter import FlopCounterMode

from nblib.models import build_model, config_to_dict
from nblib.models.engine import kv_cache_bytes, kv_positions_kept
from nblib.models.gemma3 import Gemma3Config
from nblib.models.gpt2 import GPT2Config
from nblib.models.layers import mean_keys


def gpt2_recipe(d_model: int, n_layers: int, head_dim: int = 64, vocab_size: int = 50257,
                max_seq_len: int = 1024) -> GPT2Config:
    """Model A's proportions (GPT-2: heads of 64, MLP 4d, learned positions) at a given size."""
    return GPT2Config(vocab_size=vocab_size, max_seq_len=max_seq_len, d_model=d_model, n_layers=n_layers,
                      n_heads=d_model // head_dim)


def gemma3_recipe(d_model: int, n_layers: int, head_dim: int = 64, vocab_size: int = 50304, window: int = 512,
                  global_every: int = 4) -> Gemma3Config:
    """Model B's proportions at a given size: heads of 64 with a quarter as many key/value
    heads (GQA 4:1), a GeGLU of width 8/3 d (Model B: 2048 at d = 768), and windows of 512
    in three layers of four."""
    n_heads = d_model // head_dim
    return Gemma3Config(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                        n_kv_heads=n_heads // 4, head_dim=head_dim, d_ff=round(d_model * 8 / 3), window=window,
                        global_every=global_every)


# The blog's scaled recipes: widths and depths that give its parameter counts (6.7B, 15.4B,
# 5.8B, 13.5B) and, through `flops_breakdown`, its FLOPs table to the printed digit.
BLOG_RECIPES = {
    "Model A's recipe, 6.7B": ("gpt2", gpt2_recipe(4096, 32)),
    "Model A's recipe, 15.4B": ("gpt2", gpt2_recipe(5120, 48)),
    "Model B's recipe, 5.8B": ("gemma3", gemma3_recipe(4096, 32)),
    "Model B's recipe, 13.5B": ("gemma3", gemma3_recipe(5120, 48)),
}


def meta_model(family: str, cfg):
    """A model of `family` with config `cfg` on the meta device (shapes only)."""
    with torch.device("meta"):
        return build_model(family, config_to_dict(cfg))


def long_context_flops(recipes: dict = BLOG_RECIPES, contexts=(1024, 131072)) -> pd.DataFrame:
    """The blog's "FLOPs at long contexts" table: parameters, forward GFLOPs per token at each
    context, the growth from the first to the last, and the attention scores' share at the
    last context. One row per recipe."""
    rows = []
    for name, (family, cfg) in recipes.items():
        m = meta_model(family, cfg)
        row = {"recipe": name, "parameters (B)": m.n_params(non_embedding=False) / 1e9}
        parts = {T: m.flops_breakdown(T) for T in contexts}
        for T, f in parts.items():
            row[f"GFLOPs/token at {T:,}"] = (f["linear"] + f["attention"]) / 1e9
        first, last = (parts[T]["linear"] + parts[T]["attention"] for T in (contexts[0], contexts[-1]))
        row[f"growth {contexts[0]:,} -> {contexts[-1]:,}"] = last / first
        row[f"attention share at {contexts[-1]:,}"] = parts[contexts[-1]]["attention"] / last
        rows.append(row)
    return pd.DataFrame(rows)


def mean_keys_table(contexts=(1024, 131072), window: int = 512) -> pd.DataFrame:
    """k̄ per query of a global and of a local layer (window W) at each context, and the local
    layer's saving (the blog's table: 512.5 against 384.25 at T = 1024, W = 512)."""
    return pd.DataFrame([{"context T": T, "global k̄": mean_keys(T), f"local k̄ (W={window})": mean_keys(T, window),
                          "local layer's saving": mean_keys(T) / mean_keys(T, window)} for T in contexts])


def kv_layouts_7b(n_layers: int = 32, n_heads: int = 32, head_dim: int = 128, kv_heads: int = 8,
                  window: int = 1024, global_every: int = 6) -> dict:
    """The blog's 7B-class model (32 layers, d_model 4096 = 32 heads of 128) under three cache
    layouts: {name: (layer windows, key/value heads, head size)}. With windows, one layer in
    six is global, rounded up: 6 of 32 (what the blog's 0.31 / 0.91 / 3.3 GB imply)."""
    n_global = math.ceil(n_layers / global_every)
    local = [window] * (n_layers - n_global) + [None] * n_global
    return {"MHA (32 KV heads)": ([None] * n_layers, n_heads, head_dim),
            f"GQA-{kv_heads}": ([None] * n_layers, kv_heads, head_dim),
            f"GQA-{kv_heads} + windows of {window}": (local, kv_heads, head_dim)}


def kv_cache_table(layouts: dict, lengths=(8192, 32768, 131072), bytes_per_el: int = 2) -> pd.DataFrame:
    """KV cache per sequence in GB (1e9 bytes) for each layout at each length (bf16 by default)."""
    rows = []
    for T in lengths:
        row = {"tokens": T}
        for name, (windows, n_kv, hd) in layouts.items():
            row[name] = kv_cache_bytes(windows, n_kv, hd, T, bytes_per_el=bytes_per_el) / 1e9
        rows.append(row)
    return pd.DataFrame(rows)


def measured_cache_bytes(models: dict, lengths, dtype=torch.float32) -> pd.DataFrame:
    """For each {name: (family, config)} and each length T: the bytes of the cache tensors the
    model allocates for one sequence of T tokens (`init_kv_cache`, real tensors) and the
    closed form. The model itself lives on the meta device."""
    rows = []
    for name, (family, cfg) in models.items():
        m = meta_model(family, cfg)
        for T in lengths:
            if m.max_positions is not None and T > m.max_positions:
                continue  # a learned position table has no row past its length
            cache = m.init_kv_cache(1, T, dtype=dtype, device="cpu")
            per_el = torch.empty((), dtype=dtype).element_size()
            rows.append({"model": name, "tokens": T, "measured bytes": cache.nbytes(),
                         "formula bytes": m.kv_cache_bytes(T, bytes_per_el=per_el),
                         "positions kept": sum(kv_positions_kept(T, w) for w in m.layer_windows)})
            del cache
    return pd.DataFrame(rows)


def profiler_flops(models: dict, seq_len: int = 256) -> pd.DataFrame:
    """Cross-check of `flops_breakdown` with PyTorch's FlopCounterMode on one forward pass of
    each real model (random weights, batch 1, `seq_len` tokens): the matmuls it counts per
    token against the analytic linear term. FlopCounterMode has no formula for the CPU SDPA
    kernels, so what it counts of attention (none of the SDPA calls; the bmm of the blocked
    band path) is reported next to the closed form, which the tests check against
    brute-force counts of the masks instead."""
    rows = []
    for name, (family, cfg) in models.items():
        torch.manual_seed(0)
        m = build_model(family, config_to_dict(cfg)).eval()
        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            m(torch.randint(0, cfg.vocab_size, (1, seq_len)))
        counts = {str(op): n for op, n in fc.get_flop_counts()["Global"].items()}
        # the linear layers run as mm/addmm; anything else counted belongs to attention
        matmul = sum(n for op, n in counts.items() if op in ("aten.mm", "aten.addmm"))
        other = sum(n for op, n in counts.items() if op not in ("aten.mm", "aten.addmm"))
        f = m.flops_breakdown(seq_len)
        rows.append({"model": name, "tokens": seq_len, "analytic linear FLOPs/token": f["linear"],
                     "profiler matmul FLOPs/token": matmul / seq_len,
                     "ratio": matmul / seq_len / f["linear"], "analytic attention FLOPs/token": f["attention"],
                     "profiler attention FLOPs/token": other / seq_len})
        del m
    return pd.DataFrame(rows)
