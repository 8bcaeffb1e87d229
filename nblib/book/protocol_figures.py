"""Chapter 4's figures of the Constant-Last4 protocol (LCCP paper §4, Figs. 4b and 5): each
takes the chapter's tables and fits and returns a figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from nblib.book.budget_file import load_budget_file
from nblib.book.figures import parity, token_ticks
from nblib.budgets import get_budget
from nblib.lccp import merge, scaling
from nblib.probes.results import RESULTS


def weight_profiles_figure(k: int = 25):
    """Fig. 10 (App. B, Eqs. 3-7): the weight LastM (M = 4, 8, 12, k), 1-Sqrt and EMA(0.9)
    give each of `k` checkpoints, oldest to newest."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    it = np.arange(1, k + 1)
    for m in (4, 8, 12, k):
        ax.plot(it, merge.last_m_weights(k, m), drawstyle="steps-mid", label=f"Last{m}")
    ax.plot(it, merge.one_sqrt_weights(it), label="1-Sqrt")
    ax.plot(it, merge.ema_weights(it, 0.9, 1), label="EMA β=0.9")
    ax.set(xlabel="checkpoint (oldest → newest)", ylabel="weight", title="Fig. 10: merging weight profiles")
    ax.legend(fontsize=8)
    return fig


def observation_rules_figure(rules, ld_ref, where: str):
    """Fig. 4a: LongPPL against ShortPPL of every App. B rule on one trajectory's pool
    (`experiments.observation_rules`), and of the budget-matched Linear-Decay run `ld_ref`
    (a star); `where` names the configuration in the title."""
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for _, r in rules.iterrows():
        ax.scatter(r.shortppl, r.longppl, s=30)
        ax.annotate(r.rule, (r.shortppl, r.longppl), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.scatter(ld_ref.shortppl, ld_ref.longppl, marker="*", s=200, c="k", label="Linear-Decay")
    ax.set(xlabel="ShortPPL", ylabel="LongPPL", title=f"Fig. 4a: observation rules ({where})")
    ax.legend()
    return fig


def last4_gain_figure(gain):
    """The mean relative LongPPL gain of Last4 over Raw, (Raw - Last4) / Raw in percent, by
    scale and Dl (`experiments.last4_vs_raw`), as a heatmap; blue: Last4 better."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    sns.heatmap(100 * gain, annot=True, fmt=".1f", center=0, cmap="RdBu", cbar_kws={"label": "% LongPPL gain"}, ax=ax,
                xticklabels=[f"{c:g}N" for c in gain.columns])
    ax.set(xlabel="$D_l$", ylabel="scale", title="Last4 against Raw: (Raw − Last4) / Raw")
    return fig


def protocols_figure(s4, ccc):
    """Fig. 4b: Constant-Raw and Constant-Last4 against Linear-Decay at every S4 configuration
    (`experiments.protocols_at_scale`), ShortPPL and LongPPL, with Lin's CCC (`ccc`) in the legend."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    for ax, metric in zip(axes, ("shortppl", "longppl")):
        for rule, color in (("raw", "tab:orange"), ("last4", "tab:blue")):
            g = s4[s4.rule == rule]
            c = ccc[(ccc.metric == metric) & (ccc.rule == rule)].CCC.iloc[0]
            ax.scatter(g[f"{metric}_ld"], g[metric], s=18, c=color, label=f"Constant-{rule.title()} (CCC {c:.3f})")
        lo, hi = s4[[metric, f"{metric}_ld"]].min().min(), s4[[metric, f"{metric}_ld"]].max().max()
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set(xlabel=f"Linear-Decay {metric}", ylabel=f"Constant {metric}", title=metric)
        ax.legend(fontsize=8)
    fig.suptitle(f"Fig. 4b: protocols across the {s4.groupby(['ds_mult', 'dl_mult']).ngroups} S4 configurations")
    return fig


def cl4_fit_figure(res_a, res_b, split_a, fit_scales, scale: str, fitted_dl_max: float):
    """Fig. 5: Eq. 1 fitted to Constant-Last4 data. Left: the held-out scale's parity (`res_a`,
    fitted on `split_a`); middle: its absolute percent error by (Ds, Dl), each axis labelled at
    the grid's budgets; right: the long trajectory's Last4 points against the fit on
    `fit_scales` (`res_b`), past the largest fitted Dl (dotted)."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    p = res_a.predictions
    parity(axes[0], p.log_longppl, p.pred_log_longppl, size=20,
           title=f"{'-'.join(split_a[0][::len(split_a[0]) - 1])} → {split_a[1][0]}: R²={res_a.r2:.3f}, "
                 f"MAPE={res_a.mape:.2f}%")
    ape = scaling.ape_log(p.log_longppl, p.pred_log_longppl)
    sc = axes[1].scatter(p.Ds, p.Dl, c=ape, cmap="magma_r", s=60)
    plt.colorbar(sc, ax=axes[1], label="APE (%)")
    axes[1].set(xscale="log", yscale="log", xlabel="$D_s$ (tokens)", ylabel="$D_l$ (tokens)",
                title=f"{split_a[1][0]}: error by budget")
    token_ticks(axes[1], "x", p.Ds.unique())
    token_ticks(axes[1], "y", p.Dl.unique())
    q = res_b.predictions.sort_values("Dl")
    axes[2].plot(q.Dl, q.log_longppl, "o", ms=4, label="measured (Last4)")
    axes[2].plot(q.Dl, q.pred_log_longppl, "-", label="Eq. 1 fitted on " + ", ".join(fit_scales))
    axes[2].axvline(fitted_dl_max, ls=":", c="0.5", label="largest fitted $D_l$")
    axes[2].set(xscale="log", xlabel="$D_l$ (tokens)", ylabel="log(LongPPL)",
                title=f"{scale} trajectory: R²={res_b.r2:.3f}, MAPE={res_b.mape:.2f}%")
    axes[2].legend(fontsize=8)
    fig.suptitle("Fig. 5: Eq. 1 under Constant-Last4")
    return fig


def design_rates(designs, book: str = "toy") -> dict:
    """{design: LCCP LR / short LR} (App. A.3: the paper's 1/10): the budget `book` for the
    book's grid, else the design file data/probes/grid_designs/<design>.toml."""
    return {d: (get_budget(d) if d == book else load_budget_file(RESULTS / "grid_designs" / f"{d}.toml")).lccp_lr_frac
            for d in designs}


def protocol_turn_figure(horizon, rates: dict, book: str = "toy"):
    """Where Linear-Decay catches up with Constant (§4.1's order, Fig. 4b; the records of
    `experiments.protocol_horizon_table`): LD - Raw (left) and LD - Last4 (right) against Dl
    for every (design, scale) probed, one colour per design of `rates` ({design: LCCP LR /
    short LR}), `book` drawn as the book's grid; below 0 the decayed run is better."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    designs = [d for d in rates if d in set(horizon.design)]
    colors = dict(zip(designs, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    markers = dict(zip(sorted(set(horizon.scale)), "osD^v"))
    for ax, col in zip(axes, ("LD - Raw", "LD - Last4")):
        for (design, scale), g in horizon[horizon.design.isin(designs)].groupby(["design", "scale"], sort=False):
            g = g.sort_values("dl")
            ax.plot(g.dl, g[col], marker=markers[scale], c=colors[design], ms=5,
                    label=f"{'book grid' if design == book else design} ({rates[design]:.0%} LR), {scale}")
        ax.axhline(0, c="k", lw=0.8, ls="--")
        dls = sorted(set(horizon.dl))
        ax.set(xscale="log", xlabel="$D_l$ (N(S1))", title=f"{col} (LongPPL)")
        ax.set_xticks(dls, [f"{d:g}" for d in dls])
        ax.minorticks_off()
    axes[0].set_ylabel("LongPPL difference (< 0: Linear-Decay better)")
    axes[1].legend(fontsize=7, ncol=2)
    fig.suptitle("Where Linear-Decay catches up with Constant-Raw and Last4, past the grid's $D_l$")
    return fig
