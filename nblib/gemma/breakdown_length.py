"""Does plain RoPE's breakdown past L grow with training length? (Gemma blog, "Position at
longer contexts": Model B's page perplexity 20.6 at L and 37.7 at 4L, 1.83x, after about 79
tokens per parameter.)

    ladder = breakdown_ladder(store, budget)                  # {(key, fraction): Run}
    nll = ladder_page_nll(ladder, pages, known)               # {(key, tokens): (n, T) losses}
    table = breakdown_by_length(nll, L, (4, 8), n_params)     # ratio ppl(kL) / ppl(L) per run
    trend = breakdown_trend(table, "B-global", "4L", 1.5)     # where the ratio would reach 1.5x

Model B and its all-global control (`pair.all_global_config`) are each read at every
training length the store holds as one WSD run: the pair's shorter budgets are decay
branches of its run (chapter 6), the control's are branches of the control's own run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nblib.budgets import Budget
from nblib.gemma.extension import page_nll
from nblib.gemma.pair import all_global_config, ladder_configs, pair_configs
from nblib.stats import paired_bootstrap
from nblib.store.runstore import Run, RunStore
from nblib.training.runner import get_or_run_many


def breakdown_ladder(store: RunStore, budget: Budget, seed: int = 0) -> dict[tuple[str, float], Run]:
    """{(key, fraction of the pair's tokens): Run} for Model B ("B": its ladder and the pair's
    run at 1.0) and the all-global control ("B-global": its ladder and its own run at
    `budget.pair.control_fraction`). Runs the store lacks are trained (chapter 6's
    `pair.train_pair` trains them all in one pass)."""
    cfgs = {("B", 1.0): pair_configs(budget, seed)["B"],
            ("B-global", float(budget.pair.control_fraction)): all_global_config(budget, seed),
            **ladder_configs(budget, seed, models=("B", "B-global"))}
    runs = get_or_run_many(store, list(cfgs.values()), desc="breakdown ladder")
    return dict(sorted(zip(cfgs, runs), key=lambda kv: (kv[0][0], kv[0][1])))


def ladder_page_nll(ladder: dict, pages, known: dict | None = None) -> dict[tuple[str, int], np.ndarray]:
    """{(model key, training tokens): (n, T) per-token losses on `pages`} for every run of
    `ladder` (`breakdown_ladder`), in its order: a run whose hash is in `known` {hash: losses}
    (already read on the same pages) is not read again; every other is loaded and read in one
    pass per page (`extension.page_nll`)."""
    known = {} if known is None else known
    return {(key, r.config.realized_tokens): known[r.hash] if r.hash in known else page_nll(r.load_model(), pages)
            for (key, f), r in ladder.items()}


def breakdown_by_length(nll: dict, L: int, ks, n_params: int, n_boot: int = 2000) -> pd.DataFrame:
    """One row per run of `nll` {(model key, training tokens): (n_pages, T >= k*L) per-token
    losses} and page length k*L for k in `ks` (see `breakdown_row`), indexed by (model key,
    page ("4L"), tokens per parameter of `n_params`, Model A's count as in chapter 6)."""
    rows = {(key, f"{k}L", tokens / n_params): breakdown_row(v, L, k, n_boot)
            for (key, tokens), v in nll.items() for k in ks}
    out = pd.DataFrame(rows).T
    out.index = pd.MultiIndex.from_tuples(out.index, names=["model", "page", "tokens per parameter"])
    return out.sort_index()


def breakdown_row(v: np.ndarray, L: int, k: int, n_boot: int = 2000) -> dict:
    """The blog's breakdown measure on (n_pages, T) losses: page perplexity over the first L
    and the first k*L tokens, their ratio, and the rise in nats/token (mean loss over k*L
    minus over L) with a paired bootstrap 95% interval over pages; the ratio is exp(rise)."""
    v = np.asarray(v, float)
    if v.ndim != 2 or v.shape[1] < k * L:
        raise ValueError(f"losses of shape {v.shape} do not reach k*L = {k * L} positions")
    r = paired_bootstrap(v[:, :k * L].mean(1), v[:, :L].mean(1), n_boot=n_boot)
    return {"ppl at L": float(np.exp(v[:, :L].mean())), "ppl at kL": float(np.exp(v[:, :k * L].mean())),
            "ratio": float(np.exp(r["diff"])), "rise (nats/token)": r["diff"], "95% lo": r["lo"], "95% hi": r["hi"]}


def breakdown_trend(table: pd.DataFrame, model: str, page: str, bar: float = 1.5) -> dict:
    """Least-squares line rise = a + b ln(D/N) through the rows of `model` at `page` ("4L") of
    `breakdown_by_length` (the rise is ln of the perplexity ratio), and the D/N at which it reaches ln(`bar`): inf
    when the line does not rise toward the bar, the last measured D/N's value when a point
    already reaches it. A line in ln(D/N) is the simplest trend three or more points allow;
    it says nothing about curvature past the last one. Returns {"slope", "intercept",
    "n_points", "residual_sd", "bar", "reached_at", "measured_max"}."""
    t = table.xs((model, page), level=("model", "page"))
    if len(t) < 3:
        raise ValueError(f"{len(t)} training lengths of {model!r} at {page}; a trend needs at least 3")
    x, y = np.log(t.index.to_numpy(float)), t["rise (nats/token)"].to_numpy(float)
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    target = np.log(bar)
    if (y >= target).any():
        reached = float(t.index[np.argmax(y >= target)])
    elif b > 0:
        reached = float(np.exp((target - a) / b))
    else:
        reached = float("inf")
    return {"slope": float(b), "intercept": float(a), "n_points": len(t),
            "residual_sd": float(np.sqrt(resid @ resid / max(1, len(t) - 2))), "bar": bar, "reached_at": reached,
            "measured_max": float(t.index.max())}
