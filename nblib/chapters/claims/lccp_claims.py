"""The LCCP paper's claims on the scorecard (chapters 3-5): each claim, the source's number,
how the toy's number is read from a build's saved tables, and the rule that judges it
(`nblib.chapters.claims.scorecard` lists the verdicts).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nblib.budgets import get_budget
from nblib.budgets import targets as T
from nblib.chapters.claims.claim import NOT_MEASURED, Claim, Conditions, Figures, Measure, Rule
from nblib.chapters.claims.noise import noise_verdict, table14_noise
from nblib.chapters.claims.paper_values import FIG17_RATIO, RETRIEVAL_HEADS, TABLE3_LD, TABLE4_CL4, TABLE14_LATER
from nblib.lccp import scaling
from nblib.lccp.law_checks import law_conditions, longppl_seed_spread
from nblib.probes import grid_ladder as GL
from nblib.probes import records
from nblib.stats import spearman_rho


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
    rho = spearman_rho(g.dl, g.longppl)
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
    rho = spearman_rho(g.dl, g.piece_hit)
    rho_gain = spearman_rho(g.dl, g.needle_gain) if g.needle_gain.nunique() > 1 else float("nan")
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
    rho = spearman_rho(tracked.index, tracked.values)
    first, last = t[t.dl == t.dl.min()], t[t.dl == t.dl.max()]
    thr = T.RETRIEVAL_HEAD
    rises = tracked.iloc[-1] > tracked.iloc[0]
    verdict = "reproduced" if rho >= T.RETRIEVAL_RHO and rises else "partly" if rises else "not"
    return Measure(rho, f"tracked heads' mean {tracked.iloc[0]:.2f} → {tracked.iloc[-1]:.2f} (ρ with Dl {rho:+.2f}); "
                        f"best head {first.score.max():.2f} at {t.dl.min():g} → {last.score.max():.2f} at "
                        f"{t.dl.max():g}; heads above {thr:g}: {(first.score > thr).sum()} → "
                        f"{(last.score > thr).sum()} of {t.groupby(['layer', 'head']).ngroups}", verdict)


_LATER = sum(v > 0 for v in TABLE14_LATER.values()) / len(TABLE14_LATER)
LCCP = "LCCP paper"

LCCP_CLAIMS = (
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
)
