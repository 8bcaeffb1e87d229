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
# # 6. Models A and B: GPT-2 (124M) and a Gemma 3-style model (113M)
#
# *Gemma blog, Part 2's opening and Part 1's models.*
#
# **The claims.** Two models trained identically on the same 9.8 billion FineWeb-Edu tokens:
#
# - **Model A** is GPT-2 small: learned position embeddings, multi-head attention, LayerNorm,
#   a GELU MLP; 124,439,808 parameters.
# - **Model B** is Gemma 3-style: RoPE, grouped-query attention (12 query heads over 3
#   key/value heads), QK-norm, sandwich RMSNorm, a GeGLU MLP and a 512-token sliding window
#   in three layers of four, the global layers being 0, 4 and 8; 112,990,464 parameters.
#
# The two tied on loss and on every benchmark; Model B trained 4% slower in practice. Its
# recipe targets inference (chapter 7) and longer contexts (chapters 8-9). This chapter
# trains both at this budget on the same token stream and compares them; chapters 7-10 read
# these runs and never retrain them.

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
from nblib.budgets import get_budget
from nblib.chapters.part2 import blog_findings
from nblib.data import get_corpus, get_tokenizer
from nblib.gemma import pair, training_length
from nblib.gemma.pair import MODELS
from nblib.metrics.probes import copy_gain_table, position_loss_table
from nblib.models.gemma3 import global_layers

ch = Chapter("06_models_ab", budget=budget, budget_file=budget_file, seed=seed, run_root=run_root)
budget = ch.budget.name  # a budget file's base, when one is given
spec = ch.budget.pair
L = spec.seq_len

# %% [markdown]
# ## Two architectures, one proportion
#
# At `full` the two models are the blog's, exactly. At `toy` both are scaled down together
# (`nblib.budgets.ModelPairSpec`): the same width, depth and heads for A and B, heads of
# width/heads, GQA 4:1, Model B's MLP 8/3 of the width, one global layer in four and a window
# of half the training context $L$.
#
# **Where Model B's global layers sit.** The blog numbers layers from 0 and places its
# three global layers at 0, 4 and 8: it names "global layer 8" (its most far-sighted
# layer), "layer 6, a local layer" (home of its strongest induction head) and "Layer 0, head
# 6" (a sharply local head in a global layer). Twelve layers with one global in four give
# exactly those numbers only when the global layer opens each group of four, G L L L
# (`Gemma3Config.layer_pattern="blog"`). Hugging Face's Gemma 3 closes each group instead, L
# L L G (global layers 3, 7 and 11, where layer 8 would be local); the book keeps that rule as
# the option `layer_pattern="hf"` and follows the blog's, so the layer numbers chapters 8-10
# quote mean what the blog's mean. The toy pair has eight layers (Model B: G L L L G L L L),
# so a global layer comes after local ones there too.

# %%
shapes = pd.DataFrame({"Model A (GPT-2)": pd.Series(spec.model_a), "Model B (Gemma 3-style)": pd.Series(spec.model_b)})
shapes.loc["training context L"] = spec.seq_len
shapes.loc["global layers (from 0)"] = ["all", ", ".join(map(str, global_layers(
    spec.model_b["n_layers"], spec.model_b.get("global_every", 4), spec.model_b.get("layer_pattern", "blog"))))]
shapes.fillna("-")

# %% [markdown]
# ## Where the parameters are
#
# Embedding parameters (the token table, tied with the output head, and Model A's
# position table) against the rest, for the blog's models and for this budget's. Model B
# saves in attention (3 key/value heads instead of 12) and spends on its MLP (GeGLU's three
# matrices).

# %%
blog = get_budget("full").pair
params = pair.shape_parameter_table({  # built on the meta device: counted without allocating
    "A, blog (124M)": ("gpt2", blog.model_a), "B, blog (113M)": ("gemma3", blog.model_b),
    f"A, {budget}": ("gpt2", spec.model_a), f"B, {budget}": ("gemma3", spec.model_b)})
ch.save_table(params, "parameters")
params

# %% [markdown]
# ## Training both on the same stream
#
# Same corpus, tokenizer, seed and batches; the same optimizer (Muon for matrices, AdamW for
# the rest), schedule (warmup, stable, then a linear decay over the last fifth) and token
# budget. The runs train in parallel, one process per core, together with Part 2's other
# pre-training runs (the shorter budgets below, and chapter 9's all-global control with its
# own shorter budgets); a run the store already has is read, not retrained.

# %%
runs = pair.train_pair(ch.store, ch.budget, seed=seed)
cfg = runs["A"].config
pd.Series({"tokens per model": f"{cfg.n_tokens:,}", "batch (sequences of L)": cfg.batch_size,
           "steps": cfg.total_steps, "peak LR": cfg.schedule["lr"], "corpus": cfg.data["corpus"],
           "tokenizer": cfg.data["tokenizer"], "runs": f"A {runs['A'].hash}, B {runs['B'].hash}"}).to_frame("value")

# %% [markdown]
# ## Loss curves
#
# Training loss at every logged step, and the held-out loss of every kept checkpoint on the
# same held-out windows (the first $L+1$ tokens of evaluation-split documents).

# %%
windows = pair.eval_windows(ch.budget)
curves = pair.loss_curves(runs, windows)
ch.save_table(curves, "loss_curves", runs=list(runs.values()))
speed = pair.training_speed(runs)
speed

# %% [markdown]
# What each of Part 2's pre-training runs cost on this machine (one process per core; a
# branch counts only the steps after its parent's checkpoint):

# %%
part2_runs = {c.label: ch.store.run(c) for c in pair.part2_configs(ch.budget, seed)}
cost = pair.training_cost(part2_runs)
ch.save_table(cost, "training_cost", runs=list(part2_runs.values()))
cost.round(2)

# %% tags=["remove-output"]
#| label: cell-loss-curves
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
colors = {"Model A (GPT-2)": "tab:orange", "Model B (Gemma 3-style)": "tab:blue"}
for name, g in curves.groupby("model", sort=False):
    tr, ho = g[g.kind == "train"], g[g.kind == "held-out"]
    axes[0].plot(tr.tokens, tr.loss.rolling(5, min_periods=1).mean(), c=colors[name], lw=1, label=f"{name}, train")
    axes[0].plot(ho.tokens, ho.loss, "o--", c=colors[name], ms=4, label=f"{name}, held-out")
    axes[1].plot(ho.tokens, ho.loss, "o-", c=colors[name], ms=4, label=name)
axes[0].set(xlabel="tokens", ylabel="loss (nats/token)", title="Training loss (5-record mean) and held-out loss")
late = curves[(curves.kind == "held-out") & (curves.tokens >= curves.tokens.max() / 4)]
axes[1].set(xlabel="tokens", ylabel="held-out loss (nats/token)", title="Held-out loss, last three quarters",
            ylim=(late.loss.min() - 0.05, late.loss.max() + 0.05), xlim=(late.tokens.min() * 0.9, None))
for ax in axes:
    ax.legend(fontsize=8)
ch.save_figure(fig, "fig_loss_curves", runs=list(runs.values()))

# %% [markdown]
# :::{figure} #cell-loss-curves
# :label: fig-loss-curves
# Models A and B trained on the same token stream at this budget. Left: training loss
# (mean of 5 logged steps) and held-out loss at every kept checkpoint. Right: the held-out
# loss alone over the last three quarters of training.
# :::
#
# ## Do the models use their context?
#
# Chapters 8-10 study how the models use position and copy from far back, so first check that
# they do at this budget: the held-out loss by position within the window (it falls as more
# context is available), and the copy gain, the loss on the first copy of a random token
# segment minus the loss on its repeat (an induction head, which looks back and copies,
# gains several nats; `nblib.metrics.probes.copy_gain`). Model B's local layers see at
# most $W$ tokens back, so a repeat at distance $\ge W$ can only be copied through its global
# layer.

# %%
models = pair.pair_models(runs)
tok = get_tokenizer(spec.tokenizer)
texts = [d.text for d in get_corpus(spec.corpus).split("eval")]
edges = tuple(sorted({0, 4, 16, L // 4, L // 2, L}))
context_use = position_loss_table({MODELS[k][1]: m for k, m in models.items()}, texts, tok, L, edges)
copy_dists = (8, L // 4, L // 2 - 8, L // 2)
copying = copy_gain_table({MODELS[k][1]: m for k, m in models.items()}, tok.vocab_size, tok.eos_id, copy_dists)
ch.save_table(context_use.join(copying), "context_use", runs=list(runs.values()))
context_use.join(copying).round(2)

# %% [markdown]
# How the toy pair's training length was chosen (the probes, `python -m nblib.probes pair`):
# [appendix A](11_toy_design.ipynb).
#
# ## Is one model better?
#
# The final checkpoints' held-out loss per window, paired by window, with a bootstrap 95%
# interval over windows for the difference.

# %%
final = pair.heldout_losses(models, windows)
ch.markdown(blog_findings.pair_findings(final, speed, params, budget))

# %% [markdown]
# ## Does the gap close with training length?
#
# The blog's models saw about 79 tokens per parameter (9.8B tokens, Model A's 124.4M
# parameters) and tied. This budget's pair sees far fewer, so the gap is read against
# training length: the same pair at shorter budgets, each its own WSD run (warmup, constant
# LR, a linear decay over its last fifth). A shorter WSD run is the full run up to where its
# decay starts, so each is a decay branched from the pair's run at that step, with the
# pair's optimizer state (`nblib.gemma.training_length`); chapter 6 trained them with the
# pair. Tokens per parameter count Model A's parameters, as the blog's 79 does.

# %%
ladder = training_length.length_ladder(ch.store, ch.budget, seed=seed)
per_window = training_length.ladder_losses(ladder, windows)
n_params_a = int(params.loc["total", f"A, {budget}"])
gaps = training_length.gap_table(ladder, per_window, n_params_a)
trend = training_length.fit_gap_trend(gaps, per_window)
ratio = training_length.token_ratio(gaps)
gaps[ratio.name] = ratio
ch.save_table(gaps, "gap_by_training_length", runs=[r for rs in ladder.values() for r in rs.values()])
gaps.round(3)

# %% tags=["remove-output"]
#| label: cell-gap-by-length
fig, ax = plt.subplots(figsize=(7, 4))
x = gaps.index.to_numpy()
ax.errorbar(x, gaps["B - A"], yerr=[gaps["B - A"] - gaps["95% lo"], gaps["95% hi"] - gaps["B - A"]], fmt="o",
            c="tab:blue", capsize=3, label=f"B - A at {budget} (95% interval over {len(windows)} windows)")
xs = np.geomspace(x.min(), trend["target"] * 1.2, 100)
ax.plot(xs, trend["intercept"] + trend["slope"] * np.log(xs), "--", c="tab:blue", lw=1, label="a + b ln(D/N), fitted")
ax.errorbar([trend["target"]], [trend["at_target"]], yerr=[[trend["at_target"] - trend["lo"]], [trend["hi"] - trend["at_target"]]],
            fmt="s", mfc="white", c="tab:blue", capsize=3, label="the line at the blog's D/N (window bootstrap 95%)")
ax.errorbar([trend["target"] * 1.08], [trend["at_target"]],
            yerr=[[trend["at_target"] - trend["pred_lo"]], [trend["pred_hi"] - trend["at_target"]]],
            fmt="none", c="0.5", capsize=3, label="with the lengths' scatter (95% prediction interval)")
ax.scatter([trend["target"]], [0.0], marker="*", s=120, c="k", zorder=3, label="blog: tied")
ax.axhline(0, c="0.5", lw=0.8)
ax.set(xscale="log", xlabel="training tokens per parameter (Model A)", ylabel="held-out loss, B - A (nats/token)",
       title="The A/B gap against training length")
ax.legend(fontsize=8)
ch.save_figure(fig, "fig_gap_by_length", runs=[r for rs in ladder.values() for r in rs.values()])

# %% [markdown]
# :::{figure} #cell-gap-by-length
# :label: fig-gap-by-length
# Held-out loss of Model B minus Model A at each training length (dots, paired-bootstrap 95%
# intervals over the held-out windows), the line fitted through them in ln(D/N) (dashed),
# its value at the blog's 79 tokens per parameter with a window-bootstrap interval (open
# square) and the wider prediction interval that adds the lengths' scatter about the line
# (grey), and the blog's tie (star).
# :::

# %%
ch.markdown(blog_findings.gap_trend_findings(gaps, trend, ratio, budget))

# %%
ch.done()
