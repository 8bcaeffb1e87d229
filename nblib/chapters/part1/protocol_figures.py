"""Chapter 4's figures of the Constant-Last4 protocol (LCCP paper §4, Figs. 4b and 5): each
takes the chapter's tables and fits and returns a figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from nblib.budgets import get_budget
from nblib.budgets.budget_file import load_budget_file
from nblib.chapters.figures import legend_outside, parity, token_ticks
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


# Fig. 4a's rules by family: one marker per family, one colour per member (Raw alone)
_RULE_STYLE = {"Raw": ("X", "k"), "Last": ("o", None), "1-Sqrt": ("P", "tab:olive"), "EMA": ("^", None),
               "DARE": ("D", None), "TIES": ("s", None)}
_FAMILY_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")


def _rule_styles(rules) -> dict:
    """{rule: (marker, colour)} for Fig. 4a: the family (LastM, EMA, DARE, TIES) picks the
    marker, the member within it the colour, so that every rule has its own legend entry."""
    out, seen = {}, {}
    for rule in rules:
        family = next((f for f in _RULE_STYLE if rule.startswith(f)), None)
        marker, color = _RULE_STYLE.get(family, ("v", None))
        if color is None:
            k = seen[family] = seen.get(family, -1) + 1
            color = _FAMILY_COLORS[k % len(_FAMILY_COLORS)]
        out[rule] = (marker, color)
    return out


def observation_rules_figure(rules, ld_ref, where: str):
    """Fig. 4a: LongPPL against ShortPPL of every App. B rule on one trajectory's pool
    (`experiments.observation_rules`: columns rule, shortppl, longppl), and of the
    budget-matched Linear-Decay run `ld_ref` (a star); `where` names the configuration in the
    title. The rules are told apart by marker (family) and colour (member) in a legend beside
    the axes: rules that land on the same point (Raw and EMA 0.1 often do) stay readable."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for rule, (marker, color) in _rule_styles(list(rules.rule)).items():
        r = rules[rules.rule == rule].iloc[0]
        ax.scatter(r.shortppl, r.longppl, s=45, marker=marker, c=color, alpha=0.8, edgecolors="white", linewidths=0.5,
                   label=f"{rule} ({r.longppl:.2f})", zorder=3 if rule == "Raw" else 2)  # Raw on top
    ax.scatter(ld_ref.shortppl, ld_ref.longppl, marker="*", s=220, c="k", label=f"Linear-Decay ({ld_ref.longppl:.2f})")
    ax.set(xlabel="ShortPPL (perplexity on the short key tokens)", ylabel="LongPPL (perplexity on the long key tokens)",
           title=f"Fig. 4a: observation rules ({where})")
    legend_outside(ax, title="rule (LongPPL)", ncol=1 if len(rules) < 12 else 2)
    return fig


def last4_gain_figure(gain):
    """The mean relative LongPPL gain of Last4 over Raw, (Raw - Last4) / Raw in percent, by
    scale and Dl (`experiments.last4_vs_raw`), as a heatmap; blue: Last4 better."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    sns.heatmap(100 * gain, annot=True, fmt=".1f", center=0, cmap="RdBu", cbar_kws={"label": "% LongPPL gain"}, ax=ax,
                xticklabels=[f"{c:g}N" for c in gain.columns])
    ax.set(xlabel="$D_l$", ylabel="scale", title="Last4 against Raw: (Raw − Last4) / Raw")
    return fig


METRIC_WORDS = {"shortppl": "ShortPPL", "longppl": "LongPPL"}


def protocols_figure(s4, ccc):
    """Fig. 4b: Constant-Raw and Constant-Last4 against Linear-Decay at every S4 configuration
    (`experiments.protocols_at_scale`), ShortPPL and LongPPL, with Lin's CCC (`ccc`) in the
    legend under each panel."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 5))
    for ax, metric in zip(axes, ("shortppl", "longppl")):
        word = METRIC_WORDS[metric]
        for rule, color in (("raw", "tab:orange"), ("last4", "tab:blue")):
            g = s4[s4.rule == rule]
            c = ccc[(ccc.metric == metric) & (ccc.rule == rule)].CCC.iloc[0]
            ax.scatter(g[f"{metric}_ld"], g[metric], s=18, c=color, label=f"Constant-{rule.title()} (CCC {c:.3f})")
        lo, hi = s4[[metric, f"{metric}_ld"]].min().min(), s4[[metric, f"{metric}_ld"]].max().max()
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="$y = x$ (same as Linear-Decay)")
        ax.set(xlabel=f"Linear-Decay {word} (perplexity)", ylabel=f"Constant {word} (perplexity)",
               title=f"{word}: Constant against Linear-Decay")
        legend_outside(ax, "below", ncol=1)
    fig.suptitle(f"Fig. 4b: protocols across the {s4.groupby(['ds_mult', 'dl_mult']).ngroups} S4 configurations")
    return fig


def cl4_fit_figure(res_a, res_b, split_a, fit_scales, scale: str, fitted_dl_max: float):
    """Fig. 5: Eq. 1 fitted to Constant-Last4 data. Left: the held-out scale's parity (`res_a`,
    fitted on `split_a`); middle: its absolute percent error by (Ds, Dl), each axis labelled at
    the grid's budgets; right: the long trajectory's Last4 points against the fit on
    `fit_scales` (`res_b`), past the largest fitted Dl (dotted), its Dl axis labelled in
    tokens (`token_ticks`). Legends sit under the panels."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.8))
    p = res_a.predictions
    parity(axes[0], p.log_longppl, p.pred_log_longppl, size=20,
           title=f"{'-'.join(split_a[0][::len(split_a[0]) - 1])} → {split_a[1][0]}: R²={res_a.r2:.3f}, "
                 f"MAPE={res_a.mape:.2f}%")
    axes[0].set_ylabel("predicted log(LongPPL)")
    ape = scaling.ape_log(p.log_longppl, p.pred_log_longppl)
    sc = axes[1].scatter(p.Ds, p.Dl, c=ape, cmap="magma_r", s=60)
    plt.colorbar(sc, ax=axes[1], label="absolute % error of log(LongPPL)")
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
    token_ticks(axes[2], "x", [*q.Dl, fitted_dl_max])
    legend_outside(axes[2], "below", ncol=1)
    fig.suptitle("Fig. 5: Eq. 1 under Constant-Last4")
    return fig


def prefix_fits_figure(dl, log_longppl, fits: dict, scale: str, unit: str = "N"):
    """Fig. 6: a trajectory's Last4 log(LongPPL) against Dl (`dl` in tokens) and Eq. 2 fitted
    on each prefix (`fits`: {prefix in `unit`: a fit with .predict(Dl=...)}, as
    `scaling.prefix_forecast` returns), each drawn over the whole trajectory; Dl labelled in
    tokens (`token_ticks`), the legend beside the axes."""
    dl, y = np.asarray(dl, float), np.asarray(log_longppl, float)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(dl, y, "ko", ms=4, label="measured (Last4)")
    grid_dl = np.geomspace(dl.min(), dl.max(), 100)
    for pm, f in fits.items():
        ax.plot(grid_dl, f.predict(Dl=grid_dl), label=f"fit up to {pm:g} {unit}")
    ax.set(xscale="log", xlabel="$D_l$ (tokens)", ylabel="log(LongPPL)",
           title=f"Fig. 6: prefix fits of Eq. 2 ({scale})")
    token_ticks(ax, "x", dl)
    legend_outside(ax)
    return fig


def last4_trajectory_figure(traj, scale: str, unit: str = "N"):
    """The title claim (§4.2) on its own: the long trajectory's LongPPL against Dl, Last4 and Raw
    checkpoints (`traj`: `experiments.trajectory_protocol_table`, Dl in multiples of `unit`), the
    figure the book's landing page shows."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for protocol, label, style in (("Raw", "Raw checkpoint", dict(ls=":", marker=".", color="0.55")),
                                   ("Last4", "Last4 (the last four checkpoints averaged)", dict(marker="o"))):
        t = traj[traj.protocol == protocol].sort_values("dl")
        ax.plot(t.dl, t.longppl, ms=4, label=label, **style)
    ax.set(xlabel=f"$D_l$ (multiples of {unit.strip()})", ylabel="LongPPL (perplexity)",
           title=f"{scale}'s Constant trajectory: LongPPL against $D_l$")
    legend_outside(ax, "below", ncol=2)
    return fig


def elasticity_ratio_figure(d_meas, r_meas, d_ext, r_ext):
    """Fig. 17 (App. D.1): R(Dl) = e_Long / e_Short along the trajectory (`d_meas` in tokens,
    solid) and its fits extended past it (`d_ext`, dashed), R = 1 grey; Dl labelled in tokens
    (`token_ticks`), the legend under the axes."""
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    ax.plot(d_meas, r_meas, "o-", ms=4, c="tab:purple", label="R over the measured range")
    ax.plot(d_ext, r_ext, "--", c="tab:purple", label="fits extended to 2x the trajectory")
    ax.axhline(1, c="0.6", lw=0.8, label="R = 1: both improve alike")
    ax.set(xscale="log", xlabel="$D_l$ (tokens)", ylabel="$R(D_l) = e_{Long} / e_{Short}$ (ratio)",
           title="Fig. 17: elasticity ratio along the trajectory")
    token_ticks(ax, "x", [*np.asarray(d_meas, float), *np.asarray(d_ext, float)])
    legend_outside(ax, "below", ncol=2)
    return fig


def design_rates(designs, book: str = "toy") -> dict:
    """{design: LCCP LR / short LR} (App. A.3: the paper's 1/10): the budget `book` for the
    book's grid, else the design file data/probes/grid_designs/<design>.toml."""
    return {d: (get_budget(d) if d == book else load_budget_file(RESULTS / "grid_designs" / f"{d}.toml")).lccp_lr_frac
            for d in designs}


def protocol_turn_figure(horizon, rates: dict, labels: dict | None = None):
    """Where Linear-Decay catches up with Constant (§4.1's order, Fig. 4b; the records of
    `experiments.protocol_horizon_table`): LD - Raw (left) and LD - Last4 (right) against Dl
    for every (design, scale) probed, one colour per design of `rates` ({design: LCCP LR /
    short LR}), each labelled with the design it came from (`labels`: the design a record's bare
    budget name stood for, `protocol_horizon.RECORDED_AS`); below 0 the decayed run is better."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    designs = [d for d in rates if d in set(horizon.design)]
    colors = dict(zip(designs, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    markers = dict(zip(sorted(set(horizon.scale)), "osD^v"))
    for ax, col in zip(axes, ("LD - Raw", "LD - Last4")):
        for (design, scale), g in horizon[horizon.design.isin(designs)].groupby(["design", "scale"], sort=False):
            g = g.sort_values("dl")
            ax.plot(g.dl, g[col], marker=markers[scale], c=colors[design], ms=5,
                    label=f"{(labels or {}).get(design, design)} ({rates[design]:.0%} LR), {scale}")
        ax.axhline(0, c="k", lw=0.8, ls="--")
        dls = sorted(set(horizon.dl))
        ax.set(xscale="log", xlabel="$D_l$ (N(S1))", title=f"{col} (LongPPL)")
        ax.set_xticks(dls, [f"{d:g}" for d in dls])
        ax.minorticks_off()
    axes[0].set_ylabel("LongPPL difference (< 0: Linear-Decay better)")
    axes[1].legend(fontsize=7, ncol=2)
    fig.suptitle("Where Linear-Decay catches up with Constant-Raw and Last4, past the grid's $D_l$")
    return fig
