"""The book's scorecard: one row per claim of the two works, the source's number, the toy's
number read from the figures of the build, and a verdict by a rule that names its threshold.

    python -m nblib.book.scorecard                      # the committed toy figures
    python -m nblib.book.scorecard --figures _build/smoke/figures --budget smoke

Each `Claim` reads its number from the saved tables of one build (`Figures`: the committed toy
figures, or a smoke or budget-file build's own), so the page follows the grid when the grid
changes, and nothing on it is typed by hand. Its `Rule` gives the verdict: **reproduced** when
the toy meets the book's target for that claim, **partly** when the direction holds and the
size misses, **not** when the direction is reversed or the effect is absent; a table the build
lacks gives **not measured**. The book runner writes the page (book/scorecard.md) after the
chapters, right after chapter 1 in the table of contents.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from nblib.book.figures import figures_root
from nblib.book.paper_values import (BLOG_ATTENTION, BLOG_SLOW_WEIGHT, BLOG_YARN, FIG17_RATIO, RETRIEVAL_HEADS,
                                     TABLE3_LD, TABLE4_CL4, TABLE14_LATER)
from nblib.budgets import get_budget
from nblib.lccp import scaling
from nblib.probes import grid_ladder as GL
from nblib.probes import records

VERDICTS = ("reproduced", "partly", "not", "not measured")


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
class Measure:
    """The toy's number for a claim: `value` (what the rule reads) and `shown` (the number as the
    page shows it, with its interval, seed or host spread)."""

    value: float
    shown: str


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
    is read (`measure`), the rule, and one line of why the rule is what it is."""

    work: str
    where: str
    claim: str
    source: str
    measure: Callable[[Figures], Measure]
    rule: Rule
    why: str = ""


def _r2_law(f: Figures) -> Measure:
    t = f.csv("03_scaling_law", "fig03_r2_intervals")
    if t is None:
        return NOT_MEASURED
    shown = " / ".join(f"{r['R²']:.3f} [{r['R² lo']:.2f}, {r['R² hi']:.2f}]" for _, r in t.iterrows())
    return Measure(float(t["R²"].min()), shown + _host_spread(f, list(GL.R2.values())))


def _host_spread(f: Figures, columns: list[str]) -> str:
    """'; k hosts: lo-hi / ...' over the design ladder's rows of the book's toy grid that carry
    every one of `columns` (the grid re-run fresh on other hosts, `grid_ladder.book_grid_rows`),
    or '' when fewer than two hosts measured them or the build is not the toy's."""
    if f.budget != "toy":
        return ""
    rows = GL.book_grid_rows(records("toy_grid_ladder")).dropna(subset=columns)
    if len(rows) < 2:
        return ""
    cols = [rows[c].astype(float) for c in columns]
    return f"; {len(rows)} hosts: " + " / ".join(f"{c.min():.3f} to {c.max():.3f}" for c in cols)


def _table3(f: Figures) -> Measure:
    t = f.csv("03_scaling_law", "table03_variant_ablation")
    if t is None:
        return NOT_MEASURED
    t = t.set_index("variant")
    best = {s: t[f"{s} R²"].idxmax() for s in ("S4", "S5")}
    return Measure(float(sum(b == "additive" for b in best.values())),
                   "best: " + ", ".join(f"{s} {b} ({t.loc[b, f'{s} R²']:.3f})" for s, b in best.items()))


def _ccc(f: Figures) -> Measure:
    t = f.csv("04_constant_last4", "fig04b_ccc")
    if t is None:
        return NOT_MEASURED
    r = t[(t.metric == "longppl") & (t.rule == "last4")].iloc[0]
    return Measure(float(r.CCC), f"{r.CCC:.3f} (mean gap to LD {r['mean gap to LD']:+.2f})")


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
    return Measure(rho, f"ρ {rho:+.2f}; Last4 {start} → {g.longppl.iloc[-1]:.2f} at {g.dl.iloc[-1]:g}"
                   + _host_spread(f, [GL.S5_RHO]))


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
    return Measure(float(r[-1]), f"R {r[0]:.2f} at {g.dl.iloc[0]:g} → {r[-1]:.2f} at {g.dl.iloc[-1]:g}")


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
    return Measure(float(last.score.min()),
                   f"Raw {last.score['Raw']:.1f}, Last4 {last.score['Last4']:.1f} at {t.dl.max():g}{n} "
                   f"(control {last.control_score.max():.1f})")


def _table14(f: Figures) -> Measure:
    t = f.csv("05_downstream", "table14")
    if t is None:
        return NOT_MEASURED
    later = t[t.stage != "LCCP"]
    if later.empty:
        return NOT_MEASURED
    share = float((later.Delta > 0).mean())
    return Measure(share, "; ".join(f"{r.stage} {r.Delta:+.3f}" for r in later.itertuples()))


def _retrieval(f: Figures) -> Measure:
    t = f.csv("05_downstream", "retrieval_heads")
    if t is None:
        return NOT_MEASURED
    first, last = t[t.dl == t.dl.min()], t[t.dl == t.dl.max()]
    thr = RETRIEVAL_HEADS["threshold"]
    return Measure(float(last.score.max()), f"best head {last.score.max():.2f} at {t.dl.max():g}; heads above "
                                            f"{thr:g}: {(first.score > thr).sum()} → {(last.score > thr).sum()}")


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
    return Measure(med - even, f"median slow-band share {med:.2f} against {even:.2f} for an even spread")


def _yarn(f: Figures, row: str, blog: tuple, base: float) -> Measure:
    t = f.csv("09_yarn", "yarn_intervals")
    if t is None:
        return NOT_MEASURED
    r = t[t.difference.str.startswith(row)]
    if r.empty:
        return NOT_MEASURED
    r = r.iloc[0]
    return Measure(float(r["a - b"] / r["ppl a"]),
                   f"{r['a - b']:+.2f} [{r['95% lo']:+.2f}, {r['95% hi']:+.2f}] on {r['ppl a']:.2f}")


def _distance(f: Figures) -> Measure:
    t = f.csv("10_attention", "head_measures")
    if t is None:
        return NOT_MEASURED
    m = t.groupby("model").distance.mean()
    a = m[[k for k in m.index if k.startswith("Model A")]].iloc[0]
    b = m[[k for k in m.index if k.startswith("Model B")]].iloc[0]
    return Measure(float(a / b), f"A {a:.0f}, B {b:.0f} tokens back on average")


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
LCCP, BLOG = "LCCP paper", "Gemma blog"

CLAIMS = (
    Claim(LCCP, "§3.3, Fig. 3", "Eq. 1 fitted on smaller scales predicts the held-out ones (held-out R², S4 / S5)",
          f"{TABLE3_LD['additive'][0]} / {TABLE3_LD['additive'][2]}", _r2_law, Rule(0.85, 0.0),
          "the book's target 0.85 on both splits; above 0, better than the mean"),
    Claim(LCCP, "§3.3, Table 3", "the additive form extrapolates best of the alternatives (splits where it is best)",
          "best on both", _table3, Rule(2, 1), "best on both held-out scales, as in the paper; on one: partly"),
    Claim(LCCP, "§4.1, Fig. 4b", "Constant-Last4 matches Linear-Decay across S4 (Lin's CCC, LongPPL)", "0.98",
          _ccc, Rule(0.9, 0.5), "the book's target 0.9; 0.5 still a clear agreement"),
    Claim(LCCP, "§4.1, Fig. 4a", "Last4 is at or below Constant-Raw (share of S1-S4 points)", "most points",
          _last4_le_raw, Rule(85, 50, unit="%"), "the book's target 85%; a majority: partly"),
    Claim(LCCP, "§4.1", "Linear-Decay is at or below Constant-Raw (share of S1-S4 points)", "most points",
          _ld_le_raw, Rule(85, 50, unit="%"), "as above"),
    Claim(LCCP, "§4.2, Table 4", "Eq. 1 on Constant-Last4 data extrapolates (R², held-out S4 / S5 trajectory)",
          f"{TABLE4_CL4['additive'][0]} / {TABLE4_CL4['additive'][2]}", _cl4_law, Rule(0.85, 0.0), "as Fig. 3"),
    Claim(LCCP, "title, §4.2",
          "S5's Constant trajectory keeps improving (Spearman ρ of Last4 LongPPL against Dl, Dl ≥ 10)", "falls to 120N", _s5_trajectory, Rule(-0.9, 0.0, higher=False),
          "the book's target ρ ≤ -0.9; any fall: partly; a rise: not"),
    Claim(LCCP, "§4.3, Fig. 6", "Eq. 2 on a prefix forecasts the trajectory's end (|error| of the longest prefix)",
          "a few %", _prefix, Rule(5, 20, higher=False, unit="%"), "within 5%; within 20%: partly"),
    Claim(LCCP, "App. D.1, Fig. 17", "LongPPL improves faster than ShortPPL (elasticity ratio R at the end)",
          f"{FIG17_RATIO['5N']} → {FIG17_RATIO['120N']}", _elasticity, Rule(2.0, 1.0),
          "R ≥ 2 as the paper's end; above 1: faster, partly"),
    Claim(LCCP, "§5.1, Fig. 7", "retrieval improves with Dl (code needles, Last4: the lower of the two ρ)",
          "RULER rises 5N → 120N", _needle_rise, Rule(0.8, 0.0), "the book's target 0.8 for both measures"),
    Claim(LCCP, "§5.1, Fig. 7", "the needles are answered at the trajectory's end (score, the lower of Raw and Last4)",
          "RULER-32K > 0", _needle_end, Rule(15, 1), "the book's target 15; any score above the floor: partly"),
    Claim(LCCP, "§5.2-5.3, Table 14", "Last4's advantage survives the extension and SFT (share of later stages)",
          f"{_LATER:.0%} of later stages", _table14, Rule(_LATER, 0.01), "the paper's share; any: partly"),
    Claim(LCCP, "App. D.3, Fig. 18", "retrieval heads form (best head's score at the end)",
          f"{RETRIEVAL_HEADS['count_start']} → {RETRIEVAL_HEADS['count_end'][0]}-{RETRIEVAL_HEADS['count_end'][1]} "
          f"heads above {RETRIEVAL_HEADS['threshold']}", _retrieval, Rule(0.5, RETRIEVAL_HEADS["threshold"]),
          "the book's target 0.5; above the paper's 0.1: partly"),
    Claim(BLOG, "Part 2, opening", "Models A and B tie on held-out loss (the larger end of B − A's 95% interval, nats)",
          "tied", _pair_tie, Rule(0.05, 0.2, higher=False), "within 0.05 nats is a tie; within 0.2: partly"),
    Claim(BLOG, "KV cache", "the KV cache holds exactly the bytes the formula counts (largest relative error)",
          "Eq. (kv)", _kv_formula, Rule(0.0, 0.01, higher=False), "exact; within 1%: partly"),
    Claim(BLOG, "RoPE clocks", "Model B's heads lean on the slow bands (median share above an even spread)",
          f"{BLOG_SLOW_WEIGHT['median']:.2f} against {BLOG_SLOW_WEIGHT['even']:.2f}", _slow_bands,
          Rule(round(_BLOG_SLOW / 2, 3), 0.0), "half the blog's excess; any excess: partly"),
    Claim(BLOG, "YaRN", "zero-shot YaRN lowers the page's perplexity past L (relative drop)",
          f"{BLOG_YARN['page']['plain RoPE']} → {BLOG_YARN['page']['zero-shot YaRN']}",
          lambda f: _yarn(f, "plain RoPE - zero-shot YaRN, whole page", BLOG_YARN["plain_minus_zero"], 0),
          Rule(round(_BLOG_ZERO / 2, 3), 0.0), "half the blog's relative drop; any drop: partly"),
    Claim(BLOG, "YaRN", "a short fine-tune lowers it further (relative drop against zero-shot)",
          f"{BLOG_YARN['page']['zero-shot YaRN']} → {BLOG_YARN['page']['YaRN fine-tuned']}",
          lambda f: _yarn(f, "zero-shot YaRN - fine-tuned, whole page", BLOG_YARN["zero_minus_ft"], 0),
          Rule(round(_BLOG_FT / 2, 3), 0.0), "as above"),
    Claim(BLOG, "Attention", "Model A's heads look further back than Model B's (ratio of mean distances)",
          f"{BLOG_ATTENTION['distance']['A']} against {BLOG_ATTENTION['distance']['B']}", _distance,
          Rule(round(1 + (_BLOG_DIST - 1) / 2, 2), 1.0), "half the blog's excess ratio; above 1: partly"),
    Claim(BLOG, "Induction heads", "past B's window, A still copies and B's induction heads are gone (A − B, best head)",
          f"{BLOG_ATTENTION['induction'][('A', 768)][0]} against {BLOG_ATTENTION['induction'][('B', 768)][0]}",
          _induction_far, Rule(round(_BLOG_IND / 2, 2), 0.0), "half the blog's gap; any gap: partly"),
)


def scorecard(figs: Figures, claims=CLAIMS) -> pd.DataFrame:
    """One row per claim: work, where, claim, source, toy (the measure as shown), verdict, rule."""
    rows = []
    for c in claims:
        try:
            m = c.measure(figs)
        except (KeyError, IndexError, ValueError) as e:  # a table of another shape: said, not hidden
            m = Measure(float("nan"), f"unreadable: {type(e).__name__}: {e}")
        rows.append({"work": c.work, "where": c.where, "claim": c.claim, "source": c.source, "toy": m.shown,
                     "value": m.value, "verdict": c.rule.verdict(m.value), "rule": c.rule.words(), "why": c.why})
    return pd.DataFrame(rows)


def _cell(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def scorecard_markdown(figs: Figures, claims=CLAIMS) -> str:
    """The scorecard page: a count of verdicts, then one table per work."""
    t = scorecard(figs, claims)
    counts = t.verdict.value_counts()
    lines = ["# Scorecard: which claims the toy reproduces", "",
             f"Every number on this page is read from the figures of this build (`{figs.root}`, budget "
             f"**{figs.budget}**) by `nblib.book.scorecard`, and every verdict by the rule in its row: "
             "**reproduced** when the toy meets the book's target, **partly** when the direction holds and the "
             "size misses, **not** when the direction is reversed or the effect is absent.", "",
             "Verdicts: " + ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS) + ".", ""]
    for work, g in t.groupby("work", sort=False):
        lines += [f"## {work}", "", "| where | claim | source | toy | verdict | rule |", "|---|---|---|---|---|---|"]
        lines += [f"| {_cell(r.where)} | {_cell(r.claim)} | {_cell(r.source)} | {_cell(r.toy)} | **{r.verdict}** | "
                  f"{_cell(r.rule)} ({_cell(r.why)}) |" for r in g.itertuples()]
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
