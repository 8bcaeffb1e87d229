"""Weight rules of the weighted-average mergers: LastM (Eq. 4), 1-Sqrt (Eqs. 5-6), EMA (Eq. 7).

Pure functions of the checkpoint iterations; imports only numpy and `checks`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from nblib.lccp.merge.checks import _check_beta, _check_iterations, _int_value, _positive_int


# -----------------------------------------------------------------------------
# Weight rules (App. B)


def last_m_weights(n: int, m: int) -> np.ndarray:
    """LastM (App. B, Eq. 4): weight 1/m on each of the newest m of n checkpoints, 0 before."""
    n, m = _positive_int(n, "n"), _positive_int(m, "m")
    if m > n:
        raise ValueError(f"m={m} exceeds the number of checkpoints n={n}; choose 1 <= m <= n")
    w = np.zeros(n)
    w[n - m:] = 1.0 / m
    return w


def one_sqrt_weights(iterations: Sequence[int]) -> np.ndarray:
    """1-Sqrt (App. B, Eqs. 5-6) on actual iterations: w_i ∝ 1 - sqrt((t_K - t_i)/(t_K - t_1)).

    The oldest checkpoint gets weight 0; a single checkpoint gets weight 1.
    """
    t = _check_iterations(iterations)
    if len(t) == 1:
        return np.ones(1)
    age = (t[-1] - t) / (t[-1] - t[0])  # Eq. 5, in [0, 1]
    w = 1.0 - np.sqrt(age)  # Eq. 6, unnormalised
    return w / w.sum()


def default_ema_delta(iterations: Sequence[int]) -> float:
    """Nominal checkpoint interval Delta for EMA (App. B, Eq. 7): the median gap t_{i+1} - t_i."""
    t = _check_iterations(iterations)
    return float(np.median(np.diff(t))) if len(t) > 1 else 1.0


def ema_weights(iterations: Sequence[int], beta: float, delta: float | None = None) -> np.ndarray:
    """Post-hoc EMA (App. B, Eq. 7): w_i ∝ beta ** ((t_K - t_i) / delta).

    `delta` is one nominal checkpoint interval in iterations (default: the median gap).
    Small beta concentrates mass on the newest checkpoint; beta near 1 approaches uniform.
    """
    t = _check_iterations(iterations)
    beta = _check_beta(beta)
    if delta is None:
        delta = default_ema_delta(iterations)
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.integer, np.floating)):
        raise TypeError(f"delta must be a positive number of iterations, got {delta!r}")
    if not (math.isfinite(delta) and delta > 0):
        raise ValueError(f"delta must be a positive number of iterations, got {delta}")
    w = beta ** ((t[-1] - t) / delta)  # newest gets beta**0 = 1, so the sum is >= 1
    return w / w.sum()


def spaced_indices(iterations: Sequence[int], m: int, spacing: int, target: int | None = None) -> list[int]:
    """Last4 spacing ablation (App. B.1): indices of the checkpoints at {T-(m-1)s, ..., T-s, T}.

    T is `target` (default: the newest iteration); every wanted iteration must be present.
    """
    t = [int(x) for x in _check_iterations(iterations)]
    m, spacing = _positive_int(m, "m"), _positive_int(spacing, "spacing")
    target = t[-1] if target is None else _int_value(target, "target")
    wanted = [target - j * spacing for j in range(m - 1, -1, -1)]
    missing = [x for x in wanted if x not in t]
    if missing:
        raise ValueError(
            f"Last{m} with spacing {spacing} at target {target} needs iterations {wanted}; "
            f"missing {missing} (available: {t})"
        )
    return [t.index(x) for x in wanted]
