"""Bootstrap intervals for a fitted law (beyond the paper; Epoch-style Chinchilla replication).

Configurations (rows) are resampled with replacement and the whole App. A.5 procedure is
re-run on each resample, slice thresholds included; percentiles of the refits give
intervals for every parameter and for predictions at chosen points.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .fit import FitResult, fit_law
from .laws import Law, get_law
from .table import check_table


@dataclass
class BootstrapResult:
    """Full-data fit plus n_boot refits; `samples` holds natural params in normalised units."""

    fit: FitResult
    samples: pd.DataFrame  # (n_boot, n_params)
    ci: float
    points: pd.DataFrame | None = None  # N, Ds, Dl where predictions were taken
    pred_samples: np.ndarray | None = field(default=None, repr=False)  # (n_boot, n_points)
    n_at_bound: int = 0  # refits with a parameter on a bound (FitResult.at_bound)

    @property
    def _q(self) -> tuple[float, float]:
        return 50 * (1 - self.ci), 50 * (1 + self.ci)

    def intervals(self, absolute: bool = False) -> pd.DataFrame:
        """Percentile interval per parameter: estimate (full fit), lo, hi. absolute=True
        converts every refit to absolute-count units first (Table 11 style)."""
        law, samples, est = self.fit.law, self.samples, self.fit.params
        if absolute:
            samples = pd.DataFrame([law.to_absolute(r) for r in samples.to_dict("records")])
            est = self.fit.absolute_params()
        lo, hi = np.percentile(samples.to_numpy(), self._q, axis=0)
        return pd.DataFrame({"estimate": pd.Series(est), "lo": lo, "hi": hi},
                            index=list(law.param_names)).rename_axis("param")

    def pred_intervals(self) -> pd.DataFrame:
        """Predicted log(LongPPL) at `points`: full-fit estimate and percentile interval."""
        if self.points is None:
            raise ValueError("bootstrap was run without points; pass points=DataFrame(N, Ds, Dl)")
        lo, hi = np.percentile(self.pred_samples, self._q, axis=0)
        est = self.fit.predict_table(self.points)
        return self.points.assign(pred_log_longppl=est, pred_lo=lo, pred_hi=hi)


def _refits(table: pd.DataFrame, law: Law, resamples: list, start: np.ndarray, points, fit_kwargs: dict):
    """Refit on each resample (row indices) from `start`; (params, predictions or None,
    parameters at a bound) per resample."""
    out = []
    for idx in resamples:
        f = fit_law(table.iloc[idx].reset_index(drop=True), law, start=start, **fit_kwargs)
        out.append((f.params, f.predict_table(points) if points is not None else None, len(f.at_bound)))
    return out


def bootstrap(table: pd.DataFrame, law: str | Law = "additive", n_boot: int = 200, seed: int = 0,
              points: pd.DataFrame | None = None, ci: float = 0.95, workers: int | None = None,
              **fit_kwargs) -> BootstrapResult:
    """Case-resampling bootstrap of `fit_law` (App. A.5 procedure re-run per resample).

    Each refit polishes from the full-data optimum alone (its slice thresholds recomputed on
    the resample); `n_at_bound` counts the refits with a parameter on a bound. `points`
    (columns N, Ds, Dl, absolute) get prediction intervals. fit_kwargs go to fit_law.
    The resamples are drawn up front from `seed` and refitted in `workers` processes
    (default: $NBLIB_WORKERS or the CPU count); the result does not depend on `workers`.
    """
    law = get_law(law)
    if not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        raise ValueError(f"n_boot must be an integer >= 2, got {n_boot!r}")
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    table = check_table(table, n_params=law.n_params).reset_index(drop=True)
    if points is not None:
        points = check_table(points, columns=("N", "Ds", "Dl"))
    full = fit_law(table, law, **fit_kwargs)
    fit_kwargs = {k: v for k, v in fit_kwargs.items() if k not in ("extra_starts", "n_starts", "grid")}
    rng = np.random.default_rng(seed)
    resamples = [rng.integers(0, len(table), len(table)) for _ in range(n_boot)]
    workers = workers or max(1, int(os.environ.get("NBLIB_WORKERS", os.cpu_count() or 1)))
    workers = min(workers, n_boot // 4 or 1)  # a worker's start-up costs about one refit
    if workers == 1:
        results = _refits(table, law, resamples, full.theta, points, fit_kwargs)
    else:
        chunks = [resamples[i::workers] for i in range(workers)]
        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            parts = list(pool.map(_refits, *zip(*[(table, law, c, full.theta, points, fit_kwargs) for c in chunks])))
        results = [None] * n_boot
        for w, part in enumerate(parts):
            results[w::workers] = part
    rows = [r[0] for r in results]
    preds = [r[1] for r in results] if points is not None else None
    return BootstrapResult(full, pd.DataFrame(rows, columns=list(law.param_names)), ci, points,
                           np.array(preds) if points is not None else None, sum(r[2] > 0 for r in results))
