"""Scaling-law formulas: Eq. 1 (the additive law), its App. A.2 variants (Table 3/4), and Eq. 2.

Every law is evaluated on normalised variables (App. A.2): n = N/1e8, ds = Ds/1e9,
dl = Dl/1e9. Positive amplitudes are optimised as logs, so each term is computed as
exp(log_amp - exponent * log x) (the Epoch-style log-sum-exp form; better conditioned).

Two parameter vectors exist for each law:
  natural  : the values in the formula (A, alpha, Bs, ...), in the normalised units above
  internal : what the optimiser sees; log(value) for the amplitudes marked `log=True`
`Law.fn(t, x)` takes internal values; each entry of `t` may be an array of shape (B, 1), so
B parameter vectors are evaluated at once against the (n_points,) data (used for gradients).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

N_UNIT = 1e8  # N~ = N / 1e8 (App. A.2)
D_UNIT = 1e9  # D~ = D / 1e9 (App. A.2)

EXP_GRID = (0.1, 0.25, 0.5, 0.8, 1.2)  # multi-start values for every exponent
LOG_BOUND = 30.0  # |log amplitude| <= 30


class Inputs(NamedTuple):
    """Normalised predictors and their logs, each (n_points,)."""

    n: np.ndarray
    ds: np.ndarray
    dl: np.ndarray
    log_n: np.ndarray
    log_ds: np.ndarray
    log_dl: np.ndarray


def make_inputs(n=None, ds=None, dl=None) -> Inputs:
    """Pack normalised predictors (n = N/1e8, ds = Ds/1e9, dl = Dl/1e9); a missing one is NaN."""
    given = [np.asarray(v, dtype=float) for v in (n, ds, dl) if v is not None]
    shape = np.broadcast_shapes(*[g.shape for g in given]) if given else ()
    cols = []
    for v in (n, ds, dl):
        cols.append(np.full(shape, np.nan) if v is None else np.broadcast_to(np.asarray(v, dtype=float), shape))
    with np.errstate(invalid="ignore", divide="ignore"):
        logs = [np.log(c) for c in cols]
    return Inputs(*cols, *logs)


@dataclass(frozen=True)
class Param:
    """One parameter: natural bounds, whether it is optimised as a log, and its start grid.

    grid=None marks a linear parameter (an amplitude or the offset): its start values
    come from a least-squares solve at each grid point of the nonlinear ones.
    """

    name: str
    lo: float = -np.inf
    hi: float = np.inf
    log: bool = False
    grid: tuple[float, ...] | None = None


def _amp(name: str) -> Param:
    return Param(name, 0.0, np.inf, log=True)


def _exp(name: str, hi: float = 3.0) -> Param:
    return Param(name, 0.0, hi, grid=EXP_GRID)


@dataclass(frozen=True)
class Law:
    """A scaling-law formula: name, parameters, prediction and unit conversion.

    fn(t, x)        -> prediction of log(LongPPL) from internal params t and Inputs x
    absolute(p)     -> natural params for N, D as absolute counts (Table 11 style)
    offset          -> "free", "nonneg" or "none"; the offset parameter is the last one
    pair            -> for the powered-pair laws, the two amplitudes inside (...)^k
    inputs          -> which of N, Ds, Dl the law uses
    """

    name: str
    formula: str
    params: tuple[Param, ...]
    fn: Callable[[tuple, Inputs], np.ndarray] = field(repr=False)
    absolute: Callable[[dict], dict] = field(repr=False)
    offset: str = "free"
    pair: tuple[str, str] | None = None
    inputs: tuple[str, ...] = ("N", "Ds", "Dl")

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def n_params(self) -> int:
        return len(self.params)

    def bounds_internal(self) -> list[tuple[float | None, float | None]]:
        """L-BFGS-B bounds on the internal vector (log amplitudes within +-LOG_BOUND)."""
        out = []
        for p in self.params:
            if p.log:
                out.append((-LOG_BOUND, LOG_BOUND))
            else:
                out.append((None if np.isinf(p.lo) else p.lo, None if np.isinf(p.hi) else p.hi))
        return out

    def to_internal(self, params) -> np.ndarray:
        """Natural params (dict or sequence in `param_names` order) -> internal vector."""
        vals = self._as_array(params)
        logs = np.array([p.log for p in self.params])
        with np.errstate(divide="ignore"):
            return np.where(logs, np.log(np.where(logs, vals, 1.0)), vals)

    def to_natural(self, theta) -> dict[str, float]:
        """Internal vector -> {name: natural value}."""
        theta = np.asarray(theta, dtype=float)
        return {p.name: float(np.exp(v) if p.log else v) for p, v in zip(self.params, theta)}

    def predict(self, params, n=None, ds=None, dl=None) -> np.ndarray:
        """log(LongPPL) from natural params on normalised variables n=N/1e8, ds=Ds/1e9, dl=Dl/1e9."""
        t = tuple(self.to_internal(params))
        return np.asarray(self.fn(t, make_inputs(n, ds, dl)), dtype=float)

    def to_absolute(self, params) -> dict[str, float]:
        """Natural params in absolute-count units: the same formula with raw N, Ds, Dl (Table 11)."""
        return self.absolute(dict(zip(self.param_names, self._as_array(params))))

    def _as_array(self, params) -> np.ndarray:
        if isinstance(params, dict):
            missing = [k for k in self.param_names if k not in params]
            if missing:
                raise ValueError(f"law {self.name!r} needs params {list(self.param_names)}; missing {missing}")
            return np.array([float(params[k]) for k in self.param_names])
        vals = np.asarray(params, dtype=float).ravel()
        if vals.size != self.n_params:
            raise ValueError(f"law {self.name!r} has {self.n_params} params {list(self.param_names)}, got {vals.size}")
        return vals


# ----------------------------------------------------------------------------
# formulas on internal params; lA = log A etc. Terms are exp(log_amp - exponent * log x)

def _term(log_amp, expo, log_x):
    return np.exp(log_amp - expo * log_x)


def _additive(t, x):  # Eq. 1: A n^-a + Bs ds^-bs + Bl dl^-bl + C
    lA, a, lBs, bs, lBl, bl, C = t
    return _term(lA, a, x.log_n) + _term(lBs, bs, x.log_ds) + _term(lBl, bl, x.log_dl) + C


def _no_offset(t, x):
    lA, a, lBs, bs, lBl, bl = t
    return _term(lA, a, x.log_n) + _term(lBs, bs, x.log_ds) + _term(lBl, bl, x.log_dl)


def _combined(t, x):  # A n^-a + B (ds + dl)^-b + C
    lA, a, lB, b, C = t
    return _term(lA, a, x.log_n) + _term(lB, b, np.log(x.ds + x.dl)) + C


def _effective(t, x):  # A n^-a + B (dl + K ds)^-b + C
    lA, a, lB, b, lK, C = t
    return _term(lA, a, x.log_n) + _term(lB, b, np.log(x.dl + np.exp(lK) * x.ds)) + C


def _scale_effective(t, x):  # A n^-a + B (dl + K n^nu ds)^-b + C
    lA, a, lB, b, lK, nu, C = t
    return _term(lA, a, x.log_n) + _term(lB, b, np.log(x.dl + np.exp(lK + nu * x.log_n) * x.ds)) + C


def _pair_n_ds(t, x):  # (A n^-a + Bs ds^-bs)^k + Bl dl^-bl + C
    lA, a, lBs, bs, lBl, bl, k, C = t
    pair = _term(lA, a, x.log_n) + _term(lBs, bs, x.log_ds)
    return np.exp(k * np.log(pair)) + _term(lBl, bl, x.log_dl) + C


def _pair_n_dl(t, x):  # (A n^-a + Bl dl^-bl)^k + Bs ds^-bs + C
    lA, a, lBs, bs, lBl, bl, k, C = t
    pair = _term(lA, a, x.log_n) + _term(lBl, bl, x.log_dl)
    return np.exp(k * np.log(pair)) + _term(lBs, bs, x.log_ds) + C


def _pair_ds_dl(t, x):  # A n^-a + (Bs ds^-bs + Bl dl^-bl)^k + C
    lA, a, lBs, bs, lBl, bl, k, C = t
    pair = _term(lBs, bs, x.log_ds) + _term(lBl, bl, x.log_dl)
    return _term(lA, a, x.log_n) + np.exp(k * np.log(pair)) + C


def _cpt(t, x):  # A n^-a + Bs ds^-bs + Bl dl^-bl n^-eta + C
    lA, a, lBs, bs, lBl, bl, eta, C = t
    return (_term(lA, a, x.log_n) + _term(lBs, bs, x.log_ds)
            + np.exp(lBl - bl * x.log_dl - eta * x.log_n) + C)


def _fixed(t, x):  # Eq. 2: Bl dl^-bl + C'
    lBl, bl, Cp = t
    return _term(lBl, bl, x.log_dl) + Cp


# ----------------------------------------------------------------------------
# unit conversion: an amplitude on n^-a ds^-b picks up 1e8^a 1e9^b (App. A.5, Table 11)

def _abs_additive(p):
    q = dict(p)
    q["A"] = p["A"] * N_UNIT ** p["alpha"]
    q["Bs"] = p["Bs"] * D_UNIT ** p["beta_s"]
    q["Bl"] = p["Bl"] * D_UNIT ** p["beta_l"]
    return q


def _abs_combined(p):
    q = dict(p)
    q["A"] = p["A"] * N_UNIT ** p["alpha"]
    q["B"] = p["B"] * D_UNIT ** p["beta"]
    return q


def _abs_scale_effective(p):
    q = _abs_combined(p)
    q["K"] = p["K"] * N_UNIT ** (-p["nu"])  # K n^nu = K 1e8^-nu N^nu
    return q


def _abs_pair(p):  # k is unitless; the amplitudes inside the pair convert as usual
    return _abs_additive(p)


def _abs_cpt(p):
    q = _abs_additive(p)
    q["Bl"] = q["Bl"] * N_UNIT ** p["eta"]
    return q


def _abs_fixed(p):
    q = dict(p)
    q["Bl"] = p["Bl"] * D_UNIT ** p["beta_l"]
    return q


# ----------------------------------------------------------------------------
# the registry

_ADD = (_amp("A"), _exp("alpha"), _amp("Bs"), _exp("beta_s"), _amp("Bl"), _exp("beta_l"))
_C = Param("C")
_K = Param("k", 1e-3, 2.0, grid=(0.5, 1.0, 1.5, 2.0))  # 0 < k <= 2 (Table 3)

VARIANTS: dict[str, Law] = {
    law.name: law
    for law in (
        Law("additive", "A N^-alpha + Bs Ds^-beta_s + Bl Dl^-beta_l + C  (Eq. 1, free offset)",
            _ADD + (_C,), _additive, _abs_additive),
        Law("no_offset", "A N^-alpha + Bs Ds^-beta_s + Bl Dl^-beta_l",
            _ADD, _no_offset, _abs_additive, offset="none"),
        Law("nonneg_offset", "A N^-alpha + Bs Ds^-beta_s + Bl Dl^-beta_l + C, C >= 0",
            _ADD + (Param("C", 0.0, np.inf),), _additive, _abs_additive, offset="nonneg"),
        Law("combined_budget", "A N^-alpha + B (Ds + Dl)^-beta + C",
            (_amp("A"), _exp("alpha"), _amp("B"), _exp("beta"), _C), _combined, _abs_combined),
        Law("effective_data", "A N^-alpha + B (Dl + K Ds)^-beta + C",
            (_amp("A"), _exp("alpha"), _amp("B"), _exp("beta"),
             Param("K", 0.0, np.inf, log=True, grid=(0.01, 0.1, 1.0)), _C),
            _effective, _abs_combined),
        Law("scale_dependent_effective_data", "A N^-alpha + B (Dl + K N^nu Ds)^-beta + C",
            (_amp("A"), _exp("alpha"), _amp("B"), _exp("beta"),
             Param("K", 0.0, np.inf, log=True, grid=(0.01, 0.1, 1.0)),
             Param("nu", -3.0, 3.0, grid=(-0.5, 0.0, 0.5)), _C),
            _scale_effective, _abs_scale_effective),
        Law("powered_pair_N_Ds", "(A N^-alpha + Bs Ds^-beta_s)^k + Bl Dl^-beta_l + C, 0 < k <= 2",
            _ADD + (_K, _C), _pair_n_ds, _abs_pair, pair=("A", "Bs")),
        Law("powered_pair_N_Dl", "(A N^-alpha + Bl Dl^-beta_l)^k + Bs Ds^-beta_s + C, 0 < k <= 2",
            _ADD + (_K, _C), _pair_n_dl, _abs_pair, pair=("A", "Bl")),
        Law("powered_pair_Ds_Dl", "A N^-alpha + (Bs Ds^-beta_s + Bl Dl^-beta_l)^k + C, 0 < k <= 2",
            _ADD + (_K, _C), _pair_ds_dl, _abs_pair, pair=("Bs", "Bl")),
        Law("cpt_interaction", "A N^-alpha + Bs Ds^-beta_s + Bl Dl^-beta_l N^-eta + C",
            _ADD + (Param("eta", -3.0, 3.0, grid=(-0.3, 0.0, 0.3)), _C), _cpt, _abs_cpt),
    )
}

FIXED_MODEL = Law("fixed_model", "Bl Dl^-beta_l + C_prime  (Eq. 2, one trajectory at fixed N, Ds)",
                  (_amp("Bl"), _exp("beta_l"), Param("C_prime")), _fixed, _abs_fixed, inputs=("Dl",))


def get_law(law: str | Law) -> Law:
    """Look up a law by name (a Law passes through); unknown names list the allowed ones."""
    if isinstance(law, Law):
        return law
    if law == FIXED_MODEL.name:
        return FIXED_MODEL
    if law not in VARIANTS:
        raise ValueError(f"unknown law {law!r}; allowed: {', '.join(VARIANTS)}, {FIXED_MODEL.name}")
    return VARIANTS[law]
