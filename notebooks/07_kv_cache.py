# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 7. Generating text with a KV cache
#
# *Gemma blog, "What a KV cache stores", "The KV cache of a larger model" and "FLOPs at long
# contexts".*
#
# **The claims.** A KV cache stores every earlier token's keys and values once, so each
# decoding step processes one new token. Its size per sequence is
#
# $$
# \text{KV cache bytes} = 2 \cdot n_{kv} \cdot h \cdot b \cdot \sum_{\ell=1}^{L} T_\ell,
# $$ (eq-kv)
#
# with $n_{kv}$ key/value heads of size $h$, $b$ bytes per number and $T_\ell$ positions kept
# by layer $\ell$: all of them in a global layer, at most $W - 1$ in a local one. Model B
# (GQA 4:1, windows of 512 in nine of its twelve layers) keeps a 6.4x smaller cache than
# Model A: 11.8 MB against 75.5 MB at 1024 tokens in fp32. At a 7B-class model's scale,
# Gemma 3's own layout (1,024-token windows, five local layers to one global) shrinks a
# 32k-token cache about 19x; that is Gemma 3's layout, not Model B's (or the toy's) one global
# layer in four with a window of L/2. Sliding windows also stop the per-token compute from
# growing with the context, but only in the local layers: the global layers' attention cost
# still grows with every token.
#
# ```{note}
# The sizes and FLOPs below are computed here from the models' real shapes and cache
# tensors. The speed section reads `benchmarks/results/bench_decode.json`, which
# `python -m benchmarks.bench_decode` writes on this machine (random weights: speed does not depend
# on them).
# ```

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)
budget_file = ""  # a TOML budget file, a base budget and its overrides (README, Your own data); empty: none

# %%
import json

import matplotlib.pyplot as plt
import pandas as pd

from nblib.book.chapter import Chapter
from nblib.chapters.part2 import blog_findings
from nblib.data import get_tokenizer
from nblib.gemma import pair
from nblib.gemma.inference_cost import (kv_cache_table, kv_layouts_7b, long_context_flops, mean_keys_table,
                                        measured_cache_bytes, profiler_flops)
from nblib.models.gemma3 import Gemma3Config
from nblib.models.gpt2 import GPT2Config
from nblib.store.provenance import REPO_ROOT

ch = Chapter("07_kv_cache", budget=budget, budget_file=budget_file, seed=seed, run_root=run_root)

# %% [markdown]
# ## What a KV cache stores
#
# The real models (Model A: GPT-2 124M; Model B: Gemma 3-style 113M) allocate their caches
# for one sequence of $T$ tokens in fp32; the table and {numref}`fig-cache-bytes` compare
# the bytes of those tensors with {eq}`eq-kv`. The shapes are the same at every budget, so
# this section does not depend on the budget.

# %%
models = {"Model A (GPT-2 124M)": ("gpt2", GPT2Config.gpt2_124m()),
          "Model B (Gemma 3-style 113M)": ("gemma3", Gemma3Config.gemma3_113m())}
lengths = [1, 64, 128, 256, 384, 511, 512, 640, 768, 896, 1024, 1536, 2048]
measured = measured_cache_bytes(models, lengths)
ch.save_table(measured, "kv_cache_bytes")
measured[measured.tokens.isin([512, 1024, 2048])].assign(
    **{"measured MB": lambda d: d["measured bytes"] / 1e6})

# %% tags=["remove-output"]
#| label: cell-cache-bytes
fig, ax = plt.subplots(figsize=(6.5, 4))
for (name, g), color in zip(measured.groupby("model", sort=False), ("tab:orange", "tab:blue")):
    ax.plot(g.tokens, g["formula bytes"] / 1e6, "-", c=color, label=f"{name}: formula")
    ax.plot(g.tokens, g["measured bytes"] / 1e6, "o", c=color, ms=4, label=f"{name}: allocated tensors")
ax.axvline(512, ls=":", c="0.5")
ax.set(xlabel="tokens in the cache", ylabel="KV cache per sequence (MB, fp32)", title="KV cache size")
ax.legend(fontsize=8)
ch.save_figure(fig, "fig_kv_cache_bytes")

# %% [markdown]
# :::{figure} #cell-cache-bytes
# :label: fig-cache-bytes
# The KV cache per sequence in fp32 against the tokens it holds: {eq}`eq-kv` (lines) and the
# bytes of the tensors each model allocates (dots). Model A stops at its 1024-row position
# table. Model B grows a quarter as steeply (GQA 4:1) and flattens past its 512-token window
# (dotted), where only its 3 global layers keep adding positions.
# :::
#
# ## Generating with the cache: the trained models
#
# Chapter 6's Models A and B continue a held-out prompt past Model B's window: greedily,
# with top-k and with nucleus sampling at temperature 0.8, each from a fixed seed. Every
# continuation is generated twice, once through the cache and once recomputing the whole
# sequence at every step; the column `same_without_cache` compares the two token for token.

# %%
runs = pair.train_pair(ch.store, ch.budget, seed=seed)  # chapter 6's runs: read, not retrained
trained = pair.pair_models(runs)
L, W = ch.budget.pair.seq_len, ch.budget.pair.model_b["window"]
n_prompt = 3 * L // 8
prompt = pair.eval_windows(ch.budget)[:1, :n_prompt]
tok = get_tokenizer(ch.budget.pair.tokenizer)
gen = pair.generation_table(trained, tok, prompt, n_new=L - n_prompt - 8, seed=seed)
ch.save_table(gen, "generation_examples", runs=list(runs.values()))
print(f"prompt ({n_prompt} tokens; the generation ends at position {L - 8}, past the window W = {W}):\n")
print(tok.decode(prompt[0]))

# %%
for r in gen.itertuples():
    print(f"--- {r.model}, {r.sampler} (same tokens without the cache: {r.same_without_cache})\n{r.continuation}\n")
gen.drop(columns="continuation")

# %% [markdown]
# ## The KV cache of a larger model
#
# The same formula for a 7B-class model (32 layers, 32 heads of 128) in bf16: full
# multi-head attention, GQA with 8 key/value heads, and GQA with windows of 1024 in all but
# one layer in six, in GB per sequence.

# %%
table_7b = kv_cache_table(kv_layouts_7b())
ch.save_table(table_7b, "kv_cache_7b")
table_7b.round(2)

# %% [markdown]
# ## FLOPs at long contexts
#
# Per layer, attention costs $4 d \bar{k}$ FLOPs per token (scores and values), with
# $\bar{k}$ the mean number of keys a query sees: $(T+1)/2$ in a global layer, at most $W$
# in a local one. Both recipes scaled to 7B- and 14B-class models, forward GFLOPs per token
# at 1k and 128k tokens (every linear layer and the LM head, plus attention):

# %%
flops = long_context_flops()
ch.save_table(flops, "flops_long_context")
flops.round(3)

# %%
kbar = mean_keys_table()
ch.save_table(kbar, "mean_keys")
kbar.round(3)

# %% [markdown]
# **A profiler cross-check.** PyTorch's `FlopCounterMode` counts the FLOPs of one real
# forward pass of each model: its matrix multiplications per token against the analytic
# linear term above. It has no formula for the CPU attention kernels, so the attention term
# rests on the closed form for $\bar{k}$ (which the tests check against brute-force counts
# of the masks).

# %%
prof = profiler_flops(models, seq_len=256)
ch.save_table(prof, "flops_profiler_check")
prof

# %% [markdown]
# ## Decoding speed: with and without the cache, against `transformers`
#
# Prefill writes the cache in one pass over the prompt; each decode step reads every weight
# once plus the whole batch's cache. Where memory bandwidth is the limit, the step time
# follows the bytes read ({numref}`fig-decode-steps`), and Model B's smaller cache pays off
# as the batch and the prompt grow.

# %%
bench_path = REPO_ROOT / "benchmarks" / "results" / "bench_decode.json"
bench = pd.DataFrame(json.loads(bench_path.read_text())["rows"]) if bench_path.exists() else None
if bench is None:
    print("no decode benchmark results yet: run `python -m benchmarks.bench_decode`")
else:
    ch.markdown((REPO_ROOT / "benchmarks" / "results" / "bench_decode.md").read_text()
                .replace("# Decode benchmark\n", ""))

# %% tags=["remove-output"]
#| label: cell-decode-steps
fig, ax = plt.subplots(figsize=(6.5, 4))
if bench is not None:
    for (name, g), color in zip(bench.groupby("model", sort=False), ("tab:orange", "tab:blue")):
        ax.plot(g.mb_read_per_step, g.decode_ms_per_step, "o-", c=color, label=name)
        for _, r in g.iterrows():
            ax.annotate(f"b{r.batch}/p{r.prompt}", (r.mb_read_per_step, r.decode_ms_per_step), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
    ax.legend(fontsize=8)
ax.set(xlabel="MB read per decode step (weights + KV cache)", ylabel="ms per decode step",
       title="Decode step time against bytes read (fp32, CPU)")
ch.save_figure(fig, "fig_decode_steps")

# %% [markdown]
# :::{figure} #cell-decode-steps
# :label: fig-decode-steps
# Time per decode step against the megabytes one step reads (every weight once plus the
# batch's KV cache), for batch 1 and 8 after 128- and 512-token prompts, Models A and B with
# random weights in fp32 on this machine's CPU (`python -m benchmarks.bench_decode`).
# :::
#
# ## What we see

# %%
ch.markdown(blog_findings.kv_cache_findings(measured, table_7b, flops))
if bench is not None:
    ch.markdown(blog_findings.decode_findings(bench))

# %%
ch.done()
