"""What a chapter's numbers say, as Markdown the chapter displays (chapters 2-5; chapters
6-10, the Gemma blog's, are in `nblib.book.blog_findings`).

Each function turns results computed in a run into sentences with the numbers inline and
the paper's numbers beside them, so a chapter's conclusions are always the ones its own
run supports. Nothing here computes a result; it reads tables the experiments return.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from nblib.book.paper_values import (FIG15_AVERAGE, HELDOUT_CLAIM, RETRIEVAL_HEADS, RULER_128K_SUBTASKS,
                                     RULER_SUBTASK_ENDPOINTS, TABLE3_LD, TABLE14_LATER)
from nblib.budgets import targets as T
from nblib.lccp.law_checks import longppl_seed_spread, n_axis_pairs
from nblib.lccp.scaling import floor_exponents
from nblib.lccp.scaling.profile import EXP_FLOOR
from nblib.probes import grid_ladder as GL
from nblib.probes import needle_ladder as NL


def bullets(lines) -> str:
    """Markdown bullet list, one line each (every chapter's conclusions)."""
    return "\n".join(f"- {line}" for line in lines)


# ---------------------------------------------------------------------------------------
# Appendix A (chapter 11): how the toy budget was chosen
# ---------------------------------------------------------------------------------------
def toy_probe_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per toy-design probe (`nblib.probes.design`'s records, data/probes/toy_design_probe.jsonl):
    its settings, loss by position after LCCP, and copy gains."""
    args = pd.json_normalize(records["args"])
    return pd.DataFrame({
        "probe": records["name"], "tokenizer": args["tokenizer"], "N (non-emb.)": records["n_params"],
        "d x heads": args["d"].astype(str) + " x " + args["heads"].astype(str),
        "tied": args.get("tie", pd.Series(False, index=args.index)).fillna(False),
        "copy share": args["copy"], "short steps": args["short_steps"], "LCCP steps": args["long_steps"],
        "LCCP loss, first chunk": [np.mean(v[:2]) for v in records["long_pos_loss"]],
        "LCCP loss, last half": [v[-1] for v in records["long_pos_loss"]],
        "copy gain @16": [c["16"] for c in records["long_copy"]],
        "copy gain @64": [c["64"] for c in records["long_copy"]],
        "short-stage copy gain @128": [c["128"] for c in records["short_copy"]],
    })


def toy_levers_markdown(probes: pd.DataFrame) -> str:
    """The first toy budget's lever table (appendix A): each design choice, the probe numbers
    behind it (read from `toy_probe_table`), and what that budget decided, with where a later
    grid superseded it."""
    def p(name, col):
        row = probes[probes.probe == name]
        return float(row[col].iloc[0]) if len(row) else float("nan")

    def drop(name):
        return p(name, "LCCP loss, first chunk") - p(name, "LCCP loss, last half")

    last = "LCCP loss, last half"
    levers = [
        ("Tokenizer: 1,024-entry BPE (`nblib.data.bpe`) instead of bytes",
         f"same model and steps, no synthetic data: from the first local chunk to the last half of the context "
         f"the loss falls {drop('bytes_natural'):.2f} nats/byte at byte level and {drop('bpe_natural'):.2f} "
         f"nats/token with BPE; a BPE token is 2.6 characters, so the same 256 positions reach about 660 "
         f"characters back instead of 256",
         "adopted for its reach (the gain per position is similar)"),
        ("Tied input/output embeddings",
         f"pure repeated-segment training, 600 steps: copy gain @16 {p('pure_copy', 'copy gain @16'):.2f} untied vs "
         f"{p('pure_tie', 'copy gain @16'):.2f} tied (d=48); {p('pure_d64h2', 'copy gain @16'):.2f} vs "
         f"{p('pure_d64h2_tie', 'copy gain @16'):.2f} (d=64, 2 heads)",
         "adopted (N is unchanged: it excludes embeddings)"),
        ("Fewer, wider heads (head size >= 16, two heads)",
         f"tied, pure repeats: 4 heads of 12 gain {p('pure_tie', 'copy gain @16'):.2f}, 2 heads of 32 gain "
         f"{p('pure_d64h2_tie', 'copy gain @16'):.2f}", "adopted at every scale"),
        ("Repeats at one fixed distance (the classic fast 'phase change' setup)",
         f"pure repeats of a 128-token segment, 300 steps of 16 x 256 tokens: copy gain "
         f"{p('pure_fixed128_T256', 'short-stage copy gain @128'):.2f} at distance 128 but "
         f"{p('pure_fixed128_T256', 'copy gain @16'):.2f} at 16 after LCCP; with lengths 8-128 instead: "
         f"{p('pure_var8-128_T256', 'short-stage copy gain @128'):.2f} at 128: a fixed distance teaches a "
         f"positional shortcut (attend exactly 128 back), not content-based copying",
         "rejected; every copy probe here uses variable lengths"),
        ("25% synthetic repeated segments in both stages",
         f"after 1,500 / 4,000 short steps: copy gain @16 {p('bpe_copy25_d48', 'copy gain @16'):.2f} / "
         f"{p('c25_s4000', 'copy gain @16'):.2f}; tied d=64, 3,000 steps: "
         f"{p('c25_d64h2_tie_s3000', 'copy gain @16'):.2f}: the induction circuit does not form within "
         f"the steps a toy run has, and a quarter of the natural tokens would be displaced",
         "rejected (the data stay natural; `CopyMixStream` remains available)"),
        ("Scale range compressed from 26x to about 7x, two layers everywhere",
         "S1 of the old budget had 6.7K parameters and one head; the probes above learn to use context "
         "at 50-90K parameters", "adopted by the first toy grid; superseded: the book's grid spans about 4x from d64, heads of 32 "
         "with a KV head each (design table below)"),
        ("Learning rate (measured after the book's grid was run: the next lever)",
         f"2,000 short + 400 LCCP steps, last-half loss after LCCP at LR 1e-2 / 2e-2 / 4e-2: S1 shape "
         f"{p('lr_S1shape_1e-2', last):.2f} / {p('lr_S1shape_2e-2', last):.2f} / {p('lr_S1shape_4e-2', last):.2f}, "
         f"S4 shape {p('lr_S4shape_1e-2', last):.2f} / {p('lr_S4shape_2e-2', last):.2f} / "
         f"{p('lr_S4shape_4e-2', last):.2f}: 2e-2 is above the optimum of both, by more at the larger width",
         "kept at 2e-2 by the first toy grid; superseded: the book's grid trains at 1e-2 with 16x the tokens a "
         "step (design table below)"),
        ("Token multiples at a tenth of the paper's (Ds 9N-45N, Dl 1N-5N)",
         "the grid then trains about 48M tokens, which fits the 40-minute budget of chapters 1-4",
         "adopted by the first toy grid; superseded: the book's grid takes the paper's multiples in a fixed "
         "token unit (design table below)"),
    ]
    return pd.DataFrame(levers, columns=["lever", "what was measured", "decision (first toy budget)"]).to_markdown(
        index=False)


# ---------------------------------------------------------------------------------------
# Chapter 3: the scaling law
# ---------------------------------------------------------------------------------------
def scaling_law_findings(table: pd.DataFrame, holdout: dict, short_holdout: dict, table3: pd.DataFrame,
                         uses_context: pd.DataFrame, copy: pd.DataFrame, copy_distance: int) -> str:
    """Chapter 3's conclusions: held-out fit quality of Eq. 1 against the paper's (§3.2,
    Table 3), the same law on ShortPPL, context use, monotonicity in N, Ds and Dl, and, when
    the held-out R² falls short, where the misfit lies (level against within-scale spread,
    the local slope in log N)."""
    r4, r5 = holdout["S1-S3 → S4"], holdout["S1-S4 → S5"]
    t3 = table3.set_index("variant")
    best5 = t3["S5 R²"].idxmax()
    ex = r5.fit.absolute_params()
    gap = uses_context["last half - first chunk"]
    col = f"gain @{copy_distance}"
    means = table.groupby("scale")["longppl"].mean()
    lines = [
        f"Held-out R² of Eq. 1 on LongPPL: S4 **{r4.r2:.3f}** (paper {TABLE3_LD['additive'][0]}), "
        f"S5 **{r5.r2:.3f}** (paper {TABLE3_LD['additive'][2]}); MAPE S4 {r4.mape:.2f}%, S5 {r5.mape:.2f}% "
        f"(paper < {HELDOUT_CLAIM['mape_max_pct']}%).",
        f"The same law on ShortPPL: S4 R² {short_holdout['S1-S3 → S4'].r2:.3f}, "
        f"S5 R² {short_holdout['S1-S4 → S5'].r2:.3f}.",
        f"The variant with the best S5 R² here: `{best5}` ({t3.loc[best5, 'S5 R²']:.3f}); the paper's best is the "
        f"additive law.",
        f"Exponents of the S1-S4 fit: α = {ex['alpha']:.3f}, β_s = {ex['beta_s']:.3f}, β_l = {ex['beta_l']:.3f}.",
        "Last-half loss minus first-chunk loss (< 0: the model uses context beyond the local chunk): "
        + ", ".join(f"{k.split(' ')[0]} {v:+.3f}" for k, v in gap.items()) + ".",
        f"Random-segment copy gain at distance {copy_distance} (≥ 1 nat means the model copies): "
        + ", ".join(f"{k.split(' ')[0]} {v:+.2f}" for k, v in copy[col].items()) + ".",
        "Mean LongPPL by scale: " + ", ".join(f"{k} {v:.2f}" for k, v in means.items())
        + (" (falls with N at every step)." if means.is_monotonic_decreasing else " (not monotone in N)."),
    ]
    for scale, g in table[table.scale != "S5"].groupby("scale"):
        by_dl = g.groupby("dl_mult")["longppl"].mean()
        by_ds = g.groupby("ds_mult")["longppl"].mean()
        lines.append(f"{scale}: mean LongPPL over Ds by Dl " + " ".join(f"{v:.2f}" for v in by_dl.values)
                     + (" (monotone)" if by_dl.is_monotonic_decreasing else " (not monotone)")
                     + "; over Dl by Ds " + " ".join(f"{v:.2f}" for v in by_ds.values)
                     + (" (monotone)." if by_ds.is_monotonic_decreasing else " (not monotone)."))
    if min(r4.r2, r5.r2) < 0.9:
        lines += _misfit_lines(table, holdout, means, copy[col])
    return bullets(lines)


def host_spread_findings(ladder: pd.DataFrame, design: str = GL.BOOK_GRID_DESIGN) -> str:
    """Fig. 3's held-out R² across hosts: the book's toy grid at seed 0 run fresh on each 2-core
    host, instruction set or precision (its rows of the design ladder, `grid_ladder.book_grid_rows`;
    each row's `change` says which)."""
    rows = GL.book_grid_rows(ladder, design)
    if rows.empty:
        return ""
    s4, s5 = (rows[c].astype(float) for c in GL.R2.values())
    varied = GL.what_varied(list(rows["design"]))
    return (f"The toy grid at seed 0, run {len(rows)} times (rows {', '.join(rows['design'])} of the design ladder, "
            f"appendix A; what varied: {varied}), gives held-out R² {s4.min():.3f} to {s4.max():.3f} for S1-S3 → S4 "
            f"and {s5.min():.3f} to {s5.max():.3f} for S1-S4 → S5. A difference smaller than that spread is not a "
            "finding.")


def grid_checks_findings(copy_targets: pd.DataFrame, stable: pd.DataFrame, spread: float, mono: pd.DataFrame,
                         r2: pd.DataFrame, r2_min: float = T.LAW_R2) -> str:
    """Chapter 3's checks of the grid itself, each with its verdict: the copy targets
    (diagnostics.copy_verdicts), the stable phase against the seed spread
    (stable_phase_verdicts), the monotonicity summary, and the held-out R² intervals."""
    lines = []
    for what, g in copy_targets.groupby("endpoint", sort=False):
        miss = g[~g["copies"]]
        lines.append(f"Copy gain, {what}, {int(g.distance.iloc[0])} tokens back: "
                     + ", ".join(f"{r.scale} {r.gain:.2f}" for r in g.itertuples())
                     + (" (every scale copies)." if miss.empty else
                        f" (**below 1 nat at {', '.join(miss.scale)}**)."))
    slow = stable[~stable["learning"]]
    lines.append("Stable phase, held-out loss from its midpoint to its end: "
                 + ", ".join(f"{k} -{v:.3f}" for k, v in stable["drop"].items())
                 + f" nats against a seed spread of {spread:.3f}"
                 + (" (every scale still learning)." if slow.empty else
                    f" (**not beyond the spread at {', '.join(slow.index)}**)."))
    for (metric, axis), r in mono.iterrows():
        n_rise, n_fail = int(r["rises within spread"]), int(r["failures"])
        text = "every one falls"
        if n_rise + n_fail:
            text = (f"{n_rise} rise(s) within the short stage's seed spread (S1's two trunks, a held-out-loss "
                    "spread, not LongPPL's)" + (f", **{n_fail} beyond it**" if n_fail else ""))
            text += f" (largest rise {r['largest rise (nats)']:.3f} nats)"
        lines.append(f"{metric} along {axis}: {int(r['steps'])} steps, {text}.")
    for name, r in r2.iterrows():
        ok = r["R²"] >= r2_min
        lines.append(f"Held-out R² {name}: {r['R²']:.3f} (95% bootstrap interval {r['R² lo']:.3f} to "
                     f"{r['R² hi']:.3f}; {r['refits at a bound']} refits with a parameter on a bound): "
                     + ("meets" if ok else "**misses**") + f" the {r2_min:g} target.")
    return bullets(lines)


def _misfit_lines(table, holdout, means, copy_gains) -> list[str]:
    lines = []
    for name, res in holdout.items():
        e = res.predictions["pred_log_longppl"] - res.predictions["log_longppl"]
        lines.append(f"{name}: mean prediction error {e.mean():+.3f} in log(LongPPL) (the level), spread "
                     f"{e.std():.3f} (the within-scale structure), against a within-scale std of "
                     f"{res.predictions['log_longppl'].std():.3f}.")
    logn = np.log(table.groupby("scale")["N"].first())
    slope = (np.log(means).diff() / logn.diff()).dropna()
    pairs = [f"{a}→{c}" for a, c in zip(means.index[:-1], means.index[1:])]
    lines.append("d log(LongPPL) / d log N between neighbouring scales: "
                 + ", ".join(f"{p} {v:+.3f}" for p, v in zip(pairs, slope.values)) + ".")
    sslope = (np.log(table.groupby("scale")["shortppl"].mean()).diff() / logn.diff()).dropna()
    lines.append("The same for ShortPPL: " + ", ".join(f"{p} {v:+.3f}" for p, v in zip(pairs, sslope.values)) + ".")
    if slope.iloc[-1] < slope.iloc[0]:
        lines.append("At toy the gain from a larger model grows with N instead of shrinking: the largest scales are "
                     "better than any power law with an offset fitted to the smaller ones predicts, so the held-out "
                     "prediction misses the level, and R² (which is computed within the held-out scale) is negative "
                     "even where the within-scale trends have the right sign."
                     + (" ShortPPL accelerates too, so this is a property of these small models (the larger ones "
                        "learn qualitatively more), not of the long-context key tokens."
                        if sslope.iloc[-1] < sslope.iloc[0] else ""))
    if copy_gains.max() < 1.0:
        lines.append(f"None of the models copies a repeated random segment (largest gain {copy_gains.max():.2f} "
                     f"nats): what they take from distant context is softer than copying (chapter 2 shows what "
                     f"was tried).")
    return lines


# ---------------------------------------------------------------------------------------
# Chapter 4: Constant-Last4
# ---------------------------------------------------------------------------------------
def observation_gap_markdown(rules: pd.DataFrame, ld_longppl: float) -> str:
    """Fig. 4a's reading: the LongPPL of the main rules and how much of the Raw → Linear-Decay
    gap Last4 closes (App. B: merging recovers most of it)."""
    g = rules.set_index("rule").longppl
    head = (f"Raw {g['Raw']:.4f}, Last4 {g['Last4']:.4f}, 1-Sqrt {g['1-Sqrt']:.4f}, EMA 0.9 {g['EMA 0.9']:.4f}, "
            f"DARE 0.5 {g['DARE 0.5']:.4f}, TIES 0.5 {g['TIES 0.5']:.4f}; Linear-Decay {ld_longppl:.4f}.")
    if g["Last4"] <= ld_longppl < g["Raw"]:
        tail = (f"Last4 closes the whole Raw → Linear-Decay LongPPL gap and goes {ld_longppl - g['Last4']:.3f} "
                f"below Linear-Decay (paper: merging recovers most of the gap).")
    elif g["Last4"] > g["Raw"]:
        tail = (f"Last4 is {g['Last4'] - g['Raw']:.3f} above Raw on this pool: averaging does not help here "
                f"(paper: merging recovers most of the Raw → Linear-Decay gap).")
    elif ld_longppl < g["Raw"]:
        closed = (g["Raw"] - g["Last4"]) / (g["Raw"] - ld_longppl)
        tail = f"Last4 closes {100 * closed:.0f}% of the Raw → Linear-Decay LongPPL gap (paper: most of it)."
    else:
        tail = "Raw is already at or below Linear-Decay on this pool, so there is no gap for merging to close."
    return bullets([head, tail])


def constant_last4_findings(paired: pd.DataFrame, ccc: pd.DataFrame, wins: pd.DataFrame, gain: pd.DataFrame,
                            heldout_label: str, res_a, scale: str, res_b, prefix_errors: pd.DataFrame) -> str:
    """Chapter 4's headline numbers: the S4 grid means of the three protocols, their CCC
    against Linear-Decay (Fig. 4b), how often Last4 beats Raw and by how much, Eq. 1 on
    Constant-Last4 (Fig. 5, Table 4) and the prefix forecasts (Fig. 6)."""
    raw, l4, ld = (paired[paired.rule == "raw"].longppl.mean(), paired[paired.rule == "last4"].longppl.mean(),
                   paired.longppl_ld.mean())
    by_scale = wins.groupby("scale")["last4_le_raw"].mean()
    lines = [f"S4 grid mean LongPPL: Constant-Raw {raw:.4f}, Constant-Last4 {l4:.4f}, Linear-Decay {ld:.4f}."]
    lines += [f"CCC vs Linear-Decay, {r.metric} Constant-{r.rule}: {r.CCC:.3f}." for _, r in ccc.iterrows()]
    lines.append(f"Constant-Last4 ≤ Constant-Raw in LongPPL on {wins['last4_le_raw'].mean():.1%} of the {len(wins)} "
                 f"S1-S4 trajectory points (by scale: " + ", ".join(f"{k} {v:.0%}" for k, v in by_scale.items()) + ").")
    lines.append(f"Eq. 1 on Constant-Last4: held-out {heldout_label} R² {res_a.r2:.3f}; {scale} trajectory R² "
                 f"{res_b.r2:.3f}, MAPE {res_b.mape:.2f}%.")
    lines += [f"Prefix {r.prefix}: MAPE {r['MAPE % (log space)']:.2f}% on the later points, final LongPPL off by "
              f"{r['LongPPL error at the end %']:+.2f}%." for _, r in prefix_errors.iterrows()]
    table = gain.round(3)
    table.columns = [f"Dl = {c:g}N" for c in table.columns]
    return (bullets(lines) + "\n\nMean relative LongPPL gain of Last4 over Raw, (Raw − Last4) / Raw, by scale and "
            "Dl/N (> 0: Last4 is better):\n\n" + table.to_markdown())



# ---------------------------------------------------------------------------------------
# Chapter 5: downstream validation
# ---------------------------------------------------------------------------------------
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


def code_needle_findings(code_needles: pd.DataFrame, probe: pd.DataFrame | None) -> str:
    """What RULER's single needles written as code (`nblib.evals.code_niah`) show: the S5
    trajectory's models at each stage (mean and best score over starting points and
    protocols), and each probe's models that copy, per format and length."""
    lines = []
    for stage, g in code_needles.dropna().groupby("stage", sort=False):
        per = g.groupby(["dl", "protocol"]).score.mean()
        best = (f"best {per.max():.1f} ({per.idxmax()[1]} from Dl/N = {per.idxmax()[0]:g})" if per.max() > 0
                else "0 from every starting point")
        lines.append(f"S5 trajectory, {stage}: the three code-format single needles average {per.mean():.1f} "
                     f"over {len(per)} models (Raw and Last4 at {g.dl.nunique()} points), {best}.")
    if probe is not None and len(probe):
        for (fmt, name), g in probe.groupby(["format", "probe"], sort=False):
            reached = g[g["single-needle mean"] > 0]
            head = (f"Probe {name!r}, {'RULER as written' if fmt == 'ruler' else 'written as code'} "
                    f"({int(g.samples.max())} prompts per subtask): ")
            lines.append(head + (
                f"above 0 on {len(reached)} of {len(g)} (model, length) rows: " + "; ".join(
                    f"{r.model} at {r['RULER length']} tokens: {r['single-needle mean']:.1f}"
                    for _, r in reached.iterrows()) if len(reached) else f"0 on all {len(g)} (model, length) rows") + ".")
    return bullets(lines)


def needle_lever_findings(levers: pd.DataFrame) -> str:
    """Chapter 5's ladder of code-needle levers in words (`downstream.needle_lever_table`): per
    model depth and form, RULER's score at its last probed point, and the teacher-forced needle
    gain and first-token hit rate from its first to its last point (Raw), and which rows answer."""
    lines = []
    t = levers.reset_index()
    for (layers, hf, kf, vf, length), g in t.groupby(["layers", "haystack_form", "key_form", "value_form", "length"],
                                                     sort=False):
        first, last = g.dl.min(), g.dl.max()
        raw = g[g.protocol == "Raw"].set_index("dl").reindex([first, last])  # NaN where a point was not probed
        l4 = g[g.protocol == "Last4"].set_index("dl").reindex([first, last])
        gain = raw["needle gain (nats/token)"]
        hit = raw["first-token hit"]
        lines.append(f"{layers} layers, haystack `{hf}`, key `{kf}`, {vf} values, {length} tokens: score {raw.loc[last, 'score']:.1f} (Raw) / "
                     f"{l4.loc[last, 'score']:.1f} (Last4) at Dl/N = {last:g}; needle gain {gain.loc[first]:+.2f} -> "
                     f"{gain.loc[last]:+.2f} nats per value token, first value token the argmax on "
                     f"{hit.loc[first]:.0%} -> {hit.loc[last]:.0%} of prompts (Raw, Dl/N = {first:g} -> {last:g})"
                     + (f"; given the true pieces before it, a value piece is the argmax on {raw.loc[last, 'value-piece hit']:.0%} "
                        f"of pieces and every piece on {raw.loc[last, 'whole-value hit']:.0%} of prompts (Raw, Dl/N = {last:g})."
                        if "value-piece hit" in raw and not np.isnan(raw.loc[last, "value-piece hit"]) else "."))
    answered = t[t.score > 0]
    lines.append("No form is answered at any point: S5 reads the needle (positive gain) but does not copy the whole "
                 "value greedily." if answered.empty else
                 f"Answered (score > 0): {len(answered)} of {len(t)} (form, point, protocol) rows.")
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


def _se(row) -> str:
    """The " ± SE" of a needle score, where the table has its binomial standard error."""
    se = row.get("score_se")
    return f" ± {se:.1f}" if se is not None and pd.notna(se) else ""


def needle_design_findings(designs: pd.DataFrame) -> str:
    """The code-form needles on chapter 2's ladder designs in words
    (`downstream.needle_design_table`): per design and form, Last4's score against its control
    and its per-piece hit rate and needle gain from the first to the last probed point, with
    Spearman rho of the hit rate against Dl where three or more points were probed, the peak
    score where it lies between the ends, and the best retrieval head (Fig. 18) where the records
    have it."""
    from scipy.stats import spearmanr

    lines = []
    t = designs.reset_index()
    if "prompts" not in t:
        t = t.assign(prompts=20)
    for (design, hf, kf, vf, n), g in t[t.protocol == "Last4"].groupby(
            ["design", "haystack_form", "key_form", "value_form", "prompts"], sort=False):
        g = g.sort_values("dl")
        first, last = g.iloc[0], g.iloc[-1]
        if len(g) == 1:  # a re-measure of one point with more prompts
            lines.append(f"Design {design}, `{hf}:{kf}` with {vf} values, Last4 at Dl/N = {last.dl:g} only, {n:g} "
                         f"prompts per needle: score {last.score:.1f}{_se(last)} (control {last.control_score:.1f}), per-piece "
                         f"hit {last.piece_hit:.2f}, needle gain {last.needle_gain:+.2f} nats per value token.")
            continue
        rho = f", rho {spearmanr(g.dl, g.piece_hit).statistic:+.2f}" if len(g) >= 3 and g.piece_hit.nunique() > 1 else ""
        top = g.loc[g.score.idxmax()]  # a score that peaks between the ends is named, not hidden
        peak = (f", peak {top.score:.1f}{_se(top)} at Dl/N = {top.dl:g}"
                if top.score > max(first.score, last.score) else "")
        lines.append(f"Design {design}, `{hf}:{kf}` with {vf} values, Last4, Dl/N = {first.dl:g} -> {last.dl:g}: "
                     f"score {first.score:.1f}{_se(first)} -> {last.score:.1f}{_se(last)} (control {first.control_score:.1f} -> "
                     f"{last.control_score:.1f}){peak}, per-piece hit {first.piece_hit:.2f} -> {last.piece_hit:.2f}{rho}, "
                     f"needle gain {first.needle_gain:+.2f} -> {last.needle_gain:+.2f} nats per value token"
                     + (f", best retrieval head {first.best_retrieval_head:.2f} -> {last.best_retrieval_head:.2f}"
                        if "best_retrieval_head" in g and g.best_retrieval_head.iloc[[0, -1]].notna().all()
                        else "") + ".")
    return bullets(lines)


def needle_ladder_findings(ladder: pd.DataFrame) -> str:
    """Chapter 5 run whole on each design's S5 trajectory in words (data/probes/toy_needle_ladder.csv,
    `nblib.probes.needle_ladder`): per design, the scores at the last point against their control,
    Last4's rank correlations, the score after the 4x extension, and which of the targets it
    meets and misses; with chapter 2's S5 LongPPL rho and chapter 3's held-out R² where joined."""
    lines = []
    for _, r in ladder.iterrows():
        met = NL.meets(r.to_dict())
        missed = [t for t, ok in met.items() if not ok]
        grid = (f"; its S5 Last4 LongPPL has rho {r['S5 Last4 rho(Dl, LongPPL)']:+.2f} against Dl and chapter 3's "
                f"held-out R² is {r['S1-S3 -> S4 R²']:.2f} / {r['S1-S4 -> S5 R²']:.2f}"
                if pd.notna(r.get("S5 Last4 rho(Dl, LongPPL)")) else "")
        lines.append(
            f"Design {r['design']} ({r['change']}): at Dl/N = {r[NL.LAST_DL]:g} the needles score "
            f"{r[NL.LAST['Raw']]:.1f} Raw and {r[NL.LAST['Last4']]:.1f} Last4 (first point {r[NL.FIRST]:.1f}, control "
            f"{r[NL.CONTROL]:.1f}); Last4's rho against Dl {r[NL.RHO_PIECE]:+.2f} (per-piece hit) and "
            f"{r[NL.RHO_GAIN]:+.2f} (needle gain); after the 4x extension at most {r[NL.EXT_BEST]:.1f}; best "
            f"retrieval head at the last point {r[NL.RETRIEVAL]:.2f}{grid}. Meets {len(met) - len(missed)} of "
            f"{len(met)} targets" + (f"; misses: {'; '.join(missed)}." if missed else "."))
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


def protocol_horizon_findings(horizon: pd.DataFrame) -> str:
    """`experiments.protocol_horizon_table` in words: per design and scale, LD - Raw and
    LD - Last4 at each Dl probed, and the first Dl where Linear-Decay is at or below Raw (the
    paper's order, Fig. 4b), or that it stays above at every one."""
    lines = []
    for (design, scale, ds), g in horizon.groupby(["design", "scale", "ds"], sort=False):
        g = g.sort_values("dl")
        at = [f"{d:g}" for d in g.dl]
        turn = g[g["LD - Raw"] <= 0]
        lines.append(f"Design {design}, {scale} from Ds = {ds:g}, Dl = {', '.join(at)}: LD - Raw "
                     + ", ".join(f"{v:+.2f}" for v in g["LD - Raw"]) + "; LD - Last4 "
                     + ", ".join(f"{v:+.2f}" for v in g["LD - Last4"])
                     + "".join(f"; LD - {c[5:]} " + ", ".join(f"{v:+.2f}" for v in g[c])
                               for c in g.columns if c.startswith("LD - Last4("))
                     + " (LongPPL; < 0: the decayed run is better). "
                     + (f"Linear-Decay is at or below Raw from Dl = {turn.dl.iloc[0]:g} on." if len(turn)
                        else "Linear-Decay stays above Raw at every Dl probed."))
    return bullets(lines)



def protocol_turn_line(horizon: pd.DataFrame, rates: dict, book: str, labels: dict | None = None) -> str:
    """Chapter 4's one line on where the toy turns: for the book's budget `book` and each other
    design of `rates` ({design: LCCP LR / short LR}), per scale, the first Dl probed from which
    Linear-Decay stays at or below Constant-Raw (§4.1's order), or that it does not by the
    last, naming any single Dl where it dipped there. `labels` names the design a record's budget
    stood for when it was written (`protocol_horizon.RECORDED_AS`), so every row carries the
    design it came from."""
    labels = labels or {}
    def where(design):
        g = horizon[horizon.design == design]
        parts = []
        for scale, s in g.groupby("scale"):
            s = s.sort_values("dl")
            below = (s["LD - Raw"] <= 0).to_numpy()
            stays = [i for i in range(len(s)) if below[i:].all()]
            if stays:
                i = stays[0]
                parts.append(f"{scale} from Dl = {s.dl.iloc[i]:g} N(S1) (LD - Raw {s['LD - Raw'].iloc[i]:+.2f})")
                continue
            dips = ", ".join(f"{d:g}" for d in s.dl[below])
            parts.append(f"{scale} not by {s.dl.max():g} N(S1) (LD - Raw {s['LD - Raw'].iloc[-1]:+.2f} there"
                         + (f"; at or below Raw at Dl = {dips} only)" if dips else ")"))
        return "; ".join(parts)

    others = [d for d in rates if d != book and d in set(horizon.design)]
    name = labels.get(book, book)
    line = (f"**Where the toy turns**: the first Dl from which Linear-Decay stays at or below Constant-Raw. On design "
            f"{name} (the {book} budget when these rows were measured; the book's grid is now "
            f"{GL.BOOK_GRID_DESIGN}; LCCP at {rates[book]:.0%} of the short LR): {where(book)}.")
    if others:
        line += " Other designs on the same short stages: " + "; ".join(
            f"{d} (LCCP at {rates[d]:.0%}): {where(d)}" for d in sorted(others, key=lambda d: (rates[d], d))) + "."
    return line


# Eq. 1's exponents and the axis each acts on (LCCP paper §3.2)
EXPONENT_AXIS = {"alpha": "N", "beta_s": "Ds", "beta_l": "Dl"}


def degenerate_fit_findings(holdout: dict) -> str:
    """Chapter 3 names a degenerate fit (App. A.5): per split, the exponents of Eq. 1 at the
    search floor (`scaling.floor_exponents`). There x^-e ~ 1 - e ln x, so the term is -a ln x
    and the offset C absorbs the rest: the fit is log-linear on that axis, not a power law, and
    what it predicts past the data on that axis is a log-linear extrapolation."""
    lines = []
    for name, res in holdout.items():
        floor = floor_exponents(res.fit)
        c = res.fit.absolute_params().get("C", float("nan"))
        if floor:
            axes = ", ".join(EXPONENT_AXIS.get(e, e) for e in floor)
            lines.append(f"{name}: **{', '.join(floor)} at the search floor {EXP_FLOOR:g}** (C = {c:.1f}): on these "
                         f"runs the fit is log-linear in {axes} (each such term is -a ln x, the offset absorbs the "
                         "rest), not a power law; its predictions past the data on that axis (Fig. 9's zero "
                         "contours) are a log-linear extrapolation.")
        else:
            lines.append(f"{name}: every exponent inside its bounds (C = {c:.2f}): a power law in N, Ds and Dl.")
    return bullets(lines)


def table3_verdict(table3: pd.DataFrame, form: str = "additive") -> str:
    """Table 3's verdict against the paper's (§3.3: the additive form extrapolates best on both
    held-out scales): per split, the best form by held-out R² here and in the paper's columns,
    and whether `form` is the best here."""
    t = table3.set_index("variant") if "variant" in table3.columns else table3
    lines = []
    for split in ("S4", "S5"):
        col, pcol = f"{split} R²", f"paper {split} R²"
        if col not in t or t[col].isna().all():
            continue
        best = t[col].idxmax()
        paper_best = t[pcol].idxmax() if pcol in t and t[pcol].notna().any() else None
        ours = t.loc[form, col] if form in t.index else float("nan")
        verdict = ("as in the paper" if best == form and paper_best == form else
                   f"the paper's best is {paper_best}" if paper_best else "")
        lines.append(f"Held out {split}: best here **{best}** (R² {t.loc[best, col]:.3f}); {form} {ours:.3f}"
                     + (f" ({verdict})." if best == form else f", so the paper's verdict that {form} is best does "
                        f"not hold at this budget on {split} ({verdict})."))
    return bullets(lines)


# ---------------------------------------------------------------------------------------
# The verdicts in words (chapters 3-4): the law's conditions, the title claim, the reversals
# ---------------------------------------------------------------------------------------
def law_conditions_findings(conditions: list[dict]) -> str:
    """The law's conditions (`law_checks.law_conditions`), one line each, met or not; a
    condition whose table this chapter does not have yet is said to be judged later."""
    lines = []
    for c in conditions:
        state = ("met" if c["passed"] else "**not met**") if c["passed"] is not None else \
            "judged in chapter 4, once the Constant runs' two seeds measure the LongPPL seed spread"
        lines.append(f"{c['condition'][0].upper() + c['condition'][1:]}: {state} ({c['words']}).")
    failed = [c for c in conditions if c["passed"] is False]
    head = ("Every condition of the law's claim judged here holds." if not failed else
            f"{len(failed)} of the law's {len(conditions)} conditions fail here, so a high held-out R² alone does "
            "not make the paper's law: the law is interior exponents over an N axis along which LongPPL falls.")
    return head + "\n\n" + bullets(lines)


def n_axis_findings(ld: pd.DataFrame, protocols: pd.DataFrame) -> str:
    """LongPPL along N judged against the LongPPL seed spread (the two seeds of the Constant
    runs, `law_checks.longppl_seed_spread`): per adjacent pair of scales, the points where the
    larger model is lower, higher, and higher beyond the spread, and how many falls are smaller
    than the spread."""
    spread = longppl_seed_spread(protocols)
    pairs = n_axis_pairs(ld, spread["max"])
    if pairs.empty:
        return "No two adjacent scales share a (Ds, Dl) point at this budget, so LongPPL's N axis is not judged."
    lines = [f"{r['pair']}: lower at {r['lower']} of {r['points']} matched (Ds, Dl) points, higher at {r['higher']}"
             + (f" (**{r['higher beyond the spread']} beyond the spread**, largest rise {r['largest rise (nats)']:.3f} "
                "nats)" if r["higher beyond the spread"] else
                f" (largest rise {r['largest rise (nats)']:.3f} nats)" if r["higher"] else "")
             + f"; {r['falls within the spread']} of its falls are smaller than the spread."
             for _, r in pairs.iterrows()]
    bad = pairs[(pairs.lower * 2 <= pairs.points) | (pairs["higher beyond the spread"] > 0)]
    head = (f"The LongPPL seed spread (the largest difference in log LongPPL between the two seeds of one Constant "
            f"run at one point, over {spread['pairs']} Raw and Last4 pairs): {spread['max']:.3f} nats (median "
            f"{spread['median']:.3f}). "
            + ("LongPPL falls with N: at every adjacent pair the larger model is lower at most points and higher at "
               "none by more than that." if bad.empty else
               f"LongPPL does **not** fall with N at {', '.join(bad.pair)}: the larger model is lower at no more than "
               "half the points, or higher somewhere by more than the spread."))
    return head + "\n\n" + bullets(lines)


def title_claim_findings(traj: pd.DataFrame, scale: str, start_dl: float = 30, unit: str = "N(S1)") -> str:
    """The paper's title claim in words (§4.2: the Constant trajectory keeps improving), from
    the trajectory table (dl, protocol, longppl): Last4 LongPPL at `start_dl` and at the last
    point, its Spearman ρ against Dl (Dl >= 10), and whether the claim holds at the book's
    target (`targets.S5_RHO`)."""
    g = traj[traj.protocol == "Last4"].sort_values("dl")
    g = g[g.dl >= 10] if (g.dl >= 10).sum() >= 3 else g  # a short budget's trajectory: every point
    if len(g) < 3:
        return f"**The title claim at this budget** is not judged: {scale}'s trajectory has {len(g)} Last4 points."
    rho = float(spearmanr(g.dl, g.longppl).statistic)
    first = g[g.dl == start_dl] if (g.dl == start_dl).any() else g.iloc[:1]
    a, b = float(first.longppl.iloc[0]), float(g.longppl.iloc[-1])
    best = g.loc[g.longppl.idxmin()]
    moves = "falls" if b < a else "rises"
    holds = rho <= T.S5_RHO and b < a
    return (f"**The title claim at this budget.** {scale}'s Constant-Last4 LongPPL {moves} from {a:.2f} at Dl = "
            f"{first.dl.iloc[0]:g} {unit} to {b:.2f} at Dl = {g.dl.iloc[-1]:g} {unit} (Spearman ρ against Dl over "
            f"Dl ≥ {g.dl.iloc[0]:g}: {rho:+.3f}; lowest {best.longppl:.2f} at Dl = {best.dl:g}). "
            + (f"It keeps improving to the end of the trajectory, as the paper's title says (the book's target ρ ≤ "
               f"{T.S5_RHO:g}): **the title claim holds here**." if holds else
               f"That misses the book's target ρ ≤ {T.S5_RHO:g}: **the title claim does not hold here**."))


def protocol_order_findings(protocols: pd.DataFrame, table12: pd.DataFrame, r_first: float, r_last: float,
                            paper_table12: dict, paper_r: tuple[float, float]) -> str:
    """Each place where the toy's protocol order differs from the paper's (§4.1, Table 12,
    App. D.1), counted from the tables: which protocol is worst at each S1-S4 point, how often
    Raw is below Last4, Table 12's Raw against Last4, and the trend of Fig. 17's ratio R."""
    w = protocols.pivot_table(index=["scale", "Ds", "Dl", "seed"], columns="protocol", values="longppl")
    pts = pd.concat([w.Raw.groupby(level=[0, 1, 2]).mean(), w.Last4.groupby(level=[0, 1, 2]).mean(),
                     w.LD.dropna().groupby(level=[0, 1, 2]).first()], axis=1).dropna()
    worst = pts.idxmax(axis=1)
    n, ld_worst = len(pts), int((worst == "LD").sum())
    pairs = w.dropna(subset=["Raw", "Last4"])
    raw_below = float((pairs.Raw < pairs.Last4).mean())
    rows = [(f"Linear-Decay is the worst of the three protocols at {ld_worst} of {n} S1-S4 points"
             + (" — **the reverse of the paper**, where a decayed run is at or below Constant-Raw (§4.1)."
                if ld_worst * 2 > n else ", as the paper's order allows."), ld_worst * 2 > n),
            (f"Constant-Raw is below Constant-Last4 on {raw_below:.0%} of {len(pairs)} (seed, point) pairs"
             + (" — **the reverse of the paper**, where averaging the last four checkpoints lowers LongPPL (§4.1)."
                if raw_below > 0.5 else ", so Last4 is at or below Raw on most pairs, as in the paper."), raw_below > 0.5)]
    t = table12.set_index("protocol") if "protocol" in table12.columns else table12
    default = [i for i in t.index if i.startswith("Last4")][0]
    raw, last4 = float(t.loc["Raw", "longppl"]), float(t.loc[default, "longppl"])
    rows.append((f"Table 12's means: Raw {raw:.3f}, {default} {last4:.3f}"
                 + (f" — **reversed** (the paper: Last4 about {paper_table12['last4']} below Raw "
                    f"{paper_table12['raw']})." if raw < last4 else
                    f", Last4 below Raw as in the paper ({paper_table12['last4']} against {paper_table12['raw']})."),
                 raw < last4))
    rows.append((f"Fig. 17's elasticity ratio R goes from {r_first:.2f} to {r_last:.2f} along the trajectory"
                 + (f" — **rising where the paper's falls** ({paper_r[0]} → {paper_r[1]})." if r_last > r_first else
                    f", falling as the paper's does ({paper_r[0]} → {paper_r[1]}).")
                 + (" Above 1 throughout: LongPPL still improves faster than ShortPPL." if min(r_first, r_last) > 1
                    else " It ends below 1: by the end ShortPPL improves faster than LongPPL, where the paper's R "
                    f"stays above 2." if r_last < 1 else ""), r_last > r_first))
    n_rev = sum(rev for _, rev in rows)
    lines = [line for line, _ in rows]
    head = (f"**Where the toy's order differs from the paper's: {n_rev} of {len(lines)} comparisons.**" if n_rev else
            f"**The toy keeps the paper's order in all {len(lines)} comparisons.**")
    return head + "\n\n" + bullets(lines)
