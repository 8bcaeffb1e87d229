"""The figures of chapter 2's toy-design probes, drawn from the tables that `toy_design` and
`toy_erosion` build from the probes' records (data/probes/). Each function returns a
matplotlib figure; the chapter saves it under its label and writes its caption.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from nblib.chapters.appendix.toy_design import copy_gain_column
from nblib.lccp.diagnostics import COPY_THRESHOLD


def lr_batch_figure(lr_batch: pd.DataFrame):
    """Short stage at a 128-token context (`toy_design.lr_batch_table`): held-out loss (top) and
    random-segment copy gain (bottom) against tokens, one column per shape, one colour per
    (batch, LR), the 1-nat copying bar dashed."""
    shapes = list(dict.fromkeys(lr_batch["shape"]))
    near = copy_gain_column(lr_batch)
    settings = sorted(set(zip(lr_batch["batch"], lr_batch["LR"])))  # one colour per (batch, LR) in every panel
    fig, axes = plt.subplots(2, len(shapes), figsize=(4.2 * len(shapes), 6.4), squeeze=False, sharey="row")
    for j, shape in enumerate(shapes):
        for (batch, lr), g in lr_batch[lr_batch["shape"] == shape].groupby(["batch", "LR"]):
            g = g.sort_values("tokens")
            style = dict(marker="o", color=f"C{settings.index((batch, lr))}",
                         label=f"batch {batch} x {g['context'].iloc[0]}, LR {lr:g}")
            axes[0, j].plot(g["tokens"] / 1e6, g["held-out loss"], **style)
            axes[1, j].plot(g["tokens"] / 1e6, g[near], **style)
        axes[0, j].legend(fontsize=7)
        axes[0, j].set_title(f"{shape}\nN = {lr_batch[lr_batch['shape'] == shape]['N (non-emb.)'].iloc[0]:,}",
                             fontsize=9)
        axes[1, j].axhline(COPY_THRESHOLD, color="grey", lw=0.8, ls="--")
        axes[1, j].set_xlabel("training tokens (M)")
    axes[0, 0].set_ylabel("held-out loss (nats/token)")
    axes[1, 0].set_ylabel(f"random-segment {near} (nats)")
    fig.suptitle("Short stage at a 128-token context: loss and copying against tokens, per batch and LR", fontsize=10)
    fig.tight_layout()
    return fig


def lccp_lr_figure(lccp_lr: pd.DataFrame, grid_frac: float):
    """Constant LCCP trajectories per LR (`toy_design.lccp_lr_table`): LongPPL and ShortPPL
    against Dl, one colour per scale; solid at the grid's rate `grid_frac`, dashed otherwise."""
    lr_scales = sorted(lccp_lr["scale"].unique())
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for (scale, frac), g in lccp_lr.groupby(["scale", "LCCP LR / short LR"]):
        g = g.sort_values("Dl")
        style = dict(color=f"C{lr_scales.index(scale)}", ls="-" if frac == grid_frac else "--", marker="o", ms=3)
        axes[0].plot(g["Dl"], g["LongPPL"], label=f"{scale}, LR x {frac:g}", **style)
        axes[1].plot(g["Dl"], g["ShortPPL"], **style)
    for ax, name in zip(axes, ("LongPPL", "ShortPPL")):
        ax.set(xlabel="$D_l$ (units of N(S1))", ylabel=name)
    axes[0].legend(fontsize=7)
    fig.suptitle("Constant LCCP at two learning rates: LongPPL and ShortPPL against $D_l$")
    return fig


def smear_ablation_figure(smear: pd.DataFrame):
    """The smeared-key ablation (`toy_design.smear_ablation_table`): copy gain against tokens
    per shape, plain grey and smeared orange, seed 0 solid and seed 1 dashed."""
    near = copy_gain_column(smear)
    smear_shapes = list(dict.fromkeys(smear.sort_values("N (non-emb.)")["shape"]))
    fig, axes = plt.subplots(1, len(smear_shapes), figsize=(4.4 * len(smear_shapes), 3.4), squeeze=False, sharey=True)
    for ax, shape in zip(axes[0], smear_shapes):
        for (variant, s), g in smear[smear["shape"] == shape].groupby(["variant", "seed"]):
            g = g.sort_values("tokens")
            ax.plot(g["tokens"] / 1e6, g[near], marker="o", color="C1" if variant == "smeared" else "0.45",
                    ls="-" if s == 0 else "--", label=f"{variant}, seed {s}")
        ax.axhline(COPY_THRESHOLD, color="grey", lw=0.8, ls=":")
        ax.set(title=shape, xlabel="training tokens (M)")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7)
    axes[0, 0].set_ylabel(f"random-segment {near} (nats)")
    fig.tight_layout()
    return fig


def erosion_figure(erosion: pd.DataFrame, dl_ref: float = 30):
    """The erosion probe (`toy_erosion.erosion_table`), one colour per (scale, variant): LongPPL
    on file beginnings and middles relative to its value at Dl = `dl_ref` (so scales compare),
    the copy gain 256 back, and the second layer's far-attention share."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for i, ((scale, variant), g) in enumerate(erosion.groupby(["scale", "variant"], sort=False)):
        g = g[g["Dl"] > 0].sort_values("Dl")
        style = dict(color=f"C{i % 10}", marker="o", ms=3)
        name = f"{scale}, {variant}"
        for col, ls, part in (("LongPPL (beginnings)", "-", name), ("LongPPL (middles)", "--", None)):
            ref = g.loc[g["Dl"] == dl_ref, col]
            if len(ref):
                axes[0].plot(g["Dl"], g[col] / float(ref.iloc[0]), ls=ls, label=part, **style)
        axes[1].plot(g["Dl"], g["copy gain @256"], label=name, **style)
        axes[2].plot(g["Dl"], g["far attention L1 (best head)"], label=name, **style)
    axes[0].axhline(1.0, color="0.6", lw=0.8)
    axes[0].set(ylabel=f"LongPPL / LongPPL at $D_l$ = {dl_ref:g} (solid: beginnings, dashed: middles)")
    axes[1].set(ylabel="copy gain 256 back (nats)")
    axes[2].set(ylabel="layer 1: attention >= 128 back, best head")
    for ax in axes:
        ax.set(xlabel="$D_l$ (units of N(S1))")
    axes[0].legend(fontsize=6)
    fig.suptitle("Constant LCCP at 10% of the short LR, 4 x 1,024 tokens a step, from $D_s$ = 270 N(S1)")
    fig.tight_layout()
    return fig


def ladder_trajectory_figure(points: pd.DataFrame):
    """S5's Constant trajectory per grid design (records of `python -m nblib.probes grid_ladder`):
    LongPPL against Dl, Last4 solid and Raw dotted, one colour per design (tab20, so that no two
    designs of a long ladder share one) and one legend entry each."""
    from matplotlib.lines import Line2D

    designs = list(points.groupby("design").groups)
    colors = plt.get_cmap("tab20" if len(designs) > 10 else "tab10").colors
    fig, ax = plt.subplots(figsize=(9, 5))
    for i, design in enumerate(designs):
        g = points[points.design == design]
        for protocol, ls in (("Last4", "-"), ("Raw", ":")):
            h = g[g.protocol == protocol].sort_values("dl")
            ax.plot(h.dl, h.longppl, ls=ls, marker="o", ms=3, color=colors[i % len(colors)],
                    label=f"design {design}" if protocol == "Last4" else None)
    ax.set(xlabel="$D_l$ (units of N(S1))", ylabel="LongPPL", yscale="log",
           title="S5's Constant trajectory (from each design's largest $D_s$) by grid design")
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], c="k", ls="-", label="Last4"), Line2D([], [], c="k", ls=":", label="Raw")]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
