"""Does the grid show what the law needs? Checks on the Linear-Decay grid (LCCP paper §3.1-3.2)
that the paper takes for granted at its scale and a toy must earn:

- `copy_gain_table`: every short-stage and Linear-Decay endpoint's random-segment copy gain
  (nblib.metrics.probes.copy_gain, its defaults) at distances inside the short context and
  past it. LongPPL scores the tokens that need distant context (App. A.1); a model that does
  not copy from past the local chunk has nothing for the law to measure.
- `stable_phase_table` and `seed_spread`: held-out loss of every scale's stable trunk at its
  midpoint and end (App. A.3's WSD stable phase), two seeds at `SPREAD_SCALES`: is the
  short stage still learning, by more than two seeds differ?
- `monotonicity_table`: LongPPL and ShortPPL against N, Ds (mean over Dl) and Dl (mean over
  Ds), every rise measured against the seed spread (Fig. 2's trends, step by step).
- `reference_margin`: the LongPPL reference (neural part plus cache model, as it selects key
  tokens) against the grid's models beyond the local chunk: it must be the stronger one there,
  as Llama-3.1-8B is against the paper's models (App. A.1).

Every measurement is cached next to the run it measures (`Run.memo`), so a chapter
re-executed over a finished store recomputes nothing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nblib.budgets import SCALES
from nblib.lccp import grid
from nblib.lccp.evaluation import Evaluator, reference_scorer
from nblib.metrics import tail_nll
from nblib.metrics.probes import copy_gain, heldout_loss
from nblib.store.runstore import Run
from nblib.training.runner import get_or_run_many

SPREAD_SCALES = grid.SPREAD_SCALES  # the scales whose stable trunks have a second seed
COPY_THRESHOLD = 1.0  # nats/token: the copy gain taken as "copies" (chapter 2's onset)


def _copy(run: Run, step: int, seg_len: int, vocab_size: int, eos_id: int) -> float:
    return run.memo(f"copy-gain-{seg_len}-{step}",
                    lambda: {"gain": copy_gain(run.load_model(step), vocab_size, eos_id, seg_len)["gain"]},
                    steps=[step])["gain"]


def copy_distances(budget) -> dict:
    """Distances probed per stage: a quarter and half of the short context for short-stage
    endpoints; a quarter of, once and twice the short context for LCCP endpoints."""
    t = budget.short_seq_len
    return {"short": (t // 4, t // 2), "LCCP": (t // 4, t, 2 * t)}


def copy_gain_table(ev: Evaluator, scales=SCALES) -> pd.DataFrame:
    """One row per (endpoint, distance): columns scale, stage, Ds, Dl, distance, gain.

    stage "short": a WSD short-stage endpoint (Dl = 0); stage "LCCP": a Linear-Decay LCCP
    endpoint of the grid (at S5 its diagonal configurations). Ds and Dl are realized tokens.
    """
    b, store, tok = ev.budget, ev.store, ev.tokenizer
    dist = copy_distances(b)
    rows = []
    for scale in scales:
        short = grid.short_stage(b, scale)
        for ds, cfg in short.wsd.items():
            run = store.run(cfg)
            for d in dist["short"]:
                rows.append({"scale": scale, "stage": "short", "Ds": cfg.realized_tokens, "Dl": 0, "distance": d,
                             "gain": _copy(run, cfg.total_steps, d, tok.vocab_size, tok.eos_id)})
        pairs = b.s5_configs if scale == "S5" else [(ds, dl) for ds in b.ds_multiples for dl in b.dl_multiples]
        for ds, dl in pairs:
            cfg = grid.lccp_linear_decay(b, scale, ds, dl)
            run = store.run(cfg)
            for d in dist["LCCP"]:
                rows.append({"scale": scale, "stage": "LCCP", "Ds": short.wsd[ds].realized_tokens,
                             "Dl": cfg.realized_tokens, "distance": d,
                             "gain": _copy(run, cfg.total_steps, d, tok.vocab_size, tok.eos_id)})
    return pd.DataFrame(rows)


def copy_verdicts(copy: pd.DataFrame, short_seq_len: int) -> pd.DataFrame:
    """The two copy targets per scale: the short-stage endpoint at the smallest Ds at a
    quarter of the short context, and the LCCP endpoint at the largest Ds and Dl (at S5:
    the largest Dl) at twice the short context; each with its gain and whether it is
    >= COPY_THRESHOLD."""
    rows = []
    for scale, g in copy.groupby("scale", sort=False):
        s = g[(g.stage == "short") & (g.Ds == g[g.stage == "short"].Ds.min()) & (g.distance == short_seq_len // 4)]
        lc = g[g.stage == "LCCP"]
        top = lc[lc.Dl == lc.Dl.max()]
        top = top[(top.Ds == top.Ds.max()) & (top.distance == 2 * short_seq_len)]
        for what, sel, d in (("short stage, smallest Ds", s, short_seq_len // 4),
                             ("LCCP, largest Ds and Dl", top, 2 * short_seq_len)):
            gain = float(sel.gain.iloc[0])
            rows.append({"scale": scale, "endpoint": what, "distance": d, "gain": gain,
                         "copies": gain >= COPY_THRESHOLD})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------
# the stable phase: still learning, by more than the seed spread?
# ---------------------------------------------------------------------------------------
def stable_phase_table(ev: Evaluator, scales=SCALES, spread_scales=SPREAD_SCALES, workers=None) -> pd.DataFrame:
    """Held-out loss (mean NLL over the test documents cut into windows of the short
    context) of each stable trunk at its midpoint checkpoint and at its end: columns scale,
    seed, mid_tokens, end_tokens, loss_mid, loss_end, drop (= loss_mid - loss_end).
    Trains the trunks the store lacks (chapter 3's grid pool trains them first)."""
    b, store, tok = ev.budget, ev.store, ev.tokenizer
    cfgs = grid.trunk_configs(b, scales, spread_scales)
    get_or_run_many(store, cfgs, workers=workers, desc="stable trunks")
    rows = []
    for cfg in cfgs:
        run = store.run(cfg)
        mid = max(cfg.total_steps // 2, 1)
        mid = min(cfg.ckpt_steps, key=lambda s: abs(s - mid))  # the midpoint checkpoint (grid)

        def loss(step):
            return run.memo(f"heldout-{ev.key}-{step}",
                            lambda: {"loss": heldout_loss(run.load_model(step), ev.texts, tok, b.short_seq_len)},
                            steps=[step])["loss"]

        tps = cfg.tokens_per_step
        lm, le = loss(mid), loss(cfg.total_steps)
        rows.append({"scale": cfg.meta["scale"], "seed": cfg.seed, "mid_tokens": mid * tps,
                     "end_tokens": cfg.total_steps * tps, "loss_mid": lm, "loss_end": le, "drop": lm - le})
    return pd.DataFrame(rows)


def seed_spread(stable: pd.DataFrame) -> float:
    """The seed spread (nats): the largest difference between two seeds' end-of-stable-phase
    held-out loss at any scale trained with two seeds."""
    per = stable.groupby("scale")["loss_end"].agg(lambda x: x.max() - x.min() if len(x) > 1 else np.nan).dropna()
    if per.empty:
        raise ValueError("no scale has two seeds in the stable-phase table; train SPREAD_SCALES with seeds 0 and 1")
    return float(per.max())


def stable_phase_verdicts(stable: pd.DataFrame, spread: float) -> pd.DataFrame:
    """Per scale (seed 0): the drop from the stable phase's midpoint to its end, and whether
    it exceeds the seed spread."""
    s0 = stable[stable.seed == 0].set_index("scale")
    return s0[["loss_mid", "loss_end", "drop"]].assign(spread=spread, learning=s0["drop"] > spread)


# ---------------------------------------------------------------------------------------
# no step inside the grid: monotone in N, Ds and Dl
# ---------------------------------------------------------------------------------------
def _rises(values: pd.Series, what: str, axis: str, metric: str, spread: float) -> list[dict]:
    out = []
    v = values.dropna()
    for (a, ya), (b, yb) in zip(v.items(), list(v.items())[1:]):
        rise = float(yb - ya)  # log-perplexity: nats per token
        verdict = "falls" if rise <= 0 else ("rise within the seed spread" if rise <= spread else "FAILS")
        out.append({"metric": metric, "axis": axis, "at": what, "from": a, "to": b, "change (nats)": rise,
                    "verdict": verdict})
    return out


def monotonicity_table(table: pd.DataFrame, spread: float, metrics=("longppl", "shortppl")) -> pd.DataFrame:
    """Every consecutive step of log(metric) of the Linear-Decay table along N (each (Ds, Dl)
    configuration across the scales that have it), along Ds (mean over Dl, per scale) and along
    Dl (mean over Ds, per scale). A rise larger than `spread` FAILS; a smaller one is kept
    with its size. S5's diagonal configurations enter the N axis only."""
    rows = []
    t = table.assign(**{f"log_{m}": np.log(table[m]) for m in metrics})
    for m in metrics:
        col = f"log_{m}"
        for (ds, dl), g in t.groupby(["ds_mult", "dl_mult"]):
            order = g.set_index("scale").reindex([s for s in SCALES if s in set(g.scale)])[col]
            rows += _rises(order, f"Ds={ds:g}, Dl={dl:g}", "N", m, spread)
        for scale, g in t[t.scale != "S5"].groupby("scale"):
            rows += _rises(g.groupby("Ds")[col].mean(), scale, "Ds (mean over Dl)", m, spread)
            rows += _rises(g.groupby("Dl")[col].mean(), scale, "Dl (mean over Ds)", m, spread)
    return pd.DataFrame(rows)


def monotonicity_summary(mono: pd.DataFrame) -> pd.DataFrame:
    """Per metric and axis: steps checked, rises within the spread (with the largest), failures."""
    g = mono.groupby(["metric", "axis"])
    return pd.DataFrame({
        "steps": g.size(),
        "rises within spread": g["verdict"].agg(lambda v: int((v == "rise within the seed spread").sum())),
        "largest rise (nats)": g["change (nats)"].max().clip(lower=0),
        "failures": g["verdict"].agg(lambda v: int((v == "FAILS").sum())),
    })



# ---------------------------------------------------------------------------------------
# the reference against the models it judges
# ---------------------------------------------------------------------------------------
def reference_margin(ev: Evaluator, models: dict) -> pd.DataFrame:
    """Mean NLL of every test token past the local chunk (positions >= the LongPPL chunk,
    up to the LCCP context) under the reference as it selects key tokens (neural part mixed
    with its cache model), under its neural part alone, and under each of `models`
    ({label: model}); `margin` is each row's NLL minus the reference's (> 0: the reference is
    stronger beyond the chunk)."""
    b, tok = ev.budget, ev.tokenizer
    start, L = b.longppl.trunc_len, b.long_seq_len
    rows = {"LongPPL reference (neural + cache)": tail_nll(reference_scorer(b, ev.store), None, ev.texts, start, L)}
    if b.reference["kind"] == "nblib":
        ref = ev.store.run(grid.reference_config(b)).load_model()
        rows["LongPPL reference (neural part)"] = tail_nll(ref, tok, ev.texts, start, L)
    for name, m in models.items():
        rows[name] = tail_nll(m, tok, ev.texts, start, L)
    out = pd.DataFrame({"NLL past the chunk": pd.Series(rows)}).rename_axis("model")
    return out.assign(margin=out["NLL past the chunk"] - out["NLL past the chunk"].iloc[0])
