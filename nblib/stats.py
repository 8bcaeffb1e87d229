"""Small agreement statistics shared by the chapters."""

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
