"""Chapter 3's figures of the scaling law (LCCP paper §3, Figs. 2, 3 and 9) and of how far the
models read back (beyond the paper): each takes the chapter's tables and returns a figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from nblib.budgets import SCALES
from nblib.chapters.figures import parity, token_ticks
from nblib.lccp import scaling


def trends_figure(table):
    """Fig. 2: log(LongPPL) of the Linear-Decay runs against Ds (Dl at its largest) and Dl (Ds at
    its largest), one line per scale S1-S4; the grid's budgets label each axis."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    colors = dict(zip(SCALES, plt.cm.viridis(np.linspace(0, 0.9, len(SCALES)))))
    fitted = table[table.scale != "S5"]
    for scale, g in fitted.groupby("scale"):
        for ax, vary, fixed in ((axes[0], "Ds", "dl_mult"), (axes[1], "Dl", "ds_mult")):
            sel = g[g[fixed] == g[fixed].max()].sort_values(vary)
            ax.plot(sel[vary], sel["y"], "o-", color=colors[scale], label=f"{scale} (N={sel.N.iloc[0]:,})")
    axes[0].set(xscale="log", xlabel="$D_s$ (tokens), $D_l$ at its largest", ylabel="log(LongPPL)")
    axes[1].set(xscale="log", xlabel="$D_l$ (tokens), $D_s$ at its largest")
    for ax, col in ((axes[0], "Ds"), (axes[1], "Dl")):
        token_ticks(ax, "x", fitted[col].unique())
    axes[0].legend(fontsize=8)
    fig.suptitle("Fig. 2: log(LongPPL) against the short-context and LCCP budgets")
    return fig


def parity_figure(table, holdout: dict, splits: dict):
    """Fig. 3: predicted against measured log(LongPPL) for each held-out split; grey the fitted
    scales, red the held-out one."""
    fig, axes = plt.subplots(1, len(holdout), figsize=(5 * len(holdout), 4.5))
    for ax, (name, res) in zip(np.atleast_1d(axes), holdout.items()):
        train_rows = table[table.scale.isin(splits[name][0])]
        p = res.predictions
        parity(ax, p["log_longppl"], p["pred_log_longppl"], title=f"{name}: R²={res.r2:.3f}, MAPE={res.mape:.2f}%",
               label=f"held out {splits[name][1][0]}", background=(train_rows["y"], res.fit.predict_table(train_rows)),
               diagonal=(table["y"].min(), table["y"].max()))
    fig.suptitle("Fig. 3: scale-extrapolation parity plots (Eq. 1, Linear-Decay)")
    return fig


def zero_contour_figure(fit, n5: int, multiples=(12.2, 100, 1000), data=None):
    """Fig. 9: the (Ds, Dl) curves where `fit` predicts log(LongPPL) = 0, at N = each multiple of
    S5's `n5`. A fit with an exponent at the search floor (`scaling.floor_exponents`) is
    log-linear on that axis, so its contours are labelled as that fit's extrapolation; `data`
    (the fitted table) shades the budgets the runs cover."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for mult in multiples:
        cont = scaling.zero_contour_ds_dl(fit, mult * n5)
        ok = np.isfinite(cont["Dl"])
        if ok.any():
            ax.plot(cont["Ds"][ok], cont["Dl"][ok], label=f"N = {mult:g} x S5 = {mult * n5:.3g}")
    if data is not None:
        ax.add_patch(plt.Rectangle((data.Ds.min(), data.Dl.min()), data.Ds.max() - data.Ds.min(),
                                   data.Dl.max() - data.Dl.min(), color="0.8", label="the fitted runs' budgets"))
    floor = scaling.floor_exponents(fit)
    title = "Fig. 9: zero contours of the S1-S4 fit"
    if floor:
        title += f"\n(extrapolation: {', '.join(floor)} at the floor, a log-linear fit)"
    ax.set(xscale="log", yscale="log", xlabel="$D_s$ (tokens)", ylabel="$D_l$ (tokens)", title=title)
    if ax.lines:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no finite zero crossing\n(the prediction stays > 0)", ha="center", transform=ax.transAxes)
    return fig


def position_loss_figure(pos, trunc_len: int):
    """Mean next-token loss by position bucket (rows: models; columns: buckets), beyond the
    paper: a model that uses distant context keeps falling past the local chunk."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, r in pos.iterrows():
        ax.plot(range(len(r)), r.values, "o-", label=name)
    ax.set(xticks=range(pos.shape[1]), xticklabels=pos.columns, xlabel="token position", ylabel="mean NLL (nats)",
           title=f"Loss by position (local chunk = {trunc_len} tokens)")
    ax.legend(fontsize=7)
    return fig


def copy_probe_figure(copy, curves: dict, distance: int):
    """The random-segment copy gain against the distance between copies (`copy`: models x
    "gain @d" columns, `copy_gain_table`), and the loss along one `distance`-token segment and its repeat (`curves`)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    dists = [int(str(c).rsplit("@", 1)[-1]) for c in copy.columns]  # columns "gain @d" (copy_gain_table)
    for name, r in copy.iterrows():
        axes[0].plot(dists, r.values, "o-", label=name)
    axes[0].axhline(1.0, ls="--", c="k", lw=0.8)
    axes[0].set(xscale="log", xlabel="distance between copies (tokens)", ylabel="copy gain (nats/token)",
                title="Random-segment copy gain")
    axes[0].set_xticks(dists, [str(d) for d in dists])
    for name, curve in curves.items():
        axes[1].plot(curve, lw=0.8, label=name)
    axes[1].axvline(distance - 1, ls=":", c="k", lw=0.8)
    axes[1].set(xlabel="position", ylabel="mean NLL (nats)", title=f"Loss along a {distance}-token segment, repeated")
    axes[0].legend(fontsize=7)
    return fig


def copy_gain_figure(copy_grid, short_seq_len: int, threshold: float):
    """The copy gain of the grid's endpoints (beyond the paper): (a) every short-stage endpoint
    a quarter of the short context back, against Ds; (b) the Linear-Decay LCCP endpoints at the
    largest Ds twice the short context back, against Dl; dashed: the copying `threshold`."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    d_short, d_long = short_seq_len // 4, 2 * short_seq_len
    for scale, g in copy_grid.groupby("scale"):
        c = plt.cm.viridis(SCALES.index(scale) / (len(SCALES) - 0.5))
        s = g[(g.stage == "short") & (g.distance == d_short)].sort_values("Ds")
        axes[0].plot(s.Ds / 1e6, s.gain, "o-", color=c, label=scale)
        lc = g[(g.stage == "LCCP") & (g.distance == d_long)]
        lc = lc[lc.Ds == lc.Ds.max()].sort_values("Dl")
        axes[1].plot(lc.Dl / 1e6, lc.gain, "o-", color=c, label=f"{scale} (Ds = {lc.Ds.max() / 1e6:.1f}M)")
    for ax in axes:
        ax.axhline(threshold, ls="--", c="k", lw=0.8)
        ax.legend(fontsize=7)
    axes[0].set(xlabel="$D_s$ (M tokens)", ylabel="copy gain (nats/token)",
                title=f"(a) short-stage endpoints, {d_short} tokens back")
    axes[1].set(xlabel="$D_l$ (M tokens)", title=f"(b) Linear-Decay LCCP endpoints, {d_long} tokens back")
    fig.suptitle("Copy gain of the grid's endpoints")
    return fig
