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
# # 9. Extending Model B's context 4x with YaRN
#
# *Gemma blog, "Position at longer contexts" and "Extending Model B's context from 1024 to
# 4096 tokens with YaRN".*
#
# **The claims.** Past its training length $L$, a plain RoPE model breaks down: its slow
# bands reach angles it never saw. On 4096-token pages, Model B's loss per position jumps
# from about 3.0 to 4.2, and the whole page's perplexity reaches 37.7.
#
# - YaRN ($s = 4$) leaves the fast bands alone, stretches the slow ones $s$-fold and blends
#   the middle. It also sharpens attention by $(0.1 \ln s + 1)^2$. With no training it holds
#   the page at 23.2: 14.6 lower, 95% interval [14.1, 15.1]. But at $L$ it costs 20.6 →
#   22.4.
# - A fine-tune of 200 steps (1% of pre-training) continues Model B's run with the optimizer
#   state, no new warmup and long pages only. It brings the page to 21.0 (2.2 lower than
#   zero-shot, [2.1, 2.3]) and removes the short-context cost (20.5 at $L$). The first 25
#   steps give 77% of the gain.
# - The toy's Model B does not break past $L$ as the blog's does; an all-global control
#   shows whether its local layers are why.
# - The blog says that a flat loss per position "can't prove how much of the distant context
#   the model actually draws on". It names two checks it did not run. This chapter runs both:
#   scoring the page's last tokens with the whole page against only the last $L$ tokens, and
#   passkey retrieval.

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
from nblib.chapters.part2 import blog_findings
from nblib.data import get_tokenizer
from nblib.gemma import breakdown_length
from nblib.gemma import extension as X
from nblib.gemma import pair
from nblib.gemma import position as P
from nblib.models.layers import yarn_inv_freq
from nblib.training.runner import get_or_run

ch = Chapter("09_yarn", budget=budget, budget_file=budget_file, seed=seed, run_root=run_root)
budget = ch.budget.name  # a budget file's base, when one is given
spec = ch.budget.pair
L, s = spec.seq_len, spec.yarn_factor
sL = s * L
runs = pair.train_pair(ch.store, ch.budget, seed=seed)  # chapter 6's runs: read, not retrained
B = runs["B"].load_model()
h, base = B.head_dim, B.config.rope_global_base

# %% [markdown]
# ## Which clocks YaRN moves
#
# Each band's wavelength before and after YaRN, against $L$ and $sL$. For the blog's heads,
# YaRN's default thresholds (fast: at least 32 turns within $L$; slow: fewer than 1) leave
# 6 bands alone, stretch 14 fully and blend 12. Without it, a 4x context would give 5 more
# bands a first full turn, at angles never seen in training.

# %%
yarn_theta, mscale = yarn_inv_freq(h, base, L, s)
bands = P.rope_bands(h, base, L).assign(yarn_wavelength=2 * np.pi / yarn_theta.double().numpy())
turning = pd.DataFrame({
    f"turn within L={L}": [(bands.turns >= 1).sum()],
    f"turn within sL={sL}, plain RoPE": [(sL / bands.wavelength >= 1).sum()],
    f"turn within sL={sL}, YaRN": [(sL / bands.yarn_wavelength >= 1).sum()],
    "attention temperature factor (mscale^2)": [mscale ** 2],
}, index=[f"{budget}: h={h}"])
blog_bands = P.rope_bands(64, 1e4, 1024).assign(yarn_wavelength=2 * np.pi / yarn_inv_freq(64, 1e4, 1024, 4)[0].double().numpy())
turning.loc["blog: h=64"] = [(blog_bands.turns >= 1).sum(), (4096 / blog_bands.wavelength >= 1).sum(),
                             (4096 / blog_bands.yarn_wavelength >= 1).sum(), yarn_inv_freq(64, 1e4, 1024, 4)[1] ** 2]
ch.save_table(bands, "yarn_bands")
turning.round(3)

# %% tags=["remove-output"]
#| label: cell-yarn-bands
palette = {"fast": "tab:purple", "middle": "tab:cyan", "slow": "goldenrod"}
fig, ax = plt.subplots(figsize=(7, 4))
for _, r in bands.iterrows():
    ax.plot([r.band, r.band], [r.wavelength, r.yarn_wavelength], c=palette[r.group], lw=1)
ax.scatter(bands.band, bands.wavelength, facecolors="none", edgecolors=bands.group.map(palette), label="trained")
ax.scatter(bands.band, bands.yarn_wavelength, c=bands.group.map(palette), s=18, label="YaRN")
for y, t in ((L, f"L = {L}"), (sL, f"sL = {sL}")):
    ax.axhline(y, ls="--", c="0.4", lw=0.8)
    ax.text(1, y * 1.2, t, fontsize=8)
ax.set(yscale="log", xlabel="band j (fastest first)", ylabel="wavelength (positions per turn)",
       title=f"Model B's bands before (hollow) and after YaRN s={s} (filled)")
ch.save_figure(fig, "fig_yarn_bands")

# %% [markdown]
# :::{figure} #cell-yarn-bands
# :label: fig-yarn-bands
# Every RoPE band of this budget's Model B before YaRN (hollow) and after (filled), coloured
# by group: fast bands stay, slow bands are stretched $s$-fold, middle bands are blended.
# :::
#
# ## The fine-tune
#
# It continues Model B's run from its final checkpoint, with the optimizer state restored,
# at the learning rate the schedule ended on, with no warmup. The tokens per step stay the
# same, now in sequences of $sL$ tokens, each the start of a training document at least
# that long. A snapshot is kept every few steps.

# %%
ft = X.finetune_run(ch.store, ch.budget, runs["B"])
fm = ft.metrics()
fm = fm[fm.kind == "train"]
pd.Series({"steps": ft.config.total_steps, "share of pre-training steps": ft.config.total_steps
           / runs["B"].config.total_steps, "sequences of sL per step": ft.config.batch_size,
           "LR (constant)": ft.config.schedule["lr"], "first logged grad norm": float(fm.grad_norm.iloc[0]),
           "last logged grad norm": float(fm.grad_norm.iloc[-1]),
           "pre-training's last grad norm": float(runs["B"].metrics().query("kind == 'train'").grad_norm.iloc[-1]),
           "run": ft.hash}).to_frame("value")

# %% [markdown]
# ## Perplexity by length and loss by position
#
# Held-out documents of at least $sL$ tokens, each read from its start in one pass. Causal
# attention means one pass at $sL$ also answers every shorter length. Model A (learned
# positions) stops at $L$.

# %%
docs = X.long_test_docs(ch.budget)
models = X.extension_models(runs["B"], ft)
nll = X.page_nlls(models, docs)
nll_a = X.page_nll(runs["A"].load_model(), docs[:, :L + 1])
lengths = sorted({L // 4, L // 2, L, 2 * L, 3 * L, sL})
ppl = X.ppl_by_length({"Model A": nll_a, **nll}, lengths)
edges = [0, L // 2, L, 2 * L, sL]
by_pos = X.loss_by_position({"Model A": nll_a, **nll}, edges)
ch.save_table(ppl, "ppl_by_length", runs=[runs["A"], runs["B"], ft])
ch.save_table(by_pos, "loss_by_position", runs=[runs["A"], runs["B"], ft])
print(f"{len(docs)} held-out pages of {sL} tokens")
ppl.round(2)

# %%
by_pos.round(3)

# %% tags=["remove-output"]
#| label: cell-yarn-ppl
colors = {"Model A": "tab:orange", "plain RoPE": "tab:blue", "zero-shot YaRN": "tab:red", "YaRN fine-tuned": "tab:cyan"}
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
grid = np.unique(np.geomspace(8, sL, 40).astype(int))
for name, v in {"Model A": nll_a, **nll}.items():
    g = grid[grid <= v.shape[1]]
    axes[0].plot(g, [np.exp(v[:, :n].mean()) for n in g], c=colors[name], label=name)
    smooth = pd.Series(v.mean(0)).rolling(max(1, L // 16), min_periods=1).mean()
    axes[1].plot(np.arange(1, v.shape[1] + 1), smooth, c=colors[name], lw=1, label=name)
for ax in axes:
    ax.axvline(L, ls="--", c="0.5")
    ax.legend(fontsize=8)
axes[0].set(xscale="log", yscale="log", xlabel="first L' tokens of the page", ylabel="perplexity",
            title="Perplexity of the first L' tokens")
axes[1].set(xlabel="position", ylabel="loss (nats/token)", title=f"Loss by position (mean of {max(1, L // 16)})")
ch.save_figure(fig, "fig_yarn_ppl", runs=[runs["A"], runs["B"], ft])

# %% [markdown]
# :::{figure} #cell-yarn-ppl
# :label: fig-yarn-ppl
# Held-out pages of at least $sL$ tokens. Left: the perplexity of a page's first $L'$
# tokens. Right: the mean loss at each position (running mean). The dashed line is the
# training length $L$; Model A has no position past it.
# :::
#
# The differences the text states, with paired bootstrap 95% intervals over the pages. As
# the blog notes of its own fine-tune, part of the fine-tuned model's gain, even at the first
# tokens of a page, is adaptation to the text it was fine-tuned on: the openings of long
# files.

# %%
intervals = X.extension_intervals(nll, L)  # saved with the rows below as yarn_intervals
intervals.round(3)

# %% [markdown]
# ## Zero-shot, two ways: YaRN on every layer, or linear interpolation on the global layers
#
# The blog applies YaRN to every layer, as the YaRN paper, Rnj-1.5 and gpt-oss do, and notes
# that Gemma 3 does otherwise: it stretches only its global layers, with linear position
# interpolation (every band's frequency divided by $s$, no attention temperature). The local
# layers never look past $W$ at any context, so only the global layers meet a distance they
# were not trained on. Both ways are read here on the same pages, with no training. Chapter
# 9's all-global control (below) is read on the same pages too, with plain RoPE and with
# zero-shot YaRN, as a control row: a model whose every layer meets the new distances.

# %%
g_run = get_or_run(ch.store, pair.all_global_config(ch.budget, seed))  # chapter 6 trained it
G = g_run.load_model()
pi_model = X.with_scaling(B, X.linear_scaling(ch.budget), layers="global")
nll_more = X.page_nlls({X.LINEAR_GLOBAL: pi_model, f"{X.CONTROL_PREFIX}plain RoPE": G,
                        f"{X.CONTROL_PREFIX}zero-shot YaRN": X.with_yarn(G, X.yarn_scaling(ch.budget))}, docs)
zero_shot = X.zero_shot_table({k: nll[k] for k in ("plain RoPE", "zero-shot YaRN")} | nll_more, L).rename(index={
    "zero-shot YaRN": "zero-shot YaRN, every layer"})
ch.save_table(zero_shot, "zero_shot_extension", runs=[runs["B"], g_run])
zero_shot.round(3)

# %% [markdown]
# ## The fine-tune against more training
#
# The fine-tune is also 60 more steps of training (at toy) on the openings of long files, so
# part of what it gains may be neither YaRN nor the longer context. Its control continues
# plain Model B the same way (weights and optimizer state, the same learning rate, steps and
# tokens per step) with plain RoPE on sequences of $L$ tokens, the starts of training files of
# at least $L$ tokens (the fine-tune reads the starts of files of at least $sL$). Inside $L$
# (the first $L/4$ and the first $L$ tokens) the fine-tune and its control differ only in the
# extension and in which file openings they trained on; past $L$ the control is plain RoPE.

# %%
cont = X.continued_run(ch.store, ch.budget, runs["B"])
nll_cont = X.page_nlls({X.CONTINUED: cont.load_model()}, docs)
all_nll = nll | nll_more | nll_cont
iv_rows = [X.extension_intervals(all_nll, L, comparisons=c) for c in
           (X.COMPARISONS, X.ZERO_SHOT_COMPARISONS, X.CONTROL_COMPARISONS, X.FINETUNE_COMPARISONS)]
all_intervals = pd.concat(iv_rows, ignore_index=True)
ch.save_table(all_intervals, "yarn_intervals", runs=[runs["B"], ft, g_run, cont])
all_intervals.iloc[len(intervals):].round(3)

# %%
ch.markdown(blog_findings.extension_control_findings(zero_shot, all_intervals, L, sL))

# %% [markdown]
# ## Where plain RoPE breaks: an all-global control
#
# Model B has one global layer in four; the other three attend within $W = L/2$ and never
# see a distance past it, at any context. A model whose local layers cannot be surprised by a
# long page may not break past $L$ at all. The control is Model B with every layer global
# (`pair.all_global_config`: the same weights, data and schedule, no window anywhere), and
# its own YaRN fine-tune with the same recipe, trained on `control_fraction` of the pair's
# tokens (all of them at toy). Both are read on held-out pages of $2sL$ tokens, so the rise
# past $L$ shows at $4L$ and at $8L$: plain RoPE, zero-shot YaRN with $s = 4$ and $s = 8$, and
# the fine-tune ($s = 4$). Intervals are paired bootstraps over
# pages, in nats per token, so the rise and what each step recovers of it add up.

# %%
g_ft = X.finetune_run(ch.store, ch.budget, g_run)
docs8 = X.long_docs_at(ch.budget, 2 * sL)
cf = spec.control_fraction
control = "all-global B" if cf == 1 else f"all-global B at {cf:g} of the tokens"
families = {"Model B": (runs["B"], ft), control: (g_run, g_ft)}
nll8 = X.breakdown_nlls(families, docs8, (s, 2 * s))
breakdown = X.breakdown_table(nll8, L, (1, s, 2 * s))
ch.save_table(breakdown, "rope_breakdown", runs=[runs["B"], ft, g_run, g_ft])
print(f"{len(docs8)} held-out pages of {2 * sL} tokens")
breakdown.round(3)

# %%
breakdown_iv = pd.concat({
    (fam, f"{k}L"): X.breakdown_intervals(nll8, L, k, f"{fam}: plain RoPE", f"{fam}: zero-shot YaRN x{k}",
                                          f"{fam}: YaRN fine-tuned" if k == s else None)
    for fam in families for k in (s, 2 * s)}, names=["model", "page"])
ch.save_table(breakdown_iv, "rope_breakdown_intervals", runs=[runs["B"], ft, g_run, g_ft])
breakdown_iv.round(3)

# %% tags=["remove-output"]
#| label: cell-rope-breakdown
fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
styles = {"plain RoPE": ("tab:blue", "-"), f"zero-shot YaRN x{s}": ("tab:red", "-"),
          f"zero-shot YaRN x{2 * s}": ("tab:red", ":"), "YaRN fine-tuned": ("tab:cyan", "-")}
for ax, fam in zip(axes, families):
    for name, (c, ls) in styles.items():
        v = nll8[f"{fam}: {name}"]
        smooth = pd.Series(v.mean(0)).rolling(max(1, L // 8), min_periods=1).mean()
        ax.plot(np.arange(1, v.shape[1] + 1), smooth, c=c, ls=ls, lw=1, label=name)
    for x in (L, sL):
        ax.axvline(x, ls="--", c="0.5", lw=0.8)
    ax.set(xlabel="position", title=f"{fam}: loss by position on {2 * sL}-token pages")
    ax.legend(fontsize=8)
axes[0].set_ylabel(f"loss (nats/token, running mean of {max(1, L // 8)})")
ch.save_figure(fig, "fig_rope_breakdown", runs=[runs["B"], ft, g_run, g_ft])

# %% [markdown]
# :::{figure} #cell-rope-breakdown
# :label: fig-rope-breakdown
# Loss by position on held-out pages of $2sL$ tokens for Model B (left) and its all-global
# control (right): plain RoPE, zero-shot YaRN at $s$ and $2s$, and the YaRN fine-tune. The
# dashed lines are $L$ and $sL$.
# :::
#
# What the control says, read from the two tables above:

# %%
ch.markdown(blog_findings.rope_breakdown_findings(breakdown, breakdown_iv, s))

# %% [markdown]
# ## Does the breakdown grow with training length?
#
# The blog's Model B saw about 79 tokens per parameter before it broke 1.83x at $4L$; the
# toy's pair sees 6.2. Model B's shorter budgets (chapter 6's decay branches) and the
# control's own (decay branches of the control's run) are read on the same pages of $2sL$
# tokens: plain RoPE's page perplexity at $sL$ and $2sL$ against $L$, with a paired bootstrap
# interval on the rise. A line in $\ln(D/N)$ through the control's points at $sL$ says where
# it would reach 1.5x if the trend held; three or four points cannot say more.

# %%
ladder = breakdown_length.breakdown_ladder(ch.store, ch.budget, seed=seed)
n_params_a = sum(p.numel() for p in runs["A"].load_model().parameters())
reuse = {runs["B"].hash: nll8["Model B: plain RoPE"], g_run.hash: nll8[f"{control}: plain RoPE"]}
nll_len = breakdown_length.ladder_page_nll(ladder, docs8, known=reuse)
by_length = breakdown_length.breakdown_by_length(nll_len, L, (s, 2 * s), n_params_a)
ch.save_table(by_length, "breakdown_by_training_length", runs=list(ladder.values()))
trend = breakdown_length.breakdown_trend(by_length, "B-global", f"{s}L", bar=1.5)
by_length.round(3)

# %% tags=["remove-output"]
#| label: cell-breakdown-length
fig, ax = plt.subplots(figsize=(7, 4))
names = {"B": "Model B", "B-global": "all-global B"}
for key, c in (("B", "tab:blue"), ("B-global", "tab:orange")):
    for k, ls in ((s, "-"), (2 * s, ":")):
        t = by_length.xs((key, f"{k}L"), level=("model", "page"))
        err = np.exp(t[["95% lo", "95% hi"]].to_numpy().T) - t["ratio"].to_numpy()
        ax.errorbar(t.index, t["ratio"], yerr=np.abs(err), fmt="o", ls=ls, c=c, capsize=3,
                    label=f"{names[key]}, page {k}L")
if np.isfinite(trend["reached_at"]) and trend["reached_at"] > trend["measured_max"]:
    xs = np.geomspace(by_length.index.get_level_values(2).min(), trend["reached_at"], 50)
    ax.plot(xs, np.exp(trend["intercept"] + trend["slope"] * np.log(xs)), c="tab:orange", lw=0.8, ls="--",
            label="line through the control's 4L points")
ax.axhline(1.5, c="0.4", ls="--", lw=0.8, label="1.5x")
ax.axhline(blog_findings.BLOG_YARN["page"]["plain RoPE"] / blog_findings.BLOG_YARN["first L"]["plain RoPE"],
           c="k", lw=0.8, label="blog's Model B at 4L")
ax.set(xscale="log", xlabel="training tokens per parameter (Model A's count)", ylabel="ppl(kL) / ppl(L), plain RoPE",
       title="RoPE's breakdown past L against training length")
ax.legend(fontsize=7)
ch.save_figure(fig, "fig_breakdown_by_length", runs=list(ladder.values()))

# %% [markdown]
# :::{figure} #cell-breakdown-length
# :label: fig-breakdown-length
# Plain RoPE's page perplexity at $sL$ (solid) and $2sL$ (dotted) over that at $L$, for Model
# B and the all-global control at each training length, with paired bootstrap 95% intervals
# over pages; the dashed line extends a fit through the control's $sL$ points.
# :::

# %%
ch.markdown(blog_findings.breakdown_length_findings(by_length, trend, s))

# %% [markdown]
# ## How many steps the fine-tune needs
#
# Every snapshot scored on the same pages: the perplexity of the whole page, and of its
# first $L$ tokens, against Model B before YaRN on those first $L$ tokens (dashed).

# %%
snaps = X.finetune_snapshots(ft, docs, L, zero_shot=nll["zero-shot YaRN"])
ch.save_table(snaps, "finetune_snapshots", runs=[ft])
snaps.round(3)

# %% tags=["remove-output"]
#| label: cell-snapshots
fig, ax = plt.subplots(figsize=(6.5, 4))
ax.plot(snaps.step, snaps["whole page"], "o-", c="tab:cyan", label=f"whole page ({sL} tokens)")
ax.plot(snaps.step, snaps["first L"], "o-", c="goldenrod", label=f"first L = {L} tokens")
ax.axhline(np.exp(nll["plain RoPE"][:, :L].mean()), ls="--", c="0.4", label="Model B before YaRN, first L")
ax.set(xlabel="fine-tuning step (0 = zero-shot YaRN)", ylabel="perplexity", title="YaRN fine-tune snapshots")
ax.legend(fontsize=8)
ch.save_figure(fig, "fig_finetune_snapshots", runs=[ft])

# %% [markdown]
# :::{figure} #cell-snapshots
# :label: fig-finetune-snapshots
# Each snapshot of the fine-tune scored on the same held-out pages: the whole page and its
# first $L$ tokens, against Model B before YaRN on the first $L$ tokens (dashed).
# :::
#
# ## Beyond the blog (a): does the model use more than the last $L$ tokens?
#
# The last $L/8$ tokens of each of (up to) 48 pages are scored twice: with the whole page
# before them, and with only the $L$ tokens just before each. A gain (window loss minus whole-page loss)
# above zero means the model draws on context more than $L$ tokens back. The interval is a
# paired bootstrap over pages.

# %%
last = L // 8
wv_table = X.whole_vs_window_table(models, docs[:48], window=L, last=last)
ch.save_table(wv_table, "whole_vs_window", runs=[runs["B"], ft])
wv_table.round(4)

# %% [markdown]
# ## Beyond the blog (b): passkey retrieval
#
# A line `PASSKEY = "<5 digits>"` is hidden at a depth of held-out code, and the prompt
# ends with `assert PASSKEY == "`. The model must complete the digits, greedily. Prompts are
# $sL - 8$ tokens long for the three Model B variants. As a reference, Models A and B also
# get prompts of $L - 8$ tokens, which fit their training context.
#
# What does a toy model need to retrieve a passkey? The task asks for two things: copying
# five digits from far back, and recognising that `assert PASSKEY == "` asks for what
# followed `PASSKEY = "`, a format the Python corpus never pairs that way. The rows marked
# "repeated prefix" separate them: the same haystacks and keys, but the prompt ends with
# the needle's own prefix `PASSKEY = "`, which an induction head answers by copying. No
# model is trained on either format.

# %%
tok = get_tokenizer(spec.tokenizer)
depths = np.linspace(0.05, 0.95, 7).round(2)
n_per = max(2, 48 // len(depths)) if budget != "smoke" else 1
# Model B's three variants on prompts of sL - 8 tokens; Models A and B (plain RoPE) on L - 8
passkey = X.passkey_table(ch.budget, models, {"Model A": runs["A"].load_model(), "plain RoPE": B}, depths, n_per,
                          tok, seed=seed)
ch.save_table(passkey, "passkey_accuracy", runs=[runs["A"], runs["B"], ft])
print(f"{n_per} prompts per depth")
passkey.round(2)

# %% [markdown]
# ## What we see

# %%
ch.markdown(blog_findings.yarn_findings(ppl, by_pos, intervals, snaps, wv_table, passkey, L, sL, budget))

# %%
ch.done()
