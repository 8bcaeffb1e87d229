"""The Gemma blog's claims on the scorecard (chapters 6-10): each claim, the blog's number,
how the toy's number is read from a build's saved tables, and the rule that judges it: for
most, half the blog's effect (`targets.BLOG_FRACTION`).
"""

from __future__ import annotations

from nblib.budgets import targets as T
from nblib.chapters.claims.claim import NOT_MEASURED, Claim, Figures, Measure, Rule
from nblib.chapters.claims.paper_values import BLOG_ATTENTION, BLOG_SLOW_WEIGHT, BLOG_YARN


def _pair_tie(f: Figures) -> Measure:
    t = f.csv("06_models_ab", "gap_by_training_length")
    if t is None:
        return NOT_MEASURED
    r = t.sort_values("fraction").iloc[-1]
    worst = max(abs(r["95% lo"]), abs(r["95% hi"]))
    return Measure(float(worst), f"B − A {r['B - A']:+.3f} nats [{r['95% lo']:+.3f}, {r['95% hi']:+.3f}]")


def _kv_formula(f: Figures) -> Measure:
    t = f.csv("07_kv_cache", "kv_cache_bytes")
    if t is None:
        return NOT_MEASURED
    rel = float((abs(t["measured bytes"] - t["formula bytes"]) / t["formula bytes"]).max())
    return Measure(rel, f"largest |measured − formula| / formula {rel:.2g} over {len(t)} rows")


def _slow_bands(f: Figures) -> Measure:
    w, groups = f.csv("08_position", "band_weights"), f.csv("08_position", "band_groups")
    if w is None or groups is None:
        return NOT_MEASURED
    per_head = w[w.group == "slow"].groupby(["layer", "head"]).share.sum()
    toy = groups[~groups.row.str.startswith("blog")].iloc[-1]
    even = toy.slow / toy.bands
    med = float(per_head.median())
    shown = (f"median slow-band share {med:.2f} against {even:.2f} for an even spread ({int(toy.slow)} slow of "
             f"{int(toy.bands)} bands at toy; the blog: 14 of 32)")
    control = f.csv("08_position", "band_control")
    floor = even
    if control is not None and "median slow share" in control:  # what an untrained model already gives
        untrained = float(control["median slow share"].iloc[0])
        floor = max(even, untrained)
        shown += f"; untrained control {untrained:.2f}; excess over the higher of the two {med - floor:+.3f}"
    return Measure(med - floor, shown)


def _yarn(f: Figures, row: str) -> Measure:
    t = f.csv("09_yarn", "yarn_intervals")
    if t is None:
        return NOT_MEASURED
    r = t[t.difference.str.startswith(row)]
    if r.empty:
        return NOT_MEASURED
    r = r.iloc[0]
    rel = float(r["a - b"] / r["ppl a"])
    return Measure(rel, f"relative drop {rel:+.3f} ({r['ppl a']:.2f} → {r['ppl b']:.2f} perplexity; "
                        f"{r['a - b']:+.2f} [{r['95% lo']:+.2f}, {r['95% hi']:+.2f}])")


def _distance(f: Figures) -> Measure:
    iv = f.csv("10_attention", "attention_distance")
    if iv is not None and "ratio A / B" in set(iv.model):
        r = iv[(iv.model == "ratio A / B") & (iv.measure == iv.measure.iloc[0])].iloc[0]
        ab = iv[(iv.model != "ratio A / B") & (iv.measure == r.measure)].set_index("model")["mean"]
        noise = "within noise" if r["95% lo"] <= 1 <= r["95% hi"] else None  # the interval holds a tie
        return Measure(float(r["mean"]), f"A / B {r['mean']:.2f} [{r['95% lo']:.2f}, {r['95% hi']:.2f}] ("
                       + ", ".join(f"{m.split(' (')[0]} {v:.1f}" for m, v in ab.items()) + f" tokens, {r.measure})",
                       noise)
    t = f.csv("10_attention", "head_measures")
    if t is None:
        return NOT_MEASURED
    m = t.groupby("model").distance.mean()
    a = m[[k for k in m.index if k.startswith("Model A")]].iloc[0]
    b = m[[k for k in m.index if k.startswith("Model B")]].iloc[0]
    return Measure(float(a / b), f"A {a:.0f}, B {b:.0f} tokens back on average (no interval)")


def _induction_far(f: Figures) -> Measure:
    t = f.csv("10_attention", "induction_scores")
    if t is None:
        return NOT_MEASURED
    far = t[t.distance == t.distance.max()]
    best = far.groupby("model").score.max()
    a = best[[k for k in best.index if k.startswith("Model A")]].iloc[0]
    b = best[[k for k in best.index if k.startswith("Model B")]].iloc[0]
    return Measure(float(a - b), f"best head at {int(t.distance.max())} back: A {a:.2f}, B {b:.2f}")


_BLOG_DIST = BLOG_ATTENTION["distance"]["A"] / BLOG_ATTENTION["distance"]["B"]
_BLOG_IND = BLOG_ATTENTION["induction"][("A", 768)][0] - BLOG_ATTENTION["induction"][("B", 768)][0]
_BLOG_SLOW = BLOG_SLOW_WEIGHT["median"] - BLOG_SLOW_WEIGHT["even"]
_BLOG_ZERO = BLOG_YARN["plain_minus_zero"][0] / BLOG_YARN["page"]["plain RoPE"]
_BLOG_FT = BLOG_YARN["zero_minus_ft"][0] / BLOG_YARN["page"]["zero-shot YaRN"]
_HALF = T.BLOG_FRACTION
BLOG = "Gemma blog"
ZERO_SHOT = "plain RoPE - zero-shot YaRN, whole page"
ZERO_SHOT_CONTROL = "all-global control: plain RoPE - zero-shot YaRN, whole page"
FINE_TUNE = "zero-shot YaRN - fine-tuned, whole page"
FINE_TUNE_CONTROL = "plain continued - fine-tuned, whole page"

BLOG_CLAIMS = (
    Claim(BLOG, "Part 2, opening", "Models A and B tie on held-out loss (the larger end of B − A's 95% interval, nats)",
          "tied", _pair_tie, Rule(T.PAIR_TIE_NATS, T.PAIR_TIE_PARTLY_NATS, higher=False),
          "within 0.05 nats is a tie; within 0.2: partly", "06_models_ab"),
    Claim(BLOG, "KV cache", "the KV cache holds exactly the bytes the formula counts (largest relative error)",
          "Eq. (kv)", _kv_formula, Rule(T.KV_FORMULA_REL_ERROR, T.KV_FORMULA_REL_ERROR_PARTLY, higher=False),
          "exact; within 1%: partly", "07_kv_cache"),
    Claim(BLOG, "RoPE clocks", "Model B's heads lean on the slow bands (median share above an even spread and above "
          "the untrained model's)",
          f"{BLOG_SLOW_WEIGHT['median']:.2f} against {BLOG_SLOW_WEIGHT['even']:.2f}", _slow_bands,
          Rule(round(_BLOG_SLOW * _HALF, 3), 0.0), "half the blog's excess; any excess: partly", "08_position"),
    Claim(BLOG, "YaRN", "zero-shot YaRN lowers the page's perplexity past L (relative drop)",
          f"{BLOG_YARN['page']['plain RoPE']} → {BLOG_YARN['page']['zero-shot YaRN']} ({_BLOG_ZERO:.3f})",
          lambda f: _yarn(f, ZERO_SHOT), Rule(round(_BLOG_ZERO * _HALF, 3), 0.0),
          "half the blog's relative drop; any drop: partly", "09_yarn"),
    Claim(BLOG, "YaRN", "control: the same on the all-global model (relative drop)",
          f"({_BLOG_ZERO:.3f})", lambda f: _yarn(f, ZERO_SHOT_CONTROL), Rule(round(_BLOG_ZERO * _HALF, 3), 0.0),
          "as above; a control, not counted", "09_yarn", control=True),
    Claim(BLOG, "YaRN", "a short fine-tune lowers it further (relative drop against zero-shot)",
          f"{BLOG_YARN['page']['zero-shot YaRN']} → {BLOG_YARN['page']['YaRN fine-tuned']} ({_BLOG_FT:.3f})",
          lambda f: _yarn(f, FINE_TUNE), Rule(round(_BLOG_FT * _HALF, 3), 0.0), "as above", "09_yarn"),
    Claim(BLOG, "YaRN", "control: the fine-tune against plain Model B continued for the same tokens (relative drop)",
          "–", lambda f: _yarn(f, FINE_TUNE_CONTROL), Rule(round(_BLOG_FT * _HALF, 3), 0.0),
          "tells the extension's gain from more training; a control, not counted", "09_yarn", control=True),
    Claim(BLOG, "Attention", "Model A's heads look further back than Model B's (ratio of mean distances)",
          f"{BLOG_ATTENTION['distance']['A']} against {BLOG_ATTENTION['distance']['B']}", _distance,
          Rule(round(1 + (_BLOG_DIST - 1) * _HALF, 2), 1.0), "half the blog's excess ratio; above 1: partly",
          "10_attention"),
    Claim(BLOG, "Induction heads", "past B's window, A still copies and B's induction heads are gone (A − B, best head)",
          f"{BLOG_ATTENTION['induction'][('A', 768)][0]} against {BLOG_ATTENTION['induction'][('B', 768)][0]}",
          _induction_far, Rule(round(_BLOG_IND * _HALF, 2), 0.0), "half the blog's gap; any gap: partly",
          "10_attention"),
)
