"""Least-squares variable projection of Eq. 1 (beyond the paper): a cross-check of fit_law.

Given the exponents (alpha, beta_s, beta_l), Eq. 1 is linear in (A, Bs, Bl, C): a grid over
the exponents with non-negative least squares for the amplitudes (free C by centring) finds
the basin; scipy's least_squares (TRF, its own Huber loss) then refines all 7 parameters.
No exponent regulariser: this checks the law's optimum, not the App. A.5 prior.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy.optimize import least_squares, nnls
from threadpoolctl import threadpool_limits

from .fit import F_SCALE, FitResult, Objective
from .profile import EXP_FLOOR
from .laws import VARIANTS
from .metrics import mape_log, r2_log
from .table import check_table, table_inputs, table_target

EXPONENT_GRID = tuple(np.linspace(0.02, 1.5, 20))  # the least-squares grid (fit_law's is its own)


def fit_varpro(table: pd.DataFrame, *, alpha_grid=EXPONENT_GRID, beta_s_grid=EXPONENT_GRID,
               beta_l_grid=EXPONENT_GRID, f_scale: float = F_SCALE, n_refine: int = 3) -> FitResult:
    """Eq. 1 by variable projection: exponent grid x NNLS amplitudes, then local refinement.

    Refinement: least_squares(loss="huber", f_scale) from the `n_refine` best grid points
    (0: return the best grid point). Params are in normalised units like fit_law's.
    """
    law = VARIANTS["additive"]
    table = check_table(table, n_params=law.n_params)
    x, y = table_inputs(table), table_target(table)
    with threadpool_limits(limits=1, user_api="blas"):  # tiny fits: BLAS threads only contend
        best = _varpro(law, x, y, alpha_grid, beta_s_grid, beta_l_grid, f_scale, n_refine)
    yhat = law.fn(tuple(best), x)
    return FitResult(law, law.to_natural(best), best, Objective(law, x, y, f_scale)(best),
                     r2_log(y, yhat), mape_log(y, yhat), len(y), {}, f_scale, 0.0, method="varpro")


def _varpro(law, x, y, alpha_grid, beta_s_grid, beta_l_grid, f_scale, n_refine) -> np.ndarray:
    """The grid + NNLS stage and the least_squares refinement; returns internal params."""
    cols = {name: np.exp(-np.outer(np.asarray(g, float), lx))  # (G, n) per axis
            for name, g, lx in (("alpha", alpha_grid, x.log_n), ("beta_s", beta_s_grid, x.log_ds),
                                ("beta_l", beta_l_grid, x.log_dl))}
    yc = y - y.mean()
    scored = []
    for i, j, k in itertools.product(*(range(len(g)) for g in (alpha_grid, beta_s_grid, beta_l_grid))):
        F = np.column_stack([cols["alpha"][i], cols["beta_s"][j], cols["beta_l"][k]])  # (n, 3)
        Fm = F.mean(axis=0)
        amps, rnorm = nnls(F - Fm, yc)  # free intercept: centre both sides
        scored.append((rnorm, (alpha_grid[i], beta_s_grid[j], beta_l_grid[k]), amps, y.mean() - Fm @ amps))
    scored.sort(key=lambda s: s[0])

    def theta_of(s):  # internal vector: log amplitudes, exponents, C
        _, (a, bs, bl), amps, c = s
        la = np.log(np.maximum(amps, 1e-8))
        return np.array([la[0], a, la[1], bs, la[2], bl, c])

    obj = Objective(law, x, y, f_scale)
    bounds = law.bounds_internal()
    lo = np.array([-np.inf if b[0] is None else b[0] for b in bounds])
    hi = np.array([np.inf if b[1] is None else b[1] for b in bounds])
    lo[[1, 3, 5]] = EXP_FLOOR  # as fit_law: below it an exponent's term is collinear with C
    best = np.clip(theta_of(scored[0]), lo, hi)
    for s in scored[:n_refine]:
        res = least_squares(lambda t: law.fn(tuple(t), x) - y, np.clip(theta_of(s), lo, hi),
                            bounds=(lo, hi), loss="huber", f_scale=f_scale, method="trf",
                            x_scale="jac", ftol=1e-12, xtol=1e-12, gtol=1e-12, max_nfev=1000)
        if obj(res.x) < obj(best):
            best = res.x
    return best
