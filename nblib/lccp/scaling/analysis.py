"""What a fitted law says: zero contours (App. A.2, Fig. 9) and elasticities (App. D.1)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from .fit import FitResult
from .laws import D_UNIT

D_RANGE = (1e6, 1e22)  # tokens searched for a zero crossing


def _root_log_d(g, d_range) -> float:
    """Root of a decreasing g(log D) on d_range: inf if g stays > 0, nan if g <= 0 already at the low end."""
    lo, hi = np.log(d_range[0]), np.log(d_range[1])
    g_lo, g_hi = g(lo), g(hi)
    if g_lo <= 0:
        return np.nan
    if g_hi > 0:
        return np.inf
    return float(np.exp(brentq(g, lo, hi, xtol=1e-12, rtol=1e-14)))


def zero_contour_ds_dl(fit: FitResult, N: float, ds=None, dl_range=D_RANGE) -> pd.DataFrame:
    """Fig. 9: the (Ds, Dl) curve where predicted log(LongPPL) = 0 at model size N.

    For each Ds (tokens; default 1e9..1e16) solve for Dl in dl_range. Dl = inf: no finite
    zero (the prediction stays > 0); Dl = nan: already <= 0 at the smallest Dl.
    """
    if N <= 0:
        raise ValueError(f"N must be > 0, got {N}")
    ds = np.logspace(9, 16, 141) if ds is None else np.asarray(ds, dtype=float).ravel()
    if np.any(ds <= 0):
        raise ValueError("ds must be > 0 (tokens)")
    dl = [_root_log_d(lambda t, d=d: float(fit.predict(N, d, np.exp(t))), dl_range) for d in ds]
    return pd.DataFrame({"N": float(N), "Ds": ds, "Dl": dl})


def zero_crossing_equal_budget(fit: FitResult, N: float, d_range=D_RANGE) -> float:
    """App. A.2: the per-stage budget D (tokens) with Ds = Dl = D where predicted
    log(LongPPL) = 0 at size N (the paper: ~11.0T at N = 10B for its Linear-Decay S1-S4 fit).
    inf if the prediction stays > 0 up to d_range[1]."""
    if N <= 0:
        raise ValueError(f"N must be > 0, got {N}")
    d = _root_log_d(lambda t: float(fit.predict(N, np.exp(t), np.exp(t))), d_range)
    if np.isnan(d):
        raise ValueError(f"prediction is already <= 0 at D = {d_range[0]:g}; lower d_range[0]")
    return d


_DL_TERM_LAWS = ("fixed_model", "additive", "no_offset", "nonneg_offset", "powered_pair_N_Ds")


def elasticity(fit: FitResult, dl) -> np.ndarray:
    """App. D.1: e(Dl) = |d log M / d log Dl| = beta * B * Dl^-beta for log M = E + B Dl^-beta.

    Units cancel, so this is beta_l * Bl * (Dl/1e9)^-beta_l in the fit's normalised params.
    Valid for laws where Dl enters only through the additive term Bl Dl^-beta_l.
    """
    if fit.law.name not in _DL_TERM_LAWS:
        raise ValueError(f"elasticity needs a law with a separate Bl Dl^-beta_l term: {_DL_TERM_LAWS}; got {fit.law.name!r}")
    dl = np.asarray(dl, dtype=float)
    if np.any(dl <= 0):
        raise ValueError("dl must be > 0 (tokens)")
    b, beta = fit.params["Bl"], fit.params["beta_l"]
    return beta * b * (dl / D_UNIT) ** (-beta)


def elasticity_ratio(fit_long: FitResult, fit_short: FitResult, dl) -> np.ndarray:
    """App. D.1: R(Dl) = e_LongPPL(Dl) / e_ShortPPL(Dl)."""
    return elasticity(fit_long, dl) / elasticity(fit_short, dl)
