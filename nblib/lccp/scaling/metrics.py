"""Fit-quality metrics in log(LongPPL) space (App. A.2)."""

from __future__ import annotations

import numpy as np

from nblib.stats import _pair


def r2_log(y, yhat) -> float:
    """R^2 = 1 - sum (yhat - y)^2 / sum (y - mean y)^2, with y = log(LongPPL) (App. A.2)."""
    y, yhat = _pair(y, yhat)
    ss_tot = np.sum((y - y.mean()) ** 2)
    if ss_tot == 0:
        raise ValueError("R^2 undefined: all measured y are equal")
    return float(1.0 - np.sum((yhat - y) ** 2) / ss_tot)


def ape_log(y, yhat) -> np.ndarray:
    """Absolute percent error per point, 100 |yhat - y| / |y|, with y = log(LongPPL) (App. A.2)."""
    y, yhat = _pair(y, yhat)
    if np.any(y == 0):
        raise ValueError("MAPE undefined: some measured y = log(LongPPL) are 0")
    return 100.0 * np.abs(yhat - y) / np.abs(y)


def mape_log(y, yhat) -> float:
    """MAPE = 100/n sum |yhat - y| / |y| in percent, with y = log(LongPPL) (App. A.2)."""
    y, yhat = _pair(y, yhat)
    if np.any(y == 0):
        raise ValueError("MAPE undefined: some measured y = log(LongPPL) are 0")
    return float(100.0 * np.mean(np.abs(yhat - y) / np.abs(y)))
