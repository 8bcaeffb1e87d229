"""Scaling-law fitting for LCCP (LCCP paper): Eq. 1, its App. A.2 variants, Eq. 2.

    fit = fit_additive_law(table)                        # App. A.5 procedure on a run table
    res = holdout_eval(table, ["S1", "S2", "S3"], ["S4"])  # Sec. 3.2 scale extrapolation
    python -m nblib.lccp.scaling fit RUNS.csv --holdout S5 --bootstrap 200

Modules: laws (formulas), table (input checks), slices (App. A.5 thresholds), fit (Huber +
regulariser, and the search), profile (variable projection: the exact inner solve, the grid,
the polish), bootstrap, varpro (cross-check), analysis (Fig. 9 zero contours, App. D.1
elasticity), metrics (App. A.2 R^2, MAPE), studies (the held-out, bootstrap, variant and
prefix studies the chapters report).
"""

from nblib.stats import lins_ccc
from .analysis import elasticity, elasticity_ratio, zero_contour_ds_dl, zero_crossing_equal_budget
from .bootstrap import BootstrapResult, bootstrap
from .fit import (F_SCALE, LAM, METHODS, N_STARTS, FitResult, at_bound, floor_exponents, params_at_bound, HoldoutResult, Objective, fit_additive_law,
                  fit_fixed_model_law, fit_law, holdout_eval, huber, split_scales)
from .laws import D_UNIT, FIXED_MODEL, N_UNIT, VARIANTS, Law, Param, get_law
from .metrics import ape_log, mape_log, r2_log
from .studies import (holdout_evals, holdout_r2_intervals, parameter_table, prefix_forecast, r2_difference_intervals,
                      refits_with_exponent_at_bound, variant_ablation)
from .slices import cluster_levels, fit_slice, slice_exponents, slice_thresholds
from .table import TableError, check_table
from .varpro import fit_varpro

__all__ = [
    "BootstrapResult", "D_UNIT", "METHODS", "at_bound", "floor_exponents", "params_at_bound", "FIXED_MODEL", "F_SCALE", "FitResult", "HoldoutResult", "LAM", "Law",
    "N_STARTS", "N_UNIT", "Objective", "Param", "TableError", "VARIANTS", "bootstrap", "check_table",
    "cluster_levels", "elasticity", "elasticity_ratio", "fit_additive_law", "fit_fixed_model_law",
    "fit_law", "fit_slice", "fit_varpro", "get_law", "holdout_eval", "huber", "lins_ccc", "mape_log",
    "holdout_r2_intervals", "r2_difference_intervals", "refits_with_exponent_at_bound",
    "r2_log", "slice_exponents", "slice_thresholds", "split_scales", "zero_contour_ds_dl",
    "zero_crossing_equal_budget", "ape_log", "holdout_evals", "parameter_table", "prefix_forecast",
    "variant_ablation",
]
