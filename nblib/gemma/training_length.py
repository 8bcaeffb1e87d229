"""Models A and B at several training lengths: does the gap close as the blog's tie suggests?

The blog trains both models on 9.8B tokens, about 79 tokens per parameter of Model A
(124.4M), and finds them tied. A toy pair trains far fewer tokens per parameter, so its gap
is read against training length here:

    configs = pair.ladder_configs(budget)          # {(key, fraction): WSD decay branch}
    ladder = length_ladder(store, budget)           # {fraction: {"A": Run, "B": Run}}, 1.0 = the pair
    per_window = ladder_losses(ladder, windows)     # {fraction: {"A": (n,), "B": (n,)}}
    table = gap_table(ladder, per_window, n_params)
    trend = fit_gap_trend(table, per_window, target=79)

Each shorter budget is its own WSD run (same warmup, constant LR, a linear decay over its
last `decay_frac`), branched from the pair's run where its decay starts: until then a WSD
run's batches and learning rates depend only on the step, so the branch restores the
pair's full training state at that step and is the same run as one trained alone (the
LCCP grid's short stage does the same, `nblib.lccp.grid.short_stage`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nblib.budgets import Budget
from nblib.gemma.pair import heldout_loss, ladder_configs, pair_configs, tensor_digest
from nblib.stats import paired_bootstrap
from nblib.store.runstore import RunStore
from nblib.training.runner import get_or_run_many

BLOG_TOKENS_PER_PARAM = 9.8e9 / 124_439_808  # Gemma blog: 9.8B tokens, Model A's 124.4M parameters


def length_ladder(store: RunStore, budget: Budget, seed: int = 0, fractions=None) -> dict:
    """{fraction: {"A": Run, "B": Run}} for every fraction and 1.0 (the pair itself). Runs the
    store lacks are trained (chapter 6's `pair.train_pair` trains them all in one pass)."""
    base = pair_configs(budget, seed)
    branches = ladder_configs(budget, seed, fractions)
    cfgs = [*base.values(), *branches.values()]
    runs = dict(zip([*base, *branches], get_or_run_many(store, cfgs, desc="training-length ladder")))
    out = {f: {k: runs[(k, f)] for k in base} for (_, f) in branches}
    out[1.0] = {k: runs[k] for k in base}
    return out


def ladder_losses(ladder: dict, windows) -> dict:
    """{fraction: {"A": per-window held-out loss, "B": ...}} of each run's final weights, cached
    in the run folder like chapter 6's loss curves, with the final checkpoint's sha256: weights
    written again (a retrain into the same folder) are scored again, not read from the cache."""
    key = f"heldout_final_{windows.shape[0]}x{windows.shape[1]}_{tensor_digest(windows)}"
    out = {}
    for f, runs in ladder.items():
        out[f] = {k: np.asarray(r.memo(key, lambda r=r: {"loss": heldout_loss(r.load_model(), windows).tolist()},
                                       steps=[r.config.total_steps])["loss"])
                  for k, r in runs.items()}
    return out


def gap_table(ladder: dict, per_window: dict, n_params: int, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """One row per training length: tokens, tokens per parameter (of `n_params`, Model A's
    count as in the blog's 79), both losses, and B - A with a paired-bootstrap 95% interval
    over windows. Indexed by tokens per parameter."""
    rows = []
    for f in sorted(ladder):
        run = ladder[f]["A"]
        tokens = run.config.realized_tokens
        a, b = per_window[f]["A"], per_window[f]["B"]
        r = paired_bootstrap(b, a, n_boot=n_boot, seed=seed)
        rows.append({"tokens per parameter": tokens / n_params, "fraction": f, "tokens": tokens,
                     "loss A": float(a.mean()), "loss B": float(b.mean()), "B - A": r["diff"],
                     "95% lo": r["lo"], "95% hi": r["hi"]})
    return pd.DataFrame(rows).set_index("tokens per parameter")


def _zero_crossing(a: float, b: float, x_last: float) -> float:
    """D/N where a + b ln(D/N) reaches 0 beyond x_last, if the line heads toward 0 there; else inf."""
    at_last = a + b * x_last
    if b == 0 or at_last == 0 or np.sign(b) == np.sign(at_last):
        return float("inf")
    return float(np.exp(-a / b))


def fit_gap_trend(table: pd.DataFrame, per_window: dict, target: float = BLOG_TOKENS_PER_PARAM,
                  n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> dict:
    """Least-squares line gap = a + b ln(D/N) through the ladder's B - A gaps, and its value
    at `target` tokens per parameter, with a bootstrap interval: windows are resampled (the
    same draw at every length, since every model reads the same windows) and the line refit.
    Also the D/N where the line crosses zero, when it rises toward zero. A line in ln(D/N)
    is the simplest trend the points allow; the interval says nothing about curvature past
    the last point. Returns {"intercept", "slope", "at_target", "lo", "hi", "target",
    "zero_at", "zero_lo", "zero_hi", "n_points", "residual_sd", "pred_lo", "pred_hi"}: pred_lo and
    pred_hi are the OLS prediction interval at `target` from the lengths' scatter about the line."""
    if len(table) < 3:
        raise ValueError(f"{len(table)} training lengths given; a trend with an interval needs at least 3")
    x = np.log(table.index.to_numpy(float))
    fr = table["fraction"].to_numpy()
    gaps = np.stack([per_window[f]["B"] - per_window[f]["A"] for f in fr])  # (lengths, windows)
    n = gaps.shape[1]
    X = np.stack([np.ones_like(x), x], 1)

    def fit(g):
        return np.linalg.lstsq(X, g, rcond=None)[0]

    means = gaps.mean(1)
    a, b = fit(means)
    x0 = np.log(target)
    idx = np.random.default_rng(seed).integers(0, n, (n_boot, n))
    coef = np.stack([fit(gaps[:, i].mean(1)) for i in idx])  # (n_boot, 2)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(coef[:, 0] + coef[:, 1] * x0, [tail, 100 - tail])
    # The lengths' own scatter about the line: the OLS prediction interval at the target
    # (t with n - 2 >= 1 degrees of freedom), which the window bootstrap alone does not see.
    resid = means - (a + b * x)
    dof = len(x) - 2
    s2 = float(resid @ resid / dof)
    se = np.sqrt(s2 * (1 + 1 / len(x) + (x0 - x.mean()) ** 2 / ((x - x.mean()) ** 2).sum()))
    import scipy.stats  # on first use: at module level it adds about 1.2 s to every kernel's start

    t = scipy.stats.t.ppf(1 - (1 - level) / 2, dof)
    zero = np.array([_zero_crossing(a_, b_, x.max()) for a_, b_ in coef])
    zero_at = _zero_crossing(a, b, x.max())
    zlo, zhi = np.percentile(zero, tail, method="lower"), np.percentile(zero, 100 - tail, method="higher")
    return {"intercept": float(a), "slope": float(b), "at_target": float(a + b * x0), "lo": float(lo),
            "hi": float(hi), "target": float(target), "zero_at": zero_at, "zero_lo": float(zlo), "zero_hi": float(zhi),
            "n_points": len(table), "residual_sd": float(np.sqrt(s2)), "pred_lo": float(a + b * x0 - t * se),
            "pred_hi": float(a + b * x0 + t * se)}


def token_ratio(table: pd.DataFrame) -> pd.Series:
    """How many times Model B's tokens Model A needs for the same held-out loss, at each
    training length of B: A's loss is interpolated linearly in ln(D/N) between the ladder's
    points (NaN where B's loss lies outside A's measured range). A constant ratio means the
    loss gap in nats shrinks as both curves flatten; a rising one means it does not."""
    x = np.log(table.index.to_numpy(float))
    la, lb = table["loss A"].to_numpy(), table["loss B"].to_numpy()
    if not np.all(np.diff(la) < 0):
        raise ValueError("Model A's loss must fall with every longer budget to invert it; got "
                         f"{np.round(la, 4).tolist()}")
    out = []
    for xb, l in zip(x, lb):
        if not la[-1] <= l <= la[0]:
            out.append(float("nan"))
            continue
        xa = np.interp(l, la[::-1], x[::-1])  # la falls, so interpolate on the reversed arrays
        out.append(float(np.exp(xa - xb)))
    return pd.Series(out, index=table.index, name="A's tokens for B's loss (x B's)")
