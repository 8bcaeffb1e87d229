# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11. Designing the toy (1): the budget, the grid designs, and what erodes
#
# *Appendix to chapters 2-5. It trains nothing: it reads the probes' records in
# `data/probes/` (each written by the `python -m nblib.probes ...` command named beside its
# table) and shows why the toy budget is what it is.*
#
# The paper's grid takes GPU-weeks; the toy's must train on two CPU cores and still show the
# phenomena the paper measures. Each section below is one question the design had to answer,
# the measurement that answered it, and the choice it led to. Chapters 2-5 report the book's
# grid; this appendix keeps the grids that came before it, and their failures.

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)
budget_file = ""  # a TOML budget file, a base budget and its overrides (README, Your own data); empty: none

# %%
import pandas as pd
from IPython.display import display

from nblib.book.chapter import Chapter
from nblib.budgets import get_budget
from nblib.chapters import budget_words
from nblib.chapters.appendix import grid_ladder_findings, probe_findings, toy_design, toy_erosion, toy_figures
from nblib.probes import n_axis, record_path, records, short_seeds

ch = Chapter("11_toy_design", budget=budget, budget_file=budget_file, seed=seed, run_root=run_root)
b = ch.budget

# %% [markdown]
# ## The toy budget: how it was chosen
#
# At `toy` the models must be small enough to train the whole grid on two CPU cores, yet
# able to *use* a long context, or LongPPL has nothing to measure. The first toy budget
# (byte tokens, models of 7K-170K parameters, S1 with one head of size 16) failed that test:
# loss by position was flat or rising past the 32-byte local chunk, and [chapter 3](03_scaling_law.ipynb)'s law did
# not extrapolate (held-out R² 0.02 and -6.05). Each lever below was measured with
# `python -m nblib.probes design`, which trains a short-context model and an LCCP
# continuation through the real run store and trainer, then measures loss by position on
# held-out files and the **copy gain**: the loss on the first copy of a random token
# segment minus the loss on its second copy (`nblib.metrics.probes.copy_gain`; a model that
# looks back and copies gains several nats). Every probe's record is in
# `data/probes/toy_design_probe.jsonl`; the table shows them all.

# %%
probe_table = probe_findings.toy_probe_table(records("toy_design_probe"))
probe_table.round(3)

# %% [markdown]
# What each comparison decided (the numbers are read from the table above):

# %%
ch.markdown(probe_findings.toy_levers_markdown(probe_table))

# %% [markdown]
# ## Toward copying models: batch, learning rate and copying at a 128-token context
#
# The second toy budget, which the probes above produced, had a flaw: its models never learned to copy, so
# [chapter 3](03_scaling_law.ipynb)'s law did not extrapolate (held-out R² -2.15 and -5.45)
# and RULER stayed at 0. Its 32-token short context rarely held a repeat, its plain 2-layer
# models formed no induction circuit, and its stable phase plateaued after 1,000-3,000
# steps at 256 tokens per step. The first rebuild studied: a 128-token short context (LCCP
# at 8x that, 1,024 tokens), four layers at every scale, and a batch and LR per shape chosen
# from loss curves.
# `python -m nblib.probes lr_batch` trains one constant-LR short-stage run per (shape,
# batch, LR) through the real run store and trainer, and measures the held-out loss and the
# random-segment copy gain (a segment of 32 tokens repeated once: the loss on its first copy
# minus the loss on its second) at fixed shares of its tokens. The batch-16 runs at LR 5e-3
# form a ladder of four widths (d32, d48, d64, d96, 12M tokens each, 8M at d96), plus the
# copy-mix lever at d32 (5% of the sequences replaced by a repeated random segment). These
# runs are probes, not part of the grid below; their records are in
# `data/probes/toy_lr_batch_probe.jsonl`.

# %%
lr_batch = toy_design.lr_batch_table(records("toy_lr_batch_probe"))
lr_batch_summary = toy_design.lr_batch_summary(lr_batch)
ch.save_table(lr_batch_summary, "toy_lr_batch_summary")
lr_batch_summary.round(3)

# %% tags=["remove-output"]
#| label: cell-lr-batch-probe
ch.save_figure(toy_figures.lr_batch_figure(lr_batch), "toy_lr_batch_probe")

# %% [markdown]
# :::{figure} #cell-lr-batch-probe
# :label: fig-lr-batch-probe
# The LR x batch probes of the short stage at a 128-token context, one column per model
# shape: held-out loss (top) and random-segment copy gain (bottom: loss on a 32-token
# segment's first copy minus its second) against training tokens, one colour per batch and
# LR. The dashed line is the 1-nat copy gain the rebuilt toy needs at every scale. Records:
# `data/probes/toy_lr_batch_probe.jsonl`.
# :::
#
# What the probes say so far (read from the table and {numref}`fig-lr-batch-probe` above):

# %%
ch.markdown(toy_design.lr_batch_findings(lr_batch_summary))

# %% [markdown]
# **Does copying survive LCCP, and reach twice the short context?** The rebuilt toy needs
# every Linear-Decay endpoint at the largest budgets to copy from at least 256 tokens back.
# `python -m nblib.probes lccp_copy` continues the d64 ladder run the way the grid's LCCP
# does (RoPE base 1e4 -> 5e5, 1,024-token sequences of the length mixture, LR a tenth of the
# short stage's, constant) and measures the copy gain at 32, 128, 256 and 512 tokens back.
# The smeared rows continue the 2-layer smeared-key runs of the ablation below (d32 with
# seeds 0 and 1, d48; 2M short-stage tokens at batch 32 x 128 and LR 1e-2) the same way.

# %%
lccp_copy = toy_design.lccp_copy_table(records("toy_lccp_copy_probe"))
ch.save_table(lccp_copy, "toy_lccp_copy_probe")
lccp_copy.round(3)

# %% [markdown]
# **What a grid whose every scale copies would cost.** From the ladder: every scale of
# such a grid must be at least d64-wide (d48 needs 10M tokens), with Ds given in tokens so
# that the smallest scale still gets its ~4.5M. The table predicts the training time of
# three such designs on two cores from the FLOPs of each run and the effective FLOP rate the
# probes measured (one thread per run, the other core busy, as in the book). Evaluation is
# not included.

# %%
rates = toy_design.measured_rates(records("toy_lr_batch_probe"))
costs = toy_design.design_costs(float(rates["GFLOP/s"].median()))
ch.save_table(costs, "toy_copy_grid_costs")
display(rates.round(1))
costs.round(1)

# %% [markdown]
# The ladder's verdict, read from the three tables above:

# %%
ch.markdown(toy_design.ladder_findings(lr_batch_summary, lccp_copy, costs))

# %% [markdown]
# ## The toy grid: each choice and the measurement behind it
#
# Grid F, the book's grid before design V, came out of the probes above and chapter 2's
# smeared-key ablation. The last probe fixed the shapes: the 2-layer smeared-key model at each of
# the five widths, with heads of 32 dimensions (two of them at d48), trained like the grid's short
# stage at constant LR for 2M tokens (`python -m nblib.probes lr_batch --out
# toy_grid_shapes.jsonl`, records in `data/probes/toy_grid_shapes.jsonl`), then continued by
# the LCCP probe (its rows with heads of 32 in the LCCP table above). Every width copies from
# 32 tokens back within 1M tokens, so one token count sizes every scale.

# %%
grid_shapes = toy_design.lr_batch_summary(toy_design.lr_batch_table(records("toy_grid_shapes")))
ch.save_table(grid_shapes, "toy_grid_shapes")
grid_shapes.round(3)

# %% [markdown]
# **The LCCP learning rate.** The paper starts LCCP at a tenth of the short stage's LR, the
# short stage's terminal rate (App. A.3). On the first run of this grid at that rate, LongPPL
# *rose* with $D_l$ at S1-S3 while ShortPPL fell: LCCP taught the models the local text and
# unlearned the distant copying that LongPPL's key tokens need. The probe below
# (`python -m nblib.probes lccp_lr`) follows LongPPL along one Constant trajectory per LR
# from the grid's short-stage endpoint at $D_s$ = 270 N(S1) ({numref}`fig-lccp-lr-probe`).

# %%
lccp_lr = toy_design.lccp_lr_table(records("toy_lccp_lr_probe"))
ch.save_table(lccp_lr, "toy_lccp_lr_probe")
ch.markdown(toy_design.lccp_lr_findings(lccp_lr))

# %% tags=["remove-output"]
#| label: cell-lccp-lr-probe
ch.save_figure(toy_figures.lccp_lr_figure(lccp_lr, b.lccp_lr_frac), "toy_lccp_lr_probe")

# %% [markdown]
# :::{figure} #cell-lccp-lr-probe
# :label: fig-lccp-lr-probe
# LongPPL (left) and ShortPPL (right) along Constant LCCP trajectories from the short-stage
# endpoint at $D_s$ = 270 N(S1), one colour per scale; dashed: LCCP at a tenth of the short
# stage's LR (the paper's ratio), solid: the rate this grid uses. Records:
# `data/probes/toy_lccp_lr_probe.jsonl`.
# :::

# %% [markdown]
# **The LCCP RoPE base.** At 3% of the short LR, LongPPL falls through $D_l$ = 30 (on F's longer
# S5 trajectory it rose again after 35: the ladder's S5 figure below), but on the
# first grid at that rate the fall was still the recovery from the base change: raising the
# RoPE base from 1e4 to 5e5 (the paper's ABF step) takes S1's ShortPPL from about 4.5 to 7.
# The recovery was slower at larger N, so the drop from $D_l$ = 10 to 30 differed between
# scales. The additive law (Eq. 2) has no $N \times D_l$ term, so such a drop is what it cannot
# fit. The same probe with other LCCP RoPE bases (`--rope-bases`; records in
# `data/probes/toy_lccp_rope_probe.jsonl`) measures that drop at each scale:

# %%
rope_records = pd.concat([
    # the LR probe ran at the paper's ABF target, 5e5, with the grid's weight decay
    records("toy_lccp_lr_probe")
    .assign(rope_base=5e5, weight_decay=0.1),
    records("toy_lccp_rope_probe")])
lccp_rope = toy_design.lccp_rope_table(rope_records)
rope_drops = toy_design.lccp_rope_drops(lccp_rope, 0.03, 270, 10, 30)
ch.save_table(rope_drops, "toy_lccp_rope_probe")
ch.markdown(toy_design.lccp_rope_findings(lccp_rope, 0.03, 10, 30))

# %% [markdown]
# At 5e7 the spread of the drop across scales is a small part of the drop; at 5e5 it is about
# as large as the drop itself. At $D_l$ = 30, S2's LongPPL also falls with $D_s$ at 5e7, not at
# 5e5 (at $D_l$ = 10 it does not yet: S2's heads, below). The toy grid therefore raises the base 5,000x at LCCP (1e4 -> 5e7), not the
# paper's 50x, and the extension keeps the paper's 10x (5e7 -> 5e8). A base this large makes
# most of a 32-dim head's RoPE bands nearly constant over 1,024 tokens; the paper's 4K model
# already has a base (1e4) close to its context, where the toy's 128-token short stage has a
# base 78x its context; one reading is that the first ABF step of the toy moves bands its short
# stage did use, and a larger step moves them past where they matter at 1,024 tokens.
# `full` keeps the paper's bases.
#
# **S2's heads.** On the first grid at base 5e7, S2 (d48, one head of 48 dimensions, the only
# scale whose heads are not 32 wide) was still the outlier: after LCCP it beat S3 at the
# smallest $D_s$ and stayed flat in $D_s$. The same probe with S2's head layout changed
# (`--heads`, `--head-size`; records in `data/probes/toy_s2_heads_probe.jsonl`), next
# to the 48-dim head's records at base 5e7 above:

# %%
s2_heads = toy_design.lccp_rope_table(pd.concat([
    records("toy_s2_heads_probe"),
    rope_records[(rope_records.scale == "S2") & (rope_records.rope_base == 5e7)].assign(heads=1, head_size=48)]),
    extra=("heads", "head_size"))
s2_table = toy_design.s2_heads_table(s2_heads, lr_frac=0.03, dls=(10, 30))
ch.save_table(s2_table, "toy_s2_heads_probe")
s2_table.round(3)

# %% [markdown]
# With two heads of 32 (attention 64 wide on a 48-wide stream, as Gemma 3 decouples head
# width from $d$; the same N as one head of 48), S2's LongPPL falls with $D_s$ at every $D_l$,
# as at every other scale; one head of 32 also falls with $D_s$ but has fewer parameters. F's
# S2 was d48 with two heads of 32, so every scale had heads of 32; the book's grid keeps heads
# of 32.
#
# The book's grid now, each choice beside the paper's and the measurement behind it:

# %%
design = toy_design.grid_design_table(b if b.name == "toy" else get_budget("toy"), grid_shapes, lccp_copy)
ch.save_table(design, "toy_grid_design")
design

# %% [markdown]
# ## The grid designs tried
#
# Each row below is one design of the whole toy grid, run through chapters 3 and 4, with the
# measures the toy Part 1 is held to: held-out $R^2$ of Eq. 1 on both splits (Fig. 3, target
# 0.8), Lin's CCC of Constant-Last4 against Linear-Decay at S4 (Fig. 4b, target 0.9) and the
# share of S1-S4 trajectory points where Last4 is at or below Raw (target 85%); from I on also
# S5's Constant trajectory (Spearman ρ of Last4 LongPPL against $D_l$, target ≤ -0.8) and the
# Constant-Last4 law's held-out $R^2$ (Table 4, target 0.8). `code` names the commit that ran it
# (designs I-R are budget files in `data/probes/grid_designs/`); an empty cell was not
# measured. Records: `data/probes/toy_grid_ladder.csv`.

# %%
ladder = grid_ladder_findings.grid_ladder_table(records("toy_grid_ladder"))
ch.save_table(ladder, "toy_grid_ladder")
ch.markdown(grid_ladder_findings.grid_ladder_findings(
    ladder, {**grid_ladder_findings.GRID_TARGETS, **grid_ladder_findings.TRAJECTORY_TARGETS}))
ladder.drop(columns=["change", "measured"]).set_index("design")

# %% [markdown]
# The LCCP learning rate pulls chapter 3 and chapter 4 apart (designs F, G, H differ in it
# alone). Chapter 4's claims come from the paper's regime, where a constant LR leaves iterate
# noise that decay or averaging removes: Raw is worse than Linear-Decay, Last4 beats Raw and
# matches Linear-Decay. At 3% the toy is in the other regime: LCCP is still making fast progress
# at $D_l$ = 10-30, so decaying the LR costs more than it removes (Linear-Decay is the worst of
# the three, `Last4 - LD` < 0) and the average of the last four checkpoints lags the newest. At
# the paper's tenth (H) the order is the paper's, Linear-Decay best and Last4 better than Raw
# on most points, but Constant LCCP at that rate erodes: LongPPL rises with $D_l$ while
# ShortPPL falls, so Last4 ends above Linear-Decay (CCC falls again) and Eq. 1 no longer
# holds. The probe's drop of log LongPPL from $D_l$ = 10 to 30 at $D_s$ = 270, base 5e7, by
# LCCP rate (a negative drop is a rise):

# %%
toy_design.lccp_rate_drops(lccp_rope, 5e7, 270, 10, 30).round(3)

# %% [markdown]
# No single rate gives both chapters their regime on designs A-H: the sign of `Last4 - LD`
# crosses zero between 5% and 10%, where CCC could peak, but there the S1-S3 fit is already
# below the 0.8 target (G) and Constant LongPPL starts to rise with $D_l$ (H). F kept 3%, the
# rate at which chapter 3's law held. The next section looks for the cause of the rise in the
# heads.

# %% [markdown]
# ## The N axis: does a larger scale's LongPPL fall?
#
# Eq. 1 has LongPPL fall with N at every $(D_s, D_l)$. On the book's grid S3 sits above S2 at
# most matched points (chapter 4, "Back to Fig. 3"), and chapter 4 judges such rises against
# the spread between two Constant LCCP seeds, which all start from one short-stage checkpoint.
# The N-axis probe (`python -m nblib.probes n_axis --scales S2 S3 --seeds 0 1 --dls 10`, and the
# same with `--budget-file` for a lever) trains each scale's short stage with two seeds and the
# grid's Linear-Decay LCCP at $D_l$ = 10 from each. Levers: the book's grid (`toy`); design Vd,
# attention as wide as the model at every scale (S2 two heads of 40, where the grid's S2 has
# three heads of 32, as wide as S3's); design Ve, every short stage in fp32 (the grid trains
# S3's and S5's in bf16). Records: `data/probes/toy_n_axis_probe.jsonl`.

# %%
def design_name(r):
    return r["budget"].str.replace("data/probes/grid_designs/", "", regex=False)


n_axis_records = records("toy_n_axis_probe").assign(budget=design_name)
LATER_DESIGNS = ["Vf2.toml"]  # the design the seed probes below led to: its own section
n_axis_table = n_axis.n_axis_table(n_axis_records[~n_axis_records["budget"].isin(LATER_DESIGNS)])
ch.save_table(n_axis_table, "toy_n_axis_probe")
ch.markdown(probe_findings.n_axis_findings(n_axis_table))
n_axis_table.round(3)

# %% [markdown]
# Two seeds of one short stage move LongPPL after LCCP by several times the LCCP-seed spread
# that chapter 4 uses as the noise, so a rise or a fall of one scale pair at one seed is not a
# finding. Training S3's short stage in fp32 leaves the pair where it was: precision is not the
# cause. Narrowing S2's attention to its width moves S2 up to S3, which removes the rise but
# gives no fall outside the seed spread. The law's N axis needs either several short seeds per
# scale or seeds that agree after LCCP; the next probe asks where they part.

# %% [markdown]
# Why do two short seeds of one scale differ by more than a step up in N? A seed whose short
# stage stalls on a plateau would do it, and would leave LongPPL with little to gain from
# $D_s$. The short-stage seed probe
# (`python -m nblib.probes short_seeds --budget-file data/probes/grid_designs/Ve.toml --scales S2 S3
# --lrs 1e-2 5e-3 --seeds 0 1 2 --ds 90 270`) trains the grid's short stage alone (Ve: every
# short stage in fp32) at the grid's stable LR and at half of it, with three seeds, decayed at
# $D_s$ = 90 and 270, and scores held-out loss at the short context; no reference and no LCCP.
# Records: `data/probes/toy_short_seeds.jsonl`.

# %%
short_seed_table = short_seeds.short_seed_table(records("toy_short_seeds").assign(budget=design_name))
lccp_seed_spread = short_seeds.lccp_seed_spread(records("toy_n_axis_probe")).assign(budget=design_name)
ch.save_table(short_seed_table, "toy_short_seeds")
ch.markdown(probe_findings.short_seed_findings(short_seed_table, lccp_seed_spread))
short_seed_table.round(3)

# %% [markdown]
# Where do the seeds part, then? The same probe with `--dls 10 30` trains the grid's Linear-Decay
# LCCP from each seed's short stage at $D_s$ = 270, every run in fp32 (design Ve2:
# `python -m nblib.probes short_seeds --budget-file data/probes/grid_designs/Ve2.toml --scales S2
# S3 --seeds 0 1 2 --ds 270 --dls 10 30`), and scores the held-out loss at the long context within
# the short context's span and beyond it. Design Ve2y is the same at three times the LCCP rate
# (30% of the short LR, as design Y); the rows at a short-stage LR of 5e-3 (`--lrs 5e-3`) start
# LCCP at the grid's LR, 1e-3, from the short stages above.

# %%
short_seed_lccp = short_seeds.short_seed_lccp_table(records("toy_short_seeds").assign(budget=design_name))
ch.save_table(short_seed_lccp, "toy_short_seeds_lccp")
ch.markdown(probe_findings.short_seed_lccp_findings(short_seed_lccp))
short_seed_lccp.round(3)

# %% [markdown]
# ### Back to LongPPL: the short stage at half the LR (design Vf2)
#
# Design Vf halves the short stage's stable LR at every scale (1e-2 to 5e-3) and keeps LCCP's
# starting LR at the grid's 1e-3 (`lccp_lr_frac` 0.2); every other setting is the grid's. Vf2 is
# Vf with every run in fp32, the LongPPL reference too (as Ve2 is to Ve): on a CPU without native
# bf16 matmuls autocast is emulated and several times slower. The N-axis probe on it scores
# LongPPL, the law's own metric, at every $D_s$ of the grid and $D_l$ = 10: S2 and S3 with three
# short seeds (`python -m nblib.probes n_axis --budget-file data/probes/grid_designs/Vf2.toml
# --scales S2 S3 --seeds 0 1 2 --dls 10`), then S3, S4 and S5 with two (`--scales S3 S4 S5
# --seeds 0 1`). Records: `data/probes/toy_n_axis_probe.jsonl`.

# %%
n_axis_vf2 = n_axis.n_axis_table(n_axis_records[n_axis_records["budget"].isin(LATER_DESIGNS)])
ch.save_table(n_axis_vf2, "toy_n_axis_probe_vf2")
ch.markdown(probe_findings.n_axis_findings(n_axis_vf2))
n_axis_vf2.round(3)

# %% [markdown]
# **Signal against noise.** For each design the probe ran, the short-seed standard deviation of
# log LongPPL (pooled over the probed points), the change from the smallest to the largest probed
# scale, and the short seeds per scale that a step of that size would need to stand two standard
# errors from zero.

# %%
seed_noise = n_axis.seed_noise_table(n_axis_records)
ch.save_table(seed_noise, "toy_n_axis_seed_noise")
ch.markdown(probe_findings.seed_noise_findings(seed_noise))
seed_noise.round(3)

# %% [markdown]
# On Vf2 S3 falls below S2 at every $D_s$, but S4 sits above S3 and S5 only just below S4, and
# one seed at S4 and S5 sits as high as S2's worst. ShortPPL, on the same runs, falls with N at
# every point. Across the whole probed range, S2 to S5, LongPPL falls by less than one short
# seed's scatter: a lower short-stage LR makes S3's seeds agree, not the seeds of every scale.
# The toy's N steps are 1.2-1.7x (the paper's are 1.7-3.4x, 26x in all), and at the fall per
# step measured here one seed per scale cannot order LongPPL by N; the law's monotone-N condition
# would need more short seeds per scale than a CPU book can train, or a LongPPL whose seed scatter
# is several times smaller. Where that scatter comes from (the seeds agree within the short
# context and part beyond it, above) is the question this ladder leaves.

# %% [markdown]
# ## What erodes at the paper's LCCP rate
#
# The erosion probe (`python -m nblib.probes erosion --scale S4 --kv-heads 1 3`) follows one
# Constant trajectory at S4 from $D_s$ = 270 N(S1), at 10% of the short LR and the short
# stage's 4 x 1,024 tokens a step (the paper's rule), to $D_l$ = 120, for two head layouts with
# their own short stages: one KV head shared by the three query heads (the grid's) and a KV head
# per query head; further rows follow S1 and S3, and LCCP on aligned windows (`--aligned`,
# below). At each checkpoint it measures LongPPL on file beginnings (the evaluation set)
# and file middles (what LCCP trains on), the copy gain 128-512 tokens back, the smear gates and
# each head's attention mass by distance.

# %%
erosion = toy_erosion.erosion_table(records("toy_erosion_probe"))
ch.save_table(erosion, "toy_erosion_probe")
ch.markdown(toy_erosion.erosion_findings(erosion))
erosion.drop(columns=["LCCP LR", "LCCP batch"]).round(3).set_index(["scale", "variant", "Dl"])

# %% tags=["remove-output"]
#| label: cell-erosion-probe
ch.save_figure(toy_figures.erosion_figure(erosion), "toy_erosion_probe")

# %% [markdown]
# :::{figure} #cell-erosion-probe
# :label: fig-erosion-probe
# One Constant LCCP trajectory per scale and variant, from $D_s$ = 270 N(S1), at 10% of the
# short LR and 4 x 1,024 tokens a step, seed 0. Left: LongPPL on file beginnings (solid, the
# evaluation set) and on file middles (dashed), each over its value at $D_l$ = 30. Middle: the
# random-segment copy gain 256 tokens back. Right: the largest share of attention any head of
# the second layer (where the copying heads sit) puts 128 or more tokens back. Records:
# `data/probes/toy_erosion_probe.jsonl`.
# :::

# %% [markdown]
# **What the probe shows.** With one KV head, LongPPL rises on file middles as on beginnings
# (not the evaluation set's kind of text) and the smear gates do not move; what goes is far
# attention: the second layer's most far-looking head returns to the local window, and the copy
# gain 256 and 512 back falls with it. With a KV head per query head that head keeps its far
# attention and the copy gains at 128 and 256 keep rising. A third trajectory (`--expand-kv`)
# starts LCCP from the shared-key short stage with each KV head copied out to one per query
# head (`nblib.models.llama.expand_kv_heads`, which computes exactly what the shared head did):
# it erodes like the shared-key model, so the key sets that resist erosion form in the short
# stage. One reading: a head that copies from far needs smeared keys matched by content; a head
# serving the 97% of local tokens wants plain keys and a recency preference; one key set per
# layer cannot serve both under constant-LR LCCP.
#
# **Aligned windows.** The toy's LCCP stream laid a bucket's pieces end to end and cut its
# windows across them, so 97% of the 1,024-token windows joined the tail of one file to the
# head of an unrelated one, where App. A.4 splits long documents "into consecutive segments of
# the target length". With `--aligned` (`Budget.lccp_aligned`) each segment is a sequence of
# its own (95% of the windows hold one file). With one KV head that halves the rise from
# $D_l$ = 30 to 120 (S1, S4); with a KV head per query head, LongPPL at S3 and S4 falls at
# every checkpoint after 30. S1 with two heads of 32, a KV head each (`--heads 2`; N 31,908,
# tokens still counted in the one-head N(S1)), erodes like one head (+28%): at d32 the width
# binds. What erodes is a narrow or shared key set, and text joining unrelated files feeds it.
#
# **The whole grid on that lever (rows I-R).** I gives S2-S5 and the reference a KV head per
# query head and runs LCCP at 4 x 1,024 and 10%; J moves $D_l$ to 30-50; K is I on aligned
# windows; L is K on $D_s$ = 270-450 N(S1), S5's trajectory from 450 as the paper's; M is L on
# $D_l$ = 30-50. On L and M, S1 and S2 (d32, d48) stop gaining from $D_s$ and $D_l$. N starts
# the widths at d64 (d64 / 80 / 96 / 128 / 160, heads of 32): every scale gains from $D_s$ and
# $D_l$, chapter 3's $R^2$ reaches 0.88 / 0.97, but S2 and S3 (three heads each) swap order at
# $D_s$ = 270 (O: S2 with two heads of 40 falls below S1). P puts N on $D_l$ = 30-50: LD still
# trails. Q and R take N's LCCP to 2 and 1 x 1,024 tokens a step: Last4 <= Raw 28% -> 57% ->
# 79%, Last4 - LD -1.45 -> -0.70 -> -0.43, and on R the Constant-Last4 law fits S4 and S5 (0.84 /
# 0.88) and Eq. 2's 60N prefix misses S5's end by 2%; but LD is still the worst at S4 and
# chapter 3's S4 $R^2$ falls to 0.69. U and T are R merged with Last4 2 and 3 N(S1) apart
# (`last4_spacing`, App. B.1; appendix B reads them). V compresses N's ladder so that S5 is d128
# (S1 d64 .. S5 d128/4, a KV head each, LCCP at 10% on 4 x 1,024 aligned tokens a step): the
# book's grid descends from it (the last section names the row it is now). Every design is a
# budget file written over F's (`data/probes/grid_designs/F.toml`); `make book
# BUDGET_FILE=...` reruns any.

# %%
ladder_s5 = records("toy_grid_ladder_s5")[["design", "protocol", "dl", "longppl", "shortppl"]]
ch.save_table(ladder_s5, "toy_grid_ladder_s5")

# %% tags=["remove-output"]
#| label: cell-ladder-s5
ch.save_figure(toy_figures.ladder_trajectory_figure(ladder_s5), "toy_grid_ladder_s5")

# %% [markdown]
# :::{figure} #cell-ladder-s5
# :label: fig-ladder-s5
# LongPPL along S5's Constant LCCP trajectory of each grid design that recorded it (Last4 solid,
# Raw dotted; one seed). J shares I's trajectory, M shares L's, P shares N's; U and T are R's
# merged 2 and 3 N(S1) apart, from 10 N(S1). Records:
# `data/probes/toy_grid_ladder_s5.jsonl`, written by `python -m nblib.probes grid_ladder`.
# :::

# %% [markdown]
# ## Why the book's grid left F for the V line
#
# The ladder's two rows that decide the book's grid: F, its grid until V, as re-run fresh on
# the last host that measured it, and the book's grid now, a descendant of V (named below,
# with the rows between). F's S5 trajectory gets worse with more LCCP tokens after its
# minimum, the reverse of the paper's title claim; the V line's keeps improving and keeps
# chapter 3's law (the verdicts below are read from the ladder). The V line trains wider
# models on more tokens; each row's Part 1 minutes below were timed on its own host, so they
# compare hosts and precisions as much as designs.

# %%
ch.markdown(budget_words.book_grid_words(ladder, origin="V") + "\n\n"
            + grid_ladder_findings.book_grid_findings(ladder))

# %% [markdown]
# ## How the toy pair's training length was chosen (Part 2)
#
# The toy Models A and B ([chapter 6](06_models_ab.ipynb)) had their training length set by
# probes. Each probe trains one model with one lever changed and measures the same quantities
# on a scratch run store (`python -m nblib.probes pair`, records in
# `data/probes/pair_probe.jsonl`). At 600 steps Model A does not copy yet, and at 1,200 it
# does, so the toy pair trains 1,100 steps. For Model B the probes also record how plain RoPE
# and zero-shot YaRN read past $L$ ([chapter 9](09_yarn.ipynb)), with the blog's RoPE base of
# $10^4$ and with a base of 2,500, which keeps the slowest band's wavelength about as long
# relative to $L$ as in the blog.

# %%
probe_path = record_path("pair_probe")
pair_probes = pd.read_json(probe_path, lines=True).set_index("name") if probe_path.exists() else pd.DataFrame()
pair_probes.round(3)

# %%
ch.done()
