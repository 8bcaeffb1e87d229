"""What the Gemma blog chapters' (6-10) numbers say, as Markdown the chapter displays.

Part 2's counterpart of Part 1's findings (`nblib.chapters.part1`), with the same rule: each function turns results
computed in a run into sentences with the numbers inline and the blog's numbers beside
them; nothing here computes a result.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nblib.chapters.claims.paper_values import BLOG_ATTENTION, BLOG_POSITION_TABLE, BLOG_SLOW_WEIGHT, BLOG_YARN
from nblib.chapters.prose import bullets
from nblib.gemma.training_length import BLOG_TOKENS_PER_PARAM
from nblib.stats import paired_bootstrap

# ---------------------------------------------------------------------------------------
# Chapter 7: the KV cache and long-context FLOPs
# ---------------------------------------------------------------------------------------
def kv_cache_findings(measured: pd.DataFrame, table_7b: pd.DataFrame, flops: pd.DataFrame) -> str:
    """Chapter 7's numbers next to the Gemma blog's: cache MB at 1024 tokens, the 7B-class
    cache at 32k, and what 128k tokens cost per token under each recipe."""
    at = measured[measured.tokens == 1024].set_index("model")["measured bytes"]
    a, b = at.iloc[0], at.iloc[1]
    exact = bool((measured["measured bytes"] == measured["formula bytes"]).all())
    row32 = table_7b.set_index("tokens").loc[32768]
    f = flops.set_index("recipe")
    g128 = [c for c in flops.columns if c.startswith("GFLOPs/token at")][-1]
    lines = [
        f"KV cache per sequence at 1024 tokens, fp32: Model A {a / 1e6:.1f} MB, Model B {b / 1e6:.1f} MB, "
        f"{a / b:.1f}x smaller (blog: 75.5 MB, 11.8 MB, 6.4x). The allocated tensors "
        + ("equal the formula at every length measured." if exact else "DIFFER from the formula."),
        f"A 7B-class model at 32k tokens in bf16: {row32.iloc[0]:.1f} GB with full multi-head attention, "
        f"{row32.iloc[1]:.1f} GB with GQA-8, {row32.iloc[2]:.2f} GB with GQA-8 and windows "
        f"({row32.iloc[0] / row32.iloc[2]:.0f}x smaller; blog: 17.2, 4.3, 0.91 GB, about 19x).",
        f"At 128k tokens the 13.5B model of Model B's recipe needs {f.iloc[3][g128]:.1f} GFLOPs per token, less "
        f"than the 6.7B model of Model A's recipe ({f.iloc[0][g128]:.1f}); attention scores are "
        f"{100 * f.iloc[0].iloc[-1]:.0f}% of the latter's work (blog: 43 against 48 GFLOPs, 72%).",
    ]
    return bullets(lines)


def decode_findings(rows: pd.DataFrame) -> str:
    """Chapter 7's decode benchmark read out: Model B's decode speed over Model A's at each
    setting, ours against `transformers`, what the cache buys, and how much of the step
    time the bytes read per step explain (the memory-bound argument)."""
    a = rows[rows.model.str.startswith("A")].set_index(["batch", "prompt"])
    b = rows[rows.model.str.startswith("B")].set_index(["batch", "prompt"])
    ba = (b["decode_tok_s"] / a["decode_tok_s"]).round(2)
    ours_hf = rows["hf_generate_s"] / rows["generate_s"]
    speedup = rows["decode_tok_s"] / rows["no_cache_tok_s"]
    r = np.corrcoef(rows["mb_read_per_step"], rows["decode_ms_per_step"])[0, 1]
    lines = [
        "Model B decodes at " + ", ".join(f"{v:.2f}x" for v in ba.values) + " Model A's speed (batch, prompt = "
        + ", ".join(f"{bt}/{p}" for bt, p in ba.index) + "; blog, M1 Pro: up to 1.55x, losing only at batch 1 "
        "with a 128-token prompt; H100: B a third slower).",
        f"`generate()` end to end: `transformers` takes {ours_hf.min():.2f}x-{ours_hf.max():.2f}x the time of "
        f"ours at the same shapes (> 1: ours is faster); the greedy tokens are "
        + ("identical in every setting." if rows["same_tokens_as_transformers"].all() else "NOT identical."),
        f"The cache speeds decoding up {speedup.min():.0f}x-{speedup.max():.0f}x over recomputing the whole "
        f"sequence each step.",
        f"Across the {len(rows)} settings the MB read per step and the step time correlate with r = {r:.2f}: "
        + ("decoding here is largely memory-bound, as on the blog's Mac." if r > 0.8 else
           "the bytes read explain only part of the step time here."),
    ]
    return bullets(lines)


# ---------------------------------------------------------------------------------------
# Chapter 6: Models A and B
# ---------------------------------------------------------------------------------------
def pair_findings(final: dict, speed: pd.DataFrame, params: pd.DataFrame, budget: str) -> str:
    """Chapter 6's conclusions: the held-out loss of A and B with a paired bootstrap interval
    over windows, the training speed ratio, and the parameter counts, next to the Gemma
    blog's (tied loss, B 4% slower to train, 124.4M against 113.0M)."""
    r = paired_bootstrap(final["B"], final["A"], n_boot=2000)
    tied = r["lo"] <= 0 <= r["hi"]
    sp = speed.set_index("model")["tokens/s"]
    ratio = sp.iloc[1] / sp.iloc[0]
    a_col, b_col = f"A, {budget}", f"B, {budget}"  # chapter 6's parameter table columns
    lines = [
        f"Held-out loss after training: Model A {np.mean(final['A']):.3f}, Model B {np.mean(final['B']):.3f} "
        f"nats/token; B - A = {r['diff']:+.3f} (95% interval {r['lo']:+.3f} to {r['hi']:+.3f} over {r['n']} "
        "windows): " + ("the two tie, as in the blog." if tied else
                        f"Model {'B' if r['diff'] < 0 else 'A'} is better at this budget; the blog's models tied."),
        f"Training speed on this machine: Model B {sp.iloc[1]:,.0f} tokens/s against Model A's {sp.iloc[0]:,.0f} "
        f"({ratio:.2f}x; blog: B 4% slower, 0.96x, on GPUs).",
        f"Parameters at this budget: A {params.loc['total', a_col]:,} ({params.loc['non-embedding', a_col]:,} "
        f"non-embedding), B {params.loc['total', b_col]:,} ({params.loc['non-embedding', b_col]:,}); the blog's: "
        f"{params.loc['total'].iloc[0]:,} and {params.loc['total'].iloc[1]:,}.",
    ]
    return bullets(lines)


def gap_trend_findings(gaps: pd.DataFrame, trend: dict, ratio: pd.Series, budget: str) -> str:
    """Chapter 6's training-length conclusions: B - A at each length with its interval, the
    direction of the trend, the fitted line's value at the blog's tokens per parameter (where
    the blog's models tie) with its bootstrap and prediction intervals, and how many times
    B's tokens Model A needs for B's loss."""
    pts = "; ".join(f"{x:.3g}: {r['B - A']:+.3f} [{r['95% lo']:+.3f}, {r['95% hi']:+.3f}]" for x, r in gaps.iterrows())
    covers = [f"{x:.3g}" for x, r in gaps.iterrows() if r["95% lo"] <= 0 <= r["95% hi"]]
    g = gaps["B - A"].to_numpy()
    toward = np.sign(trend["slope"]) == -np.sign(g[-1]) and trend["slope"] != 0
    at = trend["target"]
    holds = trend["lo"] <= 0 <= trend["hi"]
    lines = [
        f"B - A (nats/token, 95% interval) by training tokens per parameter at {budget}: {pts}.",
        ("The interval covers 0 at " + ", ".join(covers) + " tokens per parameter: the pair ties there."
         if covers else "No training length here gives an interval that covers 0: the models do not tie at any "
         "of these lengths."),
        f"Trend: B - A = {trend['intercept']:+.3f} {trend['slope']:+.3f} ln(D/N) over {trend['n_points']} lengths; "
        + (f"the gap shrinks toward 0 as training gets longer, and the line reaches 0 at about {trend['zero_at']:.0f} "
           f"tokens per parameter (bootstrap 95%: {trend['zero_lo']:.0f} to "
           + ("beyond any finite length" if not np.isfinite(trend['zero_hi']) else f"{trend['zero_hi']:.0f}") + ")."
           if toward and np.isfinite(trend["zero_at"]) else
           "the gap does not shrink with training length over this range."),
        f"Extrapolated to the blog's {at:.0f} tokens per parameter: B - A = {trend['at_target']:+.3f} (bootstrap 95% "
        f"{trend['lo']:+.3f} to {trend['hi']:+.3f}, windows resampled); " + ("consistent with the blog's tie."
        if holds else "the blog's tie lies outside this interval.") + " With the lengths' own scatter about the line "
        f"(residual SD {trend['residual_sd']:.3f} nats, {trend['n_points'] - 2} degrees of freedom) the 95% prediction "
        f"interval is {trend['pred_lo']:+.3f} to {trend['pred_hi']:+.3f}, "
        + ("which covers 0: these lengths cannot tell a tie at 79 from a gap." if trend["pred_lo"] <= 0 <= trend["pred_hi"]
           else "which excludes 0.") + " Neither interval covers a change of shape past the last point.",
        "In tokens rather than nats: Model A needs " + "; ".join(
            f"{v:.2f}x B's tokens to reach B's loss at {x:.3g}" for x, v in ratio.dropna().items())
        + " tokens per parameter. " + ("A ratio that stays put means a loss gap that shrinks as both curves flatten, "
                                        "as they do toward the blog's 79." if ratio.dropna().nunique() > 1 and
                                       abs(np.log(ratio.dropna().iloc[-1] / ratio.dropna().iloc[0])) < np.log(1.25) else
                                       "The ratio moves with training length, so no constant exchange rate carries to 79."),
    ]
    return bullets(lines)


# ---------------------------------------------------------------------------------------
# Chapter 8: position
# ---------------------------------------------------------------------------------------
def position_findings(counts: pd.DataFrame, slow: pd.DataFrame, slow_untrained: pd.DataFrame, even: float,
                      picks: dict, check: dict, stats: pd.DataFrame, global_layers) -> str:
    """Chapter 8's conclusions next to the Gemma blog's: band groups, slow-band weight of the
    trained heads against an even spread and an untrained control, the exactness of the band
    decomposition, and Model A's learned table against a random one and RoPE."""
    blog_row, here = counts.iloc[0], counts.iloc[1]
    w, w0 = slow["slow_weight"], slow_untrained["slow_weight"]
    bw = BLOG_SLOW_WEIGHT
    a, rnd, rope = stats.iloc[0], stats.iloc[1], stats.iloc[2]
    bp = BLOG_POSITION_TABLE
    at = [c for c in stats.columns if c.startswith("similarity at ") and "last" not in c][0]
    neg = a["first distance with similarity < 0"]
    lines = [
        f"Clocks: with the blog's heads and context the rule gives {blog_row['fast']} fast, {blog_row['middle']} "
        f"middle and {blog_row['slow']} slow bands, {blog_row['complete a turn']} of {blog_row['bands']} completing "
        f"a turn (blog: 6 / 12 / 14, 18 of 32). This budget's Model B ({here.name}) has {here['fast']} / "
        f"{here['middle']} / {here['slow']}: its context is shorter, so more of its bands never turn.",
        f"Slow-band weight of the trained Model B's {len(w)} heads: median {w.median():.0%} against an even "
        f"spread of {even:.0%} ({here['slow']} slow of {here['bands']} bands at this budget) (blog: "
        f"{bw['median']:.0%} against {bw['even']:.0%}, 14 of 32 bands); range {w.min():.0%}-"
        f"{w.max():.0%} (blog: {bw['min']:.0%}-{bw['max']:.0%}); {(w > 0.75).sum()} heads above 75% (blog: "
        f"{bw['above_75pct']} of 144). The untrained control's median is {w0.median():.0%} (range "
        f"{w0.min():.0%}-{w0.max():.0%}), so " + (
            "training moved the weight toward the slow bands, as the blog finds."
            if w.median() > w0.max() else
            "training moved the median toward the slow bands, within the spread random weights already have."
            if w.median() > w0.median() else
            "training did NOT move the weight toward the slow bands at this budget, unlike the blog's model."),
        "By layer kind: the heads of the global layers ("
        + ", ".join(str(x) for x in global_layers) + f") have a median slow-band weight of "
        f"{w[slow['layer'].isin(global_layers)].median():.0%}, the local layers' "
        f"{w[~slow['layer'].isin(global_layers)].median():.0%}: only the global layers see distances at which the "
        "slow bands turn appreciably, and they lean on them.",
        "The band decomposition is exact: for the three heads ("
        + ", ".join(f"{k}: layer {int(r['layer'])} head {int(r['head'])}, {r['slow_weight']:.0%}" for k, r in picks.items())
        + f") the bands' sum differs from the directly computed mean score by at most {max(check.values()):.1e}.",
        f"Model A's position table: distance explains R² = {a['R2 (m != n)']:.2f} of its similarity off the "
        f"diagonal ({a['R2 (with diagonal)']:.2f} with it; a random table of the same shape: "
        f"{rnd['R2 (m != n)']:.2f} and {rnd['R2 (with diagonal)']:.2f}; blog: {bp['r2']}). Mean {at}: "
        f"{a[at]:.2f} (blog at 10: {bp['sim_at_10']}); RoPE's equal-weight curve for this budget's heads: "
        f"{rope[at]:.2f} (blog: {bp['rope_sim_at_10']} with 32 bands). "
        + (f"The similarity turns negative at distance {int(neg)} (blog: by {bp['negative_by']} of 1024)."
           if neg is not None and not pd.isna(neg) else "The mean similarity stays positive at every distance "
           f"(blog: negative by {bp['negative_by']} of 1024)."),
    ]
    return bullets(lines)


# ---------------------------------------------------------------------------------------
# Chapter 9: YaRN
# ---------------------------------------------------------------------------------------
def rope_breakdown_findings(breakdown: pd.DataFrame, intervals: pd.DataFrame, s: int, bar: float = 1.5) -> str:
    """Chapter 9's all-global control next to the blog: for Model B and its all-global
    variant, plain RoPE's page perplexity at sL and 2sL against L (the blog: 20.6 -> 37.7,
    1.83x), whether that is a breakdown (>= `bar` x), and what zero-shot YaRN and the
    fine-tune recover of the rise, with their intervals."""
    blog = BLOG_YARN["page"]["plain RoPE"] / BLOG_YARN["first L"]["plain RoPE"]
    lines = []
    for fam in dict.fromkeys(intervals.index.get_level_values("model")):
        row = breakdown.loc[f"{fam}: plain RoPE"]
        r1, r2 = row[f"ppl {s}L / ppl L"], row[f"ppl {2 * s}L / ppl L"]
        iv = intervals.loc[(fam, f"{s}L")]
        rise, rec = iv.iloc[0], iv.iloc[1]
        text = (f"**{fam}**, plain RoPE: page perplexity {row['ppl at 1L']:.2f} at L, {row[f'ppl at {s}L']:.2f} at {s}L "
                f"({r1:.2f}x) and {row[f'ppl at {2 * s}L']:.2f} at {2 * s}L ({r2:.2f}x); "
                + (f"it breaks past L (>= {bar:g}x at {s}L). " if r1 >= bar else f"no breakdown at {s}L (below {bar:g}x). ")
                + f"The rise at {s}L is {rise['nats/token']:+.3f} nats/token [{rise['95% lo']:+.3f}, {rise['95% hi']:+.3f}]; "
                f"zero-shot YaRN x{s} recovers {rec['nats/token']:+.3f} [{rec['95% lo']:+.3f}, {rec['95% hi']:+.3f}]"
                + (f", {rec['share of the rise']:.0%} of it" if rise["nats/token"] > 0 else ""))
        if len(iv) > 2:
            ft = iv.iloc[2]
            text += f", and the fine-tune {ft['nats/token']:+.3f} [{ft['95% lo']:+.3f}, {ft['95% hi']:+.3f}] more"
        lines.append(text + ".")
    lines.append(f"The blog's Model B: {BLOG_YARN['first L']['plain RoPE']} at L and {BLOG_YARN['page']['plain RoPE']} "
                 f"at 4L ({blog:.2f}x); zero-shot YaRN {BLOG_YARN['page']['zero-shot YaRN']}, fine-tuned "
                 f"{BLOG_YARN['page']['YaRN fine-tuned']}.")
    return bullets(lines)


def breakdown_length_findings(table: pd.DataFrame, trend: dict, s: int) -> str:
    """Chapter 9's breakdown against training length: plain RoPE's ratio ppl(sL)/ppl(L) of
    Model B and the all-global control at each length with intervals, whether it rises with
    training, and where a line through the control's points would reach `trend["bar"]`."""
    names = {"B": "Model B", "B-global": "The all-global control"}
    lines = []
    for key in dict.fromkeys(table.index.get_level_values("model")):
        t = table.xs((key, f"{s}L"), level=("model", "page"))
        pts = "; ".join(f"{x:.2f} tokens/param {r['ratio']:.2f}x [{np.exp(r['95% lo']):.2f}, {np.exp(r['95% hi']):.2f}]"
                        for x, r in t.iterrows())
        rises = t["ratio"].to_numpy()
        trend_word = ("rises with every longer budget" if np.all(np.diff(rises) > 0) else
                      "falls with every longer budget" if np.all(np.diff(rises) < 0) else "does not move one way")
        lines.append(f"{names.get(key, key)}, plain RoPE at {s}L over L: {pts}. The ratio {trend_word}.")
    bar, at = trend["bar"], trend["reached_at"]
    if at <= trend["measured_max"]:
        lines.append(f"The control reaches {bar:g}x at {s}L within the measured range, at {at:.2f} tokens per parameter.")
    elif np.isfinite(at):
        lines.append(f"A line in ln(D/N) through the control's {trend['n_points']} points (slope {trend['slope']:+.3f} "
                     f"nats per e-fold, residual SD {trend['residual_sd']:.3f}) reaches {bar:g}x at about {at:.1f} "
                     f"tokens per parameter, {at / trend['measured_max']:.1f}x the longest budget measured; the blog "
                     f"trains at about {BLOG_TOKENS_PER_PARAM:.0f}. This is an extrapolation from few points, not a "
                     "measurement.")
    else:
        lines.append(f"The control's ratio does not rise with training length (slope {trend['slope']:+.3f} nats per "
                     f"e-fold), so no training length within this trend reaches {bar:g}x at {s}L.")
    return bullets(lines)


def _passkey_needs(pk: pd.Series) -> str:
    """What the repeated-prefix rows say about the passkey task (chapter 9)."""
    task = {k: v for k, v in pk.items() if "repeated prefix" not in k[0]}
    copy = {(m.replace(", repeated prefix", ""), n): v for (m, n), v in pk.items() if "repeated prefix" in m}
    pairs = [(k, task[k], v) for k, v in copy.items() if k in task]
    if not pairs:
        return "No repeated-prefix control was run."
    text = "With the needle's own prefix repeated (a pure copy), accuracy is " + "; ".join(
        f"{m} at {n} tokens {c:.0%} (task: {t:.0%})" for (m, n), t, c in pairs) + ". "
    best_gap = max(c - t for _, t, c in pairs)
    if best_gap >= 0.25:
        return text + ("The models copy the digits when the prompt repeats the needle's prefix, but do not map the "
                       "question onto it: what a toy model lacks for the passkey task is the question format, "
                       "not the copying.")
    if max(c for _, _, c in pairs) < 0.25:
        return text + ("The models fail even the pure copy of five digits from inside a long file: at this budget "
                       "they do not copy an arbitrary digit string on one repeated prefix, so a passkey is out of "
                       "reach before its format matters.")
    return text + "The repeated prefix helps little: copying and format fail together."


def yarn_findings(ppl: pd.DataFrame, by_pos: pd.DataFrame, intervals: pd.DataFrame, snaps: pd.DataFrame,
                  whole_vs_window: pd.DataFrame, passkey: pd.DataFrame, L: int, sL: int, budget: str) -> str:
    """Chapter 9's conclusions next to the Gemma blog's: the breakdown of plain RoPE past L,
    what zero-shot YaRN holds and costs, what the fine-tune recovers and how fast, and the
    two checks the blog did not run (whole page against last L; passkey retrieval)."""
    by = BLOG_YARN
    iv = intervals.set_index("difference")
    cols = list(by_pos.index)
    inside, far = cols[1], cols[-1]  # (L/2..L) and (2L..sL)

    def ci(row):
        r = iv.iloc[row]
        return f"{r['a - b']:+.2f} [{r['95% lo']:+.2f}, {r['95% hi']:+.2f}]"

    rise = by_pos.loc[far, "plain RoPE"] - by_pos.loc[inside, "plain RoPE"]
    held = by_pos.loc[far, "zero-shot YaRN"] - by_pos.loc[inside, "zero-shot YaRN"]
    gain = snaps["whole page"].iloc[0] - snaps["whole page"]
    first = gain.iloc[1] / gain.iloc[-1] if len(gain) > 1 and gain.iloc[-1] > 0 else float("nan")
    wv = whole_vs_window
    pk = passkey["all depths"]
    lines = [
        f"Plain RoPE past L: its loss per position goes from {by_pos.loc[inside, 'plain RoPE']:.2f} (positions "
        f"{inside}) to {by_pos.loc[far, 'plain RoPE']:.2f} ({far}), {rise:+.2f} nats; the whole {sL}-token page "
        f"reads at perplexity {ppl.loc[sL, 'plain RoPE']:.1f} (blog: {by['loss_jump'][0]} to {by['loss_jump'][1]}, "
        f"page {by['page']['plain RoPE']}). " + ("Plain RoPE breaks down past L, as in the blog."
                                                 if rise > 0.05 else
                                                 "Plain RoPE does NOT break down here: later positions of these files "
                                                 "are easier, and the model reads past L without collapsing. Three of "
                                                 "every four layers are local and never see a distance past W, and the "
                                                 "global layers' heads weigh bands that do not complete a turn even at "
                                                 "sL (chapter 8); a probe with the RoPE base at 2,500 instead of 1e4 "
                                                 "did not break down either (chapter 6's probe table). The cost of the "
                                                 "far context shows only in the whole-page check below."),
        f"Zero-shot YaRN: page perplexity {ppl.loc[sL, 'zero-shot YaRN']:.1f}, plain minus zero-shot {ci(0)} "
        f"(blog: {by['page']['zero-shot YaRN']}, {by['plain_minus_zero'][0]} [{by['plain_minus_zero'][1]}, "
        f"{by['plain_minus_zero'][2]}]); its loss past 2L differs from its loss at {inside} by {held:+.2f} nats "
        + ("(it holds: no rise past L)." if held <= 0.05 else "(it rises past L).")
        + f" At L it costs {ci(2)} perplexity against plain RoPE (blog: {by['first L']['plain RoPE']} -> "
        f"{by['first L']['zero-shot YaRN']}).",
        f"Fine-tuned ({int(snaps.step.iloc[-1])} steps): page perplexity {ppl.loc[sL, 'YaRN fine-tuned']:.1f}, "
        f"zero-shot minus fine-tuned {ci(1)} (blog: {by['page']['YaRN fine-tuned']}, {by['zero_minus_ft'][0]} "
        f"[{by['zero_minus_ft'][1]}, {by['zero_minus_ft'][2]}]); at L, fine-tuned minus plain RoPE {ci(3)} (blog: "
        f"{by['first L']['YaRN fine-tuned']} against {by['first L']['plain RoPE']}). The first snapshot (step "
        f"{int(snaps.step.iloc[1]) if len(snaps) > 1 else 0}) has {first:.0%} of the final gain (blog: "
        f"{by['gain_share_after_first_snapshot']:.0%} after 25 of 200 steps).",
        "Whole page against the last L tokens only (the blog's unrun check), gain in nats/token with 95% "
        "intervals: " + "; ".join(f"{k} {r['gain']:+.3f} [{r['95% lo']:+.3f}, {r['95% hi']:+.3f}]"
                                  for k, r in wv.iterrows())
        + ". A gain above zero means context beyond L helps; the fine-tuned model "
        + ("does use it." if wv.loc["YaRN fine-tuned", "95% lo"] > 0 else "shows no such use at this budget."),
        "Passkey retrieval (the other unrun check), accuracy over all depths: "
        + "; ".join(f"{m} at {n} tokens {v:.0%}" for (m, n), v in pk.items() if "repeated prefix" not in m) + ".",
        _passkey_needs(pk),
    ]
    return bullets(lines)


def extension_control_findings(zero_shot: pd.DataFrame, intervals: pd.DataFrame, L: int, sL: int) -> str:
    """Chapter 9's controls of the extension: the two zero-shot ways (YaRN on every layer, the
    blog's; linear interpolation on the global layers only, Gemma 3's), the all-global control
    read on the same pages, and the YaRN fine-tune against plain Model B continued at L for the
    same steps and tokens, inside L and past it (rows of `nblib.gemma.extension`'s comparisons)."""
    iv = intervals.set_index("difference")

    def ci(row, digits=2):
        r = iv.loc[row]
        return f"{r['a - b']:+.{digits}f} [{r['95% lo']:+.{digits}f}, {r['95% hi']:+.{digits}f}]"

    def sign(row):
        r = iv.loc[row]
        return "above" if r["95% lo"] > 0 else "below" if r["95% hi"] < 0 else "within noise of"

    zs = zero_shot["ppl, whole page"]
    yarn, pi = "zero-shot YaRN, every layer", "zero-shot linear PI, global layers"
    ctl_plain, ctl_yarn = "all-global control: plain RoPE", "all-global control: zero-shot YaRN"
    cont = "plain continued"
    lines = [
        f"Zero-shot, two ways, on the whole {sL}-token page: YaRN on every layer (the blog's choice) "
        f"{zs[yarn]:.2f}, linear interpolation on the global layers only (Gemma 3's) {zs[pi]:.2f}, plain RoPE "
        f"{zs['plain RoPE']:.2f}. Plain minus linear PI {ci('plain RoPE - zero-shot linear PI (global layers), whole page')}; "
        f"linear PI minus YaRN {ci('zero-shot linear PI (global layers) - zero-shot YaRN, whole page')}, so Gemma 3's "
        f"way is {sign('zero-shot linear PI (global layers) - zero-shot YaRN, whole page').replace('above', 'worse than').replace('below', 'better than')} "
        f"the blog's here. Inside L, linear PI minus plain RoPE "
        f"{ci('zero-shot linear PI (global layers) - plain RoPE, first L (the short-context cost)')} (YaRN minus plain "
        f"RoPE: {ci('zero-shot YaRN - plain RoPE, first L (the short-context cost)')}); its local layers keep plain "
        "RoPE. The blog ran only YaRN.",
        f"The all-global control on the same pages: plain RoPE {zs[ctl_plain]:.2f} "
        f"({zero_shot.loc[ctl_plain, 'whole page / first L']:.2f}x its first L), zero-shot YaRN {zs[ctl_yarn]:.2f}; "
        f"plain minus YaRN {ci('all-global control: plain RoPE - zero-shot YaRN, whole page')} against Model B's "
        f"{ci('plain RoPE - zero-shot YaRN, whole page')}.",
        f"The fine-tune against its control ({cont}: Model B continued at L = {L} with plain RoPE for the same steps "
        f"and tokens), {cont} minus fine-tuned: whole page {ci(f'{cont} - fine-tuned, whole page')}, first L/4 "
        f"{ci(f'{cont} - fine-tuned, first L/4')}, first L {ci(f'{cont} - fine-tuned, first L')}, past L "
        f"{ci(f'{cont} - fine-tuned, past L')}. Against zero-shot YaRN: first L/4 "
        f"{ci('zero-shot YaRN - fine-tuned, first L/4')}, first L {ci('zero-shot YaRN - fine-tuned, first L')}, past L "
        f"{ci('zero-shot YaRN - fine-tuned, past L')}. More training alone ({cont} minus plain RoPE, first L): "
        f"{ci(f'{cont} - plain RoPE, first L (more training alone)')}.",
        "Inside L the fine-tune is " + {
            "above": "better than its control, so part of its short-range gain comes with the extension's training "
                     "on long openings, not from more steps alone.",
            "below": "worse than its control: the same steps of plain training do more for short contexts than the "
                     "YaRN fine-tune.",
            "within noise of": "within noise of its control: its gain inside L is what the same steps of plain "
                               "training give, not the extension."}[sign(f"{cont} - fine-tuned, first L")]
        + " Past L it is " + {
            "above": "better than its control, which is plain RoPE there: the extension's gain.",
            "below": "worse than its control past L.",
            "within noise of": "within noise of its control past L: the extension adds nothing measurable there."}[
            sign(f"{cont} - fine-tuned, past L")],
    ]
    return bullets(lines)


# ---------------------------------------------------------------------------------------
# Chapter 10: attention
# ---------------------------------------------------------------------------------------
def sink_trend_findings(sinks: pd.DataFrame, fmt: pd.Series, names: dict) -> str:
    """Chapter 10's sink check: the training format against the blog's, and the largest
    layer-mean sink shares of each model at each training length, next to the blog's."""
    ba = BLOG_ATTENTION
    lines = [f"Training format: {fmt['separator']}; windows cut across documents: "
             f"{'yes' if fmt['windows cut across documents'] else 'no'}; attention crosses documents: "
             f"{'yes' if fmt['attention crosses documents'] else 'no'} (blog: one <|endoftext|> per page, packed, "
             f"no mask). {fmt['windows with a separator']:.0%} of training windows hold a separator "
             f"({fmt['separators per window']:.2f} per window; median document {fmt['median document (tokens)']:.0f} "
             f"tokens against L = {fmt['training context L']})."]
    for key in ("A", "B"):
        g = sinks[sinks.model == names[key]].sort_values("tokens per parameter")
        first, sep = g["first position, max layer"].to_numpy(), g["separator, max layer"].to_numpy()
        x = g["tokens per parameter"].to_numpy()
        trend = "rise" if sep[-1] > sep[0] and first[-1] >= first[0] else (
            "fall" if sep[-1] < sep[0] and first[-1] <= first[0] else "move in opposite directions")
        lines.append(
            f"{names[key]}: first position {first[0]:.1%} -> {first[-1]:.1%}, separators {sep[0]:.1%} -> "
            f"{sep[-1]:.1%} of a layer from {x[0]:.3g} to {x[-1]:.3g} tokens per parameter (both {trend}); blog at 79: "
            f"{ba['first_position_max'][key]:.0%} and {ba['separator_max'][key]:.0%}.")
    return bullets(lines)


def _distance_text(distance: pd.DataFrame | None, mean: pd.DataFrame, a: str, b: str, L: int) -> str:
    """The attention-distance sentence: from chapter 10's `attention_distance` table (means with
    window-bootstrap intervals, the ratio A / B, and the reading with sinks excluded) when given,
    else from the per-layer means."""
    ba = BLOG_ATTENTION
    blog = (f"(blog, 1024-token windows: {ba['distance']['A']} and {ba['distance']['B']}, ratio "
            f"{ba['distance']['A'] / ba['distance']['B']:.2f})")
    if distance is None:
        return (f"Attention distance on held-out text (queries in the second half of {L}-token windows): {a} "
                f"{mean.loc[a, 'distance']:.0f} tokens, {b} {mean.loc[b, 'distance']:.0f} on average over layers {blog}.")
    out = []
    for i, (measure, g) in enumerate(distance.groupby("measure", sort=False)):
        t = g.set_index("model")
        r = t.loc["ratio A / B"]
        tie = r["95% lo"] <= 1 <= r["95% hi"]
        iv = ", ".join(f"{m} {t.loc[m, 'mean']:.1f} [{t.loc[m, '95% lo']:.1f}, {t.loc[m, '95% hi']:.1f}]" for m in (a, b))
        text = (f"{iv} tokens; A / B {r['mean']:.2f} [{r['95% lo']:.2f}, {r['95% hi']:.2f}]"
                + (" (the interval holds 1: no difference at this budget)" if tie else
                   " (A looks further back, as in the blog)" if r["95% lo"] > 1 else " (B looks further back)"))
        out.append((f"Attention distance on held-out text (queries in the second half of "
                    f"{int(g['windows'].iloc[0])} windows of {L} tokens taken as they come; 95% intervals "
                    "resample the windows): " if i == 0
                    else "With the sinks dropped (the attention on position 0 and on separators, the rest "
                         "renormalised): ") + text + (f" {blog}." if i == 0 else "."))
    return " ".join(out)


def attention_findings(by_layer: pd.DataFrame, induction: pd.DataFrame, ablation: pd.DataFrame, kl: dict,
                       names: dict, L: int, W: int, global_layers=(), distance: pd.DataFrame | None = None) -> str:
    """Chapter 10's conclusions next to the Gemma blog's: attention distance (with intervals
    when chapter 10's `attention_distance` table is given), sinks, induction inside and beyond
    Model B's window, the ablation, and KL(A||B)."""
    ba = BLOG_ATTENTION
    mean = by_layer.groupby(level="model").mean()
    mx = by_layer.groupby(level="model").max()
    a, b = names["A"], names["B"]
    ind = induction.set_index(["model", "distance"])
    d_in, d_out = sorted(induction.distance.unique())

    def ind_text(m, d):
        r = ind.loc[(m, d)]
        return f"best {r['best score']:.2f} ({r['best head']}), repeat loss {r['loss, repeat']:.1f}"

    abl = ablation.set_index(["model", "ablated"])
    col = f"repeat loss @{d_in}"

    def abl_text(m):
        base, ind_, prev, ctl = (abl.loc[(m, k)] for k in ("none", "induction heads", "previous-token heads",
                                                           "lowest on both (control)"))
        return (f"{m}: zeroing its induction heads ({ind_['heads']}) moves the repeat loss at {d_in} from "
                f"{base[col]:.2f} to {ind_[col]:.2f} nats, its previous-token heads ({prev['heads']}) to "
                f"{prev[col]:.2f}, the control ({ctl['heads']}) to {ctl[col]:.2f}; held-out loss "
                f"{base['held-out loss']:.3f} -> {ind_['held-out loss']:.3f} / {prev['held-out loss']:.3f} / "
                f"{ctl['held-out loss']:.3f}")

    first = induction["loss, first copy"].mean()
    lines = [
        _distance_text(distance, mean, a, b, L),
        f"Sinks: the first position takes up to {mx.loc[a, 'first_position']:.0%} of a layer's attention in {a} "
        f"and {mx.loc[b, 'first_position']:.0%} in {b} (blog: {ba['first_position_max']['A']:.0%}, "
        f"{ba['first_position_max']['B']:.0%}); separators up to {mx.loc[a, 'separator']:.0%} and "
        f"{mx.loc[b, 'separator']:.0%} (blog: {ba['separator_max']['A']:.0%}, {ba['separator_max']['B']:.0%}).",
        f"Induction with the repeat {d_in} tokens back (inside B's window W={W}): {a} {ind_text(a, d_in)}; {b} "
        f"{ind_text(b, d_in)}. At {d_out} tokens back (beyond the window): {a} {ind_text(a, d_out)}; {b} "
        f"{ind_text(b, d_out)}. The unseen first copy costs {first:.1f} nats (blog at 256 / 768 of 1024: A 0.93 / "
        f"0.90 with repeat loss 1.6 / 3.0, B 0.90 / 0.05 with 6.1 / 12.3, first copy 13.3).",
        _where_b_copies(ind.loc[(b, d_in), "best head"], ind.loc[(b, d_out), "loss, repeat"], first, global_layers),
        abl_text(a) + ". " + abl_text(b) + ".",
        f"Token-level KL(A||B) over {kl['tokens']:,} held-out tokens: mean {kl['mean']:.2f}, median "
        f"{kl['median']:.2f} nats, {kl['share > 1 nat']:.0%} above 1 nat, {kl['share > 3 nats']:.1%} above 3 (blog: "
        f"{ba['kl']['mean']}, {ba['kl']['median']}, {ba['kl']['share > 1 nat']:.0%}, {ba['kl']['share > 3 nats']:.1%}). "
        f"Mean loss A {kl['loss A']:.2f}, B {kl['loss B']:.2f} (blog: 2.98, 2.97); in the strongest 5% of "
        f"disagreements B has the lower loss on {kl['B lower loss in the tail']:.0%} (blog, top 1,000: 59%).",
    ]
    return bullets(lines)


def _where_b_copies(best_head: str, repeat_beyond: float, first: float, global_layers) -> str:
    """Where Model B's strongest induction head sits, and what that means past its window."""
    layer = int(best_head.split(",")[0].split()[-1])
    if layer in global_layers:
        return (f"Model B's strongest induction head ({best_head}) sits in a global layer, so B still copies past "
                f"its window (repeat loss {repeat_beyond:.1f} against {first:.1f} for the first copy). This is where "
                "the toy differs from the blog, whose Model B keeps its strongest induction head in a local layer "
                "and loses copying past the window.")
    return (f"Model B's strongest induction head ({best_head}) sits in a local layer, as in the blog: past its window "
            f"the repeat costs {repeat_beyond:.1f} nats against {first:.1f} for the first copy.")
