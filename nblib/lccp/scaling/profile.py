"""Eq. 1, Eq. 2 and the App. A.2 variants fitted by variable projection: the parameters that
enter linearly are solved exactly, only the others are searched.

Every law of laws.py is linear in its amplitudes and offset once its nonlinear parameters
phi are fixed (the exponents; K, nu and eta; for a powered pair (P1 + P2)^k, k and the
log-ratio of the pair's two amplitudes): yhat = F(phi) c, with c >= 0 for the amplitudes.
For fixed phi the App. A.5 objective, Huber(f_scale) plus the exponent regulariser (which
depends on phi alone), is convex in c, so its minimum, the profile P(phi), is exact:
  - Huber regression by a semismooth Newton step on the current inlier set, with an IRLS
    step as the fallback whenever Newton does not lower the loss; both are vectorised over
    a batch of phi;
  - the sign constraints by enumerating which constrained coefficients are zero: the
    constrained optimum is the unconstrained optimum of the face it lies on, and every
    other feasible face optimum is a feasible point, so the best feasible face is exact;
    the enumeration stops at the first face whose optimum also meets the KKT conditions.
The search: P on a dense grid of phi in one batch, then L-BFGS-B on P from the best few local
minima of the grid, one per basin (bounded phi; gradient by central differences, all 2q+1
points in one batch). The toy tables have several basins, some with parameters on bounds.

Hand-written because no library solves a batch of small sign-constrained Huber regressions:
scipy's nnls is least squares only and least_squares(loss="huber") solves one problem at a
time, about a thousand times slower over a 4,096-point grid. tests/test_scaling.py checks the
inner solve against least_squares.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .laws import LOG_BOUND, Inputs, Law

EXP_FLOOR = 1e-3  # smallest exponent searched: below it, n^-a ~ 1 - a ln n is collinear with C
GRID_POINTS = 4096  # target size of the phi grid
GRID_ITER = 8  # inner iterations when ranking the grid (the polish solves exactly)
POLISH_STARTS = 12  # short L-BFGS-B runs on the profile, from the best local minima of the grid
FD_STEP = 1e-6  # relative central-difference step on phi
_RIDGE = 1e-13  # relative Tikhonov term keeping a singular normal matrix solvable


def huber(r, delta: float) -> np.ndarray:
    """Huber loss per residual: r^2/2 inside |r| <= delta, delta (|r| - delta/2) outside."""
    a = np.abs(r)
    return np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))


# ----------------------------------------------------------------------------
# the inner problem: batched Huber regression with sign constraints

def _solve(H, g):
    """Batched solve of H x = g with a tiny relative ridge (H: (G, p, p), g: (G, p))."""
    p = H.shape[-1]
    scale = np.maximum(np.trace(H, axis1=1, axis2=2) / p, 1e-300)
    return np.linalg.solve(H + _RIDGE * scale[:, None, None] * np.eye(p), g[..., None])[..., 0]


def _huber_unconstrained(X, y, delta: float, max_iter: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """min_c sum huber(X c - y) for each of G problems (X: (G, n, p) with columns scaled to
    unit max; y: (G, n)). Returns (c (G, p), loss (G,))."""
    G, n, p = X.shape
    if p == 0:
        return np.zeros((G, 0)), huber(y, delta).sum(-1)
    Xt = X.transpose(0, 2, 1)
    c = _solve(Xt @ X, (Xt @ y[..., None])[..., 0])  # least squares start
    loss = huber((X @ c[..., None])[..., 0] - y, delta).sum(-1)  # (G,)
    for _ in range(max_iter):
        r = (X @ c[..., None])[..., 0] - y  # (G, n)
        inl = np.abs(r) <= delta
        psi = np.clip(r, -delta, delta)
        newton = c - _solve(Xt @ (X * inl[..., None]), (Xt @ psi[..., None])[..., 0])
        w = np.where(inl, 1.0, delta / np.maximum(np.abs(r), 1e-300))
        irls = _solve(Xt @ (X * w[..., None]), (Xt @ (w * y)[..., None])[..., 0])
        with np.errstate(over="ignore", invalid="ignore"):  # Newton on < p inliers can blow up
            ln = huber((X @ newton[..., None])[..., 0] - y, delta).sum(-1)
            li = huber((X @ irls[..., None])[..., 0] - y, delta).sum(-1)
        ln = np.where(np.isfinite(ln), ln, np.inf)
        li = np.where(np.isfinite(li), li, np.inf)
        cand = np.where((ln <= li)[:, None], newton, irls)
        lc = np.minimum(ln, li)
        better = lc < loss
        gain = np.where(better, loss - lc, 0.0)
        c = np.where(better[:, None], cand, c)
        loss = np.where(better, lc, loss)
        if np.all(gain <= 1e-15 * np.maximum(loss, 1e-300)):
            break
    return c, loss


def huber_regression(F, y, delta: float, offset: str = "free", max_iter: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Exact min over c >= 0 (and the offset) of sum huber(F c + offset - y), for a batch.

    F: (G, n, m) amplitude columns; y: (n,) or (G, n); offset: "free", "nonneg" (>= 0) or
    "none". Returns
    (coefficients (G, m + 1 or m), the offset last; loss (G,)); a batch member whose
    columns are not finite gets loss inf. Sign constraints by face enumeration (module doc).
    max_iter caps the Newton/IRLS iterations per face (a coarse value ranks grid points).
    """
    F = np.asarray(F, dtype=float)
    y = np.asarray(y, dtype=float)
    G, n, m = F.shape
    y = np.broadcast_to(y, (G, n))
    X = F if offset == "none" else np.concatenate([F, np.ones((G, n, 1))], axis=2)
    p = X.shape[2]
    ok = np.all(np.isfinite(X), axis=(1, 2))
    X = np.where(ok[:, None, None], X, 0.0)
    colscale = np.maximum(np.abs(X).max(axis=1), 1e-300)  # (G, p)
    Xs = X / colscale[:, None, :]
    constrained = list(range(m)) + ([m] if offset == "nonneg" else [])
    best_c = np.zeros((G, p))
    best_loss = np.full(G, np.inf)
    todo = np.ones(G, dtype=bool)
    # faces ordered from none zeroed to all zeroed; the first (unconstrained) face settles
    # every problem whose optimum is feasible, the rest only run on the others
    faces = [z for k in range(len(constrained) + 1) for z in itertools.combinations(constrained, k)]
    for zeroed in faces:
        idx = np.flatnonzero(todo)
        if idx.size == 0:
            break
        keep = [j for j in range(p) if j not in zeroed]
        c_k, loss_k = _huber_unconstrained(Xs[idx][:, :, keep], y[idx], delta, max_iter)
        feasible = np.all(c_k[:, [keep.index(j) for j in constrained if j in keep]] >= 0, axis=1)
        improve = feasible & (loss_k < best_loss[idx])
        rows = idx[improve]
        full = np.zeros((rows.size, p))
        full[:, keep] = c_k[improve]
        best_c[rows] = full
        best_loss[rows] = loss_k[improve]
        # KKT: a feasible face optimum whose loss does not fall when any zeroed coefficient
        # grows (d loss / d c_j >= 0 for j zeroed) is the constrained optimum: stop there
        full = np.zeros((idx.size, p))
        full[:, keep] = c_k
        psi = np.clip((Xs[idx] @ full[..., None])[..., 0] - y[idx], -delta, delta)
        grad = (Xs[idx].transpose(0, 2, 1) @ psi[..., None])[..., 0]
        kkt = np.all(grad[:, list(zeroed)] >= -1e-9 * n * delta, axis=1) if zeroed else True
        todo[idx[feasible & kkt]] = False
    best_loss[~ok] = np.inf
    return best_c / colscale, best_loss


# ----------------------------------------------------------------------------
# a law as F(phi) c: which parameters are searched, how the columns are built

@dataclass(frozen=True)
class Separable:
    """A law split into searched parameters phi and linear coefficients c (module doc).

    phi holds the law's parameters that have a start grid (natural values; the internal
    value for a log parameter such as K), then, for a powered pair, the log-ratio of its
    second amplitude to its first.
    """

    law: Law

    @property
    def nonlinear(self) -> list[int]:
        return [i for i, p in enumerate(self.law.params) if p.grid is not None]

    @property
    def amplitudes(self) -> list[int]:
        return [i for i, p in enumerate(self.law.params) if p.log and p.grid is None]

    @property
    def phi_names(self) -> list[str]:
        names = [self.law.params[i].name for i in self.nonlinear]
        return names + ([f"log({self.law.pair[1]}/{self.law.pair[0]})"] if self.law.pair else [])

    def columns(self, law_amps: list[int]) -> list[list[int]]:
        """Amplitude index groups that share one column (a powered pair shares one)."""
        if not self.law.pair:
            return [[i] for i in law_amps]
        pi = [self.law.param_names.index(nm) for nm in self.law.pair]
        return [pi] + [[i] for i in law_amps if i not in pi]

    def design(self, phi: np.ndarray, x: Inputs) -> np.ndarray:
        """Columns F(phi): (G, n, m) for phi (G, q)."""
        phi = np.atleast_2d(phi)
        G, P = phi.shape[0], self.law.n_params
        cols = []
        for group in self.columns(self.amplitudes):
            T = np.zeros((G, P))
            T[:, self.amplitudes] = -np.inf  # exp(-inf) = 0: every other amplitude off
            T[:, self.nonlinear] = phi[:, :len(self.nonlinear)]
            T[:, group[0]] = 0.0  # this amplitude = 1
            if len(group) == 2:
                T[:, group[1]] = phi[:, -1]  # the pair's second amplitude: exp(log-ratio)
            if self.law.offset != "none":
                T[:, -1] = 0.0
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                cols.append(np.broadcast_to(self.law.fn(tuple(T[:, j:j + 1] for j in range(P)), x), (G, x.dl.size)))
        return np.stack(cols, axis=2)

    def caps(self, phi: np.ndarray) -> np.ndarray:
        """Largest coefficient of each column that the law's log amplitudes (<= LOG_BOUND) can
        hold: (G, number of columns). A pair's coefficient is A1^k with A1 and A1 r both
        within the bound."""
        phi = np.atleast_2d(phi)
        out = []
        for group in self.columns(self.amplitudes):
            if len(group) == 2:
                k = phi[:, self.nonlinear.index(self.law.param_names.index("k"))]
                out.append(np.exp(k * np.minimum(LOG_BOUND, LOG_BOUND - phi[:, -1])))
            else:
                out.append(np.full(len(phi), np.exp(LOG_BOUND)))
        return np.stack(out, axis=1)

    def to_theta(self, phi: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """The law's internal vectors (G, P) from phi (G, q) and coefficients (G, m [+ 1]);
        coefficients are capped (caps) and floored at exp(-LOG_BOUND), the law's own range."""
        phi, coef = np.atleast_2d(phi), np.atleast_2d(coef)
        theta = np.zeros((len(phi), self.law.n_params))
        theta[:, self.nonlinear] = phi[:, :len(self.nonlinear)]
        caps = self.caps(phi)
        with np.errstate(divide="ignore"):
            for j, group in enumerate(self.columns(self.amplitudes)):
                la = np.log(np.clip(coef[:, j], 0.0, caps[:, j]))
                if len(group) == 2:  # the pair's column is (P1 + r P2)^k, its coefficient A1^k
                    la = la / theta[:, self.law.param_names.index("k")]
                    theta[:, group[1]] = np.clip(la + phi[:, -1], -LOG_BOUND, LOG_BOUND)
                theta[:, group[0]] = np.clip(la, -LOG_BOUND, LOG_BOUND)
        if self.law.offset != "none":
            theta[:, -1] = coef[:, -1]
        return theta

    def phi_of(self, theta: np.ndarray) -> np.ndarray:
        """phi from a full internal vector (the inverse of to_theta's phi part)."""
        phi = list(np.asarray(theta, float)[self.nonlinear])
        if self.law.pair:
            i0, i1 = (self.law.param_names.index(nm) for nm in self.law.pair)
            phi.append(theta[i1] - theta[i0])
        return np.array(phi)

    def bounds(self) -> list[tuple[float, float]]:
        """Search bounds on phi: the law's bounds, exponents floored at EXP_FLOOR."""
        out = []
        for i in self.nonlinear:
            p = self.law.params[i]
            if p.log:
                out.append((-LOG_BOUND, LOG_BOUND))
            elif p.lo == 0.0 and p.grid is not None and p.name != "k":
                out.append((EXP_FLOOR, p.hi))
            else:
                out.append((p.lo, p.hi))
        if self.law.pair:
            out.append((-2 * LOG_BOUND, 2 * LOG_BOUND))
        return out

    def grid(self, overrides: dict | None = None, extra: dict | None = None,
             points: int = GRID_POINTS) -> list[np.ndarray]:
        """The axes of the phi grid, one sorted array per phi entry: exponents geometric in
        [EXP_FLOOR, hi]; K, nu, eta, k and the pair ratio over wide fixed ranges. `overrides`
        replaces axes by name, `extra` adds values (the slice medians of App. A.5)."""
        overrides, extra = dict(overrides or {}), dict(extra or {})
        unknown = set(overrides) - set(self.phi_names)
        if unknown:
            raise ValueError(f"grid names {sorted(unknown)} are not searched params of {self.law.name!r}: "
                             f"{self.phi_names}")
        fixed_axes, exp_names = {}, []
        for i in self.nonlinear:
            p = self.law.params[i]
            if p.name in overrides:
                fixed_axes[p.name] = [np.log(v) if p.log else v for v in overrides[p.name]]
            elif p.name == "k":
                fixed_axes[p.name] = [0.25, 0.5, 1.0, 1.5, 2.0]
            elif p.log:  # K: log-spaced over 14 decades
                fixed_axes[p.name] = list(np.log(np.logspace(-4, 10, 8)))
            elif p.lo < 0:  # nu, eta: symmetric around 0, out to the law's bounds
                fixed_axes[p.name] = [v for v in (-3.0, -1.0, -0.3, 0.0, 0.3, 1.0, 3.0) if p.lo <= v <= p.hi]
            else:
                exp_names.append(p.name)
        if self.law.pair:
            name = self.phi_names[-1]
            fixed_axes[name] = list(overrides.get(name, np.linspace(-40.0, 40.0, 11)))  # amplitudes span e^+-30
        other = int(np.prod([len(v) for v in fixed_axes.values()])) if fixed_axes else 1
        n_e = int(np.clip((points / other) ** (1 / max(len(exp_names), 1)), 5, 64)) if exp_names else 0
        axes = []
        for nm, (lo, hi) in zip(self.phi_names, self.bounds()):
            vals = fixed_axes[nm] if nm in fixed_axes else list(np.geomspace(lo, hi, n_e))
            bar = extra.get(nm)
            if bar is not None and not any(np.isclose(bar, v) for v in vals):
                vals = vals + [float(np.clip(bar, lo, hi))]
            axes.append(np.unique(np.asarray(vals, dtype=float)))
        return axes


def separable(law: Law) -> Separable:
    """The variable-projection view of a law (every law of laws.py has one)."""
    return Separable(law)


# ----------------------------------------------------------------------------
# the profile objective and its search

@dataclass
class Profile:
    """P(phi) = min over the linear coefficients of the App. A.5 objective, for one law and
    one data set. reg: {phi name: (beta_bar, lambda)} (the one-sided exponent regulariser).
    The inner problem includes the law's range of amplitudes (coefficients), and P is
    evaluated at the law's own internal parameters built from its solution."""

    form: Separable
    x: Inputs
    y: np.ndarray
    f_scale: float
    reg: dict

    def __call__(self, phi, chunk: int = 1024, max_iter: int = 100) -> tuple[np.ndarray, np.ndarray]:
        """(P (G,), coefficients (G, m [+ 1])) at phi (G, q), in chunks of `chunk` rows;
        max_iter: Newton/IRLS iterations of the inner solve (GRID_ITER to rank a grid)."""
        phi = np.atleast_2d(np.asarray(phi, dtype=float))
        vals, coefs = [], []
        for s in range(0, len(phi), chunk):
            part = phi[s:s + chunk]
            coef = self.coefficients(part, max_iter)
            # the loss at the law's own parameters (an amplitude of 0 is held as exp(-LOG_BOUND))
            theta = self.form.to_theta(part, coef)
            with np.errstate(over="ignore", invalid="ignore"):
                pred = self.form.law.fn(tuple(theta[:, j:j + 1] for j in range(theta.shape[1])), self.x)
            loss = huber(pred - self.y, self.f_scale).sum(-1)
            loss = np.where(np.isfinite(loss), loss, np.inf)
            for j, name in enumerate(self.form.phi_names):
                if name in self.reg:
                    bar, lam = self.reg[name]
                    loss = loss + lam * np.maximum(part[:, j] - bar, 0.0) ** 2
            vals.append(loss)
            coefs.append(coef)
        return np.concatenate(vals), np.concatenate(coefs)

    def coefficients(self, phi: np.ndarray, max_iter: int = 100) -> np.ndarray:
        """The inner optimum at each phi (G, q). A coefficient above what the law can hold
        (Separable.caps) is fixed at its cap, its column moved to the right-hand side, and
        the others solved again (exact under the cap), until none is above."""
        F = self.form.design(phi, self.x)
        offset = self.form.law.offset
        coef, _ = huber_regression(F, self.y, self.f_scale, offset, max_iter)
        caps = self.form.caps(phi)
        m = F.shape[2]
        fixed = np.zeros((len(phi), m), dtype=bool)
        for _ in range(m):
            over = (coef[:, :m] > caps) & ~fixed
            if not over.any():
                break
            fixed |= over
            for pattern in np.unique(fixed[over.any(axis=1)], axis=0):
                rows = np.flatnonzero(over.any(axis=1) & np.all(fixed == pattern, axis=1))
                free = np.flatnonzero(~pattern)
                y_r = self.y - np.einsum("gnj,gj->gn", F[rows][:, :, pattern], caps[rows][:, pattern])
                c_free, _ = huber_regression(F[rows][:, :, free], y_r, self.f_scale, offset, max_iter)
                new = np.zeros((rows.size, coef.shape[1]))
                new[:, free] = c_free[:, :free.size]
                new[:, np.flatnonzero(pattern)] = caps[rows][:, pattern]
                if offset != "none":
                    new[:, -1] = c_free[:, -1]
                coef[rows] = new
        return coef

    def value_and_grad(self, phi) -> tuple[float, np.ndarray]:
        """P and its gradient by central differences; all 2q + 1 points in one batch."""
        phi = np.asarray(phi, dtype=float)
        q = phi.size
        h = FD_STEP * np.maximum(1.0, np.abs(phi))
        v, _ = self(np.vstack([phi, phi + np.diag(h), phi - np.diag(h)]))
        if not np.isfinite(v[0]):
            return 1e30, np.zeros(q)
        g = (v[1:q + 1] - v[q + 1:]) / (2 * h)
        return float(v[0]), np.where(np.isfinite(g), g, 0.0)


def polish(profile: Profile, starts: np.ndarray) -> tuple[np.ndarray, float]:
    """L-BFGS-B on the profile (bounded phi): a short run from each start, then the best of
    them run to convergence. Returns (phi, P)."""
    from scipy.optimize import minimize

    bounds = profile.form.bounds()
    lo, hi = np.array(bounds).T

    def run(phi0, ftol, maxiter):
        res = minimize(profile.value_and_grad, np.clip(phi0, lo, hi), jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"maxiter": maxiter, "ftol": ftol, "gtol": 1e-11})
        return res.x, float(profile(res.x)[0][0])

    found = [run(phi0, 1e-9, 60) for phi0 in np.atleast_2d(starts)]
    phi, val = min(found, key=lambda t: t[1])
    phi_f, val_f = run(phi, 1e-15, 1000)
    return (phi_f, val_f) if val_f <= val else (phi, val)


def grid_starts(profile: Profile, axes: list[np.ndarray], k: int) -> np.ndarray:
    """Polish starts from the grid axes x axes x ...: the k best local minima of P on the grid
    (a point no higher than its 3^q - 1 neighbours; one start per basin, one per plateau of
    equal values), topped up with the best other grid points when there are fewer than k,
    then the best point on each of the
    grid's 2q faces. Best first, no repeats."""
    from scipy.ndimage import minimum_filter

    points = np.array(list(itertools.product(*axes)), dtype=float)
    vals, _ = profile(points, max_iter=GRID_ITER)
    vals = np.where(np.isfinite(vals), vals, np.inf)
    if not np.isfinite(vals).any():
        raise RuntimeError(f"no grid point gives a finite objective for law {profile.form.law.name!r}")
    V = vals.reshape([len(a) for a in axes])
    is_min = (V == minimum_filter(V, size=3, mode="nearest")).ravel() & np.isfinite(vals)
    order = np.argsort(vals, kind="stable")
    ranked = [i for i in order if is_min[i]] + [i for i in order if not is_min[i] and np.isfinite(vals[i])]
    chosen, seen = [], []
    for i in ranked:  # one start per plateau: minima of equal value (a term switched off) are one basin
        if len(chosen) == max(k, 1):
            break
        if not any(abs(vals[i] - v) <= 1e-9 * abs(v) for v in seen):
            chosen.append(i)
            seen.append(vals[i])
    # optima on a face of the box (an exponent at 3, say) are common on small tables and their
    # basins need not show as grid minima: add the best grid point on each face
    for j, a in enumerate(axes):
        for end in (a[0], a[-1]):
            on_face = np.flatnonzero((points[:, j] == end) & np.isfinite(vals))
            if on_face.size:
                chosen.append(on_face[np.argmin(vals[on_face])])
    return points[list(dict.fromkeys(chosen))]
