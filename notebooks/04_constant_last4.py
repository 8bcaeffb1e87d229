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
# ---
# numbering:
#   equation:
#     start: 2
# ---
# # 4. Constant-Last4: an extensible trajectory you can read early
#
# *LCCP paper, §4, App. B (merging), B.1 (spacing), D.1 (LongPPL against ShortPPL).*
#
# **The claims.** (i) Raw checkpoints of a constant-learning-rate LCCP run are noisy and
# worse than a budget-matched Linear-Decay run; averaging the last four checkpoints
# (Last4) recovers most of the gap, about as well as fancier merges (the paper's Fig. 4a,
# {numref}`fig-observation-rules` here), and across all S4 configurations Constant-Last4
# matches Linear-Decay closely (Fig. 4b, CCC; {numref}`fig-protocols-s4`). (ii) Eq. 1 of
# [Chapter 3](03_scaling_law.ipynb) fits Constant-Last4 data and, fitted on S1-S4, predicts the
# whole S5 trajectory (Fig. 5, Table 4; {numref}`fig-cl4-fit`). (iii) With $N$ and $D_s$
# fixed, Eq. 2,
#
# $$
# \log(\mathrm{LongPPL}) = \frac{B_l}{D_l^{\beta_l}} + C',
# $$ (eq-prefix)
#
# fitted on an early prefix predicts the rest of the trajectory (Fig. 6;
# {numref}`fig-prefix-fits`). (iv) Last4 is insensitive to checkpoint spacing (Fig. 11,
# Table 12; {numref}`fig-spacing-ablation`), and LongPPL improves 2-3x faster than ShortPPL
# (Fig. 17; {numref}`fig-elasticity-ratio`).
#
# That is the decision this chapter informs: keep training or stop.

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)
budget_file = ""  # a TOML budget file, a base budget and its overrides (README, Your own data); empty: none
scale = "S5"  # the scale of the long Constant trajectory (paper: S5); the joint fit uses the smaller scales
n_boot = 0  # bootstrap refits behind the prediction intervals (0: the budget default)

# %%
import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Image, display

from nblib.book.chapter import Chapter
from nblib.budgets import SCALES, get_budget
from nblib.chapters.claims.paper_values import FIG17_RATIO, TABLE4_CL4, TABLE12_MEAN_LONGPPL
from nblib.chapters.part1 import protocol_figures, protocol_findings
from nblib.lccp import experiments, grid, scaling
from nblib.lccp.evaluation import Evaluator
from nblib.probes import protocol_horizon
from nblib.probes.results import records

ch = Chapter("04_constant_last4", budget=budget, budget_file=budget_file, seed=seed, run_root=run_root,
             scale=scale, allowed_scales=("S3", "S4", "S5"), n_boot=n_boot)
b = ch.budget
fit_scales = [s for s in SCALES if s < scale][:4]
print(f"trajectory at {scale}; joint fits on {fit_scales}")

# %% [markdown]
# ## The runs
#
# Constant-LR LCCP trajectories start from the same short-context checkpoints as the
# Linear-Decay runs of [Chapter 3](03_scaling_law.ipynb) and save a raw checkpoint every $1N$ of LCCP tokens (scaled
# like every other multiple at this budget). At S1-S4 every $D_s$ gets
# `n_constant_seeds` independent trajectories (different data order) to the largest $D_l$;
# the long trajectory at the chosen scale starts from the largest $D_s$ and runs to the
# budget's `s5_trajectory` (the paper: 120N; printed below).
# Extending any trajectory later resumes from its last raw checkpoint.

# %%
ev = Evaluator.build(b, ch.store)
ld = experiments.linear_decay_table(ev)  # Chapter 3's runs: cached
experiments.train_constant_runs(ev, scales=tuple(s for s in SCALES if s != "S5"), trajectory_scale=scale)
const = experiments.constant_table(ev, scales=tuple(s for s in SCALES if s != "S5"))
traj = experiments.trajectory_run(ev, scale)
print(f"{const.run.nunique()} Constant trajectories at S1-S4, {len(const)} raw/Last4 evaluations; "
      f"{scale} trajectory: {traj.manifest['realized_tokens']:,} tokens, {len(traj.checkpoints())} checkpoints")
all_runs = sorted(set(const.run) | set(ld.run) | {traj.hash})

# %% [markdown]
# ## Fig. 10: the weight profiles being compared
#
# Checkpoint weights on a 25-checkpoint pool, oldest to newest (App. B, Eqs. 3-7;
# {numref}`fig-weight-profiles`).

# %% tags=["remove-output"]
#| label: cell-weight-profiles
ch.save_figure(protocol_figures.weight_profiles_figure(25), "fig10_weight_profiles")

# %% [markdown]
# :::{figure} #cell-weight-profiles
# :label: fig-weight-profiles
# The paper's Fig. 10: the weight each merging rule gives to each of 25 checkpoints, oldest to
# newest (LastM, Eq. 4; 1-Sqrt, Eqs. 5-6; EMA, Eq. 7). The same at every budget.
# :::

# %% [markdown]
# ## Fig. 4a: observation rules on one S4 trajectory
#
# The pool: 25 checkpoints spaced $2N$ up to the largest $D_l$ of the S4 trajectory with the
# largest $D_s$ (at toy 1 N(S1) apart: its trajectories end at $D_l$ = 30). Each rule is compared with the budget-matched Linear-Decay
# run (same $N$, $D_s$, $D_l$).

# %%
s4_run = ch.store.run(grid.lccp_constant(b, "S4", b.ds_multiples[-1], b.dl_multiples[-1], 0))
rules = experiments.observation_rules(ev, s4_run, b.dl_multiples[-1], b.s4_pool_ckpt_every)
ld_ref = ld[(ld.scale == "S4") & (ld.ds_mult == b.ds_multiples[-1]) & (ld.dl_mult == b.dl_multiples[-1])].iloc[0]

# %% tags=["remove-output"]
#| label: cell-observation-rules
fig = protocol_figures.observation_rules_figure(rules, ld_ref, f"S4, Ds={b.ds_multiples[-1]}{b.unit}, "
                                                                f"Dl={b.dl_multiples[-1]}{b.unit}")
ch.save_figure(fig, "fig04a_observation_rules", runs=[s4_run, ld_ref.run])

# %% [markdown]
# :::{figure} #cell-observation-rules
# :label: fig-observation-rules
# The paper's Fig. 4a at budget {{ budget }}: LongPPL against ShortPPL of every App. B rule on
# one S4 Constant trajectory's pool of 25 checkpoints, and of the budget-matched Linear-Decay
# run (star).
# :::

# %%
rules.assign(gap_to_LD=rules.longppl - ld_ref.longppl).round(4)

# %% [markdown]
# The paper's LongPPL on its pool (App. B): Raw 3.6233, TIES(0.5) 3.7950, DARE(0.5)
# 3.5217, 1-Sqrt 3.4724, EMA(0.9) 3.4720; simple averages beat the task-vector merges.

# %%
ch.markdown(protocol_findings.observation_gap_markdown(rules, ld_ref.longppl))

# %% [markdown]
# ## Fig. 4b: Constant-Raw and Constant-Last4 against Linear-Decay across S4
#
# One point per S4 configuration (the paper: 5 $D_s$ x 5 $D_l$; this budget's grid is printed
# below), each Constant value averaged over the independent trajectories. Lin's concordance correlation coefficient (App. B, with
# denominators $n$) measures agreement with Linear-Decay: 1 means identical.

# %%
s4 = experiments.protocols_at_scale(const, ld, "S4")
ccc = experiments.protocol_agreement(s4)
print(f"{len(b.ds_multiples)} x {len(b.dl_multiples)} = {len(b.ds_multiples) * len(b.dl_multiples)} S4 "
      f"configurations; Last4 averages four checkpoints {b.last4_gap(b.constant_ckpt_every):g} N apart "
      f"(the budget's last4_spacing; the paper's 1N, App. B.1)")

# %% tags=["remove-output"]
#| label: cell-protocols-s4
fig = protocol_figures.protocols_figure(s4, ccc)
ch.save_figure(fig, "fig04b_protocols_s4", runs=all_runs)

# %% [markdown]
# :::{figure} #cell-protocols-s4
# :label: fig-protocols-s4
# The paper's Fig. 4b at budget {{ budget }}: Constant-Raw and Constant-Last4 against
# Linear-Decay at each S4 configuration of the grid, ShortPPL (left) and LongPPL (right), with
# Lin's CCC in the legend; dashed: $y = x$.
# :::

# %%
ch.save_table(ccc, "fig04b_ccc", runs=all_runs)
# every S1-S4 point under the three protocols (seed by seed; Linear-Decay has one seed)
protocols = experiments.protocols_table(const, ld)
ch.save_table(protocols, "protocols_s1_s4", runs=all_runs)
ccc.round(4)

# %%
ch.verdict("§4.1, Fig. 4b")

# %% [markdown]
# ## Back to Fig. 3: does LongPPL fall with $N$?
#
# [Chapter 3](03_scaling_law.ipynb) could not judge the law's $N$ axis: a rise of LongPPL from one
# scale to the next means something only against LongPPL's own noise. The Constant runs above
# give it: at every S1-S4 point two seeds (different data order) train the same configuration,
# and the largest difference between them in log LongPPL is the **LongPPL seed spread**. Against
# it, each adjacent pair of scales on the Linear-Decay grid, and then the scorecard's verdict on
# the law as a whole:

# %%
ch.markdown(protocol_findings.n_axis_findings(ld, protocols))
ch.verdict("§3.3, Fig. 3")

# %% [markdown]
# ## Past the grid: where does Linear-Decay catch up?
#
# The paper's order (Fig. 4b) has Linear-Decay at or below Constant-Raw: a decay removes the
# iterate's noise once progress is slow. While progress is fast, a decay gives up more of it
# than it removes noise. So where, in $D_l$, does a decayed run catch up? The probe
# `protocol_horizon` scores Linear-Decay runs to each $D_l$ against one Constant trajectory
# (Raw and Last4) from the largest $D_s$, on the book's grid and at higher LCCP rates (`python
# -m nblib.probes.design_probe --budget-file data/probes/grid_designs/X.toml protocol_horizon
# --scales S2 S4 --dls 15 30 60 120`; one seed; toy records, whatever this chapter's budget).

# %%
horizon = experiments.protocol_horizon_table(records("toy_protocol_horizon"))
rates = protocol_figures.design_rates([d for d in ("toy", "W", "X", "Y", "Z") if d in set(horizon.design)])
turn = horizon[horizon.design.isin(list(rates))].reset_index(drop=True)
ch.save_table(turn, "protocol_turn")
ch.markdown(protocol_findings.protocol_turn_line(turn, rates, "toy", labels=protocol_horizon.RECORDED_AS))

# %% tags=["remove-output"]
#| label: cell-protocol-turn
fig = protocol_figures.protocol_turn_figure(turn, rates, labels=protocol_horizon.RECORDED_AS)
ch.save_figure(fig, "fig_protocol_turn")

# %% [markdown]
# :::{figure} #cell-protocol-turn
# :label: fig-protocol-turn
# Beyond the paper, toy records: Linear-Decay minus Constant-Raw (left) and minus Last4
# (right) in LongPPL against $D_l$, at S2 and S4 from $D_s$ = 450 N(S1), for design Vb (the toy
# budget when these rows were measured; the book's grid is now Vc, whose LongPPL reference differs),
# the same grid at higher LCCP rates (W, X, Y) and Y with half the sequences an LCCP step (Z);
# below the dashed line the decayed run is better.
# :::

# %% [markdown]
# ## Fig. 5 and Table 4: Eq. 1 on Constant-Last4 data
#
# The fit data: S1-S4 Constant-Last4 (seed means) on the grid. The held-out targets:
# S4 from S1-S3, and every Last4 evaluation point of the long trajectory (every 5N, Last4 of
# checkpoints 1N apart unless the budget's `last4_spacing` says otherwise) from S1-S4. The trajectory reaches far beyond the largest $D_l$ of
# the fit.

# %%
table_cl4, tp = experiments.constant_last4_fit_table(ev, const, traj, scale, fit_scales)
tl4 = tp[tp.rule == "last4"]
split_a = (fit_scales[:-1], [fit_scales[-1]])
split_b = (fit_scales, [scale])
held = ch.cached(scaling.holdout_evals, table_cl4, {"a": split_a, "b": split_b})
res_a, res_b = held["a"], held["b"]
ch.save_table(table_cl4[["scale", "N", "Ds", "Dl", "ds_mult", "dl_mult", "longppl", "shortppl"]],
              "runs_constant_last4", runs=all_runs)  # the fit table, for benchmarks/bench_fit.py
ch.save_table(experiments.trajectory_protocol_table(tp), f"{scale.lower()}_trajectory", runs=[traj])
for (tr, te), res in ((split_a, res_a), (split_b, res_b)):  # optima on a bound, or none inside, are said here
    label = f"{tr[0]}-{tr[-1]} → {te[0]}"
    print(res.fit.report(f"{label}: ") or f"{label}: every parameter inside its bounds")

# %% tags=["remove-output"]
#| label: cell-cl4-fit
fig = protocol_figures.cl4_fit_figure(res_a, res_b, split_a, fit_scales, scale,
                                      table_cl4[table_cl4.scale.isin(fit_scales)].Dl.max())
ch.save_figure(fig, "fig05_cl4_fit", runs=all_runs)

# %% [markdown]
# :::{figure} #cell-cl4-fit
# :label: fig-cl4-fit
# The paper's Fig. 5 at budget {{ budget }}: {eq}`eq-law` fitted to Constant-Last4 data. Left:
# S1-S3 → S4 parity; middle: the S4 absolute percent error by $(D_s, D_l)$; right: the long
# trajectory's Last4 points against the S1-S4 fit's prediction, far past the largest fitted
# $D_l$ (dotted).
# :::

# %%
print(f"paper: S4 R² {TABLE4_CL4['additive'][0]}, MAPE {TABLE4_CL4['additive'][1]}%; "
      f"S5 trajectory R² {TABLE4_CL4['additive'][2]}, MAPE {TABLE4_CL4['additive'][3]}%")

# %%
table4 = ch.cached(scaling.variant_ablation, table_cl4,
                   {"held-out " + split_a[1][0]: split_a, f"{scale} trajectory": split_b},
                   paper=TABLE4_CL4, variants=b.variant_laws, n_starts=b.variant_fit_starts)
ch.save_table(table4, "table04_variant_ablation_cl4", runs=all_runs)
table4.round(4)

# %% tags=["remove-output"]
#| label: cell-last4-trajectory
fig = protocol_figures.last4_trajectory_figure(experiments.trajectory_protocol_table(tp), scale, unit=b.unit)
ch.save_figure(fig, f"fig_{scale.lower()}_last4_longppl", runs=[traj])

# %% [markdown]
# :::{figure} #cell-last4-trajectory
# :label: fig-last4-trajectory
# The title claim at budget {{ budget }}: the long trajectory's LongPPL against $D_l$, for the
# Last4 merge of each point's last four checkpoints and for the raw checkpoint; the book's
# landing page shows this figure.
# :::

# %% [markdown]
# ## Fig. 6: predicting a trajectory from its prefix (Eq. 2)
#
# With $N$ and $D_s$ fixed, fit $\log(\mathrm{LongPPL}) = B_l D_l^{-\beta_l} + C'$ (Huber)
# on the Last4 points up to 20N, 40N and 60N, and score each fit on every later point.

# %%
tl = tl4.sort_values("Dl")
y_all, dl_all = np.log(tl.longppl.to_numpy()), tl.Dl.to_numpy(float)
prefixes = [b.multiple_scale * m for m in (20, 40, 60)]
prefix_errors, prefix_fits = ch.cached(scaling.prefix_forecast, dl_all, y_all, tl.dl_mult, prefixes)

# %% tags=["remove-output"]
#| label: cell-prefix-fits
fig = protocol_figures.prefix_fits_figure(dl_all, y_all, prefix_fits, scale, unit=b.unit)
ch.save_figure(fig, "fig06_prefix_fits", runs=[traj])

# %% [markdown]
# :::{figure} #cell-prefix-fits
# :label: fig-prefix-fits
# The paper's Fig. 6 at budget {{ budget }}: {eq}`eq-prefix` fitted to the Last4 points of the
# long trajectory up to 20N, 40N and 60N (scaled), each extended over the whole trajectory.
# :::

# %%
ch.save_table(prefix_errors, "fig06_prefix_errors", runs=[traj])
prefix_errors.round(3)

# %% [markdown]
# ## Fig. 11 and Table 12: is Last4 sensitive to checkpoint spacing?
#
# Targets every 10N from 20N to 120N; Last4($s$) averages checkpoints $\{T-3s, T-2s, T-s, T\}$
# for $s$ = 1N..5N; Raw is the control.

# %%
k = b.multiple_scale
targets = [round(k * t, 6) for t in range(20, 121, 10)]
spacings = [round(k * s, 6) for s in (1, 2, 3, 4, 5)]
sp = experiments.spacing_ablation(ev, traj, targets, spacings)
base = sp[sp.protocol == f"Last4({spacings[0]:g}N)"].set_index("target_mult")

# %% tags=["remove-output"]
#| label: cell-spacing-ablation
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for proto, g in sp.groupby("protocol", sort=False):
    g = g.set_index("target_mult")
    axes[0].plot(g.index, g.longppl, "o-" if proto != "Raw" else "s--", ms=3, label=proto)
    if proto != "Raw":
        axes[1].plot(g.index, 100 * (g.longppl - base.longppl) / base.longppl, "o-", ms=3, label=proto)
axes[0].set(xlabel="$D_l$ / N", ylabel="LongPPL", title="(a) LongPPL")
axes[1].set(xlabel="$D_l$ / N", ylabel=f"% difference from Last4({spacings[0]:g}N)", title="(b) relative to the default")
axes[0].legend(fontsize=7)
fig.suptitle("Fig. 11: Last4 window-spacing ablation")
ch.save_figure(fig, "fig11_spacing_ablation", runs=[traj])

# %% [markdown]
# :::{figure} #cell-spacing-ablation
# :label: fig-spacing-ablation
# The paper's Fig. 11 at budget {{ budget }}: LongPPL of Last4 with checkpoint spacings of 1N-5N
# (scaled) and of Raw at targets along the long trajectory (a), and each spacing's difference
# from the 1N default (b).
# :::

# %%
table12 = experiments.spacing_means(sp, default=f"Last4({spacings[0]:g}N)")
ch.save_table(table12.reset_index(), "table12_spacing_means", runs=[traj])
print(f"paper: mean LongPPL Raw {TABLE12_MEAN_LONGPPL['raw']} vs about {TABLE12_MEAN_LONGPPL['last4']} for every spacing")
table12.round(4)

# %% [markdown]
# ## Fig. 17: does LongPPL improve faster than ShortPPL? (App. D.1)
#
# Fit $\log M = E_M + A_M D_l^{-\alpha_M}$ to LongPPL and to ShortPPL along the trajectory,
# and compare their log-scale elasticities $e_M = \alpha_M A_M D_l^{-\alpha_M}$ through
# $R(D_l) = e_{Long}/e_{Short}$. Solid: the measured range; dashed: the fit extended to twice
# that. The paper's $R$ falls from 3.35 at 5N to 2.22 at 120N.

# %%
f_long = scaling.fit_fixed_model_law(tl.Dl.to_numpy(float), np.log(tl.longppl.to_numpy()))
f_short = scaling.fit_fixed_model_law(tl.Dl.to_numpy(float), np.log(tl.shortppl.to_numpy()))
d_meas = tl.Dl.to_numpy(float)
d_ext = np.geomspace(d_meas.max(), 2 * d_meas.max(), 30)
r_meas = scaling.elasticity_ratio(f_long, f_short, d_meas)
r_ext = scaling.elasticity_ratio(f_long, f_short, d_ext)

# %% tags=["remove-output"]
#| label: cell-elasticity-ratio
fig = protocol_figures.elasticity_ratio_figure(d_meas, r_meas, d_ext, r_ext)
ch.save_figure(fig, "fig17_elasticity_ratio", runs=[traj])

# %% [markdown]
# :::{figure} #cell-elasticity-ratio
# :label: fig-elasticity-ratio
# The paper's Fig. 17 at budget {{ budget }}: the ratio of LongPPL's to ShortPPL's log-scale
# elasticity along the long trajectory (solid), and the fits extended to twice the trajectory
# (dashed); above 1, LongPPL still improves faster.
# :::

# %%
print(f"R at the first point {r_meas[0]:.2f}, at the last {r_meas[-1]:.2f} "
      f"(paper: {FIG17_RATIO['5N']} at 5N, {FIG17_RATIO['120N']} at 120N)")

# %% [markdown]
# ## Monitoring your own run
#
# `python -m nblib.lccp.monitor RUN_DIR` does the above for any constant-LR trajectory: it
# computes Last4 LongPPL and ShortPPL at each evaluation point (caching what it has already
# evaluated), fits {eq}`eq-prefix` with bootstrap intervals, and prints the predicted LongPPL at future
# budgets with the marginal gain per extra billion tokens. Here it reads the trajectory
# above ({numref}`fig-monitor`).

# %%
plot = ch.store.root / "monitor" / f"{traj.hash}.png"
last = traj.manifest["realized_tokens"]
cmd = [sys.executable, "-m", "nblib.lccp.monitor", str(traj.path), "--eval-every", str(int(round(b.s5_eval_every / b.s5_ckpt_every))),
       "--future", str(2 * last), str(4 * last), "--n-boot", str(max(8, ch.n_boot // 2)), "--plot", str(plot)]
out = subprocess.run(cmd, capture_output=True, text=True)
print(out.stdout[-4000:] or out.stderr[-4000:])

# %% tags=["remove-output"]
#| label: cell-monitor
if plot.exists():
    display(Image(str(plot)))

# %% [markdown]
# :::{figure} #cell-monitor
# :label: fig-monitor
# The monitor's plot at budget {{ budget }}: Last4 LongPPL of the long trajectory so far
# (black) and the {eq}`eq-prefix` forecast at twice and four times its length, with bootstrap
# 95% intervals (red).
# :::

# %% [markdown]
# ## At the paper's scale
#
# `papermill notebooks/04_constant_last4.ipynb out.ipynb -p budget full -p scale S5` launches
# (or resumes) the real trajectory: on a machine with GPUs every missing run is trained with
# `torchrun` over all local GPUs (FSDP2), checkpointing every 1N so an interrupted run
# resumes. What that costs, from the model's analytic FLOPs at the 32K context:

# %%
need = experiments.trajectory_compute(get_budget("full"), "S5")
print(f"S5 Constant trajectory to 120N: {need['tokens'] / 1e9:.1f}B LCCP tokens, {need['flops']:.3g} training FLOPs; "
      f"{need['gpu_hours']:,.0f} H100-hours at 40% MFU (bf16), about {need['hours_on_16_gpus']:.0f} h on 16 GPUs "
      f"(the paper used 2 nodes x 8 H800); {need['checkpoints']} checkpoints of {need['checkpoint_gb']:.1f} GB "
      f"(fp32 weights; optimizer state is kept on the newest only)")

# %% [markdown]
# ## What we see
#
# The headline numbers of this run, computed above, next to the paper's:

# %%
ch.markdown(protocol_findings.title_claim_findings(experiments.trajectory_protocol_table(tp), scale,
                                                   unit=b.unit.strip()))

# %%
ch.markdown(protocol_findings.protocol_order_findings(protocols, table12, float(r_meas[0]), float(r_meas[-1]),
                                                      TABLE12_MEAN_LONGPPL, (FIG17_RATIO["5N"], FIG17_RATIO["120N"])))

# %%
wins, gain = experiments.last4_vs_raw(const)
ch.markdown(protocol_findings.constant_last4_findings(s4, ccc, wins, gain, split_a[1][0], res_a, scale, res_b,
                                                      prefix_errors))

# %% [markdown]
# The scorecard's verdict on each of this chapter's claims, from the tables above:

# %%
for where in ("§4.1, Fig. 4a", "§4.1", "§4.2, Table 4", "title, §4.2", "§4.3, Fig. 6", "App. D.1, Fig. 17"):
    ch.verdict(where)

# %% [markdown]
# Where merging helps: the mean relative LongPPL gain of Last4 over Raw at every scale and
# LCCP budget, as a heatmap ({numref}`fig-last4-gain`).

# %% tags=["remove-output"]
#| label: cell-last4-gain
ch.save_figure(protocol_figures.last4_gain_figure(gain), "figA_last4_gain", runs=sorted(set(const.run)))

# %% [markdown]
# :::{figure} #cell-last4-gain
# :label: fig-last4-gain
# Beyond the paper, at budget {{ budget }}: the mean relative LongPPL gain of Last4 over Raw,
# (Raw − Last4) / Raw in percent, by scale and LCCP budget $D_l$ (over the $D_s$ budgets and
# independent trajectories); blue: Last4 better.
# :::
#
# Where the toy's LCCP sits against the paper's regime (progress-limited or noise-limited), and
# the grid designs that tried to move it: [appendix B](12_toy_ladders.ipynb).

# %%
ch.done()
