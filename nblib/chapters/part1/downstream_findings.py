"""Chapter 5's numbers in words: RULER along the trajectory and Table 14 next to the paper's
(§5.1-5.3, App. D.3), the needle trajectory, and the stages after LCCP (the 4x extension and
SFT), as Markdown the chapter displays.

Each function turns results computed in a run into sentences with the numbers inline and
the paper's numbers beside them, so a chapter's conclusions are always the ones its own
run supports. Nothing here computes a result; it reads tables the experiments return.
"""

from __future__ import annotations

import pandas as pd

from nblib.chapters.claims.paper_values import (FIG15_AVERAGE, RETRIEVAL_HEADS, RULER_128K_SUBTASKS,
                                                RULER_SUBTASK_ENDPOINTS, TABLE14_LATER)
from nblib.chapters.prose import bullets


def post_training_findings(ext_suite: dict, ruler_ext: pd.DataFrame, ext_len: int, bench_suite: dict,
                           sft_models: pd.DataFrame, bench_len: int) -> str:
    """What §5.2-5.3's stages show at this budget, next to the paper: RULER after the 4x
    extension (first and last starting point, Raw and Last4, the single-needle subtasks) and
    the SFT benchmark average (seed mean and range) from the first to the last point."""
    fit = [t for t, v in ext_suite.items() if isinstance(v, list)]
    r = ruler_ext.dropna()
    single = r[r.task.str.startswith("niah_single")]
    if single.empty:
        lines = [f"After the 4x extension, no single-needle RULER subtask fits {ext_len} tokens "
                 f"({len(fit)} of 13 subtasks fit), so the extended models are not compared here."]
    else:
        agg = r.groupby(["dl", "protocol"]).score.mean().unstack()
        first, last = agg.index.min(), agg.index.max()
        one = single.groupby(["dl", "protocol"]).score.mean().unstack()
        lines = [
            f"After the 4x extension, RULER at {ext_len} tokens ({len(fit)} of 13 subtasks fit): Raw "
            f"{agg.loc[first, 'Raw']:.1f} -> {agg.loc[last, 'Raw']:.1f}, Last4 {agg.loc[first, 'Last4']:.1f} -> "
            f"{agg.loc[last, 'Last4']:.1f} from Dl/N = {first:g} to {last:g}; single-needle subtasks: Raw "
            f"{one.loc[first, 'Raw']:.1f} -> {one.loc[last, 'Raw']:.1f}, Last4 {one.loc[first, 'Last4']:.1f} -> "
            f"{one.loc[last, 'Last4']:.1f} (paper, RULER-128K 10N -> 120N: "
            + ", ".join(f"{k} Raw {v['Raw'][0]:g} -> {v['Raw'][1]:g}, Last4 {v['Last4'][0]:g} -> {v['Last4'][1]:g}"
                        for k, v in RULER_128K_SUBTASKS.items()) + ")."]
    bfit = [t for t, v in bench_suite.items() if isinstance(v, list)]
    bskip = [t for t in bench_suite if t not in bfit]
    if len(sft_models):
        m = sft_models.reset_index()
        by = m.groupby(["dl", "protocol"])["average"].agg(["mean", "min", "max"])
        f0, f1 = by.index.get_level_values(0).min(), by.index.get_level_values(0).max()
        lines.append(
            f"After long-context SFT ({m.seed.nunique()} data seeds), the benchmark average at {bench_len} tokens over "
            f"{int(m['benchmarks'].max())} of 4 benchmarks ({len(bfit)} of {len(bench_suite)} tasks fit"
            + (f"; {', '.join(bskip)} do not: their templates alone exceed the context" if bskip else "") + "): "
            + "; ".join(f"{p} {by.loc[(f0, p), 'mean']:.1f} [{by.loc[(f0, p), 'min']:.1f}, {by.loc[(f0, p), 'max']:.1f}] -> "
                        f"{by.loc[(f1, p), 'mean']:.1f} [{by.loc[(f1, p), 'min']:.1f}, {by.loc[(f1, p), 'max']:.1f}]"
                        for p in ("Raw", "Last4"))
            + f" from Dl/N = {f0:g} to {f1:g} (mean [min, max] over seeds; paper, 4.20B SFT 10N -> 120N: "
            + ", ".join(f"{k} {a:.2f} -> {b:.2f}" for k, (a, b) in FIG15_AVERAGE.items()) + ").")
    else:
        lines.append(f"No benchmark task fits {bench_len} tokens, so the SFT models are not scored at this budget.")
    return bullets(lines)


def needle_trajectory_findings(traj: pd.DataFrame, ext: pd.DataFrame | None = None) -> str:
    """Chapter 5's needle trajectory in words (`downstream.needle_trajectory`): Spearman rho of
    each measure against Dl under Last4 and Raw, the score against its control at the first and
    the last point, and, after the 4x extension, the score and control per starting point."""
    from scipy.stats import spearmanr

    lines = []
    for protocol in ("Last4", "Raw"):
        g = traj[traj.protocol == protocol].sort_values("dl")
        if len(g) < 3:
            continue
        # a measure constant along the trajectory (every score 0) has no rank correlation
        rho = {c: (f"{spearmanr(g.dl, g[c]).statistic:+.2f}" if g[c].nunique() > 1 else "undefined: constant")
               for c in ("piece_hit", "needle_gain", "score")}
        first, last = g.iloc[0], g.iloc[-1]
        n_last = f", {last.prompts:g} prompts per needle" if "prompts" in g and pd.notna(last.prompts) else ""
        lines.append(
            f"{protocol}, Dl/N = {first.dl:g} -> {last.dl:g}: per-piece hit rate {first.piece_hit:.2f} -> "
            f"{last.piece_hit:.2f} (Spearman rho {rho['piece_hit']}), needle gain {first.needle_gain:+.2f} -> "
            f"{last.needle_gain:+.2f} nats per value token (rho {rho['needle_gain']}), score "
            f"{first.score:.1f} -> {last.score:.1f}{n_last} against the control's {first.control_score:.1f} -> "
            f"{last.control_score:.1f} (rho {rho['score']}).")
    if ext is not None and len(ext):
        e = ext.sort_values(["dl", "protocol"])
        lines.append("After the 4x extension, score (control) from each starting point: " + "; ".join(
            f"{r.protocol} Dl/N = {r.dl:g}: {r.score:.1f} ({r.control_score:.1f})" for r in e.itertuples()) + ".")
    return bullets(lines)


def downstream_findings(suite: dict, ruler: pd.DataFrame, heads: pd.DataFrame, t14: pd.DataFrame,
                        length: int) -> str:
    """Chapter 5's conclusions next to the LCCP paper's: which RULER subtasks fit and where
    each stays, the trajectory's endpoints Raw and Last4, Table 14's deltas, and the
    retrieval-head count."""
    fit = [t for t, v in suite.items() if isinstance(v, list)]
    skip = [t for t in suite if t not in fit]
    r = ruler.dropna()
    agg = r.groupby(["dl", "protocol"]).score.mean().unstack()
    first, last = agg.index.min(), agg.index.max()
    per = r[r.protocol == "Last4"].pivot_table(index="task", columns="dl", values="score")
    floor = [t for t in per.index if per.loc[t].max() == 0]
    rising = [t for t in per.index if per.loc[t, last] > per.loc[t, first]]
    cnt = heads.groupby("dl").score.apply(lambda s: int((s > RETRIEVAL_HEADS["threshold"]).sum()))
    lines = [
        f"RULER at {length} tokens: {len(fit)} of 13 subtasks fit ({', '.join(fit)})"
        + (f"; {', '.join(skip)} do not (their template, keys and answers alone exceed the context)." if skip else "."),
        f"Mean over those subtasks along the trajectory: Raw {agg.loc[first, 'Raw']:.1f} -> {agg.loc[last, 'Raw']:.1f}, "
        f"Last4 {agg.loc[first, 'Last4']:.1f} -> {agg.loc[last, 'Last4']:.1f} from Dl/N = {first:g} to {last:g} (paper, "
        "RULER-32K: an upward trend with no sign of saturation, Last4 above Raw and steadier).",
        "Subtasks at 0 at every point under Last4: " + (", ".join(floor) if floor else "none")
        + "; rising from the first to the last point: " + (", ".join(rising) if rising else "none")
        + " (paper, Last4 5N -> 120N: " + ", ".join(f"{k} {a:.1f} -> {b:.1f}" for k, (a, b) in RULER_SUBTASK_ENDPOINTS.items())
        + ").",
        "Table 14, Last4 - Raw (means over the points each stage was run at): " + "; ".join(
            f"{stage}, {metric}: {row.Delta:+.3f} ({int(row.points)} points)" if row.points else f"{stage}: not run"
            for (stage, metric), row in t14.iterrows())
        + " (paper: Last4 lowers LongPPL and raises RULER-32K during LCCP; after later stages "
        + ", ".join(f"{k} {v:+.2f}" for k, v in TABLE14_LATER.items()) + ").",
        f"Retrieval heads (score > {RETRIEVAL_HEADS['threshold']}) on single-needle prompts: {cnt.iloc[0]} at the first "
        f"point, {cnt.iloc[-1]} at the last (paper: {RETRIEVAL_HEADS['count_start']} -> "
        f"{RETRIEVAL_HEADS['count_end'][0]}-{RETRIEVAL_HEADS['count_end'][1]}); best head {heads.score.max():.2f}.",
    ]
    return bullets(lines)
