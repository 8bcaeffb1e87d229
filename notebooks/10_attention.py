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
# # 10. What the heads attend to: copying, sinks and disagreements
#
# *Gemma blog, "Visualizing attention", "Attention distance and attention sinks", "Induction
# heads and the local window" and "Where the two models disagree".*
#
# **The claims.**
#
# - Asked to continue "Learning is Fun 🤗, Keep exploring 🔭", both models copy the line.
#   The copy shows as a stripe parallel to the diagonal in one layer per model.
# - On ordinary text, Model A's heads look further back than Model B's: 132 against 81
#   tokens on average. Model A parks attention on position 0 (up to 13% of a layer) and even
#   more on document separators (up to 29%). Model B's global layers never park it on
#   position 0; B parks it on separators, though less than A (at most 11% of a layer).
# - Induction heads: with a random block repeated 256 tokens back (inside Model B's 512
#   window), both models have clean induction heads (best scores 0.93 and 0.90). At 768
#   tokens back, Model A still copies (score 0.90). Model B's heads are gone (best 0.05,
#   repeat loss 12.3 nats), because its strongest induction head sits in a local layer.
# - Token by token, the models rarely disagree: mean KL(A‖B) 0.29 nats, median 0.21, 3% of
#   tokens above 1 nat.
# - The blog names a causal check it did not run: switch heads off and measure what breaks.
#   This chapter runs it on the induction heads.

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)
budget_file = ""  # a TOML budget file, a base budget and its overrides (README, Your own data); empty: none

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from nblib.book.chapter import Chapter
from nblib.chapters.figures import glyph_available
from nblib.chapters.part2 import blog_findings
from nblib.data import get_tokenizer
from nblib.gemma import attention as AT
from nblib.gemma import pair, training_length
from nblib.metrics import attention_maps as M

ch = Chapter("10_attention", budget=budget, budget_file=budget_file, seed=seed, run_root=run_root)
budget = ch.budget.name  # a budget file's base, when one is given
spec = ch.budget.pair
L, W = spec.seq_len, spec.model_b["window"]
runs = pair.train_pair(ch.store, ch.budget, seed=seed)  # chapter 6's runs: read, not retrained
models = pair.pair_models(runs)
names = {k: pair.MODELS[k][1] for k in models}
tok = get_tokenizer(spec.tokenizer)
global_layers = [i for i, w in enumerate(models["B"].layer_windows) if w is None]

# %% [markdown]
# ## A prompt and its greedy continuation
#
# First the blog's sentence, after the end-of-document token that starts every document in
# training, continued greedily by both models.

# %%
prompt = "Learning is Fun 🤗, Keep exploring 🔭"
n_new = max(8, min(24, L // 8))
for k, text in AT.greedy_continuations(models, tok, prompt, n_new).items():
    print(f"{names[k]}: {prompt!r} -> {text!r}")

# %% [markdown]
# The blog's models learned English from FineWeb-Edu and answer by repeating the line. At
# `toy` the models have read only Python source, so an English line is foreign to them, and
# at `full` it is the blog's own test. To see a copy in the attention maps at every budget,
# the maps below read the sentence twice, then each model's greedy continuation. The second
# copy is where an induction head looks back at the token after its earlier twin. The
# whole text is encoded again so that every token gets a legible label: a line break is ↵,
# and the tokens of a multi-byte character carry its glyph, or its code point where the
# plotting font has no glyph, with their part (🤗¹ 🤗² …).

# %%
twice = f"{prompt}\n{prompt}\n"
continuation = AT.greedy_continuations(models, tok, twice, n_new, max_tokens=L - n_new)  # Model A reads <= L tokens
for k, text in continuation.items():
    print(f"{names[k]}: ... -> {text!r}")

# %% tags=["remove-output"]
#| label: cell-attention-maps
n_layers = len(models["A"].blocks)
maps = AT.layer_maps(models, tok, {k: twice + c for k, c in continuation.items()}, L, renderable=glyph_available)
fig, axes = plt.subplots(2, n_layers, figsize=(3.6 * n_layers, 7.6))
for row, (k, (labels, mean_maps)) in enumerate(maps.items()):
    for layer in range(n_layers):
        ax = axes[row, layer]
        ax.imshow(mean_maps[layer], cmap="Blues", vmin=0, vmax=1)
        kind = "" if k == "A" else (" (global)" if layer in global_layers else " (local)")
        ax.set_title(f"{names[k].split(' (')[0]}, layer {layer}{kind}", fontsize=9)
        step = max(1, len(labels) // 28)
        ax.set_xticks(range(0, len(labels), step), labels[::step], rotation=90, fontsize=5)
        ax.set_yticks(range(0, len(labels), step), labels[::step], fontsize=5)
ch.save_figure(fig, "fig_attention_maps", runs=list(runs.values()))

# %% [markdown]
# :::{figure} #cell-attention-maps
# :label: fig-attention-maps
# Every layer's attention averaged over its heads, for the sentence read twice and each
# model's own greedy continuation. Rows are queries, columns keys; darker is more attention.
# A copying layer shows a stripe parallel to the diagonal where the second copy looks back
# at the first.
# :::
#
# ## How far heads look, and where they rest
#
# Held-out files packed one after another with an end-of-document separator between them,
# as in training, in windows of $L$ tokens. The measures use only the queries in the second
# half of each window, so every head could look at least $L/2$ tokens back. Attention
# distance and the first-position share read the windows as they come, as the blog's do
# ("32 held-out 1024-token windows"). The separator share needs a separator to look at, so it
# reads windows chosen to hold one in their first half; the toy's files are mostly longer
# than a window, so few windows would otherwise hold one.

# %%
n_win = 32 if budget != "smoke" else 4
plain_windows = AT.heldout_windows(ch.budget, n=n_win)  # as they come
windows = M.packed_eval_windows(ch.budget, n=n_win)  # a separator in the first half of each
measures = AT.head_measure_table(models, plain_windows, tok.eos_id, names).drop(columns="separator").merge(
    AT.head_measure_table(models, windows, tok.eos_id, names)[["model", "layer", "head", "separator"]])
ch.save_table(measures.set_index(["model", "layer", "head"]), "head_measures", runs=list(runs.values()))
by_layer = measures.groupby(["model", "layer"])[["distance", "first_position", "separator"]].mean()
by_layer.round(3)

# %% [markdown]
# The blog compares the two models' mean attention distance over all heads. Here it is
# with a bootstrap interval that resamples windows, and the ratio A / B with its own (both
# models read the same windows, so the resample is paired). A second reading drops the
# attention on the sinks, position 0 and the separators, and renormalises the rest: it asks
# how far a head looks when it does look at text.

# %%
distances = AT.model_distances(models, plain_windows, tok.eos_id)
distance_iv = AT.distance_table(distances, names)
ch.save_table(distance_iv, "attention_distance", runs=list(runs.values()))
distance_iv.round(3)

# %% tags=["remove-output"]
#| label: cell-distance-sinks
fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
colors = {names["A"]: "tab:blue", names["B"]: "tab:orange"}
for ax, col, title in zip(axes, ("distance", "first_position", "separator"),
                          ("attention distance (tokens)", "share on the first position", "share on separators")):
    for gl in global_layers:
        ax.axvspan(gl - 0.4, gl + 0.4, color="0.92")
    for name, g in measures.groupby("model", sort=False):
        off = -0.1 if name == names["A"] else 0.1
        ax.scatter(g.layer + off, g[col], s=12, c=colors[name], alpha=0.7)
        ax.plot(*zip(*g.groupby("layer")[col].mean().items()), c=colors[name], label=name)
    ax.set(xlabel="layer (shaded: Model B's global layers)", title=title)
axes[0].axhline(W, ls="--", c="0.5", lw=0.8)
axes[0].legend(fontsize=8)
ch.save_figure(fig, "fig_distance_sinks", runs=list(runs.values()))

# %% [markdown]
# :::{figure} #cell-distance-sinks
# :label: fig-distance-sinks
# One dot per head, the line per layer's mean, Model A blue and Model B orange, Model B's
# global layers shaded. Left: attention distance (dashed: Model B's window). Middle: share of
# attention on the window's first position. Both read the windows as they come. Right: share
# on document separators, on windows with a separator in their first half.
# :::
#
# ### Why the toy's sinks are small: the data format, then training length
#
# The blog's models rest up to 13% (A, first position) and 29% (A) or 11% (B) of a layer's
# attention on sinks. Sinks depend on what training shows the model, so first the toy's
# training text against the blog's: one <|endoftext|> token between pages (the blog puts it
# at the start of every page; here it ends every document, the same token between packed
# documents), training windows cut across page boundaries, and attention free to cross them.

# %%
fmt = pair.data_format(ch.budget, seed)
fmt.to_frame("this budget's pair")

# %% [markdown]
# The format matches: the same separator between documents, windows cut across them, and
# no mask at their boundaries. What the toy changes is how often a window holds a
# separator. The blog's pages are mostly shorter than its windows (it notes that only about
# 3% of FineWeb-Edu pages reach 4k tokens, so packed windows join several pages), while the
# toy's Python files are mostly longer than its 256-token windows: the table above counts
# how few training windows hold one. A token that rarely appears cannot become a resting
# place. The other differences are scale: eight layers of four heads instead of twelve of
# twelve, and a few tokens per parameter instead of 79. Chapter 6's shorter budgets of the
# same pair show how the sinks move with training length.

# %%
ladder = training_length.length_ladder(ch.store, ch.budget, seed=seed)
sink_windows = windows[: 16 if budget != "smoke" else 4]
n_params_a = sum(p.numel() for p in models["A"].parameters())
sinks = AT.sinks_by_length(ladder, sink_windows, tok.eos_id, n_params_a, names)
ch.save_table(sinks.set_index(["model", "tokens per parameter"]), "sinks_by_training_length",
              runs=[r for rs in ladder.values() for r in rs.values()])
sinks.round(3)

# %%
ch.markdown(blog_findings.sink_trend_findings(sinks, fmt, names))

# %% [markdown]
# ## Induction heads, inside and beyond the window
#
# A block of random tokens, random filler, then the same block again: nothing but the earlier
# copy predicts the repeat. The repeat sits $L/4$ tokens back (inside Model B's window of
# $L/2$) or $3L/4$ back (beyond it; the blog's 256 and 768 at $L = 1024$). A head's
# induction score is the attention it puts on the token right after the earlier twin,
# averaged over the repeat.

# %%
n_block = max(8, L // 16)
n_seqs = 32 if budget != "smoke" else 4
distances = (L // 4, 3 * L // 4)
tests = AT.induction_tests(models, tok.vocab_size, tok.eos_id, n_block, distances, n_seqs, seed)
scores, induction = AT.induction_tables(tests, names)
ch.save_table(scores.set_index(["model", "distance", "layer", "head"]), "induction_scores",
              runs=list(runs.values()))
induction.round(3)

# %% tags=["remove-output"]
#| label: cell-induction
fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
for ax, d in zip(axes[:2], distances):
    for gl in global_layers:
        ax.axvspan(gl - 0.4, gl + 0.4, color="0.92")
    for name, g in scores[scores.distance == d].groupby("model", sort=False):
        off = -0.1 if name == names["A"] else 0.1
        ax.scatter(g.layer + off, g.score, s=14, c=colors[name], label=name)
    ax.set(xlabel="layer", ylabel="induction score", ylim=(-0.03, 1.03),
           title=f"repeat {d} tokens back ({'inside' if d < W else 'beyond'} B's window W={W})")
axes[0].legend(fontsize=8)
for name, g in induction.groupby("model", sort=False):
    axes[2].plot(g.distance, g["loss, repeat"], "o-", c=colors[name], label=f"{name}: repeat")
axes[2].axhline(induction["loss, first copy"].mean(), ls="--", c="0.4", label="first copy (unpredictable)")
axes[2].set(xlabel="distance of the repeat (tokens)", ylabel="loss (nats/token)", title="Does the repeat get copied?")
axes[2].legend(fontsize=8)
ch.save_figure(fig, "fig_induction", runs=list(runs.values()))

# %% [markdown]
# :::{figure} #cell-induction
# :label: fig-induction
# Induction scores of every head with the repeat inside (left) and beyond (middle) Model B's
# window; shaded columns are Model B's global layers. Right: the loss on the repeated block
# against the unpredictable first copy (dashed).
# :::
#
# ## Beyond the blog: switching heads off
#
# Attention maps show where information can flow, not that the model needs it there. Here
# each model's induction heads (score above 0.3 with the repeat inside the window, or its
# best head if none is) are zeroed before the output projection, and the repeat's loss is
# measured again. An induction head needs a previous-token head in an earlier layer, which
# tells each position what came before it (Olsson et al., 2022). So the same number of
# heads with the highest previous-token score are zeroed too. As a control, the same
# number of heads that score lowest on both counts are zeroed. The held-out loss on natural
# text shows what else the heads do.

# %%
natural = pair.eval_windows(ch.budget)
ablation = AT.ablation_table(models, tests, distances, natural, tok.vocab_size, tok.eos_id, n_block, n_seqs, seed,
                             names)
ch.save_table(ablation, "induction_ablation", runs=list(runs.values()))
ablation.round(3)

# %% [markdown]
# ## Where the two models disagree
#
# KL(A‖B) between the two next-token distributions at every position of the held-out
# windows, and the strongest disagreements in context.

# %%
kl, top_table, kl_summary = M.disagreements(models["A"], models["B"], natural, tok, top=8)
ch.save_table(top_table, "top_disagreements", runs=list(runs.values()))
pd.Series(kl_summary).to_frame("value").round(3)

# %%
top_table.round(2)

# %% tags=["remove-output"]
#| label: cell-kl
fig, ax = plt.subplots(figsize=(6.5, 3.8))
ax.hist(np.log10(np.clip(kl, 1e-6, None)), bins=60, color="tab:purple")
ax.set(xlabel="log10 KL(A || B) per token (nats)", ylabel="tokens", title=f"{kl.size:,} held-out tokens")
ch.save_figure(fig, "fig_kl", runs=list(runs.values()))

# %% [markdown]
# :::{figure} #cell-kl
# :label: fig-kl
# How much the two models disagree, token by token: the distribution of KL(A‖B) over the
# held-out windows, on a log scale.
# :::
#
# ## What we see

# %%
ch.markdown(blog_findings.attention_findings(by_layer, induction, ablation, kl_summary, names, L, W, global_layers,
                                            distance_iv))

# %%
ch.done()
