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
# # 4. Constant-Last4: an extensible trajectory you can read early
#
# *Seed 000, §4, App. B (merging), B.1 (spacing), D.1 (LongPPL against ShortPPL).*
#
# **The claims.** (i) Raw checkpoints of a constant-learning-rate LCCP run are noisy and
# worse than a budget-matched Linear-Decay run; averaging the last four checkpoints
# (Last4) recovers most of the gap, about as well as fancier merges (Fig. 4a), and across
# all S4 configurations Constant-Last4 matches Linear-Decay closely (Fig. 4b, CCC).
# (ii) Eq. 1 fits Constant-Last4 data and, fitted on S1-S4, predicts the whole S5
# trajectory (Fig. 5, Table 4). (iii) With $N$ and $D_s$ fixed, Eq. 2,
# $\log(\mathrm{LongPPL}) = B_l/D_l^{\beta_l} + C'$, fitted on an early prefix predicts the
# rest of the trajectory (Fig. 6). (iv) Last4 is insensitive to checkpoint spacing (Fig. 11,
# Table 12), and LongPPL improves 2-3x faster than ShortPPL (Fig. 17).
#
# That is the decision this chapter informs: keep training or stop.

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)
scale = "S5"  # the scale of the long Constant trajectory (paper: S5); the joint fit uses the smaller scales
n_boot = 0  # bootstrap refits for prediction intervals; 0 = the budget's default

# %%
import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Image, display

from nblib import grid, lccp, merge, scaling
from nblib.budgets import SCALES
from nblib.chapter import Chapter
from nblib.paper_values import FIG4A_LONGPPL, FIG17_RATIO, TABLE4_CL4, TABLE12_MEAN_LONGPPL
from nblib.stats import lins_ccc

ch = Chapter("04_constant_last4", budget=budget, seed=seed, run_root=run_root, scale=scale,
             allowed_scales=("S3", "S4", "S5"))
b = ch.budget
fit_scales = [s for s in SCALES if s < scale][:4]
if not isinstance(n_boot, int) or isinstance(n_boot, bool) or n_boot == 1 or n_boot < 0:
    raise ValueError(f"n_boot={n_boot!r} is not allowed; allowed values: 0 (the budget's default) or integers >= 2")
n_boot = n_boot or b.n_boot
print(f"trajectory at {scale}; joint fits on {fit_scales}")

# %% [markdown]
# ## The runs
#
# Constant-LR LCCP trajectories start from the same short-context checkpoints as the
# Linear-Decay runs of Chapter 3 and save a raw checkpoint every $1N$ of LCCP tokens (scaled
# like every other multiple at this budget). At S1-S4 every $D_s$ gets
# `n_constant_seeds` independent trajectories (different data order) to the largest $D_l$;
# the long trajectory at the chosen scale starts from the largest $D_s$ and runs to 120N.
# Extending any trajectory later resumes from its last raw checkpoint.

# %%
ev = lccp.Evaluator.build(b, ch.store)
ld = lccp.linear_decay_table(ev)  # Chapter 3's runs: cached
const = lccp.constant_table(ev, scales=tuple(s for s in SCALES if s != "S5"))
traj_cfg = lccp.trajectory_config(b, scale)
traj = ch.store.get_or_run_many([traj_cfg], desc=f"{scale} trajectory")[0]
print(f"{const.run.nunique()} Constant trajectories at S1-S4, {len(const)} raw/Last4 evaluations; "
      f"{scale} trajectory: {traj.manifest['realized_tokens']:,} tokens, {len(traj.checkpoints())} checkpoints")
all_runs = sorted(set(const.run) | set(ld.run) | {traj.hash})

# %% [markdown]
# ## Fig. 10: the weight profiles being compared
#
# Checkpoint weights on a 25-checkpoint pool, oldest to newest (App. B, Eqs. 3-7).

# %%
K = 25
fig, ax = plt.subplots(figsize=(6, 3.5))
it = np.arange(1, K + 1)
for m in (4, 8, 12, 25):
    ax.plot(it, merge.last_m_weights(K, m), drawstyle="steps-mid", label=f"Last{m}")
ax.plot(it, merge.one_sqrt_weights(it), label="1-Sqrt")
ax.plot(it, merge.ema_weights(it, 0.9, 1), label="EMA β=0.9")
ax.set(xlabel="checkpoint (oldest → newest)", ylabel="weight", title="Fig. 10: merging weight profiles")
ax.legend(fontsize=8)
ch.save_figure(fig, "fig10_weight_profiles")

# %% [markdown]
# ## Fig. 4a: observation rules on one S4 trajectory
#
# The pool: 25 checkpoints spaced $2N$ up to the largest $D_l$ of the S4 trajectory with the
# largest $D_s$ (scaled at toy). Each rule is compared with the budget-matched Linear-Decay
# run (same $N$, $D_s$, $D_l$).

# %%
s4_run = ch.store.run(grid.lccp_constant(b, "S4", b.ds_multiples[-1], b.dl_multiples[-1], 0))
rules = lccp.observation_rules(ev, s4_run, b.dl_multiples[-1], b.s4_pool_ckpt_every)
ld_ref = ld[(ld.scale == "S4") & (ld.ds_mult == b.ds_multiples[-1]) & (ld.dl_mult == b.dl_multiples[-1])].iloc[0]
fig, ax = plt.subplots(figsize=(6.5, 4.5))
for _, r in rules.iterrows():
    ax.scatter(r.shortppl, r.longppl, s=30)
    ax.annotate(r.rule, (r.shortppl, r.longppl), fontsize=7, xytext=(3, 3), textcoords="offset points")
ax.scatter(ld_ref.shortppl, ld_ref.longppl, marker="*", s=200, c="k", label="Linear-Decay")
ax.set(xlabel="ShortPPL", ylabel="LongPPL", title=f"Fig. 4a: observation rules (S4, Ds={b.ds_multiples[-1]}N, "
       f"Dl={b.dl_multiples[-1]}N)")
ax.legend()
ch.save_figure(fig, "fig04a_observation_rules", runs=[s4_run, ld_ref.run])
rules.assign(gap_to_LD=rules.longppl - ld_ref.longppl).round(4)

# %% [markdown]
# The paper's LongPPL on its pool (App. B): Raw 3.6233, TIES(0.5) 3.7950, DARE(0.5)
# 3.5217, 1-Sqrt 3.4724, EMA(0.9) 3.4720; simple averages beat the task-vector merges.

# %%
gap = rules.set_index("rule").longppl
print(f"Raw {gap['Raw']:.4f}, Last4 {gap['Last4']:.4f}, 1-Sqrt {gap['1-Sqrt']:.4f}, EMA 0.9 {gap['EMA 0.9']:.4f}, "
      f"DARE 0.5 {gap['DARE 0.5']:.4f}, TIES 0.5 {gap['TIES 0.5']:.4f}; Linear-Decay {ld_ref.longppl:.4f}")
if gap["Last4"] <= ld_ref.longppl < gap["Raw"]:
    print(f"Last4 closes the whole Raw -> Linear-Decay LongPPL gap and goes {ld_ref.longppl - gap['Last4']:.3f} below "
          f"Linear-Decay (paper: merging recovers most of the gap)")
elif ld_ref.longppl < gap["Raw"]:
    closed = (gap["Raw"] - gap["Last4"]) / (gap["Raw"] - ld_ref.longppl)
    print(f"Last4 closes {100 * closed:.0f}% of the Raw -> Linear-Decay LongPPL gap (paper: most of it)")
else:
    print("Raw is already at or below Linear-Decay on this pool, so there is no gap for merging to close")

# %% [markdown]
# ## Fig. 4b: Constant-Raw and Constant-Last4 against Linear-Decay across S4
#
# One point per S4 configuration (5 $D_s$ x 5 $D_l$), each Constant value averaged over the
# independent trajectories. Lin's concordance correlation coefficient (App. B, with
# denominators $n$) measures agreement with Linear-Decay: 1 means identical.

# %%
cm = lccp.seed_mean(const)
s4 = cm[cm.scale == "S4"].merge(ld[ld.scale == "S4"][["ds_mult", "dl_mult", "longppl", "shortppl"]],
                                on=["ds_mult", "dl_mult"], suffixes=("", "_ld"))
fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
ccc = []
for ax, metric in zip(axes, ("shortppl", "longppl")):
    for rule, color in (("raw", "tab:orange"), ("last4", "tab:blue")):
        g = s4[s4.rule == rule]
        c = lins_ccc(g[f"{metric}_ld"], g[metric])
        ccc.append({"metric": metric, "rule": rule, "CCC": c, "mean gap to LD": (g[metric] - g[f"{metric}_ld"]).mean()})
        ax.scatter(g[f"{metric}_ld"], g[metric], s=18, c=color, label=f"Constant-{rule.title()} (CCC {c:.3f})")
    lo, hi = s4[[metric, f"{metric}_ld"]].min().min(), s4[[metric, f"{metric}_ld"]].max().max()
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    ax.set(xlabel=f"Linear-Decay {metric}", ylabel=f"Constant {metric}", title=metric)
    ax.legend(fontsize=8)
fig.suptitle("Fig. 4b: protocols across the 25 S4 configurations")
ch.save_figure(fig, "fig04b_protocols_s4", runs=all_runs)
ccc = pd.DataFrame(ccc)
ch.save_table(ccc, "fig04b_ccc", runs=all_runs)
ccc.round(4)

# %% [markdown]
# ## Fig. 5 and Table 4: Eq. 1 on Constant-Last4 data
#
# The fit data: S1-S4 Constant-Last4 (seed means) at the 5x5 grid. The held-out targets:
# S4 from S1-S3, and every Last4 evaluation point of the long trajectory (every 5N, Last4 of
# checkpoints 1N apart) from S1-S4. The trajectory reaches far beyond the largest $D_l$ of
# the fit.

# %%
cl4 = cm[cm.rule == "last4"].copy()
dl_points = [round(b.s5_eval_every * k, 6) for k in range(1, int(round(b.s5_trajectory / b.s5_eval_every)) + 1)]
tp = lccp.trajectory_points(ev, traj, dl_points, b.s5_ckpt_every)
tl4 = tp[tp.rule == "last4"].assign(scale=scale, N=b.n_params(scale), Ds=ch.store.run(
    grid.short_stage(b, scale).wsd[b.ds_multiples[-1]]).config.realized_tokens)
table_cl4 = pd.concat([cl4[cl4.scale.isin(fit_scales)], tl4], ignore_index=True)
split_a = (fit_scales[:-1], [fit_scales[-1]])
split_b = (fit_scales, [scale])
res_a = scaling.holdout_eval(table_cl4, *split_a)
res_b = scaling.holdout_eval(table_cl4, *split_b)
fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
p = res_a.predictions
axes[0].scatter(p.log_longppl, p.pred_log_longppl, c="tab:red", s=20)
lo, hi = p[["log_longppl", "pred_log_longppl"]].min().min(), p[["log_longppl", "pred_log_longppl"]].max().max()
axes[0].plot([lo, hi], [lo, hi], "k--", lw=0.8)
axes[0].set(xlabel="measured log(LongPPL)", ylabel="predicted",
            title=f"{'-'.join(split_a[0][::len(split_a[0]) - 1])} → {split_a[1][0]}: R²={res_a.r2:.3f}, MAPE={res_a.mape:.2f}%")
ape = 100 * np.abs(p.pred_log_longppl - p.log_longppl) / np.abs(p.log_longppl)
sc = axes[1].scatter(p.Ds, p.Dl, c=ape, cmap="magma_r", s=60)
plt.colorbar(sc, ax=axes[1], label="APE (%)")
axes[1].set(xscale="log", yscale="log", xlabel="$D_s$", ylabel="$D_l$", title=f"{split_a[1][0]}: error by budget")
q = res_b.predictions.sort_values("Dl")
axes[2].plot(q.Dl, q.log_longppl, "o", ms=4, label="measured (Last4)")
axes[2].plot(q.Dl, q.pred_log_longppl, "-", label="Eq. 1 fitted on " + ", ".join(fit_scales))
axes[2].axvline(table_cl4[table_cl4.scale.isin(fit_scales)].Dl.max(), ls=":", c="0.5", label="largest fitted $D_l$")
axes[2].set(xscale="log", xlabel="$D_l$ (tokens)", ylabel="log(LongPPL)",
            title=f"{scale} trajectory: R²={res_b.r2:.3f}, MAPE={res_b.mape:.2f}%")
axes[2].legend(fontsize=8)
fig.suptitle("Fig. 5: Eq. 1 under Constant-Last4")
ch.save_figure(fig, "fig05_cl4_fit", runs=all_runs)
print(f"paper: S4 R² {TABLE4_CL4['additive'][0]}, MAPE {TABLE4_CL4['additive'][1]}%; "
      f"S5 trajectory R² {TABLE4_CL4['additive'][2]}, MAPE {TABLE4_CL4['additive'][3]}%")

# %%
rows = []
for variant in scaling.VARIANTS:
    row = {"variant": variant}
    for label, (tr, te) in (("held-out " + split_a[1][0], split_a), (f"{scale} trajectory", split_b)):
        r = scaling.holdout_eval(table_cl4, tr, te, law=variant)
        row[f"{label} R²"], row[f"{label} MAPE %"] = r.r2, r.mape
    pv = TABLE4_CL4.get(variant)
    row.update({"paper S4 R²": pv[0], "paper S4 MAPE %": pv[1], "paper S5 R²": pv[2], "paper S5 MAPE %": pv[3]})
    rows.append(row)
table4 = pd.DataFrame(rows)
ch.save_table(table4, "table04_variant_ablation_cl4", runs=all_runs)
table4.round(4)

# %% [markdown]
# ## Fig. 6: predicting a trajectory from its prefix (Eq. 2)
#
# With $N$ and $D_s$ fixed, fit $\log(\mathrm{LongPPL}) = B_l D_l^{-\beta_l} + C'$ (Huber)
# on the Last4 points up to 20N, 40N and 60N, and score each fit on every later point.

# %%
y_all = np.log(tl4.sort_values("Dl").longppl.to_numpy())
dl_all = tl4.sort_values("Dl").Dl.to_numpy(float)
mult_all = tl4.sort_values("Dl").dl_mult.to_numpy(float)
prefixes = [b.multiple_scale * m for m in (20, 40, 60)]
fig, ax = plt.subplots(figsize=(7, 4.5))
ax.plot(dl_all, y_all, "ko", ms=4, label="measured (Last4)")
pref_rows = []
for pm in prefixes:
    inside = mult_all <= pm + 1e-9
    if inside.sum() < 4 or (~inside).sum() == 0:
        continue
    f = scaling.fit_fixed_model_law(dl_all[inside], y_all[inside])
    grid_dl = np.geomspace(dl_all.min(), dl_all.max(), 100)
    ax.plot(grid_dl, f.predict(Dl=grid_dl), label=f"fit up to {pm:g}N")
    pred = f.predict(Dl=dl_all[~inside])
    ape = 100 * np.abs(pred - y_all[~inside]) / np.abs(y_all[~inside])
    pref_rows.append({"prefix": f"{pm:g}N", "points fitted": int(inside.sum()), "points predicted": int((~inside).sum()),
                      "MAPE % (log space)": ape.mean(), "max APE %": ape.max(),
                      "LongPPL error at the end %": 100 * (np.exp(pred[-1]) - np.exp(y_all[-1])) / np.exp(y_all[-1]),
                      "beta_l": f.absolute_params()["beta_l"]})
ax.set(xscale="log", xlabel="$D_l$ (tokens)", ylabel="log(LongPPL)", title=f"Fig. 6: prefix fits of Eq. 2 ({scale})")
ax.legend(fontsize=8)
ch.save_figure(fig, "fig06_prefix_fits", runs=[traj])
prefix_errors = pd.DataFrame(pref_rows)
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
sp = lccp.spacing_ablation(ev, traj, targets, spacings)
base = sp[sp.protocol == f"Last4({spacings[0]:g}N)"].set_index("target_mult")
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
table12 = sp.groupby("protocol", sort=False)[["longppl", "shortppl"]].mean()
ref = table12.loc[f"Last4({spacings[0]:g}N)"]
table12["Δ LongPPL vs default"] = table12.longppl - ref.longppl
table12["Δ ShortPPL vs default"] = table12.shortppl - ref.shortppl
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
tl = tl4.sort_values("Dl")
f_long = scaling.fit_fixed_model_law(tl.Dl.to_numpy(float), np.log(tl.longppl.to_numpy()))
f_short = scaling.fit_fixed_model_law(tl.Dl.to_numpy(float), np.log(tl.shortppl.to_numpy()))
d_meas = tl.Dl.to_numpy(float)
d_ext = np.geomspace(d_meas.max(), 2 * d_meas.max(), 30)
r_meas = scaling.elasticity_ratio(f_long, f_short, d_meas)
r_ext = scaling.elasticity_ratio(f_long, f_short, d_ext)
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(d_meas, r_meas, "o-", ms=4, c="tab:purple", label="R over the measured range")
ax.plot(d_ext, r_ext, "--", c="tab:purple", label="fit extended to 2x")
ax.axhline(1, c="0.6", lw=0.8)
ax.set(xscale="log", xlabel="$D_l$ (tokens)", ylabel="$R(D_l) = e_{Long} / e_{Short}$",
       title="Fig. 17: elasticity ratio along the trajectory")
ax.legend(fontsize=8)
ch.save_figure(fig, "fig17_elasticity_ratio", runs=[traj])
print(f"R at the first point {r_meas[0]:.2f}, at the last {r_meas[-1]:.2f} "
      f"(paper: {FIG17_RATIO['5N']} at 5N, {FIG17_RATIO['120N']} at 120N)")

# %% [markdown]
# ## Monitoring your own run
#
# `python -m nblib.monitor RUN_DIR` does the above for any constant-LR trajectory: it
# computes Last4 LongPPL and ShortPPL at each evaluation point (caching what it has already
# evaluated), fits Eq. 2 with bootstrap intervals, and prints the predicted LongPPL at future
# budgets with the marginal gain per extra billion tokens. Here it reads the trajectory
# above.

# %%
plot = ch.store.root / "monitor" / f"{traj.hash}.png"
last = traj.manifest["realized_tokens"]
cmd = [sys.executable, "-m", "nblib.monitor", str(traj.path), "--eval-every", str(int(round(b.s5_eval_every / b.s5_ckpt_every))),
       "--future", str(2 * last), str(4 * last), "--n-boot", str(max(20, n_boot // 2)), "--plot", str(plot)]
out = subprocess.run(cmd, capture_output=True, text=True)
print(out.stdout[-4000:] or out.stderr[-4000:])
if plot.exists():
    display(Image(str(plot)))

# %% [markdown]
# ## At the paper's scale
#
# `papermill notebooks/04_constant_last4.ipynb out.ipynb -p budget full -p scale S5` launches
# (or resumes) the real trajectory: on a machine with GPUs every missing run is trained with
# `torchrun` over all local GPUs (FSDP2), checkpointing every 1N so an interrupted run
# resumes. What that costs, from the model's analytic FLOPs at the 32K context:

# %%
from nblib.budgets import get_budget as _gb

need = lccp.trajectory_compute(_gb("full"), "S5")
print(f"S5 Constant trajectory to 120N: {need['tokens'] / 1e9:.1f}B LCCP tokens, {need['flops']:.3g} training FLOPs; "
      f"{need['gpu_hours']:,.0f} H100-hours at 40% MFU (bf16), about {need['hours_on_16_gpus']:.0f} h on 16 GPUs "
      f"(the paper used 2 nodes x 8 H800); {need['checkpoints']} checkpoints of {need['checkpoint_gb']:.1f} GB "
      f"(fp32 weights; optimizer state is kept on the newest only)")

# %% [markdown]
# ## What we see
#
# The headline numbers of this run, computed above, next to the paper's:

# %%
lr = s4[s4.rule == "raw"].longppl.mean(), s4[s4.rule == "last4"].longppl.mean(), s4.longppl_ld.mean()
print(f"S4 grid mean LongPPL: Constant-Raw {lr[0]:.4f}, Constant-Last4 {lr[1]:.4f}, Linear-Decay {lr[2]:.4f}")
for _, r in ccc.iterrows():
    print(f"CCC vs Linear-Decay, {r.metric:<9} Constant-{r.rule:<5}: {r.CCC:.3f}")
paired = const.pivot_table(index=["scale", "ds_mult", "dl_mult", "seed"], columns="rule", values="longppl")
wins = paired["last4"] <= paired["raw"]
print(f"Constant-Last4 <= Constant-Raw in LongPPL on {wins.mean():.1%} of the {len(paired)} S1-S4 trajectory points "
      f"(by scale: " + ", ".join(f"{k} {v:.0%}" for k, v in wins.groupby(level="scale").mean().items()) + ")")
gain = (paired["raw"] - paired["last4"]) / paired["raw"]
print("mean relative LongPPL gain of Last4 over Raw, by scale (rows) and Dl/N (columns); > 0: Last4 is better")
print(gain.groupby(level=["scale", "dl_mult"]).mean().unstack().round(3).to_string())
print(f"Eq. 1 on Constant-Last4: held-out {split_a[1][0]} R² {res_a.r2:.3f}; {scale} trajectory R² {res_b.r2:.3f}, "
      f"MAPE {res_b.mape:.2f}%")
for _, r in prefix_errors.iterrows():
    print(f"prefix {r.prefix}: MAPE {r['MAPE % (log space)']:.2f}% on the later points, final LongPPL off by "
          f"{r['LongPPL error at the end %']:+.2f}%")

# %%
ch.done()
