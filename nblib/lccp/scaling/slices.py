"""Per-slice exponent fits and their medians: the regulariser thresholds of App. A.5.

On a slice with N and Ds fixed, Eq. 1 reduces to y = b Dl^-beta + c, so a 3-parameter fit
gives a local beta_l; slices with N and Dl fixed give local beta_s. The median over all
slices of the training split is the threshold beta_bar.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

from .laws import D_UNIT
from .table import table_target

SLICE_BETA_RANGE = (1e-3, 4.0)
MIN_SLICE_POINTS = 4  # distinct D values; 3 would interpolate exactly
GROUP_RTOL = 0.05  # realised budgets of one nominal level differ by ~2% (Tables 6/7); levels by >= 25%


def cluster_levels(values, rtol: float = GROUP_RTOL) -> np.ndarray:
    """Integer labels grouping values within a relative tolerance of their cluster's smallest.

    Realised token counts of one nominal budget (e.g. 0.58, 0.59, 0.60 B) share a label.
    """
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="stable")
    labels = np.empty(values.size, dtype=int)
    label, start = -1, None
    for i in order:
        if start is None or values[i] > start * (1 + rtol):
            label, start = label + 1, values[i]
        labels[i] = label
    return labels


def fit_slice(d, y) -> tuple[float, float, float]:
    """Least-squares fit of y = b d^-beta + c on one slice (App. A.5); returns (b, beta, c).

    Variable projection: for each beta the best (b, c) is a 2-column regression, so only
    the profile SSE(beta) is searched (grid, then bounded Brent around the best cell).
    """
    d = np.asarray(d, dtype=float)
    y = np.asarray(y, dtype=float)
    if d.size < 3 or np.unique(d).size < 3:
        raise ValueError(f"a slice fit needs >= 3 distinct D values, got {np.unique(d).size}")
    logd = np.log(d / D_UNIT)
    yc = y - y.mean()

    def profile(beta):  # beta: (G,) -> SSE (G,), b (G,)
        x = np.exp(-np.outer(beta, logd))  # (G, m)
        xc = x - x.mean(axis=1, keepdims=True)
        sxx = np.sum(xc * xc, axis=1)
        sxy = xc @ yc
        b = sxy / sxx
        return np.sum(yc * yc) - sxy * b, b, x.mean(axis=1)

    lo, hi = SLICE_BETA_RANGE
    grid = np.geomspace(lo, hi, 80)
    sse, _, _ = profile(grid)
    i = int(np.argmin(sse))
    a, z = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = minimize_scalar(lambda t: profile(np.array([t]))[0][0], bounds=(a, z), method="bounded",
                          options={"xatol": 1e-10})
    beta = float(res.x) if res.fun <= sse[i] else float(grid[i])
    _, b, xm = profile(np.array([beta]))
    c = y.mean() - b[0] * xm[0]
    return float(b[0]), beta, float(c)


def slice_exponents(table: pd.DataFrame, axis: str = "Dl", min_points: int = MIN_SLICE_POINTS) -> pd.DataFrame:
    """Local exponents from every slice along `axis` (App. A.5).

    axis="Dl": slices of fixed (N, Ds), fit over Dl -> local beta_l.
    axis="Ds": slices of fixed (N, Dl), fit over Ds -> local beta_s.
    Returns one row per slice with >= min_points distinct values: N, fixed level, n_points, b, beta, c.
    """
    if axis not in ("Dl", "Ds"):
        raise ValueError(f"axis must be 'Dl' or 'Ds', got {axis!r}")
    other = "Ds" if axis == "Dl" else "Dl"
    y = table_target(table)
    n_lab = cluster_levels(table["N"].to_numpy(float))
    rows = []
    for nl in np.unique(n_lab):
        in_n = n_lab == nl
        o_lab = cluster_levels(table[other].to_numpy(float)[in_n])  # levels within this scale only
        idx_n = np.flatnonzero(in_n)
        for ol in np.unique(o_lab):
            idx = idx_n[o_lab == ol]
            d = table[axis].to_numpy(float)[idx]
            if np.unique(d).size < min_points:
                continue
            b, beta, c = fit_slice(d, y[idx])
            rows.append({"N": float(np.median(table["N"].to_numpy(float)[idx])),
                         other: float(np.median(table[other].to_numpy(float)[idx])),
                         "n_points": int(idx.size), "b": b, "beta": beta, "c": c})
    return pd.DataFrame(rows, columns=["N", other, "n_points", "b", "beta", "c"])


def slice_thresholds(table: pd.DataFrame, min_points: int = MIN_SLICE_POINTS) -> dict[str, float | None]:
    """beta_bar_s and beta_bar_l: medians of the slice exponents (App. A.5); None if no slice."""
    out = {}
    for name, axis in (("beta_s", "Ds"), ("beta_l", "Dl")):
        s = slice_exponents(table, axis, min_points)
        out[name] = float(np.median(s["beta"])) if len(s) else None
    return out
