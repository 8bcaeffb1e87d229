"""The book's scorecard: one row per claim of the two works, the source's number, the toy's
number read from the figures of the build, and a verdict by a rule that names its threshold.

    python -m nblib.book.scorecard                      # the committed toy figures
    python -m nblib.book.scorecard --figures _build/smoke/figures --budget smoke

Each `Claim` reads its number from the saved tables of one build (`Figures`: the committed toy
figures, or a smoke or budget-file build's own), so the page follows the grid when the grid
changes, and nothing on it is typed by hand. Every threshold is read from `nblib.budgets.targets`, the
one place the scorecard, the chapters and the appendix's ladders share. The verdicts:

- **reproduced**: the toy meets the book's target for the whole claim;
- **partly**: the direction holds and a condition misses (the row names which);
- **within noise**: the difference the claim is about sits inside its named noise (a paired
  bootstrap interval), so the toy cannot tell;
- **out of reach at toy**: a committed ladder of at least three budgets measures the quantity and
  its fitted trend reaches the source's value only beyond the largest budget (`out_of_reach`;
  no row takes it yet);
- **not**: the direction is reversed or the effect is absent;
- **not measured**: the build lacks the table.

A **control** row (`Claim.control`) is shown beside the claim it controls and left out of the
counts. The book runner writes the page (book/scorecard.md) after the chapters, right after
chapter 1 in the table of contents.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from nblib.budgets import targets as T
from nblib.book.figures import figures_root
from nblib.book.noise import noise_verdict, out_of_reach, table14_noise  # noqa: F401 (out_of_reach: the rule's home for callers)
from nblib.book.paper_values import (BLOG_ATTENTION, BLOG_SLOW_WEIGHT, BLOG_YARN, FIG17_RATIO, RETRIEVAL_HEADS,
                                     TABLE3_LD, TABLE4_CL4, TABLE14_LATER)
from nblib.budgets import get_budget
from nblib.lccp import scaling
from nblib.lccp.law_checks import law_conditions, longppl_seed_spread
from nblib.probes import grid_ladder as GL
from nblib.probes import records
from nblib.store.provenance import REPO_ROOT

VERDICTS = ("reproduced", "partly", "within noise", "out of reach at toy", "not", "not measured")


@dataclass(frozen=True)
class Rule:
    """A claim's verdict from one number: reproduced when it is at or past `target`, partly
    when at or past `partly`, else not (`higher`: which way is better)."""

    target: float
    partly: float
    higher: bool = True
    unit: str = ""

    def verdict(self, value: float) -> str:
        if value is None or not np.isfinite(value):
            return "not measured"
        past = (lambda t: value >= t) if self.higher else (lambda t: value <= t)
        return "reproduced" if past(self.target) else "partly" if past(self.partly) else "not"

    def words(self) -> str:
        op = "≥" if self.higher else "≤"
        return f"reproduced {op} {self.target:g}{self.unit}; partly {op} {self.partly:g}{self.unit}"


@dataclass(frozen=True)
class Conditions:
    """A claim judged on several conditions at once (its measure sets the verdict and names the
    conditions that failed); `words` states the rule."""

    text: str

    def verdict(self, value: float) -> str:  # the measure's own verdict is used instead
        return "not measured"

    def words(self) -> str:
        return self.text


@dataclass(frozen=True)
class Measure:
    """The toy's number for a claim: `value` (what the rule reads), `shown` (the number as the
    page shows it, with its interval or spread) and, for a rule of several conditions or a
    noise, the `verdict` the measure reached itself."""

    value: float
    shown: str
    verdict: str | None = None


NOT_MEASURED = Measure(float("nan"), "–")


class Figures:
    """The saved tables of one build: `root`/<chapter>/<name>.csv."""

    def __init__(self, root: Path, budget: str = "toy"):
        self.root, self.budget = Path(root), budget

    def csv(self, chapter: str, name: str) -> pd.DataFrame | None:
        p = self.root / chapter / f"{name}.csv"
        return pd.read_csv(p) if p.is_file() else None


@dataclass(frozen=True)
class Claim:
    """One claim: which work and section, the claim, the source's number, how the toy's number
    is read (`measure`), the rule, one line of why the rule is what it is, the chapter whose
    figures give the number, and whether it is a control row (shown, not counted)."""

    work: str
    where: str
    claim: str
    source: str
    measure: Callable[[Figures], Measure]
    rule: Rule | Conditions
    why: str = ""
    chapter: str = ""
    control: bool = False


# ---------------------------------------------------------------------------------------
# Part 1: the law
# ---------------------------------------------------------------------------------------
def _law(f: Figures) -> Measure:
    r2 = f.csv("03_scaling_law", "fig03_r2_intervals")
    if r2 is None:
        return NOT_MEASURED
    conds = law_conditions(r2, f.csv("03_scaling_law", "table11_fitted_params"),
                           f.csv("03_scaling_law", "runs_linear_decay"), f.csv("04_constant_last4", "protocols_s1_s4"))
    shown = " / ".join(f"{r['R²']:.3f} [{r['R² lo']:.2f}, {r['R² hi']:.2f}]" for _, r in r2.iterrows())
    shown += _spread(f, list(GL.R2.values()))
    failed = [c for c in conds if c["passed"] is not True]
    if float(r2["R²"].min()) < 0:
        verdict = "not"
    else:
        verdict = "partly" if failed else "reproduced"
    if failed:
        shown += ". Fails: " + "; ".join(f"{c['condition']} ({c['words']})" for c in failed)
    return Measure(float(r2["R²"].min()), shown, verdict)


def _spread(f: Figures, columns: list[str]) -> str:
    """'; <what varied> (rows ...): lo to hi / ...' over the design ladder's rows of the book's
    toy grid that carry every one of `columns` (`grid_ladder.book_grid_rows`: fresh re-runs and
    the repeats `BOOK_GRID_ALSO` names), labelled by what varied between them
    (`grid_ladder.what_varied`: hosts, precision or instruction set), or '' when fewer than two
    rows measured them or the build is not the toy's."""
    if f.budget != "toy":
        return ""
    rows = GL.book_grid_rows(records("toy_grid_ladder")).dropna(subset=columns)
    if len(rows) < 2:
        return ""
    cols = [rows[c].astype(float) for c in columns]
    label = GL.what_varied(list(rows.design))
    return f"; {label} ({', '.join(rows.design)}): " + " / ".join(f"{c.min():.3f} to {c.max():.3f}" for c in cols)


def _table3(f: Figures) -> Measure:
    d = f.csv("03_scaling_law", "table03_r2_difference")
    if d is None:
        return NOT_MEASURED
    outcome = {r["split"]: noise_verdict(r["95% lo"], r["95% hi"], better_when_positive=False)
               for _, r in d.iterrows()}
    shown = "; ".join(f"{r['split']}: {r['rival']} {r['rival - base']:+.4f} R² against additive "
                      f"[{r['95% lo']:+.4f}, {r['95% hi']:+.4f}]" for _, r in d.iterrows())
    if all(v == "better" for v in outcome.values()):
        verdict = "reproduced"
    elif any(v == "worse" for v in outcome.values()):
        verdict = "not"
    else:
        verdict = "within noise"
    best = sum(v == "better" for v in outcome.values())
    return Measure(float(best), shown, verdict)


def _seed_spread(f: Figures) -> float:
    t = f.csv("04_constant_last4", "protocols_s1_s4")
    return longppl_seed_spread(t)["max"] if t is not None else float("nan")


def _s4_log_gap(f: Figures) -> float:
    """Mean log(Last4) - log(LD) over S4's points (Last4: seed mean), nats."""
    w = _wide_protocols(f)
    if w is None:
        return float("nan")
    s4 = w[w.scale == "S4"]
    last4 = np.log(s4.dropna(subset=["Last4"]).groupby(["Ds", "Dl"]).Last4.mean())
    ld = np.log(s4.dropna(subset=["LD"]).groupby(["Ds", "Dl"]).LD.first())
    return float((last4 - ld).dropna().mean())


def _ccc(f: Figures) -> Measure:
    t = f.csv("04_constant_last4", "fig04b_ccc")
    if t is None:
        return NOT_MEASURED
    r = t[(t.metric == "longppl") & (t.rule == "last4")].iloc[0]
    gap, spread = _s4_log_gap(f), _seed_spread(f)
    ccc = float(r.CCC)
    close = np.isfinite(gap) and np.isfinite(spread) and abs(gap) <= spread
    verdict = ("reproduced" if ccc >= T.CCC else "partly" if ccc >= T.CCC_PARTLY and close else "not")
    return Measure(ccc, f"{ccc:.3f}; mean gap to LD {r['mean gap to LD']:+.2f} LongPPL ({gap:+.3f} nats of log "
                        f"LongPPL, LongPPL seed spread {spread:.3f})", verdict)


def _wide_protocols(f: Figures) -> pd.DataFrame | None:
    t = f.csv("04_constant_last4", "protocols_s1_s4")
    if t is None:
        return None
    return t.pivot_table(index=["scale", "Ds", "Dl", "seed"], columns="protocol", values="longppl").reset_index()


def _last4_le_raw(f: Figures) -> Measure:
    w = _wide_protocols(f)
    if w is None:
        return NOT_MEASURED
    w = w.dropna(subset=["Raw", "Last4"])
    share = 100 * float((w.Last4 <= w.Raw).mean())
    return Measure(share, f"{share:.0f}% of {len(w)} (seed, point) pairs at S1-S4")


def _ld_le_raw(f: Figures) -> Measure:
    w = _wide_protocols(f)
    if w is None:
        return NOT_MEASURED
    raw = w.groupby(["scale", "Ds", "Dl"]).Raw.mean()
    ld = w.dropna(subset=["LD"]).groupby(["scale", "Ds", "Dl"]).LD.first()
    both = pd.concat([raw, ld], axis=1).dropna()
    share = 100 * float((both.LD <= both.Raw).mean())
    return Measure(share, f"{share:.0f}% of {len(both)} S1-S4 points (Raw: seed mean)")


def _cl4_law(f: Figures) -> Measure:
    t = f.csv("04_constant_last4", "table04_variant_ablation_cl4")
    if t is None:
        return NOT_MEASURED
    r = t.set_index("variant").loc["additive"]
    cols = [c for c in r.index if c.endswith(" R²") and not c.startswith("paper")]
    return Measure(float(min(r[c] for c in cols)), " / ".join(f"{r[c]:.3f}" for c in cols))


def _s5_trajectory(f: Figures) -> Measure:
    t = f.csv("04_constant_last4", "s5_trajectory")
    if t is None:
        return NOT_MEASURED
    g = t[(t.protocol == "Last4") & (t.dl >= 10)].sort_values("dl")
    if len(g) < 3:
        return NOT_MEASURED
    rho = float(spearmanr(g.dl, g.longppl).statistic)
    at30 = g[g.dl == 30].longppl
    start = f"{at30.iloc[0]:.2f} at 30" if len(at30) else f"{g.longppl.iloc[0]:.2f} at {g.dl.iloc[0]:g}"
    return Measure(rho, f"ρ {rho:+.3f}; Last4 {start} → {g.longppl.iloc[-1]:.2f} at {g.dl.iloc[-1]:g}"
                   + _spread(f, [GL.S5_RHO]))


def _prefix(f: Figures) -> Measure:
    t = f.csv("04_constant_last4", "fig06_prefix_errors")
    if t is None or t.empty:
        return NOT_MEASURED
    r = t.iloc[-1]
    err = abs(float(r["LongPPL error at the end %"]))
    return Measure(err, f"{r['prefix']} prefix: {r['LongPPL error at the end %']:+.1f}% at the end")


def _elasticity(f: Figures) -> Measure:
    t = f.csv("04_constant_last4", "s5_trajectory")
    if t is None:
        return NOT_MEASURED
    g = t[t.protocol == "Last4"].sort_values("dl")
    if len(g) < 4:
        return NOT_MEASURED
    b = get_budget(f.budget)
    d = np.array([b.n_tokens("S5", x) for x in g.dl], dtype=float)
    fl = scaling.fit_fixed_model_law(d, np.log(g.longppl.to_numpy(float)))
    fs = scaling.fit_fixed_model_law(d, np.log(g.shortppl.to_numpy(float)))
    r = scaling.elasticity_ratio(fl, fs, d[[0, -1]])
    trend = "rising" if r[-1] > r[0] else "falling"
    return Measure(float(r[-1]), f"R {r[0]:.2f} at {g.dl.iloc[0]:g} → {r[-1]:.2f} at {g.dl.iloc[-1]:g} ({trend}; "
                                 f"the paper's falls)")


def _needle_rise(f: Figures) -> Measure:
    t = f.csv("05_downstream", "needle_trajectory")
    if t is None:
        return NOT_MEASURED
    g = t[t.protocol == "Last4"].sort_values("dl")
    if len(g) < 3 or g.piece_hit.nunique() < 2:
        return NOT_MEASURED
    rho = float(spearmanr(g.dl, g.piece_hit).statistic)
    rho_gain = float(spearmanr(g.dl, g.needle_gain).statistic) if g.needle_gain.nunique() > 1 else float("nan")
    return Measure(min(rho, rho_gain), f"ρ(Dl, per-piece hit) {rho:+.2f}, ρ(Dl, needle gain) {rho_gain:+.2f}")


def _needle_end(f: Figures) -> Measure:
    t = f.csv("05_downstream", "needle_trajectory")
    if t is None:
        return NOT_MEASURED
    last = t[t.dl == t.dl.max()].set_index("protocol")
    n = f", {int(last.prompts.iloc[0])} prompts a needle" if "prompts" in last else ""
    score, control = float(last.score.min()), float(last.control_score.max())
    verdict = ("reproduced" if score >= T.NEEDLE_SCORE and score - control >= T.NEEDLE_ABOVE_CONTROL else
               "partly" if score > control else "not")
    return Measure(score, f"Raw {last.score['Raw']:.1f}, Last4 {last.score['Last4']:.1f} at {t.dl.max():g}{n} "
                          f"(no-needle control {control:.1f})", verdict)


def _table14(f: Figures) -> Measure:
    t = table14_noise(f)
    if t is None:
        return NOT_MEASURED
    better = float((t.noise == "better").mean())
    shown = "; ".join(f"{r['stage']} {r['Last4 - Raw']:+.3f} [{r['95% lo']:+.3f}, {r['95% hi']:+.3f}]"
                      for _, r in t.iterrows())
    if (t.noise == "within noise").all():
        verdict = "within noise"
    elif better >= _LATER:
        verdict = "reproduced"
    elif better > 0:
        verdict = "partly"
    else:
        verdict = "not"
    return Measure(better, shown + " (Last4 − Raw, paired bootstrap over cells)", verdict)


def _retrieval(f: Figures) -> Measure:
    t = f.csv("05_downstream", "retrieval_heads")
    if t is None:
        return NOT_MEASURED
    tracked = t[t.tracked.astype(bool)].groupby("dl").score.mean().sort_index()
    if len(tracked) < 3:
        return NOT_MEASURED
    rho = float(spearmanr(tracked.index, tracked.values).statistic)
    first, last = t[t.dl == t.dl.min()], t[t.dl == t.dl.max()]
    thr = T.RETRIEVAL_HEAD
    rises = tracked.iloc[-1] > tracked.iloc[0]
    verdict = "reproduced" if rho >= T.RETRIEVAL_RHO and rises else "partly" if rises else "not"
    return Measure(rho, f"tracked heads' mean {tracked.iloc[0]:.2f} → {tracked.iloc[-1]:.2f} (ρ with Dl {rho:+.2f}); "
                        f"best head {first.score.max():.2f} at {t.dl.min():g} → {last.score.max():.2f} at "
                        f"{t.dl.max():g}; heads above {thr:g}: {(first.score > thr).sum()} → "
                        f"{(last.score > thr).sum()} of {t.groupby(['layer', 'head']).ngroups}", verdict)


# ---------------------------------------------------------------------------------------
# Part 2: the blog
# ---------------------------------------------------------------------------------------
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
_LATER = sum(v > 0 for v in TABLE14_LATER.values()) / len(TABLE14_LATER)
_HALF = T.BLOG_FRACTION
LCCP, BLOG = "LCCP paper", "Gemma blog"
ZERO_SHOT = "plain RoPE - zero-shot YaRN, whole page"
ZERO_SHOT_CONTROL = "all-global control: plain RoPE - zero-shot YaRN, whole page"
FINE_TUNE = "zero-shot YaRN - fine-tuned, whole page"
FINE_TUNE_CONTROL = "plain continued - fine-tuned, whole page"

CLAIMS = (
    Claim(LCCP, "§3.3, Fig. 3",
          "Eq. 1 with interior exponents, fitted on smaller scales over an N axis where LongPPL falls, predicts the "
          "held-out ones (held-out R², S4 / S5)",
          f"{TABLE3_LD['additive'][0]} / {TABLE3_LD['additive'][2]}", _law,
          Conditions(f"reproduced: held-out R² ≥ {T.LAW_R2:g} on both splits, no exponent of either point fit on a "
                     f"bound (floor {T.EXP_FLOOR:g}, ceiling {T.EXP_CEILING:g}), ≤ {T.LAW_MAX_REFITS_AT_BOUND} of 100 "
                     "refits at a bound, and LongPPL lower for the larger model at most matched points and higher at "
                     "none by more than the LongPPL seed spread; partly: R² ≥ 0 with a condition failed; not: R² < 0"),
          "the paper's claim is the whole law, not one R²", "03_scaling_law"),
    Claim(LCCP, "§3.3, Table 3", "the additive form extrapolates best of the alternatives (R² of the best rival minus "
          "the additive form's, paired bootstrap)", "best on both", _table3,
          Conditions("reproduced: the additive form better than its best rival beyond noise on both splits; not: a "
                     "rival better beyond noise on a split; within noise: otherwise"),
          "both forms are fitted on the same resamples, so their R² difference has a paired interval",
          "03_scaling_law"),
    Claim(LCCP, "§4.1, Fig. 4b", "Constant-Last4 matches Linear-Decay across S4 (Lin's CCC, LongPPL)", "0.98",
          _ccc, Conditions(f"reproduced: CCC ≥ {T.CCC:g}; partly: CCC ≥ {T.CCC_PARTLY:g} and the mean gap to "
                           "Linear-Decay within the LongPPL seed spread; not: otherwise"),
          "agreement needs both a high CCC and no level shift beyond the seeds' noise", "04_constant_last4"),
    Claim(LCCP, "§4.1, Fig. 4a", "Last4 is at or below Constant-Raw (share of S1-S4 points)", "most points",
          _last4_le_raw, Rule(T.AT_OR_BELOW_RAW_PCT, T.MAJORITY_PCT, unit="%"),
          "the book's target; a majority: partly", "04_constant_last4"),
    Claim(LCCP, "§4.1", "Linear-Decay is at or below Constant-Raw (share of S1-S4 points)", "most points",
          _ld_le_raw, Rule(T.AT_OR_BELOW_RAW_PCT, T.MAJORITY_PCT, unit="%"), "as above", "04_constant_last4"),
    Claim(LCCP, "§4.2, Table 4", "Eq. 1 on Constant-Last4 data extrapolates (R², held-out S4 / S5 trajectory)",
          f"{TABLE4_CL4['additive'][0]} / {TABLE4_CL4['additive'][2]}", _cl4_law, Rule(T.LAW_R2, 0.0),
          "the law's R² target on both; above 0, better than the mean: partly", "04_constant_last4"),
    Claim(LCCP, "title, §4.2",
          "S5's Constant trajectory keeps improving (Spearman ρ of Last4 LongPPL against Dl, Dl ≥ 10)",
          "falls to 120N", _s5_trajectory, Rule(T.S5_RHO, 0.0, higher=False),
          "the book's target; any fall: partly; a rise: not", "04_constant_last4"),
    Claim(LCCP, "§4.3, Fig. 6", "Eq. 2 on a prefix forecasts the trajectory's end (|error| of the longest prefix)",
          "a few %", _prefix, Rule(T.PREFIX_ERROR_PCT, T.PREFIX_ERROR_PARTLY_PCT, higher=False, unit="%"),
          "a few % as the paper; within 20%: partly", "04_constant_last4"),
    Claim(LCCP, "App. D.1, Fig. 17", "LongPPL improves faster than ShortPPL (elasticity ratio R at the end)",
          f"{FIG17_RATIO['5N']} → {FIG17_RATIO['120N']}", _elasticity,
          Rule(T.ELASTICITY_RATIO, T.ELASTICITY_RATIO_PARTLY), "R ≥ 2 as the paper's end; above 1: faster, partly",
          "04_constant_last4"),
    Claim(LCCP, "§5.1, Fig. 7", "retrieval improves with Dl (code needles, Last4: the lower of the two ρ)",
          "RULER rises 5N → 120N", _needle_rise, Rule(T.NEEDLE_RHO, 0.0), "the book's target for both measures",
          "05_downstream"),
    Claim(LCCP, "§5.1, Fig. 7", "the needles are answered at the trajectory's end (score, the lower of Raw and Last4)",
          "RULER-32K > 0", _needle_end,
          Conditions(f"reproduced: both ≥ {T.NEEDLE_SCORE:g} and ≥ {T.NEEDLE_ABOVE_CONTROL:g} above the no-needle "
                     "control; partly: above the control; not: otherwise"),
          "a score is only an answer above what the model gets with no needle", "05_downstream"),
    Claim(LCCP, "§5.2-5.3, Table 14", "Last4's advantage survives the extension and SFT (share of later stages where "
          "Last4 beats Raw beyond noise)", f"{_LATER:.0%} of later stages", _table14,
          Conditions(f"reproduced: Last4 better beyond noise in ≥ {_LATER:.0%} of later stages (the paper's share); "
                     "partly: in some; within noise: every stage's interval holds 0; not: otherwise"),
          "RULER at toy scores near 0: its differences need their sampling error", "05_downstream"),
    Claim(LCCP, "App. D.3, Fig. 18", "retrieval heads form (Spearman ρ of the tracked heads' mean score against Dl)",
          f"{RETRIEVAL_HEADS['count_start']} → {RETRIEVAL_HEADS['count_end'][0]}-{RETRIEVAL_HEADS['count_end'][1]} "
          f"heads above {RETRIEVAL_HEADS['threshold']}", _retrieval,
          Conditions(f"reproduced: ρ ≥ {T.RETRIEVAL_RHO:g} and the mean higher at the end than at the start; partly: "
                     "higher at the end; not: otherwise"),
          "a count over 8 heads moves one head at a time; the tracked heads' mean moves with all of them",
          "05_downstream"),
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


def scorecard(figs: Figures, claims=CLAIMS) -> pd.DataFrame:
    """One row per claim: work, where, claim, source, toy (the measure as shown), verdict, rule,
    why, chapter and control."""
    rows = []
    for c in claims:
        try:
            m = c.measure(figs)
        except (KeyError, IndexError, ValueError, AttributeError) as e:  # a table of another shape: said
            m = Measure(float("nan"), f"unreadable: {type(e).__name__}: {e}")
        verdict = m.verdict if m.verdict is not None else c.rule.verdict(m.value)
        if not np.isfinite(m.value) and m.verdict is None:
            verdict = "not measured"
        rows.append({"work": c.work, "where": c.where, "claim": c.claim, "source": c.source, "toy": m.shown,
                     "value": m.value, "verdict": verdict, "rule": c.rule.words(), "why": c.why,
                     "chapter": c.chapter, "control": c.control})
    return pd.DataFrame(rows)


def verdict_counts(table: pd.DataFrame) -> dict[str, int]:
    """{verdict: rows} over the claims, control rows left out."""
    counted = table[~table.control.astype(bool)] if "control" in table else table
    c = counted.verdict.value_counts()
    return {v: int(c.get(v, 0)) for v in VERDICTS}


def verdict_line(figs: Figures, where: str, claims=CLAIMS) -> str:
    """One sentence: the scorecard's verdict on the claims at `where` (e.g. "§3.3, Fig. 3"),
    with the toy's number and the rule, for a chapter's "What we see"."""
    rows = scorecard(figs, [c for c in claims if c.where == where and not c.control])
    if rows.empty:
        raise ValueError(f"no claim at {where!r}; claims are at: {sorted({c.where for c in claims})}")
    return " ".join(f"**Verdict ({r.where}): {r.verdict}.** {r.claim[0].upper() + r.claim[1:]}: {r.toy}. Rule: "
                    f"{r.rule}." for r in rows.itertuples())


def _cell(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def _shown_root(root: Path) -> str:
    """A figures folder as the page names it: relative to the repository when inside it."""
    try:
        return str(Path(root).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return Path(root).name


def scorecard_markdown(figs: Figures, claims=CLAIMS) -> str:
    """The scorecard page: a count of verdicts, then one table per work."""
    t = scorecard(figs, claims)
    counts = verdict_counts(t)
    lines = ["# Scorecard: which claims the toy reproduces", "",
             f"Every number on this page is read from the figures of this build (`{_shown_root(figs.root)}`, budget "
             f"**{figs.budget}**) by `nblib.book.scorecard`, and every verdict by the rule in its row, with thresholds "
             "from `nblib.budgets.targets`: **reproduced** when the toy meets the target for the whole claim, **partly** "
             "when the direction holds and a condition misses (named), **within noise** when the difference sits "
             "inside its paired bootstrap interval, **not** when the direction is reversed or the effect is absent. "
             "Control rows are shown beside their claim and not counted.", "",
             "Verdicts: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS) + ".", ""]
    for work, g in t.groupby("work", sort=False):
        lines += [f"## {work}", "", "| where | claim | source | toy | verdict | rule |", "|---|---|---|---|---|---|"]
        lines += [f"| {_cell(r.where)} | {_cell(r.claim)} | {_cell(r.source)} | {_cell(r.toy)} | "
                  f"**{'control: ' if r.control else ''}{r.verdict}** | {_cell(r.rule)} ({_cell(r.why)}) |"
                  for r in g.itertuples()]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nblib.book.scorecard", description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="toy", help="the budget the figures were made at (default toy)")
    ap.add_argument("--figures", default=None, help="a build's figures folder (default: the budget's)")
    a = ap.parse_args(argv)
    get_budget(a.budget)
    print(scorecard_markdown(Figures(Path(a.figures) if a.figures else figures_root(a.budget), a.budget)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
