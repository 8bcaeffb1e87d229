"""Bootstrap intervals for a fitted law (beyond the paper; Epoch-style Chinchilla replication).

Configurations (rows) are resampled with replacement and the whole App. A.5 procedure is
re-run on each resample, slice thresholds included; percentiles of the refits give
intervals for every parameter and for predictions at chosen points.
"""

from __future__ import annotations

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


def bootstrap(table: pd.DataFrame, law: str | Law = "additive", n_boot: int = 200, seed: int = 0,
              points: pd.DataFrame | None = None, ci: float = 0.95, **fit_kwargs) -> BootstrapResult:
    """Case-resampling bootstrap of `fit_law` (App. A.5 procedure re-run per resample).

    Each refit starts from its own grid plus the full-data optimum. `points` (columns N, Ds,
    Dl, absolute) get prediction intervals. fit_kwargs go to fit_law (e.g. grid, n_starts).
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
    extra = list(fit_kwargs.pop("extra_starts", ())) + [full.theta]
    rng = np.random.default_rng(seed)
    rows, preds = [], []
    for _ in range(n_boot):
        idx = rng.integers(0, len(table), len(table))
        f = fit_law(table.iloc[idx].reset_index(drop=True), law, extra_starts=extra, **fit_kwargs)
        rows.append(f.params)
        if points is not None:
            preds.append(f.predict_table(points))
    return BootstrapResult(full, pd.DataFrame(rows, columns=list(law.param_names)), ci, points,
                           np.array(preds) if points is not None else None)
