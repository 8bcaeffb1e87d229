"""Small statistics shared by the chapters: agreement (Lin's CCC) and paired bootstrap intervals."""

from __future__ import annotations

import numpy as np


def _pair(x, y) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same length, got {x.size} and {y.size}")
    if x.size < 2:
        raise ValueError(f"need at least 2 pairs, got {x.size}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("x and y must be finite (found NaN or inf)")
    return x, y


def spearman_rho(x, y) -> float:
    """Spearman's rank correlation of x and y (scipy.stats.spearmanr), for the Dl trends of
    Fig. 5 and Table 14. scipy.stats is imported here, on first use: at module level it adds
    about 1.2 s to the start of every kernel and process that imports the chapters."""
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def lins_ccc(x, y) -> float:
    """Lin's concordance correlation coefficient (App. B, Fig. 4b).

    CCC = 2 s_xy / (s_x^2 + s_y^2 + (mean x - mean y)^2), variances and covariance with
    denominator n. Equals Pearson's r times a bias factor <= 1; 1 only for y == x.
    """
    x, y = _pair(x, y)
    dx, dy = x - x.mean(), y - y.mean()
    sxy = np.mean(dx * dy)
    denom = np.mean(dx**2) + np.mean(dy**2) + (x.mean() - y.mean()) ** 2
    if denom == 0:
        raise ValueError("CCC undefined: x and y are the same constant")
    return float(2 * sxy / denom)


def paired_bootstrap(a, b, n_boot: int = 2000, level: float = 0.95, seed: int = 0, transform=None) -> dict:
    """f(mean a) - f(mean b) for paired per-document values a and b (f = identity, or e.g.
    np.exp to compare perplexities from per-document mean NLLs of equal length), with a
    percentile bootstrap interval: documents are resampled with replacement, n_boot times,
    keeping the pairs (Efron & Tibshirani, 1993, ch. 13). Returns {"diff", "lo", "hi", "n"}."""
    a, b = _pair(a, b)
    if not (isinstance(n_boot, int) and n_boot >= 100):
        raise ValueError(f"n_boot={n_boot!r} is not allowed; allowed: an int >= 100")
    if not 0 < level < 1:
        raise ValueError(f"level={level!r} is not allowed; allowed: a number in (0, 1)")
    f = transform or (lambda x: x)
    idx = np.random.default_rng(seed).integers(0, a.size, (n_boot, a.size))
    boots = f(a[idx].mean(1)) - f(b[idx].mean(1))
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(boots, [tail, 100 - tail])
    return {"diff": float(f(a.mean()) - f(b.mean())), "lo": float(lo), "hi": float(hi), "n": int(a.size)}
