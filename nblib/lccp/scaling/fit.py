"""Fitting a law to runs (App. A.5): Huber loss on log(LongPPL), one-sided exponent
regulariser at slice-fit medians, a start grid, then local optimisation, keep the best.

Two implementations of the same objective:
  method="profile" (default): variable projection (profile.py). The amplitudes and the
      offset are solved exactly for each value of the nonlinear parameters, which are
      searched on a dense grid and polished; bootstrap refits polish from one start.
      An optimum on a bound, or an exponent running to 0 while the offset runs to -inf, is
      reported in FitResult.at_bound instead of being left to an iteration limit.
  method="multistart": the first implementation, kept as a second one for tests and
      benchmarks/bench_fit.py: a coarse grid over the nonlinear parameters, the linear ones
      by least squares, then L-BFGS-B on all parameters from the best `n_starts` grid points.

Objective (internal params theta, residuals r_i = yhat_i - y_i, y = log LongPPL):
    sum_i huber_delta(r_i) + lam * [max(beta_s - beta_bar_s, 0)]^2 + lam * [max(beta_l - beta_bar_l, 0)]^2
huber_delta(r) = r^2/2 for |r| <= delta, delta (|r| - delta/2) beyond; delta = f_scale = 0.05.
This is the cost of scipy.optimize.least_squares(loss="huber", f_scale=delta), summed with
equal weights over configurations (the paper's "f_scale" names that convention).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import minimize, nnls
from threadpoolctl import threadpool_limits

from .laws import D_UNIT, LOG_BOUND, N_UNIT, FIXED_MODEL, Inputs, Law, get_law, make_inputs
from .metrics import mape_log, r2_log
from .profile import EXP_FLOOR, huber, POLISH_STARTS, Profile, grid_starts, polish, separable
from .slices import fit_slice, slice_thresholds
from .table import TableError, check_table, table_inputs, table_target

F_SCALE = 0.05  # Huber transition, in log(LongPPL) units (App. A.5)
LAM = 1.0  # lambda_s = lambda_l = 1 (App. A.5)
N_STARTS = 16  # method="multistart": L-BFGS-B runs from the best grid points (of ~180 for Eq. 1)
METHODS = ("profile", "multistart")
FD_STEP = 1e-6  # relative step of the central differences for the gradient


# ----------------------------------------------------------------------------
# the objective

@dataclass
class Objective:
    """Huber data term + one-sided exponent regulariser (App. A.5) on internal params."""

    law: Law
    x: Inputs
    y: np.ndarray
    f_scale: float = F_SCALE
    reg: tuple[tuple[int, float, float], ...] = ()  # (param index, beta_bar, lambda)

    def penalty(self, theta) -> tuple[float, np.ndarray]:
        val, grad = 0.0, np.zeros(len(theta))
        for j, bar, lam in self.reg:
            over = max(theta[j] - bar, 0.0)
            val += lam * over * over
            grad[j] += 2 * lam * over
        return val, grad

    def __call__(self, theta) -> float:
        pred = self.law.fn(tuple(theta), self.x)
        if not np.all(np.isfinite(pred)):
            return np.inf
        return float(np.sum(huber(pred - self.y, self.f_scale)) + self.penalty(theta)[0])

    def value_and_grad(self, theta) -> tuple[float, np.ndarray]:
        """Value and gradient; d yhat / d theta by central differences, all 2P+1 rows in one call."""
        theta = np.asarray(theta, dtype=float)
        P = theta.size
        h = FD_STEP * np.maximum(1.0, np.abs(theta))
        T = np.vstack([theta, theta + np.diag(h), theta - np.diag(h)])  # (2P+1, P)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            pred = self.law.fn(tuple(T[:, j:j + 1] for j in range(P)), self.x)  # (2P+1, n)
        pred = np.broadcast_to(pred, (2 * P + 1, self.y.size))
        if not np.all(np.isfinite(pred)):
            return 1e30, np.zeros(P)
        r = pred[0] - self.y
        jac = (pred[1:P + 1] - pred[P + 1:]) / (2 * h[:, None])  # (P, n)
        pen, pen_grad = self.penalty(theta)
        val = float(np.sum(huber(r, self.f_scale))) + pen
        grad = jac @ np.clip(r, -self.f_scale, self.f_scale) + pen_grad
        return val, grad


# ----------------------------------------------------------------------------
# multi-start: grid over the nonlinear params, linear params by least squares

def _amplitude_columns(law: Law, theta: np.ndarray, x: Inputs) -> tuple[list[int], np.ndarray]:
    """Columns f_j with yhat = sum_j amp_j f_j + offset (at k = 1 for the powered pairs)."""
    amp_idx = [i for i, p in enumerate(law.params) if p.log and p.grid is None]
    T = np.tile(theta, (len(amp_idx), 1))
    for row, i in enumerate(amp_idx):
        T[row, amp_idx] = -np.inf  # exp(-inf) = 0: every other amplitude off
        T[row, i] = 0.0  # this amplitude = 1
    if law.offset != "none":
        T[:, -1] = 0.0
    if law.pair is not None:
        T[:, law.param_names.index("k")] = 1.0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        cols = law.fn(tuple(T[:, j:j + 1] for j in range(T.shape[1])), x)
    return amp_idx, np.broadcast_to(cols, (len(amp_idx), x.dl.size)).T  # (n, n_amp)


def linear_start(law: Law, theta_nl: np.ndarray, x: Inputs, y: np.ndarray) -> np.ndarray | None:
    """Complete a start: amplitudes >= 0 and offset by (non-negative) least squares.

    theta_nl holds the nonlinear params (other entries ignored). Powered pairs are solved at
    k = 1 and the pair's amplitudes rescaled so its median value is unchanged at the grid k.
    """
    theta = np.array(theta_nl, dtype=float)
    amp_idx, F = _amplitude_columns(law, theta, x)
    if not np.all(np.isfinite(F)):
        return None
    if law.offset == "free":  # free intercept: centre, nnls on the amplitudes
        Fm, ym = F.mean(axis=0), y.mean()
        amps, _ = nnls(F - Fm, y - ym)
        theta[-1] = ym - Fm @ amps
    elif law.offset == "nonneg":
        sol, _ = nnls(np.column_stack([F, np.ones(len(y))]), y)
        amps, theta[-1] = sol[:-1], sol[-1]
    else:
        amps, _ = nnls(F, y)
    amps = np.maximum(amps, 1e-6 * max(amps.max(), 1e-6))  # log of 0 would pin the start at the bound
    log_amps = np.log(amps)
    if law.pair is not None:
        k = theta[law.param_names.index("k")]
        pj = [amp_idx.index(law.param_names.index(nm)) for nm in law.pair]
        pair_med = np.median(F[:, pj] @ amps[pj])
        if pair_med > 0:
            log_amps[pj] += (1.0 / k - 1.0) * np.log(pair_med)  # (c P)^k = P at the median
    theta[amp_idx] = np.clip(log_amps, -LOG_BOUND, LOG_BOUND)
    return theta


def start_grid(law: Law, grid: dict | None = None, beta_bar: dict | None = None) -> np.ndarray:
    """Cartesian grid over the nonlinear params (internal values), shape (G, P).

    Exponents use laws.EXP_GRID; the slice medians beta_bar are added to the beta_s/beta_l
    axes (App. A.5: slice fits provide initialisation). `grid` overrides axes by name.
    """
    grid = dict(grid or {})
    unknown = set(grid) - set(law.param_names)
    if unknown:
        raise ValueError(f"grid names {sorted(unknown)} are not params of {law.name!r}: {list(law.param_names)}")
    axes = []
    for p in law.params:
        if p.grid is None:
            axes.append((0.0,))
            continue
        vals = list(grid.get(p.name, p.grid))
        bar = (beta_bar or {}).get(p.name)
        if bar is not None and not any(np.isclose(bar, v) for v in vals):
            vals.append(float(np.clip(bar, p.lo, p.hi)))
        axes.append(tuple(np.log(vals)) if p.log else tuple(vals))
    return np.array(list(itertools.product(*axes)), dtype=float)


def minimize_multistart(obj: Objective, starts: np.ndarray, n_starts: int | None = N_STARTS,
                        extra_starts=()) -> tuple[np.ndarray, float, int]:
    """Rank the completed grid starts by the objective, run L-BFGS-B from the best
    `n_starts` (all if None) plus `extra_starts`; return (theta, objective, runs)."""
    law = obj.law
    done = []
    for s in starts:
        theta = linear_start(law, s, obj.x, obj.y)
        if theta is not None:
            v = obj(theta)
            if np.isfinite(v):
                done.append((v, theta))
    done.sort(key=lambda t: t[0])
    chosen = [t for _, t in (done if n_starts is None else done[:n_starts])]
    chosen += [np.asarray(e, dtype=float) for e in extra_starts]
    if not chosen:
        raise RuntimeError(f"no finite start for law {law.name!r}")
    bounds = law.bounds_internal()
    lo = np.array([-np.inf if b[0] is None else b[0] for b in bounds])
    hi = np.array([np.inf if b[1] is None else b[1] for b in bounds])
    best_theta, best_val = None, np.inf
    for theta0 in chosen:
        res = minimize(obj.value_and_grad, np.clip(theta0, lo, hi), jac=True, method="L-BFGS-B",
                       bounds=bounds, options={"maxiter": 3000, "ftol": 1e-13, "gtol": 1e-9})
        val = obj(res.x)
        if val < best_val:
            best_theta, best_val = res.x, val
    return best_theta, float(best_val), len(chosen)


# ----------------------------------------------------------------------------
# results

@dataclass
class FitResult:
    """A fitted law. params are natural values in normalised units (n = N/1e8, D = D/1e9)."""

    law: Law
    params: dict[str, float]
    theta: np.ndarray = field(repr=False)
    objective: float
    r2: float  # training R^2 in log(LongPPL) space (App. A.2)
    mape: float  # training MAPE, percent
    n_train: int
    beta_bar: dict = field(default_factory=dict)
    f_scale: float = F_SCALE
    lam: float = LAM
    method: str = "profile"
    at_bound: tuple[str, ...] = ()  # one line per parameter whose optimum ran to a bound

    def report(self, label: str = "") -> str:
        """One line per parameter at a bound, each prefixed with `label`; "" if none."""
        return "\n".join(f"{label}{line}" for line in self.at_bound)

    def predict(self, N=None, Ds=None, Dl=None) -> np.ndarray:
        """Predicted log(LongPPL) at absolute N (params) and Ds, Dl (tokens); arrays broadcast."""
        given = {"N": N, "Ds": Ds, "Dl": Dl}
        need = [k for k in self.law.inputs if given[k] is None]
        if need:
            raise ValueError(f"law {self.law.name!r} needs {list(self.law.inputs)}; missing {need}")
        for k, v in given.items():
            if v is not None and np.any(np.asarray(v, dtype=float) <= 0):
                raise ValueError(f"{k} must be > 0 (absolute counts), got {v!r}")
        x = make_inputs(None if N is None else np.asarray(N, float) / N_UNIT,
                        None if Ds is None else np.asarray(Ds, float) / D_UNIT,
                        None if Dl is None else np.asarray(Dl, float) / D_UNIT)
        return np.asarray(self.law.fn(tuple(self.theta), x), dtype=float)

    def predict_table(self, table: pd.DataFrame) -> np.ndarray:
        """Predicted log(LongPPL) for each row of a run table."""
        return self.predict(*(table[c].to_numpy(float) if c in self.law.inputs else None
                              for c in ("N", "Ds", "Dl")))

    def absolute_params(self) -> dict[str, float]:
        """Params for absolute N, Ds, Dl counts (Table 11 style)."""
        return self.law.to_absolute(self.params)

    def summary(self) -> pd.DataFrame:
        """One row per param: normalised and absolute-count values."""
        ab = self.absolute_params()
        return pd.DataFrame({"normalised": self.params, "absolute": ab}).rename_axis("param")


def _reg_terms(law: Law, beta_bar: dict, lam: float) -> tuple:
    return tuple((law.param_names.index(k), float(v), lam) for k, v in beta_bar.items()
                 if v is not None and k in law.param_names and lam > 0)


def _minimize_profile(obj: Objective, grid: dict | None, grid_extra: dict, n_starts: int | None,
                      extra_starts=(), start=None) -> tuple[np.ndarray, float]:
    """method="profile": grid on the nonlinear params with the linear ones solved exactly,
    L-BFGS-B on the profile from the best `n_starts` local minima of the grid and from `extra_starts`
    (internal vectors), then a short L-BFGS-B on all params. `start`: skip the grid and
    polish from this internal vector alone (bootstrap refits)."""
    law = obj.law
    form = separable(law)
    reg = {law.param_names[j]: (bar, lam) for j, bar, lam in obj.reg}
    prof = Profile(form, obj.x, obj.y, obj.f_scale, reg)
    if start is not None:
        starts = [form.phi_of(start)]
    else:
        k = POLISH_STARTS if n_starts is None else n_starts
        starts = list(grid_starts(prof, form.grid(grid, grid_extra), k))
        starts += [form.phi_of(e) for e in extra_starts]
    phi, _ = polish(prof, np.array(starts))
    coef = prof(phi)[1][0]
    theta = form.to_theta(phi, coef)[0]
    # a last L-BFGS-B on every parameter, inside the same bounds as the search: it removes
    # the rounding of log amplitudes at +-LOG_BOUND and is kept only if it is lower
    bounds = law.bounds_internal()
    for j, (lo, hi) in zip(form.nonlinear, form.bounds()):
        bounds[j] = (lo, hi)
    res = minimize(obj.value_and_grad, theta, jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": 1000, "ftol": 1e-15, "gtol": 1e-10})
    if obj(res.x) < obj(theta):
        theta = res.x
    return theta, float(obj(theta))


def params_at_bound(law: Law, theta: np.ndarray, rtol: float = 1e-6) -> list[tuple[str, str, float]]:
    """(param, "lower" or "upper", bound) for each fitted value on a bound of the search:
    exponents on [EXP_FLOOR, hi], the other nonlinear params on the law's bounds, amplitudes
    at exp(-+LOG_BOUND) (at the lower one the term is off), a non-negative offset at 0."""
    form = separable(law)
    out = []
    for j, (lo, hi) in zip(form.nonlinear, form.bounds()):
        for side, b in (("lower", lo), ("upper", hi)):
            if np.isfinite(b) and abs(theta[j] - b) <= rtol * max(1.0, abs(b)):
                out.append((law.params[j].name, side, float(np.exp(b) if law.params[j].log else b)))
    for j in form.amplitudes:
        if theta[j] <= -LOG_BOUND * (1 - rtol):
            out.append((law.params[j].name, "lower", 0.0))
        elif theta[j] >= LOG_BOUND * (1 - rtol):
            out.append((law.params[j].name, "upper", float(np.exp(LOG_BOUND))))
    if law.offset == "nonneg" and theta[-1] <= 1e-12:
        out.append((law.param_names[-1], "lower", 0.0))
    return out


def floor_exponents(fit: "FitResult") -> list[str]:
    """The exponents of a fit whose term is on and whose value sits at the search floor
    (EXP_FLOOR): on those axes x^-e ~ 1 - e ln x, so the fitted law is log-linear there, not a
    power law (App. A.5's form without an interior optimum)."""
    hits = params_at_bound(fit.law, fit.theta)
    off = {name for name, side, b in hits if side == "lower" and b == 0.0}
    out = []
    for name, side, b in hits:
        j = fit.law.param_names.index(name)
        amp = fit.law.param_names[j - 1] if j > 0 else None
        if side == "lower" and b == EXP_FLOOR and amp is not None and amp not in off \
                and fit.law.params[j - 1].log and fit.law.params[j - 1].grid is None:
            out.append(name)
    return out


def at_bound(law: Law, theta: np.ndarray, n: int) -> tuple[str, ...]:
    """One line per parameter on a bound (params_at_bound). An exponent at the search floor
    whose term is on, with a free offset, is the runaway where the objective keeps falling as
    the exponent goes to 0, its amplitude to +inf and C to -inf (the term becomes -a ln x):
    there is no interior optimum, and the line says so. An exponent whose amplitude is 0 is
    undetermined and gets no line of its own."""
    where = f"{law.name} fit on {n} points: "
    nat = law.to_natural(theta)
    hits = params_at_bound(law, theta)
    off = {name for name, side, b in hits if side == "lower" and b == 0.0}
    lines = []
    for name, side, b in hits:
        j = law.param_names.index(name)
        amp = law.param_names[j - 1] if j > 0 and law.params[j - 1].log and law.params[j - 1].grid is None else None
        if side == "lower" and b == EXP_FLOOR and amp is not None:
            if amp in off:
                continue
            if law.offset == "free":
                lines.append(f"{where}{name} ran to the search floor {EXP_FLOOR:g} ({amp} = {nat[amp]:.4g}, "
                             f"C = {nat[law.param_names[-1]]:.4g}): the objective still falls as {name} -> 0, "
                             f"{amp} -> inf and C -> -inf; no interior optimum")
                continue
        if name in off and name != law.param_names[-1]:
            lines.append(f"{where}{name} at its lower bound 0 (the term is off)")
        else:
            lines.append(f"{where}{name} at its {side} bound {b:.4g}")
    return tuple(lines)


def _check_method(method: str, n_starts) -> None:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; allowed: {', '.join(METHODS)}")
    if n_starts is not None and n_starts < 1:
        raise ValueError(f"n_starts must be >= 1 or None (every grid point), got {n_starts}")


def _optimise(obj: Objective, method: str, grid, beta_bar: dict, n_starts, extra_starts, start):
    if method == "profile":
        return _minimize_profile(obj, grid, beta_bar, n_starts, extra_starts, start)
    starts = start_grid(obj.law, grid, beta_bar)
    extra = list(extra_starts) + ([start] if start is not None else [])
    theta, val, _ = minimize_multistart(obj, starts, N_STARTS if n_starts is None else n_starts, extra)
    return theta, val


def fit_law(table: pd.DataFrame, law: str | Law = "additive", *, f_scale: float = F_SCALE,
            lam: float = LAM, beta_bar: dict | None = None, grid: dict | None = None,
            n_starts: int | None = None, extra_starts=(), start=None, method: str = "profile") -> FitResult:
    """Fit a law (Eq. 1 or an App. A.2 variant) to a run table by the App. A.5 procedure.

    Huber(f_scale) on y = log(LongPPL), equal weights; one-sided regulariser
    lam [max(beta - beta_bar, 0)]^2 on beta_s and beta_l where the law has them (the single
    beta of the combined/effective-data laws has no slice threshold), beta_bar = median slice
    exponent of THIS table (pass the training split only); slice medians join the start grid.
    method="profile" (default): the linear params solved exactly on a dense grid of the others,
    L-BFGS-B from the best `n_starts` (default 12) local minima of the grid; start: an internal vector to
    polish from instead of the grid (bootstrap refits). method="multistart": the first
    implementation (module doc). Parameters on a bound are listed in FitResult.at_bound.
    beta_bar: override the slice thresholds ({"beta_s": .., "beta_l": ..}; None entries off).
    """
    law = get_law(law)
    if f_scale <= 0:
        raise ValueError(f"f_scale must be > 0, got {f_scale}")
    _check_method(method, n_starts)
    if lam < 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    table = check_table(table, n_params=law.n_params)
    x, y = table_inputs(table), table_target(table)
    with threadpool_limits(limits=1, user_api="blas"):  # tiny fits: BLAS threads only contend
        if beta_bar is None:
            beta_bar = slice_thresholds(table)
        obj = Objective(law, x, y, f_scale, _reg_terms(law, beta_bar, lam))
        theta, val = _optimise(obj, method, grid, beta_bar, n_starts, extra_starts, start)
    yhat = law.fn(tuple(theta), x)
    return FitResult(law, law.to_natural(theta), theta, val, r2_log(y, yhat), mape_log(y, yhat),
                     len(y), dict(beta_bar), f_scale, lam, method,
                     at_bound(law, theta, len(y)) if method == "profile" else ())


def fit_additive_law(table: pd.DataFrame, **kwargs) -> FitResult:
    """Eq. 1: log(LongPPL) = A N^-alpha + Bs Ds^-beta_s + Bl Dl^-beta_l + C, fitted as in App. A.5."""
    return fit_law(table, "additive", **kwargs)


def fit_fixed_model_law(dl, y, *, f_scale: float = F_SCALE, grid: dict | None = None,
                        n_starts: int | None = None, start=None, method: str = "profile") -> FitResult:
    """Eq. 2 on one trajectory (Sec. 4.3): y = Bl Dl^-beta_l + C', Huber(f_scale), no regulariser.

    dl: long-context tokens (absolute); y: log of the metric (log LongPPL, or log ShortPPL
    for App. D.1). Used on prefixes of a Constant-Last4 trajectory. The least-squares slice
    fit joins the starts; `start` (an internal vector) replaces the grid, as in fit_law.
    """
    dl = np.asarray(dl, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if dl.shape != y.shape:
        raise ValueError(f"dl and y must have the same length, got {dl.size} and {y.size}")
    if not (np.isfinite(dl).all() and np.isfinite(y).all()):
        raise ValueError("dl and y must be finite (found NaN or inf)")
    if np.any(dl <= 0):
        raise ValueError(f"dl must be > 0 (tokens), got min {dl.min()}")
    if np.unique(dl).size < FIXED_MODEL.n_params:
        raise ValueError(f"Eq. 2 has {FIXED_MODEL.n_params} params; need >= {FIXED_MODEL.n_params} distinct dl, got {np.unique(dl).size}")
    _check_method(method, n_starts)
    law = FIXED_MODEL
    x = make_inputs(dl=dl / D_UNIT)
    obj = Objective(law, x, y, f_scale)
    with threadpool_limits(limits=1, user_api="blas"):  # tiny fits: BLAS threads only contend
        extra = []
        if start is None:
            b, beta, c = fit_slice(dl, y)  # the least-squares slice fit is a natural extra start
            extra = [np.array([np.log(b), beta, c])] if b > 0 else []
        theta, val = _optimise(obj, method, grid, {}, n_starts, extra, start)
    yhat = law.fn(tuple(theta), x)
    return FitResult(law, law.to_natural(theta), theta, val, r2_log(y, yhat), mape_log(y, yhat),
                     len(y), {}, f_scale, 0.0, method, at_bound(law, theta, len(y)) if method == "profile" else ())


# ----------------------------------------------------------------------------
# held-out-scale evaluation (Sec. 3.2: S1-S3 -> S4, S1-S4 -> S5)

@dataclass
class HoldoutResult:
    """Fit on train scales, R^2/MAPE on held-out scales; `predictions` holds the test rows."""

    fit: FitResult
    r2: float
    mape: float
    predictions: pd.DataFrame


def split_scales(table: pd.DataFrame, train_scales, test_scales) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rows of the train and test scales; unknown or overlapping scales raise TableError."""
    table = check_table(table, need_scale=True)
    have = sorted(map(str, table["scale"].unique()))
    train_scales, test_scales = [str(s) for s in train_scales], [str(s) for s in test_scales]
    for s in train_scales + test_scales:
        if s not in have:
            raise TableError(f"unknown scale {s!r}; the table has scales {have}")
    if set(train_scales) & set(test_scales):
        raise TableError(f"scales {sorted(set(train_scales) & set(test_scales))} are in both train and test")
    scale = table["scale"].astype(str)
    return table[scale.isin(train_scales)].copy(), table[scale.isin(test_scales)].copy()


def holdout_eval(table: pd.DataFrame, train_scales=("S1", "S2", "S3"), test_scales=("S4",),
                 law: str | Law = "additive", **fit_kwargs) -> HoldoutResult:
    """Held-out-scale extrapolation (Sec. 3.2, App. A.2): fit on train scales only (slice
    thresholds included), report R^2 and MAPE of log(LongPPL) on the test scales."""
    train, test = split_scales(table, train_scales, test_scales)
    fit = fit_law(train, law, **fit_kwargs)
    y, yhat = table_target(test), fit.predict_table(test)
    pred = test.assign(log_longppl=y, pred_log_longppl=yhat)
    return HoldoutResult(fit, r2_log(y, yhat), mape_log(y, yhat), pred)
