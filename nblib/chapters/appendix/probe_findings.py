"""The appendix's probes in words (chapters 11-12): the first toy budget's levers, the code
needles and their levers, the needles on the design ladder's trajectories and chapter 5 run
whole on each design, and where Linear-Decay catches up past the grid, as Markdown the
chapters display.

Each function turns results computed in a run into sentences with the numbers inline and
the paper's numbers beside them, so a chapter's conclusions are always the ones its own
run supports. Nothing here computes a result; it reads tables the experiments return.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nblib.chapters.prose import bullets
from nblib.probes import needle_ladder as NL


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
# Appendix B (chapter 12): the needles and the protocols on the design ladder
# ---------------------------------------------------------------------------------------
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


def short_seed_findings(table: pd.DataFrame, lccp: pd.DataFrame | None = None) -> str:
    """Chapter 11's words on the short-stage seed probe (`nblib.probes.short_seeds.short_seed_table`):
    per design and scale, each stable LR's mean held-out loss over the seeds and its seed spread at
    each Ds, what the largest Ds gains over the smallest, and which LR has the lowest mean and the
    smallest spread at the largest Ds. `lccp` (`short_seeds.lccp_seed_spread`): the same seeds'
    spread in log LongPPL after LCCP, set beside the short stage's where design, scale, LR and Ds
    match, with the factor between them."""
    if table.empty:
        return "No short-stage seed records yet (`python -m nblib.probes short_seeds`)."
    out = []
    for (design, scale), g in table.groupby(["budget", "scale"], sort=False):
        per_lr = []
        for lr, h in g.sort_values("ds").groupby("lr", sort=False):
            pts = "; ".join(f"Ds {r.ds:g}: {r.mean:.3f} (spread {r.spread:.3f})" for r in h.itertuples())
            gain = f", Ds {h.ds.iloc[0]:g} -> {h.ds.iloc[-1]:g} {h['mean'].iloc[-1] - h['mean'].iloc[0]:+.3f}" if len(h) > 1 else ""
            per_lr.append(f"LR {lr:g}, {int(h.seeds.min())} seeds: {pts}{gain}")
        top = g[g["ds"] == g["ds"].max()]
        line = f"- **{design}**, {scale}, held-out loss at the short context (nats): " + " | ".join(per_lr) + "."
        if top["lr"].nunique() > 1:
            low, tight = top.loc[top["mean"].idxmin()], top.loc[top["spread"].idxmin()]
            line += (f" At Ds {top.ds.iloc[0]:g} the lowest mean is LR {low.lr:g}'s and the smallest seed spread "
                     f"LR {tight.lr:g}'s ({tight.spread:.3f} against {top.spread.max():.3f}).")
        for r in g.itertuples():
            m = (pd.DataFrame() if lccp is None else
                 lccp[(lccp["budget"] == design) & (lccp["scale"] == scale) & (lccp["ds"] == r.ds)
                      & np.isclose(lccp["lr"], r.lr) & (lccp["seeds"] >= 2)])
            for x in m.itertuples():
                line += (f" After LCCP (the N-axis probe, Dl {x.dl:g}) the same {x.seeds} seeds at LR {r.lr:g} spread "
                         f"{x.spread:.3f} nats in log LongPPL at Ds {r.ds:g}, {x.spread / r.spread:.1f}x their short "
                         f"stage's {r.spread:.3f}.")
        out.append(line)
    return "\n".join(out)


def short_seed_lccp_findings(table: pd.DataFrame) -> str:
    """Chapter 11's words on the short-stage seeds after LCCP (`short_seeds.short_seed_lccp_table`):
    per design, scale, short-stage LR and LCCP LR, for each Dl the seed spread of the long-context
    loss beyond the short context's span and within it, against the spread the same seeds' short
    stages had; then per design, LRs and Dl, each scale's mean loss beyond the span (Eq. 1 wants
    it falling with N)."""
    if table.empty:
        return "No LCCP records of the short-stage seed probe yet (`short_seeds --dls`)."
    near = next(c for c in table if c.endswith(" spread") and "_below_" in c)
    far = next(c for c in table if c.endswith(" spread") and "_from_" in c)
    far_mean = far.replace(" spread", " mean")
    span = near.split("_below_")[1].split()[0]
    out = []
    for (design, scale, short_lr, lr), g in table.groupby(["budget", "scale", "lr", "lccp_lr"], sort=False):
        pts = "; ".join(f"Dl {r.dl:g}: {r[far]:.3f} beyond, {r[near]:.3f} within ({r[far] / r['short_spread']:.1f}x "
                        f"the short stage's {r['short_spread']:.3f})" for _, r in g.sort_values("dl").iterrows())
        out.append(f"- **{design}**, {scale}, short stage at LR {short_lr:g}, LCCP at LR {lr:g}, Ds {g.ds.iloc[0]:g}, "
                   f"{int(g.seeds.min())} short seeds: "
                   f"seed spread of the long-context loss beyond the first {span} tokens and within them: {pts}.")
    for (design, short_lr, lr, dl), g in table.groupby(["budget", "lr", "lccp_lr", "dl"], sort=False):
        if g["scale"].nunique() > 1:
            means = ", ".join(f"{r.scale} {r[far_mean]:.3f}" for _, r in g.iterrows())
            out.append(f"- **{design}**, short stage at LR {short_lr:g}, LCCP at LR {lr:g}, Dl {dl:g}: mean loss beyond "
                       f"the first {span} tokens {means} "
                       f"(largest seed spread among them {g[far].max():.3f}).")
    return "\n".join(out)


def seed_noise_findings(noise: pd.DataFrame) -> str:
    """Chapter 11's words on `nblib.probes.n_axis.seed_noise_table`: per design, the short-seed
    spread of log LongPPL against the fall in N across the probed scales, and the seeds per scale
    a step of the mean size would need to stand two standard errors from zero."""
    out = []
    for r in noise.itertuples():
        need = ("the axis does not fall, so no number of seeds shows a fall" if not np.isfinite(r.seeds_needed)
                else f"a step of that size stands two standard errors from zero only with {r.seeds_needed:.0f} "
                     f"short seeds per scale")
        out.append(f"- **{r.budget}**: one short seed's log LongPPL scatters with a standard deviation of "
                   f"{r.sigma:.3f} nats; from {r.scales} (N x{r.n_ratio:.2f}) the mean changes by {r.effect:+.3f} "
                   f"({r.per_step:+.3f} per adjacent step, {r.steps} step{'s' if r.steps > 1 else ''}): {need}.")
    return "\n".join(out)


def n_axis_findings(table: pd.DataFrame) -> str:
    """Chapter 11's words on the N-axis probe (`nblib.probes.n_axis.n_axis_table`): per design,
    the range of the larger scale's mean log LongPPL minus the smaller's over the probed points
    (Eq. 1 wants it negative) against the range of the short-stage seed spread."""
    if table.empty:
        return "No N-axis probe records yet (`python -m nblib.probes n_axis`)."
    out = []
    for (design, pair), g in table.groupby(["budget", "pair"], sort=False):
        d, s = g["larger - smaller"], g["short-seed spread"]
        inside = int((d.abs() <= s).sum())
        line = (f"- **{design}**, {pair} at {len(g)} points ({int(g['seeds'].min())} short seeds each): "
                f"larger minus smaller {d.min():+.3f} to {d.max():+.3f} nats in log LongPPL, against a "
                f"short-seed spread of {s.min():.3f} to {s.max():.3f}; {inside} of {len(g)} differences "
                f"lie inside the spread.")
        if "difference SE" in g and g["seeds"].min() >= 3:  # a standard error worth the name
            z = d / g["difference SE"]
            line += (f" Over the seeds, the difference is {z.min():+.1f} to {z.max():+.1f} standard errors "
                     f"({int((z.abs() < 2).sum())} of {len(g)} within two).")
        out.append(line)
    return "\n".join(out)
