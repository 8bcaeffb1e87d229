"""The evidence behind the next toy budget (chapter 2): loss against tokens at several batch
sizes and learning rates per shape, and when each run starts to copy.

The records come from `benchmarks/toy_lr_batch_probe.py` (benchmarks/results/
toy_lr_batch_probe.jsonl): one constant-LR short-stage run per (shape, batch, LR) at a
128-token context, measured at fixed shares of an equal token budget, as in the
critical-batch-size literature (McCandlish et al. 2018): a batch below the critical batch
reaches a loss in fewer tokens, one above it in fewer steps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

COPY_THRESHOLD = 1.0  # nats: the bar for "copies" (random-segment copy gain)


def lr_batch_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per measured point: shape, N, batch (sequences and tokens per step), LR, step,
    tokens, held-out loss and the copy gains at a quarter and a half of the context."""
    rows = []
    for r in records.itertuples(index=False):
        for p in r.points:
            gains = {int(k): v for k, v in p["copy_gain"].items()}
            near, far = sorted(gains)
            rows.append({"shape": f"d{r.d} x {r.layers} layers, {r.heads} heads", "N (non-emb.)": r.n_params,
                         "context": r.seq_len, "batch": r.batch, "tokens/step": r.batch * r.seq_len, "LR": r.lr,
                         "step": p["step"], "tokens": p["step"] * r.batch * r.seq_len,
                         "held-out loss": p["heldout_loss"], f"copy gain @{near}": gains[near],
                         f"copy gain @{far}": gains[far]})
    return pd.DataFrame(rows)


def lr_batch_summary(table: pd.DataFrame, threshold: float = COPY_THRESHOLD) -> pd.DataFrame:
    """Per (shape, batch, LR): the final held-out loss, whether the loss still fell over the
    last half of the tokens, the largest copy gain at a quarter of the context, and the first
    measured step (and tokens) at which that gain reached `threshold` (NaN: never)."""
    near = next(c for c in table.columns if c.startswith("copy gain @"))
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
