"""Chapter 4's figures of the Constant-Last4 protocol (LCCP paper §4, Figs. 4b and 5): each
takes the chapter's tables and fits and returns a figure."""

from __future__ import annotations

import matplotlib.pyplot as plt

from nblib.book.figures import parity, token_ticks
from nblib.lccp import scaling


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
