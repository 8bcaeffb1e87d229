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
# # 8. How each model represents position: RoPE clocks and a learned table
#
# *Gemma blog, "How each model represents position" and the appendix "How the band measures
# are computed".*
#
# **The claims.** Model B reads position off RoPE's bands, "clocks" that turn at fixed
# speeds $\theta_j = 10000^{-2(j-1)/h}$; Model A learns one vector per position.
#
# - With heads of $h = 64$ and a 1024-token context, only 18 of the 32 clocks complete a
#   turn. By the YaRN paper's rule, 6 are fast ($\ge 32$ turns), 12 middle and 14 slow
#   ($< 1$ turn).
# - From its weights, each head's $q \cdot k$ weight per band,
#   $w_j = \lVert W_q^{(j)} \rVert \, \lVert W_k^{(j)} \rVert$, leans toward the slow
#   bands: the median slow-band weight is 53% against 44% for an even spread.
# - On real text, a head's mean score at distance $\Delta$ splits exactly into one term per
#   band, $S(\Delta) = \sum_j S_j(\Delta)$.
# - Model A's position table learns "position as distance". The cosine similarity of two
#   rows depends mostly on their distance ($R^2 = 0.71$). It is 0.91 at distance 10 and
#   negative by 500, while RoPE's equal-weight similarity falls to 0.66 within 10 positions.

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)
budget_file = ""  # a TOML budget file, a base budget and its overrides (README, Your own data); empty: none

# %%
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from nblib.book.chapter import Chapter
from nblib.chapters.part2 import blog_findings
from nblib.gemma import pair
from nblib.gemma import position as P

ch = Chapter("08_position", budget=budget, budget_file=budget_file, seed=seed, run_root=run_root)
budget = ch.budget.name  # a budget file's base, when one is given
runs = pair.train_pair(ch.store, ch.budget, seed=seed)  # chapter 6's runs: read, not retrained
models = pair.pair_models(runs)
A, B = models["A"], models["B"]
L = ch.budget.pair.seq_len
base = B.config.rope_global_base

# %% [markdown]
# ## RoPE as clocks
#
# Each band's wavelength (positions per full turn) against the training context, for the
# blog's heads ($h = 64$, $L = 1024$) and this budget's Model B.

# %%
clocks = {"blog: h=64, L=1024": P.rope_bands(64, 1e4, 1024),
          f"{budget}: h={B.head_dim}, L={L}": P.rope_bands(B.head_dim, base, L)}
counts = pd.DataFrame({k: {**b.group.value_counts().reindex(P.GROUPS, fill_value=0).to_dict(),
                           "complete a turn": int((b.turns >= 1).sum()), "bands": len(b)}
                       for k, b in clocks.items()}).T
ch.save_table(counts, "band_groups")
counts

# %% tags=["remove-output"]
#| label: cell-clocks
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
palette = {"fast": "tab:purple", "middle": "tab:cyan", "slow": "goldenrod"}
for ax, (name, b), ctx in zip(axes, clocks.items(), (1024, L)):
    ax.scatter(b.band, b.wavelength, c=b.group.map(palette), s=22)
    ax.axhline(ctx, ls="--", c="0.4")
    ax.text(1, ctx * 1.25, f"context {ctx}", fontsize=8)
    ax.set(yscale="log", xlabel="band j (fastest first)", ylabel="wavelength (positions per turn)", title=name)
for g, c in palette.items():
    axes[1].scatter([], [], c=c, label=g)
axes[1].legend(fontsize=8, loc="upper left")
ch.save_figure(fig, "fig_rope_clocks")

# %% [markdown]
# :::{figure} #cell-clocks
# :label: fig-rope-clocks
# RoPE's bands as clocks: each band's wavelength against the training context (dashed),
# coloured by the YaRN paper's groups (fast: at least 32 turns within the context; slow:
# less than one). Left: the blog's Model B; right: this budget's.
# :::
#
# ## Which bands each head can use: from the weights
#
# The shares $s_j = w_j / \sum_l w_l$ for every head of the trained Model B, with the RMSNorm
# gains folded into the projections (`nblib.gemma.position.band_weights`). As a control, the same
# measure on an untrained Model B of the same shape shows what random weights give. An even
# spread would put (slow bands) / (bands) on the slow bands: the blog's 44% is 14 of 32 bands;
# this budget's heads have fewer bands, and its even spread is printed beside the table.

# %%
bands = clocks[f"{budget}: h={B.head_dim}, L={L}"]
weights = P.band_weights(B, bands)
slow = P.slow_band_weight(weights)
untrained = pair.untrained_model(ch.budget, "B", seed)
slow_untrained = P.slow_band_weight(P.band_weights(untrained, bands))
even = (bands.group == "slow").mean()
ch.save_table(weights, "band_weights", runs=[runs["B"]])
n_slow = int((bands.group == "slow").sum())
band_control = pd.DataFrame([
    {"model": name, "median slow share": float(v.median()), "mean slow share": float(v.mean()),
     "min": float(v.min()), "max": float(v.max()), "heads": len(v), "even spread": even,
     "slow bands": n_slow, "bands": len(bands)}
    for name, v in (("untrained Model B (control)", slow_untrained.slow_weight),
                    ("trained Model B", slow.slow_weight))]).set_index("model")
ch.save_table(band_control, "band_control", runs=[runs["B"]])
print(f"even spread: {n_slow} slow of {len(bands)} bands = {even:.0%} at this budget (the blog: 14 of 32 = 44%)")
band_control.round(3)

# %% tags=["remove-output"]
#| label: cell-band-heatmap
grid = weights.pivot_table(index=["layer", "head"], columns="band", values="share")
fig, ax = plt.subplots(figsize=(7, max(3, 0.22 * len(grid))))
sns.heatmap(grid, cmap="viridis", ax=ax, cbar_kws={"label": "share of the head's q.k weight"})
windows_of = B.layer_windows
ax.set_yticklabels([f"L{lay}{'g' if windows_of[lay] is None else ''} h{hd}" for lay, hd in grid.index], fontsize=7)
n_fast, n_mid = (bands.group == "fast").sum(), (bands.group == "middle").sum()
for x in (n_fast, n_fast + n_mid):
    ax.axvline(x, c="w", lw=1.5)
ax.set(xlabel="band (fastest left; white lines: fast | middle | slow)", ylabel="layer, head (g = global layer)",
       title="Model B: q.k weight per band")
ch.save_figure(fig, "fig_band_heatmap", runs=[runs["B"]])

# %% [markdown]
# :::{figure} #cell-band-heatmap
# :label: fig-band-heatmap
# Each head's share of $q \cdot k$ weight in each RoPE band, from the trained Model B's
# weights. Rows are heads by layer ("g" marks the global layers) and columns are bands,
# fastest on the left. The white lines split the fast, middle and slow groups.
# :::
#
# ## What each band adds on real text
#
# Three heads, the highest, median and lowest slow-band weight, on the held-out windows. The
# top row sums $S_j(\Delta)$ within each group; the bottom row is the head's mean
# pre-softmax score $S(\Delta)$, the sum of all bands. Local heads stop at their window.

# %%
text = pair.eval_windows(ch.budget)[:, :L]
ranked = slow.sort_values("slow_weight").reset_index(drop=True)
picks = {"highest": ranked.iloc[-1], "median": ranked.iloc[len(ranked) // 2], "lowest": ranked.iloc[0]}
decomp = P.picked_band_scores(B, text, picks, bands)
check = P.band_sum_errors(B, text, picks, decomp)  # the bands against the score from rotated q and k
pd.DataFrame({k: {"layer": int(r["layer"]), "head": int(r["head"]), "slow-band weight": r.slow_weight,
                  "max |sum of bands - direct score|": check[k]} for k, r in picks.items()}).T

# %% tags=["remove-output"]
#| label: cell-band-scores
fig, axes = plt.subplots(2, 3, figsize=(12, 6), sharex="col")
for col, (k, d) in enumerate(decomp.items()):
    r = picks[k]
    layer, head = int(r["layer"]), int(r["head"])
    kind = "global" if B.layer_windows[layer] is None else f"local, W={B.layer_windows[layer]}"
    by_group = d.groupby(["group", "delta"]).score.sum().unstack(0)
    for g in P.GROUPS:
        if g in by_group:
            axes[0, col].plot(by_group.index, by_group[g], c=palette[g], label=g)
    axes[1, col].plot(by_group.index, by_group.sum(axis=1), c="k")
    axes[0, col].set_title(f"{k}: layer {layer} head {head} ({kind})\nslow-band weight "
                           f"{r.slow_weight:.0%}", fontsize=9)
    axes[1, col].set(xlabel="distance Δ (tokens)")
    axes[0, col].set_xscale("symlog", linthresh=10)
axes[0, 0].set_ylabel("sum of S_j(Δ) in group")
axes[1, 0].set_ylabel("mean score S(Δ)")
axes[0, 0].legend(fontsize=8)
ch.save_figure(fig, "fig_band_scores", runs=[runs["B"]])

# %% [markdown]
# :::{figure} #cell-band-scores
# :label: fig-band-scores
# The per-band decomposition of three Model B heads' mean pre-softmax score on held-out
# text (distance on a log scale past 10). Top: the fast, middle and slow bands' summed
# contributions. Bottom: the head's mean score, which the three top curves add up to.
# :::
#
# ## Model A's learned position table
#
# The cosine similarity of every pair of rows of Model A's position table; its principal
# components; and the similarity against distance, next to RoPE's equal-weight similarity
# $\frac{1}{J}\sum_j \cos(\Delta \theta_j)$ for this budget's heads and for the blog's.

# %%
table = A.wpe.weight.detach()
sim = P.position_similarity(table)
by_dist = P.similarity_by_distance(sim)
pcs, pc_share = P.position_pcs(table, k=3)
random_sim = P.random_table_similarity(table, seed)
rope_here = P.rope_similarity(B.head_dim, base, by_dist.delta)
stats = P.position_summary(sim, rope_here, random_sim)
ch.save_table(by_dist.assign(rope=rope_here), "position_similarity_by_distance", runs=[runs["A"]])
stats

# %% tags=["remove-output"]
#| label: cell-position-table
fig, axes = plt.subplots(1, 3, figsize=(14, 4))
im = axes[0].imshow(sim, cmap="RdBu_r", vmin=-1, vmax=1)
fig.colorbar(im, ax=axes[0], fraction=0.046)
axes[0].set(xlabel="position n", ylabel="position m", title="Model A: cosine similarity of position rows")
for i in range(pcs.shape[1]):
    axes[1].plot(pcs[:, i], label=f"PC{i + 1} ({pc_share[i]:.0%} of variance)")
axes[1].set(xlabel="position", ylabel="projection", title="Principal components of the rows")
axes[1].legend(fontsize=8)
axes[2].plot(by_dist.delta, by_dist["mean"], c="tab:orange", label="Model A: mean over pairs")
axes[2].fill_between(by_dist.delta, by_dist.p10, by_dist.p90, color="tab:orange", alpha=0.25,
                     label="Model A: middle 80% of pairs")
axes[2].plot(by_dist.delta, rope_here, c="tab:blue", lw=0.8, label=f"RoPE, h={B.head_dim} (equal weights)")
axes[2].axhline(0, c="0.6", lw=0.6)
axes[2].set(xlabel="distance Δ", ylabel="similarity", title="Similarity against distance")
axes[2].legend(fontsize=8)
ch.save_figure(fig, "fig_position_table", runs=[runs["A"]])

# %% [markdown]
# :::{figure} #cell-position-table
# :label: fig-position-table
# Model A's learned position table at this budget. Left: the cosine similarity of every pair
# of rows. Middle: the rows' top three principal components against position. Right: the
# similarity against distance (mean and middle 80% of the pairs at that distance) next to
# RoPE's equal-weight similarity for Model B's heads.
# :::
#
# ## What we see

# %%
global_layers = [i for i, w in enumerate(B.layer_windows) if w is None]
ch.markdown(blog_findings.position_findings(counts, slow, slow_untrained, even, picks, check, stats, global_layers))

# %%
ch.done()
