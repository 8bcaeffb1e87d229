"""The evidence behind the next toy budget (chapter 2): loss against tokens at several batch
sizes and learning rates per shape, and when each run starts to copy.

The records come from `python -m nblib.probes lr_batch` (data/probes/
toy_lr_batch_probe.jsonl): one constant-LR short-stage run per (shape, batch, LR) at a
128-token context, measured at fixed shares of an equal token budget, as in the
critical-batch-size literature (McCandlish et al. 2018): a batch below the critical batch
reaches a loss in fewer tokens, one above it in fewer steps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from nblib.budgets import PAPER_N, SCALES, get_budget, swiglu_width
from nblib.lccp import grid
from nblib.lccp.diagnostics import COPY_THRESHOLD
from nblib.models import build_model
from nblib.chapters.budget_words import (_NUMBER_WORDS, _SHARE_WORDS, _base, _bases, _contexts, _multiples,
                                     _unit_words, shape_words)


def lr_batch_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per measured point: shape, N, batch (sequences and tokens per step), LR, step,
    tokens, held-out loss and the copy gains at a quarter and a half of the context."""
    rows = []
    for r in records.itertuples(index=False):
        mix = getattr(r, "copy_fraction", 0.0)
        mix = 0.0 if mix is None or mix != mix else float(mix)  # records before the copy-mix lever: none
        for p in r.points:
            gains = {int(k): v for k, v in p["copy_gain"].items()}
            near, far = sorted(gains)
            variant = getattr(r, "variant", None)
            rows.append({"shape": f"d{r.d} x {r.layers} layers, {r.heads} heads"
                         + (f", {variant}" if isinstance(variant, str) and variant != "plain" else "")
                         + (f", {mix:.0%} copy mix" if mix else ""), "N (non-emb.)": r.n_params,
                         "context": r.seq_len, "batch": r.batch, "tokens/step": r.batch * r.seq_len, "LR": r.lr,
                         "step": p["step"], "tokens": p["step"] * r.batch * r.seq_len,
                         "held-out loss": p["heldout_loss"], f"copy gain @{near}": gains[near],
                         f"copy gain @{far}": gains[far]})
    return pd.DataFrame(rows)


def copy_gain_column(table: pd.DataFrame) -> str:
    """The probe table's random-segment copy gain column (`copy gain @<distance>`, the first)."""
    return next(c for c in table.columns if c.startswith("copy gain @"))


def lr_batch_summary(table: pd.DataFrame, threshold: float = COPY_THRESHOLD) -> pd.DataFrame:
    """Per (shape, batch, LR): the final held-out loss, whether the loss still fell over the
    last half of the tokens, the largest copy gain at a quarter of the context, and the first
    measured step (and tokens) at which that gain reached `threshold` (NaN: never)."""
    near = copy_gain_column(table)
    out = []
    for (shape, n, batch, lr), g in table.groupby(["shape", "N (non-emb.)", "batch", "LR"], sort=True):
        g = g.sort_values("step")
        mid = g.iloc[(len(g) - 1) // 2]
        onset = g[g[near] >= threshold]
        out.append({"shape": shape, "N (non-emb.)": n, "batch": batch, "LR": lr, "steps": int(g["step"].iloc[-1]),
                    "tokens": int(g["tokens"].iloc[-1]), "final held-out loss": g["held-out loss"].iloc[-1],
                    "fall over the second half": mid["held-out loss"] - g["held-out loss"].iloc[-1],
                    f"max {near}": g[near].max(),
                    "copies from step": float(onset["step"].iloc[0]) if len(onset) else np.nan,
                    "copies from tokens": float(onset["tokens"].iloc[0]) if len(onset) else np.nan})
    return pd.DataFrame(out)


def lr_batch_findings(summary: pd.DataFrame, threshold: float = COPY_THRESHOLD) -> str:
    """What the probe says, shape by shape, as Markdown sentences read from `lr_batch_summary`."""
    near = next(c for c in summary.columns if c.startswith("max copy gain @"))
    lines = []
    for shape, g in summary.groupby("shape", sort=False):
        best = g.loc[g["final held-out loss"].idxmin()]
        parts = [f"**{shape}** (N = {int(best['N (non-emb.)']):,}): the lowest held-out loss after "
                 f"{best['tokens'] / 1e6:.1f}M tokens is {best['final held-out loss']:.3f}, at batch {int(best['batch'])} "
                 f"and LR {best['LR']:g}"]
        for lr, h in g.groupby("LR"):
            if h["batch"].nunique() > 1:
                lo, hi = h.loc[h["batch"].idxmin()], h.loc[h["batch"].idxmax()]
                better = "larger" if hi["final held-out loss"] < lo["final held-out loss"] else "smaller"
                parts.append(f"at LR {lr:g} and equal tokens the {better} batch wins ({int(lo['batch'])}: "
                             f"{lo['final held-out loss']:.3f}, {int(hi['batch'])}: {hi['final held-out loss']:.3f}"
                             f"{', in a quarter of the steps' if better == 'larger' else ''})")
        copies = g[g["copies from step"].notna()]
        if len(copies):
            parts.append("it copies (gain >= %g nat%s) at %s" % (
                threshold, "" if threshold == 1 else "s", "; ".join(
                    f"batch {int(r.batch)}, LR {r.LR:g} from step {int(r['copies from step']):,} "
                    f"({r['copies from tokens'] / 1e6:.1f}M tokens)" for _, r in copies.iterrows())))
        else:
            parts.append(f"no run copies within {g['tokens'].max() / 1e6:.1f}M tokens (largest gain "
                         f"{g[near].max():.2f} nats)")
        flat = g[g["fall over the second half"] < 0.02]
        if len(flat):
            parts.append("the loss stopped falling over the second half at " + ", ".join(
                f"batch {int(r.batch)} / LR {r.LR:g}" for _, r in flat.iterrows()))
        lines.append("- " + "; ".join(parts) + ".")
    return "\n".join(lines)


def lccp_copy_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per (parent shape, variant, seed; LCCP tokens) of `python -m nblib.probes lccp_copy`: the
    random-segment copy gain at each measured distance, in short contexts (0 tokens: the
    parent's weights with the LCCP RoPE base, before any LCCP step)."""
    rows = []
    for r in records.itertuples(index=False):
        for p in r.points:
            variant = getattr(r, "variant", None)
            seed = getattr(r, "parent_seed", None)
            heads = getattr(r, "heads", None)
            parent = (f"d{r.d} x {r.layers} layers" + (f", heads of {r.d // int(heads)}" if heads == heads and heads else "")
                      + (f", {variant}" if isinstance(variant, str) and variant != "plain" else "")
                      + (f", seed {int(seed)}" if isinstance(seed, (int, float)) and seed == seed and seed > 0 else ""))
            row = {"parent": parent, "N (non-emb.)": r.n_params, "LCCP context": r.long_seq_len,
                   "RoPE base": r.rope_base, "LCCP tokens": p["tokens"], "LCCP steps": p["step"]}
            for dist, g in sorted(p["copy_gain"].items(), key=lambda kv: int(kv[0])):
                row[f"copy gain @{int(dist)}"] = g
            rows.append(row)
    return pd.DataFrame(rows).set_index(["parent", "LCCP tokens"])


def measured_rates(records: pd.DataFrame) -> pd.DataFrame:
    """Training throughput of each probed shape, read off its probe record (tokens / wall
    seconds of the whole run, one thread, with the other core busy as in the book), and the
    effective FLOP rate it implies (the model's analytic training FLOPs per token)."""
    rows = []
    for r in records.itertuples(index=False):
        if not getattr(r, "wall_s", 0) or r.wall_s < 30:  # cached or too short to time
            continue
        f = _flops(r.d, r.layers, r.heads, r.kv, r.seq_len)
        rows.append({"shape": f"d{r.d} x {r.layers} layers, {r.heads} heads", "d": r.d, "context": r.seq_len,
                     "tokens/s": r.tokens / r.wall_s, "GFLOP/s": r.tokens / r.wall_s * f / 1e9})
    return pd.DataFrame(rows).groupby(["shape", "d", "context"], as_index=False).max()


def _flops(d, layers, heads, kv, seq_len, vocab=1024):
    cfg = dict(vocab_size=vocab, d_model=d, n_layers=layers, n_heads=heads, n_kv_heads=kv,
               d_ff=swiglu_width(d), rope_base=1e4, max_seq_len=4096, tie_embeddings=True)
    with torch.device("meta"):
        return build_model("llama", cfg).flops_per_token(seq_len)


def copying_grid_cost(shapes: list[tuple], gflops: float, ds_tokens: tuple, dl_tokens: tuple,
                      short: int = 128, n_seeds: int = 2, s5_trajectory: float | None = None,
                      cores: int = 2) -> pd.DataFrame:
    """Predicted training wall time, on `cores` cores at `gflops` effective GFLOP/s each, of
    a Part 1 grid with Ds and Dl given in tokens (the same at every scale, so every scale gets
    the steps it needs to copy) and the LCCP context 8x `short`:

    - short stage (§3.1, App. A.3): `grid.nominal_short_stage_tokens`, the grid's trunk and
      decays before rounding to steps (a design has no batch size yet);
    - Linear-Decay LCCP: every (Ds, Dl) at S1-S4, the diagonal (i-th Ds with i-th Dl) at S5;
    - Constant LCCP (§4.1): `n_seeds` trajectories to the largest Dl per (scale, Ds) at
      S1-S4, and one S5 trajectory of `s5_trajectory` tokens (default: twice the largest Dl).

    `shapes`: [(scale, d, layers, heads, kv)]. One row per scale and stage: tokens and minutes.
    """
    s5_traj = s5_trajectory if s5_trajectory is not None else 2 * max(dl_tokens)
    rows = []
    for scale, d, layers, heads, kv in shapes:
        fs, fl = (_flops(d, layers, heads, kv, t) for t in (short, 8 * short))
        stages = {"short (trunk + decays)": (grid.nominal_short_stage_tokens(ds_tokens), fs)}
        if scale == "S5":
            stages["Linear-Decay LCCP"] = (sum(dl_tokens[:len(ds_tokens)]), fl)
            stages["Constant LCCP"] = (s5_traj, fl)
        else:
            stages["Linear-Decay LCCP"] = (len(ds_tokens) * sum(dl_tokens), fl)
            stages["Constant LCCP"] = (n_seeds * len(ds_tokens) * max(dl_tokens), fl)
        for stage, (tokens, f) in stages.items():
            rows.append({"scale": scale, "shape": f"d{d} x {layers} layers", "stage": stage, "tokens": int(tokens),
                         "core-minutes": tokens * f / (gflops * 1e9) / 60})
    out = pd.DataFrame(rows)
    out["wall minutes (2 cores)"] = out["core-minutes"] / cores
    return out


# The designs whose cost the ladder predicts: five depth-4 scales each, Ds and Dl in tokens
# (the same at every scale, so the smallest model gets the steps it needs to copy; the law is
# fitted on tokens, so nothing in it needs Ds to be a multiple of N). Widths and head counts
# keep heads of 16 dimensions or fewer, as the probed shapes do.
COPY_DESIGNS = {
    "3x3, d64-d96": ([("S1", 64, 4, 4, 2), ("S2", 72, 4, 4, 2), ("S3", 80, 4, 4, 2), ("S4", 88, 4, 4, 2),
                      ("S5", 96, 4, 6, 2)], (3e6, 4.5e6, 6e6), (0.33e6, 0.67e6, 1e6)),
    "5x5, d64-d96": ([("S1", 64, 4, 4, 2), ("S2", 72, 4, 4, 2), ("S3", 80, 4, 4, 2), ("S4", 88, 4, 4, 2),
                      ("S5", 96, 4, 6, 2)], (2e6, 3e6, 4e6, 5e6, 6e6), (0.2e6, 0.4e6, 0.6e6, 0.8e6, 1e6)),
    "3x3, d48-d96": ([("S1", 48, 4, 4, 2), ("S2", 56, 4, 4, 2), ("S3", 64, 4, 4, 2), ("S4", 80, 4, 4, 2),
                      ("S5", 96, 4, 6, 2)], (6e6, 9e6, 12e6), (0.67e6, 1.33e6, 2e6)),
}


def design_costs(gflops: float, designs: dict = COPY_DESIGNS) -> pd.DataFrame:
    """`copying_grid_cost` of each design, summed per stage: one row per design, minutes of
    training on two cores (evaluation not included)."""
    rows = []
    for name, (shapes, ds, dl) in designs.items():
        c = copying_grid_cost(shapes, gflops, ds, dl)
        per = c.groupby("stage")["wall minutes (2 cores)"].sum()
        rows.append({"design": name, "Ds (M tokens)": ", ".join(f"{d / 1e6:g}" for d in ds),
                     "Dl (M tokens)": ", ".join(f"{d / 1e6:g}" for d in dl), "training tokens (M)": c["tokens"].sum() / 1e6,
                     **{f"{k} (min)": v for k, v in per.items()}, "total (min, 2 cores)": per.sum()})
    return pd.DataFrame(rows).set_index("design")


def ladder_findings(summary: pd.DataFrame, lccp: pd.DataFrame, costs: pd.DataFrame, budget_min: float = 60.0,
                    threshold: float = COPY_THRESHOLD) -> str:
    """The ladder's verdict as Markdown bullets, every number read from its tables: where
    copying starts per width (the batch-16 runs), what the copy-mix lever did, whether LCCP
    carries copying to twice the short context, and what a copying grid would cost."""
    near = next(c for c in summary.columns if c.startswith("max copy gain @"))
    lad = summary[(summary["batch"] == 16)].sort_values("N (non-emb.)")
    onset = []
    for _, r in lad.iterrows():
        if r["copies from tokens"] == r["copies from tokens"]:
            onset.append(f"{r['shape']} (N {int(r['N (non-emb.)']):,}) from {r['copies from tokens'] / 1e6:.1f}M tokens "
                         f"(step {int(r['copies from step']):,})")
        else:
            onset.append(f"{r['shape']} (N {int(r['N (non-emb.)']):,}) not within {r['tokens'] / 1e6:.0f}M tokens "
                         f"(largest gain {r[near]:.2f})")
    lines = [f"Copy onset (random-segment gain >= {threshold:g} nat at a quarter of the 128-token context; batch "
             "16 x 128, LR 5e-3, constant): " + "; ".join(onset) + ". Wider models start sooner in tokens and in steps."]
    for parent, g in lccp.groupby(level="parent", sort=False):
        g = g.droplevel("parent")
        far = [c for c in g.columns if c.startswith("copy gain @")]
        two = far[-2]  # twice the short context
        lines.append(f"LCCP from {parent} (context {int(g['LCCP context'].iloc[0])}, RoPE base "
                     f"{g['RoPE base'].iloc[0]:g}): the gain {two.replace('copy gain ', '')} goes "
                     f"{g[two].iloc[0]:.2f} (before LCCP) -> {g[two].iloc[-1]:.2f} after {g.index[-1] / 1e6:.1f}M tokens, "
                     f"while {far[1].replace('copy gain ', '')} goes {g[far[1]].iloc[0]:.2f} -> {g[far[1]].iloc[-1]:.2f}: "
                     + ("LCCP carries copying to twice the short context." if g[two].iloc[-1] >= threshold else
                        "copying does not reach twice the short context within these LCCP tokens."))
    total = costs["total (min, 2 cores)"]
    lines.append("Predicted training time of a grid whose every scale copies (Ds and Dl in tokens, the measured "
                 "effective FLOP rate): " + "; ".join(f"{k} {v:.0f} min" for k, v in total.items())
                 + f", against {budget_min:.0f} min for chapters 1-5 with evaluation. The cheapest is "
                 f"{total.min() / budget_min:.1f}x over the budget, and LCCP at the 8x context is "
                 f"{(1 - costs.loc[total.idxmin(), 'short (trunk + decays) (min)'] / total.min()):.0%} of it.")
    return "\n".join(f"- {line}" for line in lines)


# ---------------------------------------------------------------------------------------- smeared keys
def smear_ablation_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per measured point of chapter 2's smeared-key ablation
    (data/probes/toy_smear_ablation.jsonl, written by `python -m nblib.probes lr_batch`
    with --variant): width, architecture variant (nblib.budgets.LLAMA_VARIANTS), seed, N,
    tokens, held-out loss and the random-segment copy gains at a quarter and a half of the
    context. ValueError naming the missing columns when `records` are not such records."""
    need = {"d", "layers", "heads", "kv", "variant", "seed", "n_params", "seq_len", "batch", "lr", "points"}
    missing = sorted(need - set(records.columns))
    if missing:
        raise ValueError(f"smeared-key ablation records lack columns {missing}; allowed: the JSON lines of "
                         "`python -m nblib.probes lr_batch` run with --variant")
    rows = []
    for r in records.itertuples(index=False):
        for p in r.points:
            gains = {int(k): v for k, v in p["copy_gain"].items()}
            near, far = sorted(gains)
            rows.append({"shape": f"d{r.d} x {r.layers} layers, {r.heads} heads of {r.d // r.heads}, {r.kv} KV head"
                         + ("s" if r.kv > 1 else ""), "variant": r.variant, "seed": int(r.seed),
                         "N (non-emb.)": int(r.n_params), "context": int(r.seq_len), "batch": int(r.batch), "LR": r.lr,
                         "step": int(p["step"]), "tokens": int(p["step"]) * r.batch * r.seq_len,
                         "held-out loss": p["heldout_loss"], f"copy gain @{near}": gains[near],
                         f"copy gain @{far}": gains[far], "wall s": getattr(r, "wall_s", np.nan)})
    return pd.DataFrame(rows)


def smear_ablation_summary(table: pd.DataFrame) -> pd.DataFrame:
    """The ablation at its last measured point: one row per (shape, variant, seed) with N,
    tokens, held-out loss, both copy gains and the run's training wall time."""
    last = table.sort_values("step").groupby(["shape", "variant", "seed"], sort=False).tail(1)
    cols = ["shape", "variant", "seed", "N (non-emb.)", "tokens", "held-out loss"]
    cols += [c for c in table.columns if c.startswith("copy gain @")] + ["wall s"]
    order = {v: i for i, v in enumerate(("plain", "smeared"))}
    last = last.assign(_w=last["N (non-emb.)"], _v=last["variant"].map(order).fillna(9))
    return last.sort_values(["_w", "_v", "seed"])[cols].reset_index(drop=True)


def smear_ablation_findings(summary: pd.DataFrame, threshold: float = COPY_THRESHOLD) -> str:
    """The ablation's verdict as Markdown bullets, every number read from `smear_ablation_summary`:
    per shape, the plain and the smeared model's copy gain range over seeds at equal tokens, what
    the smear does to the held-out loss, and the range of training wall times."""
    near = copy_gain_column(summary)
    lines = []
    for shape, g in summary.groupby("shape", sort=False):
        by = {v: h for v, h in g.groupby("variant")}
        if not {"plain", "smeared"} <= set(by):
            continue
        p, s = by["plain"], by["smeared"]
        seeds = ", ".join(map(str, sorted(set(g["seed"]))))
        verdict = ("only the smeared model copies" if s[near].min() >= threshold > p[near].max() else
                   "both copy" if p[near].min() >= threshold else "neither copies on every seed")
        lines.append(f"**{shape}** after {g['tokens'].max() / 1e6:.1f}M tokens (seeds {seeds}): {near} "
                     f"{p[near].min():.2f} to {p[near].max():.2f} nats plain, {s[near].min():.2f} to "
                     f"{s[near].max():.2f} smeared: {verdict} (threshold {threshold:g} nat). Held-out loss "
                     f"{p['held-out loss'].mean():.3f} plain, {s['held-out loss'].mean():.3f} smeared (mean over seeds); "
                     f"{g['wall s'].min():.0f}-{g['wall s'].max():.0f} s of training per run on one thread.")
    return "\n".join(f"- {line}" for line in lines)



def grid_design_table(b, shapes: pd.DataFrame, lccp_copy: pd.DataFrame) -> pd.DataFrame:
    """Chapter 2's design table of the toy grid: one row per choice, its value at budget `b`
    (read off the budget, and every count of runs and steps off the run configs of
    `nblib.lccp.grid.grid_runs`), the paper's (the `full` budget's, LCCP paper §3.1, App. A.3),
    and the measurement it rests on, read off the probe tables: `shapes` is `lr_batch_summary`
    of the grid's shapes (data/probes/toy_grid_shapes.jsonl), `lccp_copy` is
    `lccp_copy_table`."""
    spec, paper = b.scale("S1"), get_budget("full")
    with grid.placeholder_corpus():  # counts only: the configs are not trained from here
        runs = {(st.stage, st.scale): st.configs for st in grid.grid_runs(b)}
    ld, wsd = runs[("linear-decay", "S1")], runs[("short", "S1")][-1]
    n_ds, n_dl = len({c.meta["ds_mult"] for c in ld}), len({c.meta["dl_mult"] for c in ld})
    n_s5, n_seeds = len(runs[("linear-decay", "S5")]), len({c.seed for c in runs[("constant", "S1")]})
    share = ld[0].tokens_per_step / wsd.tokens_per_step
    layers = {b.scale(s).model["n_layers"] for s in SCALES}
    after = lccp_copy[lccp_copy.index.get_level_values("LCCP tokens") > 0]

    def gain_range(pattern):
        sel = after[after.index.get_level_values("parent").str.contains(pattern, regex=False)]["copy gain @256"]
        return f"{sel.min():.1f}-{sel.max():.1f}" if len(sel) else "n/a"

    onset = shapes["copies from tokens"]
    s1_ds = b.n_tokens("S1", b.ds_multiples[0])
    bases, abf, ext = _bases(b)
    p_bases, p_abf, p_ext = _bases(paper)
    p_spec = paper.scale("S1")
    rows = [
        ("shapes", shape_words(b),
         f"Llama, {PAPER_N['S1'] / 1e6:.0f}M-{PAPER_N['S5'] / 1e6:.0f}M non-embedding",
         "copy gain 256 tokens back after 0.25-1M LCCP tokens: heads of 32 "
         f"{gain_range('heads of 32, smeared')} nats, heads of 16 {gain_range('heads of 16, smeared')} (LCCP table above); "
         "with one KV head shared by every query head, or below d64, a long constant-LR LCCP lost the copying "
         "again (the erosion probes, and grid F in the design ladder)"),
        ("span of N", f"{b.n_params('S1'):,} .. {b.n_params('S5'):,} ({b.n_params('S5') / b.n_params('S1'):.1f}x)",
         f"{PAPER_N['S5'] / PAPER_N['S1']:.0f}x",
         (f"{_NUMBER_WORDS.get(min(layers), min(layers))} layers at every scale: width alone spans N, so S1 keeps a "
          f"{spec.model.get('head_size') or spec.model['d_model'] // spec.model['n_heads']}-dim head")
         if len(layers) == 1 else "width and depth span N"),
        ("short context", f"{b.short_seq_len} tokens", f"{paper.short_seq_len:,}",
         f"every probed shape copies 32 tokens back by {onset.max() / 1e6:.1f}M tokens at the latest (table below)"),
        ("LCCP / extension contexts", _contexts(b, str), _contexts(paper, lambda n: f"{n // 1024}K"),
         "the paper's ratios; 8x at a tenth of the LR carried copying farthest at d32 (LCCP table above)"),
        ("RoPE bases", f"{bases} (ABF {abf} at LCCP, {ext} at the extension)", f"{p_bases} ({p_abf}, {p_ext})",
         "the drop of log LongPPL from Dl = 10 to 30 N(S1) is the same at every scale at 5e7, not at 5e5 "
         "(RoPE-base probe above), and S2 falls with Ds"),
        ("token unit", _unit_words(b), _unit_words(paper),
         "copying sets in after a similar number of tokens at every width (table below); the unit is pinned "
         "to the first toy S1's N, so the grid's token counts stayed when S1 grew"),
        ("Ds", ", ".join(f"{d:g}" for d in b.ds_multiples) + f" x {b.unit} = "
         + ", ".join(f"{b.n_tokens('S1', d) / 1e6:.2f}M" for d in b.ds_multiples),
         _multiples(paper.ds_multiples), f"S1's smallest Ds ({s1_ds / 1e6:.2f}M) is {s1_ds / onset.max():.1f}x past the latest onset"),
        ("Dl", ", ".join(f"{d:g}" for d in b.dl_multiples) + f" x {b.unit} = "
         + ", ".join(f"{b.n_tokens('S1', d) / 1e6:.2f}M" for d in b.dl_multiples),
         _multiples(paper.dl_multiples), "0.25M LCCP tokens already carry copying to 256 tokens back (LCCP table above)"),
        ("S5", ", ".join(f"({ds:g}, {dl:g})" for ds, dl in b.s5_configs) + f"; trajectory to Dl = {b.s5_trajectory:g}",
         f"{len(paper.s5_configs)} configurations; trajectory to {paper.s5_trajectory:g}N",
         "the diagonal only, dropped for time with the larger Ds and Dl; the trajectory runs past the paper's "
         "end to where chapter 5 reads its needles"),
        ("short stage", f"{wsd.batch_size} x {wsd.seq_len} tokens a step, LR {wsd.schedule['lr']:g}, "
         f"{wsd.schedule['warmup_steps']} warmup steps, {wsd.schedule['kind'].upper()}", "Table 7",
         "the smeared-key ablation's setting (below); at equal tokens the larger batch won in the LR x batch probes"),
        ("LCCP", f"{spec.batch_long} x {b.long_seq_len} tokens a step, LR {b.lccp_lr('S1'):g} "
         f"({b.lccp_lr_frac:g} x the short stage's)",
         f"GBS / {p_spec.batch_short // p_spec.batch_long}, LR / {1 / paper.lccp_lr_frac:g}",
         f"{_SHARE_WORDS.get(share, f'{share:g}x')} the short stage's tokens a step (the paper keeps them equal) so "
         f"that the smallest Dl still takes {min(c.total_steps for c in ld)} steps; with one KV head, LongPPL rose "
         f"with Dl after a few {b.unit} at a tenth of the LR (LCCP LR figure above), with a KV head per query "
         "head it keeps falling (design ladder)"),
        ("grid", f"{n_ds} x {n_dl} at S1-S4, {n_s5} at S5; {n_seeds} Constant seeds",
         f"{len(paper.ds_multiples)} x {len(paper.dl_multiples)} at S1-S4, {len(paper.s5_configs)} at S5; "
         f"{paper.n_constant_seeds} seeds",
         "the rest of the paper's 5 x 5 dropped for time; chapter 3 checks that "
         f"the {n_ds} x {n_dl} still shows the law"),
    ]
    return pd.DataFrame(rows, columns=["choice", f"{b.name}", "paper", "measured"]).set_index("choice")


# ---------------------------------------------------------------------------------------- LCCP LR
def lccp_lr_table(records: pd.DataFrame, extra=()) -> pd.DataFrame:
    """One row per (scale, LCCP LR fraction, Dl point) of `python -m nblib.probes lccp_lr`:
    LongPPL and ShortPPL along a Constant LCCP trajectory (Dl in units of the budget's token
    unit), with the record fields `extra` as columns."""
    rows = []
    for r in records.to_dict(orient="records"):
        for p in r["points"]:
            rows.append({"scale": r["scale"], "Ds": r["ds_mult"], "LCCP LR / short LR": r["lr_frac"], "LCCP LR": r["lr"],
                         "Dl": p["dl_mult"], "LongPPL": p["longppl"], "ShortPPL": p["shortppl"]}
                        | {k: r[k] for k in extra})
    return pd.DataFrame(rows)


def lccp_lr_findings(table: pd.DataFrame) -> str:
    """Per scale and LR fraction: where LongPPL bottoms out along the trajectory, by how much it
    rises after its minimum to the last point, and whether ShortPPL falls throughout."""
    lines = []
    for (scale, frac), g in table.groupby(["scale", "LCCP LR / short LR"], sort=True):
        g = g.sort_values("Dl")
        i = g["LongPPL"].idxmin()
        last = g.iloc[-1]
        rise = np.log(last["LongPPL"] / g.loc[i, "LongPPL"])
        short_falls = bool((np.diff(g["ShortPPL"].to_numpy()[1:]) <= 0).all())
        lines.append(f"- {scale}, LCCP LR {frac:g} x the short stage's: LongPPL {g['LongPPL'].iloc[0]:.2f} at Dl = 0, "
                     f"lowest {g.loc[i, 'LongPPL']:.2f} at Dl = {g.loc[i, 'Dl']:g}, {last['LongPPL']:.2f} at Dl = "
                     f"{last['Dl']:g}" + (f" (**rises {rise:.3f} nats after its minimum**)" if rise > 0 else
                                          " (still falling at the end)")
                     + f"; ShortPPL {'falls throughout' if short_falls else 'does not fall throughout'} "
                     f"({g['ShortPPL'].iloc[1]:.2f} -> {last['ShortPPL']:.2f}).")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- LCCP RoPE base
def lccp_rope_table(records: pd.DataFrame, extra=()) -> pd.DataFrame:
    """`lccp_lr_table` of `python -m nblib.probes lccp_lr --rope-bases` records, with the LCCP
    RoPE base and weight decay of each trajectory as columns, and the record fields `extra`."""
    return lccp_lr_table(records, extra=("rope_base", "weight_decay", *extra)).rename(
        columns={"rope_base": "RoPE base", "weight_decay": "weight decay"})


def s2_heads_table(table: pd.DataFrame, lr_frac: float, dls=(10, 30)) -> pd.DataFrame:
    """Chapter 2's S2 head-layout probe: log LongPPL at each Dl in `dls` and Ds, one row per
    head layout (`lccp_rope_table(..., extra=("heads", "head_size"))` at `lr_frac`), and whether
    it falls with Ds at every one of those Dl (as the monotonicity check of chapter 3 asks)."""
    sel = table[(table["LCCP LR / short LR"] == lr_frac) & table["Dl"].isin(dls)].copy()
    sel["layout"] = [f"{h} x {w}" for h, w in zip(sel["heads"], sel["head_size"])]
    out = sel.pivot_table(index="layout", columns=["Dl", "Ds"], values="LongPPL").apply(np.log)
    out.columns = [f"log LongPPL, Dl {dl:g}, Ds {ds:g}" for dl, ds in out.columns]
    falls = {}
    for layout, g in sel.groupby("layout"):
        falls[layout] = all(bool((np.diff(gg.sort_values("Ds")["LongPPL"].to_numpy()) < 0).all())
                            for _, gg in g.groupby("Dl"))
    out["falls with Ds at every Dl"] = pd.Series(falls)
    return out


def lccp_rope_drops(table: pd.DataFrame, lr_frac: float, ds: float, dl_from: float, dl_to: float) -> pd.DataFrame:
    """How far log LongPPL falls from Dl = dl_from to dl_to along each probed trajectory at
    (lr_frac, ds), one row per RoPE base and one column per scale. The additive law (LCCP paper
    Eq. 2) has no N x Dl term, so it needs this drop to be the same at every N: the row's
    spread across scales is the interaction the law cannot fit."""
    sel = table[(table["LCCP LR / short LR"] == lr_frac) & (table["Ds"] == ds) & (table["weight decay"] == 0.1)]
    log_ppl = sel.pivot_table(index=["RoPE base", "scale"], columns="Dl", values="LongPPL").apply(np.log)
    drops = (log_ppl[dl_from] - log_ppl[dl_to]).unstack("scale")
    spread = drops.max(axis=1) - drops.min(axis=1)
    drops["spread across scales"] = spread.where(drops.count(axis=1) > 1)
    return drops


def lccp_rate_drops(table: pd.DataFrame, rope_base: float, ds: float, dl_from: float, dl_to: float) -> pd.DataFrame:
    """`lccp_rope_drops` at one RoPE base for every LCCP rate probed there: one row per rate
    (LCCP LR / short LR), one column per scale plus the spread; a negative drop is a rise."""
    at = table[table["RoPE base"] == rope_base]
    rows = {frac: lccp_rope_drops(at, frac, ds, dl_from, dl_to).loc[rope_base]
            for frac in sorted(at["LCCP LR / short LR"].unique())}
    return pd.DataFrame(rows).T.rename_axis("LCCP LR / short LR")



def lccp_rope_findings(table: pd.DataFrame, lr_frac: float, dl_from: float, dl_to: float) -> str:
    """The RoPE-base probe in words: per base, the drop of log LongPPL from dl_from to dl_to at
    the largest probed Ds and its spread across scales (`lccp_rope_drops`), and, for a scale
    probed at several Ds, whether LongPPL at dl_to falls with Ds."""
    ds = table["Ds"].max()
    drops = lccp_rope_drops(table, lr_frac, ds, dl_from, dl_to)
    lines = []
    for base, row in drops.iterrows():
        per = ", ".join(f"{s} {v:.3f}" for s, v in row.drop("spread across scales").dropna().items())
        if np.isnan(row["spread across scales"]):
            continue
        lines.append(f"- RoPE base {_base(base)}, LCCP at {lr_frac:g} x the short LR, Ds = {ds:g}: log LongPPL falls "
                     f"from Dl = {dl_from:g} to {dl_to:g} by {per} nats; spread across scales "
                     f"**{row['spread across scales']:.3f}**.")
    sel = table[(table["LCCP LR / short LR"] == lr_frac) & (table["Dl"] == dl_to) & (table["weight decay"] == 0.1)]
    for (scale, base), g in sel.groupby(["scale", "RoPE base"]):
        if g["Ds"].nunique() < 2:
            continue
        g = g.sort_values("Ds")
        falls = bool((np.diff(g["LongPPL"].to_numpy()) < 0).all())
        lines.append(f"- {scale}, RoPE base {_base(base)}: LongPPL at Dl = {dl_to:g} is "
                     + " / ".join(f"{v:.2f}" for v in g["LongPPL"]) + " at Ds = "
                     + " / ".join(f"{d:g}" for d in g["Ds"]) + (" (falls with Ds)." if falls else
                                                               " (**does not fall with Ds**)."))
    return "\n".join(lines)
