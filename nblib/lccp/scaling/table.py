"""The run table a fit reads: one row per configuration, columns N, Ds, Dl, longppl (+ scale).

N is the non-embedding parameter count, Ds/Dl the short/long-context token counts (absolute
counts), longppl the measured LongPPL (Sec. 3.1); the fit target is y = log(longppl).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .laws import D_UNIT, N_UNIT, Inputs, make_inputs

REQUIRED = ("N", "Ds", "Dl", "longppl")


class TableError(ValueError):
    """A run table that cannot be fitted (the CLI turns it into exit code 2)."""


def check_table(table: pd.DataFrame, n_params: int | None = None, need_scale: bool = False,
                columns: tuple[str, ...] = REQUIRED) -> pd.DataFrame:
    """Validate a run table; return a copy with float columns. Errors name the column and row."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame, got {type(table).__name__}")
    missing = [c for c in columns if c not in table.columns]
    if need_scale and "scale" not in table.columns:
        missing.append("scale")
    if missing:
        raise TableError(f"missing column(s) {missing}; the table has {list(table.columns)}")
    out = table.copy()
    for c in columns:
        vals = pd.to_numeric(out[c], errors="coerce")
        bad = vals.isna() & out[c].notna()
        if bad.any():
            i = bad.idxmax()
            raise TableError(f"column {c!r} row {i}: non-numeric value {out[c][i]!r}")
        if vals.isna().any():
            raise TableError(f"column {c!r} row {vals.isna().idxmax()}: missing value (NaN)")
        if not np.isfinite(vals).all():
            raise TableError(f"column {c!r} row {(~np.isfinite(vals)).idxmax()}: infinite value")
        if (vals <= 0).any():
            i = (vals <= 0).idxmax()
            raise TableError(f"column {c!r} row {i}: value {vals[i]!r} is not positive (all of {list(columns)} must be > 0)")
        out[c] = vals.astype(float)
    if need_scale and out["scale"].isna().any():
        raise TableError(f"column 'scale' row {out['scale'].isna().idxmax()}: missing value (NaN)")
    if len(out) == 0:
        raise TableError("the table has no rows")
    if n_params is not None and len(out) < n_params:
        raise TableError(f"{len(out)} points but the law has {n_params} parameters; need at least {n_params}")
    return out


def table_inputs(table: pd.DataFrame) -> Inputs:
    """Normalised predictors (App. A.2): n = N/1e8, ds = Ds/1e9, dl = Dl/1e9."""
    return make_inputs(table["N"].to_numpy(float) / N_UNIT, table["Ds"].to_numpy(float) / D_UNIT,
                       table["Dl"].to_numpy(float) / D_UNIT)


def table_target(table: pd.DataFrame) -> np.ndarray:
    """y = log(LongPPL), the fit target (Sec. 3.1)."""
    return np.log(table["longppl"].to_numpy(float))
