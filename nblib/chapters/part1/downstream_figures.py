"""Chapter 5's figures of downstream retrieval along the long Constant trajectory (LCCP paper
§5.1, Figs. 7 and 12, and the code-form needles beyond the paper): each takes the table the
chapter saves (`ruler_trajectory.csv`, `needle_trajectory.csv`) and returns a figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from nblib.chapters.figures import legend_below_figure, legend_outside

PROTOCOL_COLORS = {"Raw": "tab:gray", "Last4": "tab:red"}
# RULER's metrics (string_match_all / _part) are percentages: every score runs from 0 to 100
SCORE_RANGE = (0, 100)


def _dl_label(unit: str) -> str:
    return f"$D_l$ (LCCP tokens, in {unit})"


def ruler_trajectory_figure(ruler, length: int, unit: str = "N"):
    """Fig. 7 and Fig. 12: RULER along the trajectory (`ruler`: columns dl in `unit`, protocol
    Raw | Last4, task, score 0-100, NaN where a subtask does not fit), Raw against Last4: the
    mean over the subtasks that fit (left) and each subtask at every point (right, larger
    dots: later points). Both score axes span RULER's whole 0-100, so that noise near zero
    does not read as a rise."""
    r = ruler.dropna(subset=["score"])
    agg = r.groupby(["dl", "protocol"]).score.mean().unstack()
    per = r.pivot_table(index="task", columns=["protocol", "dl"], values="score")
    points = sorted(r.dl.unique())
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.3), gridspec_kw={"width_ratios": [1, 1.6]})
    for protocol, c in PROTOCOL_COLORS.items():
        if protocol in agg:
            axes[0].plot(agg.index, agg[protocol], "o-", c=c, label=protocol)
    axes[0].set(xlabel=_dl_label(unit), ylabel=f"RULER score (0-100), mean of {r.task.nunique()} subtasks",
                title=f"Fig. 7: RULER at {length} tokens")
    sizes = 10 + 30 * np.arange(len(points)) / max(len(points), 1)
    for i, task in enumerate(per.index):
        for protocol, off in (("Raw", -0.2), ("Last4", 0.2)):
            if protocol in per.columns.get_level_values(0):
                axes[1].scatter(np.full(len(points), i + off), per.loc[task, protocol].reindex(points), s=sizes,
                                c=PROTOCOL_COLORS[protocol], alpha=0.7)
    axes[1].set_xticks(range(len(per.index)), per.index, rotation=45, ha="right", fontsize=8)
    axes[1].set(xlabel="RULER subtask", ylabel="score (0-100)",
                title="Fig. 12: each subtask (larger dots: later points)")
    for ax in axes:
        ax.set_ylim(SCORE_RANGE[0] - 3, SCORE_RANGE[1] + 3)  # the full range, dots at 0 and 100 whole
        ax.set_yticks(np.linspace(*SCORE_RANGE, 6))
    legend_outside(axes[1], handles=axes[0].get_lines(), title="checkpoint")
    return fig


def needle_trajectory_figure(traj, ext, length: int, value_form: str, unit: str = "N"):
    """The code-form single needles along the trajectory (`traj`, and `ext` after the 4x
    extension: `downstream.needle_trajectory` tables, dl in `unit`), Raw and Last4: the score
    (0-100) and its control, the per-piece hit rate and the needle gain; one legend under the
    panels."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.3))
    for protocol, c in PROTOCOL_COLORS.items():
        g = traj[traj.protocol == protocol]
        e = ext[ext.protocol == protocol]
        axes[0].plot(g.dl, g.score, "o-", c=c, label=f"{protocol}")
        axes[0].plot(g.dl, g.control_score, "x:", c=c, label=f"{protocol}, control (no needle)")
        axes[0].plot(e.dl, e.score, "s--", c=c, mfc="none", label=f"{protocol}, after the 4x extension")
        for ax, col in ((axes[1], "piece_hit"), (axes[2], "needle_gain")):
            ax.plot(g.dl, g[col], "o-", c=c, label=protocol)
            ax.plot(e.dl, e[col], "s--", c=c, mfc="none", label=f"{protocol}, after the 4x extension")
    axes[0].set(ylabel="score (0-100), mean of the 3 needles",
                title=f"code-form needles at {length} tokens ({value_form} values)")
    axes[1].set(ylabel="share of value pieces that are the argmax", title="per-piece hit rate")
    axes[2].set(ylabel="nats per value token", title="needle gain (with − without the needle)")
    for ax in axes:
        ax.set_xlabel(_dl_label(unit))
    legend_below_figure(fig, axes[0].get_lines(), ncol=2)  # a column per checkpoint kind
    return fig
