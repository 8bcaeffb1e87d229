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
# # 3. An additive two-stage scaling law for LCCP
#
# *LCCP paper, §3 and App. A.2, A.5.*
#
# **The claim.** After long-context continual pre-training with a Linear-Decay schedule,
#
# $$
# \log(\mathrm{LongPPL}) = \frac{A}{N^{\alpha}} + \frac{B_s}{D_s^{\beta_s}} + \frac{B_l}{D_l^{\beta_l}} + C
# $$ (eq-law)
#
# fits 109 configurations (five scales; a 5x5 grid of short-stage budgets $D_s$ and LCCP
# budgets $D_l$ at S1-S4; nine S5 configurations) and predicts held-out scales: fitted on
# S1-S3 it predicts S4, fitted on S1-S4 it predicts S5, with $R^2 > 0.95$ and MAPE < 2% in
# log(LongPPL) space. Alternatives (no offset, a combined budget $D_s + D_l$, effective
# data, interaction terms) extrapolate worse (Table 3). [Chapter 2](02_setup.ipynb) sets up
# the data, the models and the metric.

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)
budget_file = ""  # a TOML budget file, a base budget and its overrides (README, Your own data); empty: none
n_boot = 0  # bootstrap refits behind the intervals (0: the budget default)

# %%
import json
import subprocess
import sys

import numpy as np
import pandas as pd
from IPython.display import display

from nblib.book.chapter import Chapter
from nblib.chapters import budget_words
from nblib.chapters.claims.paper_values import OFFSET_C, TABLE3_LD, ZERO_CROSSING_10B
from nblib.chapters.part1 import law_figures, law_findings
from nblib.lccp import diagnostics, experiments, law_checks, scaling
from nblib.lccp.evaluation import Evaluator
from nblib.metrics.probes import context_use_table, copy_gain_table, copy_loss_curves, position_loss_table
from nblib.probes import records
from nblib.store.provenance import REPO_ROOT

ch = Chapter("03_scaling_law", budget=budget, budget_file=budget_file, seed=seed, run_root=run_root, n_boot=n_boot)
b = ch.budget

# %% [markdown]
# ## The runs
#
# For every scale: one WSD short-context run per $D_s$ budget (the decays branch from
# one shared stable run, which `tests/test_train.py` shows is identical to separate runs),
# then Linear-Decay LCCP from each endpoint for every $D_l$ budget; at S5, the nine
# diagonal and off-diagonal configurations. Everything goes through the run store: a second
# execution trains and evaluates nothing.

# %%
ev = Evaluator.build(b, ch.store)
table = experiments.linear_decay_table(ev)
table["y"] = np.log(table["longppl"])
runs = list(table["run"])
csv = ch.save_table(table[["scale", "N", "Ds", "Dl", "longppl", "shortppl", "ds_mult", "dl_mult", "run"]],
                    "runs_linear_decay", runs=runs)
print(f"{len(table)} Linear-Decay configurations; LongPPL from {table.longppl.min():.3f} to {table.longppl.max():.3f}")
table.groupby("scale")[["longppl", "shortppl"]].describe().round(3)

# %% [markdown]
# ## Do the models copy?
#
# LongPPL scores the tokens whose prediction needs context beyond the local chunk (App. A.1),
# and the cheapest such tokens are copies. So before any fit: does every endpoint copy? The
# probe is a random segment of tokens, repeated; the copy gain is the loss on its first copy
# minus the loss on the repeat (nats a token), at a given distance between the copies.
# The targets: every short-stage endpoint at the smallest $D_s$ copies (>= 1 nat) from a
# quarter of the short context back, and every LCCP endpoint at the largest $D_s$ and $D_l$
# from twice the short context back, past anything the short stage saw
# ({numref}`fig-copy-gain`).

# %%
copy_grid = diagnostics.copy_gain_table(ev)
ch.save_table(copy_grid, "copy_gain", runs=runs)
copy_targets = diagnostics.copy_verdicts(copy_grid, b.short_seq_len)
copy_targets.round(3)

# %% tags=["remove-output"]
#| label: cell-copy-gain
fig = law_figures.copy_gain_figure(copy_grid, b.short_seq_len, diagnostics.COPY_THRESHOLD)
ch.save_figure(fig, "fig_copy_gain", runs=runs)

# %% [markdown]
# :::{figure} #cell-copy-gain
# :label: fig-copy-gain
# Beyond the paper, at budget {{ budget }}: the random-segment copy gain of (a) every
# short-stage endpoint at a quarter of the short context, against $D_s$, and (b) the
# Linear-Decay endpoints from the largest $D_s$ at twice the short context, against $D_l$;
# dashed: 1 nat. The full table (also half the short context, and once the short context
# for LCCP endpoints) is `copy_gain.csv`.
# :::

# %% [markdown]
# ## Is the short stage still learning?
#
# App. A.3's WSD short stage keeps a constant LR through its stable phase. If the loss had
# stopped falling there, the $D_s$ axis would measure noise. The stable trunk of S1, the
# scale whose seeds differ most, is trained with a second seed; the seed spread is the
# difference between the two seeds' held-out loss at the end of the stable phase (held-out:
# the test documents cut into windows of the short context). Every scale's loss must fall
# from the stable phase's midpoint to its end by more than that spread.

# %%
stable = diagnostics.stable_phase_table(ev)
spread = diagnostics.seed_spread(stable)
ch.save_table(stable, "stable_phase", runs=runs)
print(f"seed spread (held-out loss, end of the stable phase, {' and '.join(diagnostics.SPREAD_SCALES)}): "
      f"{spread:.4f} nats")
diagnostics.stable_phase_verdicts(stable, spread).round(4)

# %% [markdown]
# **No step inside the grid.** Fig. 2 below shows the trends; this table checks every step
# of them: log(LongPPL) and log(ShortPPL) must fall with $N$ (each configuration across
# scales), with $D_s$ (mean over $D_l$) and with $D_l$ (mean over $D_s$) at every scale. A rise
# larger than the seed spread fails; a smaller one is counted with its size.

# %%
mono = diagnostics.monotonicity_table(table, spread)
ch.save_table(mono, "monotonicity", runs=runs)
display(diagnostics.monotonicity_summary(mono).round(4))
mono[mono["change (nats)"] > 0].round(4)

# %% [markdown]
# ## Fig. 2: the trends
#
# Varying one budget while the model size and the other budget stay fixed
# ({numref}`fig-trends`). Both trends should look like power-law decay towards an offset.

# %% tags=["remove-output"]
#| label: cell-trends
fig = law_figures.trends_figure(table)
ch.save_figure(fig, "fig02_trends", runs=runs)

# %% [markdown]
# :::{figure} #cell-trends
# :label: fig-trends
# The paper's Fig. 2 at budget {{ budget }}: log(LongPPL) of the Linear-Decay runs against the
# short-context budget $D_s$ (left, $D_l$ at its largest) and the LCCP budget $D_l$ (right,
# $D_s$ at its largest), one line per scale S1-S4.
# :::

# %% [markdown]
# ## Fig. 3: fit and held-out-scale extrapolation
#
# The fit follows App. A.5: Huber loss (`f_scale` 0.05) on log(LongPPL) with variables
# normalised as $N/10^8$ and $D/10^9$; a one-sided penalty $[\max(\beta-\bar\beta, 0)]^2$
# on $\beta_s, \beta_l$ whose thresholds are the medians of per-slice fits
# $y = b D^{-\beta} + c$ on the training split; multi-start from a grid, then L-BFGS-B.
# The held-out scale is used only for evaluation ({numref}`fig-parity`).
#
# The search is variable projection (beyond the paper's description, same objective): with
# the exponents fixed, {eq}`eq-law` is linear in $A, B_s, B_l, C$, which are solved exactly
# (Huber regression with $A, B_s, B_l \ge 0$); the exponents are searched on a 4,096-point
# grid and polished with L-BFGS-B from the grid's best local minima. Exponents are searched
# down to $10^{-3}$: when the objective keeps falling as an exponent goes to 0 (its term
# becoming $-a\ln N$ while $A \to \infty$ and $C \to -\infty$), the law has no interior
# optimum on these runs, and the cell below says so instead of stopping wherever an
# iteration limit does.

# %%
splits = {"S1-S3 → S4": (["S1", "S2", "S3"], ["S4"]), "S1-S4 → S5": (["S1", "S2", "S3", "S4"], ["S5"])}
holdout = ch.cached(scaling.holdout_evals, table, splits)
for name, res in holdout.items():  # an optimum on a bound, or with no interior optimum, is said here
    print(res.fit.report(f"{name}: ") or f"{name}: every parameter inside its bounds")
ch.markdown(law_findings.degenerate_fit_findings(holdout))

# %% tags=["remove-output"]
#| label: cell-parity
fig = law_figures.parity_figure(table, holdout, splits)
ch.save_figure(fig, "fig03_parity", runs=runs)

# %% [markdown]
# :::{figure} #cell-parity
# :label: fig-parity
# The paper's Fig. 3 at budget {{ budget }}: log(LongPPL) predicted by {eq}`eq-law` against the
# measured value, fitted on S1-S3 and scored on S4 (left), fitted on S1-S4 and scored on S5
# (right); grey: the fitted scales, red: the held-out one, dashed: $y = x$.
# :::

# %% [markdown]
# Each held-out $R^2$ with a 95% interval: the fitted configurations are resampled with
# replacement and the whole procedure rerun on each resample; the held-out points stay fixed.

# %%
r2_intervals = ch.cached(scaling.holdout_r2_intervals, table, splits, n_boot=ch.n_boot, seed=seed)
ch.save_table(r2_intervals.reset_index(), "fig03_r2_intervals", runs=runs)
r2_intervals.round(4)

# %%
pd.DataFrame([{"split": n, "R² (ours)": r.r2, "MAPE % (ours)": r.mape,
               "R² (paper)": TABLE3_LD["additive"][0 if "S4" in n[-2:] else 2],
               "MAPE % (paper)": TABLE3_LD["additive"][1 if "S4" in n[-2:] else 3]} for n, r in holdout.items()]).round(4)

# %% [markdown]
# These are one seed on one host. A CPU's matmul kernels pick their blocking and instruction
# set per CPU. So the order of a float sum can differ between hosts even at one thread, and
# with it the last bits of the weights. Training amplifies those bits into a slightly
# different fit. The same grid on the hosts it has run on, from the design ladder (appendix A),
# including a run with every kernel capped at AVX2 in fp32, as a CPU without AVX512-BF16 runs it:

# %%
ch.markdown(law_findings.host_spread_findings(records("toy_grid_ladder")))

# %% [markdown]
# ## Table 11: fitted parameters, with bootstrap intervals
#
# Beyond the paper: a case-resampling bootstrap (the whole App. A.5 procedure, slice
# thresholds included, rerun per resample) gives an interval for every parameter, and a
# variable-projection fit (exponent grid, non-negative least squares for the amplitudes,
# then local refinement) cross-checks the optimiser. Parameters are in absolute units
# (N, Ds, Dl as raw counts), as in Table 11.

# %%
table11 = ch.cached(scaling.parameter_table, table, splits, n_boot=ch.n_boot, seed=seed)
ch.save_table(table11, "table11_fitted_params", runs=runs)
table11.round(6)

# %% [markdown]
# How long these fits take: `python -m benchmarks.bench_fit` times every fit of this chapter and
# the next on their committed run tables, with the search above and with the first
# implementation (a coarse start grid, then L-BFGS-B on all seven parameters from 16
# starts, which on the S1-S4 table ran to its 3,000-iteration limit on most starts).

# %%
bench_json = REPO_ROOT / "benchmarks" / "results" / "bench_fit.json"
if bench_json.is_file():
    fit_bench = json.loads(bench_json.read_text())
    print(f"all fits of chapters 3 and 4 at toy: {fit_bench['total_s']['old']:.0f} s before, "
          f"{fit_bench['total_s']['new']:.0f} s now ({fit_bench['machine']})")
    display(pd.DataFrame(fit_bench["items"]).groupby("chapter")[["fits", "old_s", "new_s"]].sum().round(1))
else:
    print("no fit benchmark yet: run python -m benchmarks.bench_fit")

# %% [markdown]
# ## Table 3: alternative formulations
#
# Every variant is fitted with the same data, splits, weighting, regulariser and
# multi-start as {eq}`eq-law` and judged on the held-out scales only.

# %%
table3 = ch.cached(scaling.variant_ablation, table, {te[0]: (tr, te) for tr, te in splits.values()},
                   paper=TABLE3_LD, variants=b.variant_laws, n_starts=b.variant_fit_starts)
ch.save_table(table3, "table03_variant_ablation", runs=runs)
display(table3.round(4))
ch.markdown(law_findings.table3_verdict(table3))

# %% [markdown]
# Is a form's lead larger than the fit's own noise? Each split's best rival and the additive
# form are refitted on the same bootstrap resamples of the training scales (one seed draws the
# same resamples for both), and each refit predicts the fixed held-out points: the interval of
# the R² difference is paired. An interval that holds 0 means the toy cannot tell the two forms
# apart.

# %%
rivals = {s: table3.set_index("variant").drop(index="additive")[f"{s} R²"].idxmax() for s in ("S4", "S5")}
r2_diff = ch.cached(scaling.r2_difference_intervals, table, {te[0]: (tr, te) for tr, te in splits.values()},
                    rivals, n_boot=ch.n_boot, seed=seed, n_starts=b.variant_fit_starts)
ch.save_table(r2_diff, "table03_r2_difference", runs=runs)
display(r2_diff.round(4))
ch.verdict("§3.3, Table 3")

# %% [markdown]
# ## Fig. 9: where the fitted law stops making sense
#
# The offset $C$ is negative in the paper (-0.60 and -0.82), so the law must cross
# log(LongPPL) = 0 somewhere; the paper's Fig. 9 ({numref}`fig-zero-contours` here) shows
# where, for the S1-S4 fit. The paper's crossing at
# $N$ = 10B with $D_s = D_l$ is about 11.0T tokens per stage. We scale $N$ by the same factor
# relative to our S5 (10B / 821M).

# %%
fit14 = holdout["S1-S4 → S5"].fit
c_ours = fit14.absolute_params()["C"]
print(f"offset C of the S1-S4 fit: {c_ours:.3f} (paper, Linear-Decay: {OFFSET_C['LD'][1]})")
n5 = b.n_params("S5")

# %% tags=["remove-output"]
#| label: cell-zero-contours
fig = law_figures.zero_contour_figure(fit14, n5, data=table[table.scale != "S5"])
ch.save_figure(fig, "fig09_zero_contours", runs=runs)

# %% [markdown]
# :::{figure} #cell-zero-contours
# :label: fig-zero-contours
# The paper's Fig. 9 at budget {{ budget }}: the $(D_s, D_l)$ curves where the S1-S4 fit of
# {eq}`eq-law` predicts log(LongPPL) = 0, for three model sizes (multiples of our S5); grey:
# the budgets the fitted runs cover. A fit with an exponent at its floor (above) is log-linear on
# that axis, and the title says its contours are that fit's extrapolation.
# :::

# %%
cross = scaling.zero_crossing_equal_budget(fit14, 12.2 * n5)
print(f"Ds = Dl zero crossing at N = 12.2 x S5: {cross:.3g} tokens per stage, {cross / table.Dl.max():.3g}x the "
      f"largest Dl in the fit (paper at 10B: {ZERO_CROSSING_10B['LD']:.3g}, about 900x its largest Dl)")

# %% [markdown]
# ## Fitting your own runs
#
# The same procedure is a command-line tool. It reads a table with columns
# `N, Ds, Dl, longppl` (and `scale` for a held-out split), prints the parameters with
# bootstrap intervals and the held-out $R^2$/MAPE, and writes predictions. Here it runs on
# this chapter's own table:

# %%
out = subprocess.run([sys.executable, "-m", "nblib.lccp.scaling", "fit", str(csv), "--holdout", "S5",
                      "--bootstrap", str(min(20, ch.n_boot)), "--out", str(csv.with_name("predictions_s5.csv"))],
                     capture_output=True, text=True)
print(out.stdout[-3000:] or out.stderr[-3000:])

# %% [markdown]
# ## A cross-check on ShortPPL, and what limits the toy fit
#
# The same law and procedure, fitted to log(ShortPPL) instead (the tokens that do *not*
# need distant context): if this fits well while LongPPL does not, the fitting machinery
# is sound and the limit is in what the toy models learn about distant context. The
# second cell measures that directly ({numref}`fig-position-loss`): a model's mean loss by
# position on the test documents; a model that uses distant context keeps improving at
# late positions.

# %%
short_table = table.assign(longppl=table["shortppl"])  # the fitter reads the `longppl` column
short_holdout = ch.cached(scaling.holdout_evals, short_table, splits)
pd.DataFrame([{"split": n, "LongPPL R²": holdout[n].r2, "LongPPL MAPE %": holdout[n].mape,
               "ShortPPL R²": r.r2, "ShortPPL MAPE %": r.mape} for n, r in short_holdout.items()]).round(4)

# %%
t, L = b.longppl.trunc_len, b.long_seq_len
edges = tuple(sorted({0, t // 2, t, 2 * t, L // 2, L}))
models = experiments.context_use_models(b, ch.store)
pos = position_loss_table(models, ev.texts, ev.tokenizer, L, edges)
# the test: mean loss in the last half of the context against the first local chunk
uses_context = context_use_table(models, ev.texts, ev.tokenizer, L, t)
pos.round(3)

# %% tags=["remove-output"]
#| label: cell-position-loss
fig = law_figures.position_loss_figure(pos, t)
ch.save_figure(fig, "figA_position_loss", runs=runs)

# %% [markdown]
# :::{figure} #cell-position-loss
# :label: fig-position-loss
# Beyond the paper, at budget {{ budget }}: mean next-token loss on the test documents by
# position bucket, for the Linear-Decay run with the largest budgets at each scale and for
# the LongPPL reference; a model that uses distant context keeps falling after the local
# chunk.
# :::

# %%
uses_context.round(3)

# %% [markdown]
# **Is the reference the stronger model where LongPPL looks?** LongPPL trusts the reference
# to know which tokens need distant context (App. A.1); the paper's reference, Llama-3.1-8B,
# is far stronger than every model it judges. Here: the mean loss of every test token past
# the local chunk under the reference as it selects key tokens (its neural part mixed with
# the cache model), under its neural part alone, and under the models above; margin > 0
# means the reference is stronger.

# %%
margin = diagnostics.reference_margin(ev, {k: m for k, m in models.items() if not k.startswith("LongPPL reference")})
ch.save_table(margin.reset_index(), "reference_margin", runs=runs)
margin.round(3)

# %% [markdown]
# **Copying.** The sharpest test of whether a model reads far back: a segment of random
# tokens, repeated. The first copy is unpredictable (about ln V nats a token); a model that
# looks back and copies predicts the second. The copy gain is the loss on the first copy
# minus the loss on the second, at several distances (the segment length); the curve on the
# right of {numref}`fig-copy-probe` is the per-position loss at the distance named below,
# read from the budget's LongPPL chunk.

# %%
far = budget_words.far_copy_distance(b)  # just past two local chunks, at most half the context
ch.markdown(f"The curve on the right: {budget_words.far_copy_words(b)}.")
seg_lens = sorted({s for s in (8, 16, 32, 64, 128) if 2 * s <= L} | {far})
copy = copy_gain_table(models, ev.tokenizer.vocab_size, ev.tokenizer.eos_id, seg_lens)
copy.round(3)

# %% tags=["remove-output"]
#| label: cell-copy-probe
d = far
fig = law_figures.copy_probe_figure(copy, copy_loss_curves(models, ev.tokenizer.vocab_size, ev.tokenizer.eos_id, d), d)
ch.save_figure(fig, "figA_copy_probe", runs=runs)

# %% [markdown]
# :::{figure} #cell-copy-probe
# :label: fig-copy-probe
# Beyond the paper, at budget {{ budget }}: the copy gain (loss on the first copy of a random
# segment minus loss on the repeat) against the distance between the copies (left; 1 nat:
# dashed), and the loss along a segment and its repeat (right; dotted: where the repeat
# starts).
# :::

# %% [markdown]
# ## What we see
#
# The numbers above are this budget's; the paper's are printed next to them. At `toy` the
# models are small and train on two CPU cores ([chapter 2](02_setup.ipynb) lists the toy's
# departures, [appendix A](11_toy_design.ipynb) how they were chosen), so read the comparison
# for its shape, not its digits: whether the models use context past the local chunk at all, whether
# log(LongPPL) falls with $N$, $D_s$ and $D_l$, whether {eq}`eq-law` fitted on smaller scales
# predicts the larger ones, and whether the alternatives extrapolate worse. The cell below
# states, from the numbers computed in this run, which of these hold here.

# %%
ch.markdown(law_findings.grid_checks_findings(copy_targets, diagnostics.stable_phase_verdicts(stable, spread), spread,
                                              diagnostics.monotonicity_summary(mono), r2_intervals))

# %%
ch.markdown(law_findings.scaling_law_findings(table, holdout, short_holdout, table3, uses_context, copy,
                                              copy_distance=far))

# %% [markdown]
# **The law's whole claim.** The paper's law is not one R²: it is {eq}`eq-law` with interior
# exponents, fitted over an $N$ axis along which LongPPL falls. The scorecard judges each of those
# conditions; here are the ones this chapter's tables decide.

# %%
ch.markdown(law_findings.law_conditions_findings(
    law_checks.law_conditions(r2_intervals.reset_index(), table11, table, None)))

# %%
ch.done()
