"""Chapter 4's numbers in words: Fig. 4a's observation gap, the protocols' headline numbers
(Fig. 4b-6, Table 4), where the toy turns, LongPPL's N axis against the seed spread, the title
claim (§4.2) and each place where the toy's protocol order differs from the paper's, as
Markdown the chapter displays.

Each function turns results computed in a run into sentences with the numbers inline and
the paper's numbers beside them, so a chapter's conclusions are always the ones its own
run supports. Nothing here computes a result; it reads tables the experiments return.
"""

from __future__ import annotations

import pandas as pd

from nblib.budgets import targets as T
from nblib.chapters.prose import bullets
from nblib.lccp.law_checks import longppl_seed_spread, n_axis_pairs
from nblib.probes import grid_ladder as GL
from nblib.stats import spearman_rho


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
    rho = spearman_rho(g.dl, g.longppl)
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
