"""The fitting studies the chapters report, each one function over a run table.

- `holdout_evals`: Eq. 1 fitted on the smaller scales, scored on a held-out one (§3.2,
  Fig. 3, Fig. 5), for several splits at once.
- `parameter_table`: fitted parameters with bootstrap intervals and a VarPro cross-check
  (Table 11).
- `holdout_r2_intervals`: the held-out R^2 and MAPE of Fig. 3 with case-resampling
  bootstrap intervals over the fitted configurations.
- `variant_ablation`: every App. A.2 formulation on the same splits (Tables 3 and 4).
- `prefix_forecast`: Eq. 2 fitted on an early prefix of one trajectory, scored on the rest
  (§4.3, Fig. 6).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .bootstrap import bootstrap
from .fit import FitResult, HoldoutResult, fit_fixed_model_law, holdout_eval, params_at_bound, split_scales
from .laws import VARIANTS
from .metrics import ape_log, mape_log, r2_log
from .profile import EXP_FLOOR
from .varpro import fit_varpro


def holdout_evals(table: pd.DataFrame, splits: dict, law: str = "additive", **fit_kwargs) -> dict[str, HoldoutResult]:
    """{split name: holdout_eval(table, train, test, law)} for splits {name: (train, test)};
    fit_kwargs go to fit_law (e.g. method)."""
    return {name: holdout_eval(table, tr, te, law=law, **fit_kwargs) for name, (tr, te) in splits.items()}


def parameter_table(table: pd.DataFrame, splits: dict, n_boot: int, seed: int = 0, **fit_kwargs) -> pd.DataFrame:
    """Table 11: for each split's training scales, every parameter of Eq. 1 in absolute units
    with its case-resampling bootstrap 95% interval and the VarPro estimate beside it, which
    estimates sit on a bound of the search (fit.params_at_bound), and how many refits have
    any parameter on a bound. fit_kwargs go to bootstrap and fit_law (e.g. method, workers)."""
    rows = []
    for tr, _ in splits.values():
        train_rows = table[table.scale.isin(tr)]
        bs = bootstrap(train_rows, "additive", n_boot=n_boot, seed=seed, **fit_kwargs)
        iv = bs.intervals(absolute=True)
        vp = fit_varpro(train_rows).absolute_params()
        bound = {name: side for name, side, _ in params_at_bound(bs.fit.law, bs.fit.theta)}
        exp_hits = refits_with_exponent_at_bound(bs)
        for param, r in iv.iterrows():
            rows.append({"fit": f"LD ({', '.join(tr)})", "param": param, "estimate": r.iloc[0], "95% lo": r.iloc[1],
                         "95% hi": r.iloc[2], "VarPro": vp[param], "estimate at bound": bound.get(param, ""),
                         "refits at a bound": f"{bs.n_at_bound}/{n_boot}",
                         "refits with an exponent at a bound": f"{exp_hits}/{n_boot}"})
    return pd.DataFrame(rows)


def refits_with_exponent_at_bound(bs, rtol: float = 1e-6) -> int:
    """How many of a bootstrap's refits have an exponent (a parameter searched on [EXP_FLOOR,
    hi]) on the floor or the ceiling of its search (the law's whole claim, §3.3, asks for
    interior exponents; `BootstrapResult.n_at_bound` counts any parameter)."""
    law = bs.fit.law
    exps = [p for p in law.params if p.grid is not None and not p.log and np.isfinite(p.hi)]
    if not exps:
        return 0
    s = bs.samples[[p.name for p in exps]].to_numpy(float)
    hi = np.array([p.hi for p in exps])
    at = (s <= EXP_FLOOR * (1 + rtol)) | (s >= hi * (1 - rtol))
    return int(at.any(axis=1).sum())


def r2_difference_intervals(table: pd.DataFrame, splits: dict, rivals: dict, base: str = "additive",
                            n_boot: int = 100, seed: int = 0, ci: float = 0.95, **fit_kwargs) -> pd.DataFrame:
    """Table 3's noise: a paired bootstrap of the held-out R² difference between a rival
    formulation and `base`, both fitted on the same resamples of the training scales (the same
    seed draws the same resamples) and scored on the fixed held-out points. rivals: {split:
    variant}. One row per split: base R², rival, rival R², the difference rival - base and its
    percentile interval (> 0: the rival extrapolates better)."""
    rows = []
    q = (50 * (1 - ci), 50 * (1 + ci))
    for name, (tr, te) in splits.items():
        train, test = split_scales(table, tr, te)
        y = np.log(test["longppl"].to_numpy(float))
        fits, r2s = {}, {}
        for law in (base, rivals[name]):
            bs = bootstrap(train, law, n_boot=n_boot, seed=seed, points=test[["N", "Ds", "Dl"]], ci=ci, **fit_kwargs)
            fits[law] = r2_log(y, bs.fit.predict_table(test))
            r2s[law] = np.array([r2_log(y, p) for p in bs.pred_samples])
        d = r2s[rivals[name]] - r2s[base]
        rows.append({"split": name, f"{base} R²": fits[base], "rival": rivals[name], "rival R²": fits[rivals[name]],
                     "rival - base": fits[rivals[name]] - fits[base], "95% lo": float(np.percentile(d, q[0])),
                     "95% hi": float(np.percentile(d, q[1])), "refits": n_boot})
    return pd.DataFrame(rows)


def holdout_r2_intervals(table: pd.DataFrame, splits: dict, n_boot: int, seed: int = 0, ci: float = 0.95,
                         **fit_kwargs) -> pd.DataFrame:
    """Fig. 3's held-out R^2 and MAPE (log space) per split, each with a percentile interval
    from a case-resampling bootstrap of the fitted configurations: every refit (the whole
    App. A.5 procedure) predicts the held-out scale, whose points stay fixed. One row per
    split: R², its interval, MAPE %, its interval, refits with a parameter on a bound."""
    rows = []
    for name, (tr, te) in splits.items():
        train, test = split_scales(table, tr, te)
        bs = bootstrap(train, "additive", n_boot=n_boot, seed=seed, points=test[["N", "Ds", "Dl"]], ci=ci, **fit_kwargs)
        y = np.log(test["longppl"].to_numpy(float))
        r2s = np.array([r2_log(y, p) for p in bs.pred_samples])
        mapes = np.array([mape_log(y, p) for p in bs.pred_samples])
        q = (50 * (1 - ci), 50 * (1 + ci))
        yhat = bs.fit.predict_table(test)
        rows.append({"split": name, "R²": r2_log(y, yhat), "R² lo": np.percentile(r2s, q[0]),
                     "R² hi": np.percentile(r2s, q[1]), "MAPE %": mape_log(y, yhat),
                     "MAPE lo": np.percentile(mapes, q[0]), "MAPE hi": np.percentile(mapes, q[1]),
                     "refits at a bound": f"{bs.n_at_bound}/{n_boot}"})
    return pd.DataFrame(rows).set_index("split")


def variant_ablation(table: pd.DataFrame, splits: dict, paper: dict | None = None,
                     variants=None, **fit_kwargs) -> pd.DataFrame:
    """Tables 3 and 4: held-out R² and MAPE of every formulation (`variants`: names of
    VARIANTS; None: all of them) on every split, with the paper's four numbers (S4 R², S4
    MAPE, S5 R², S5 MAPE) beside them where `paper` has the variant. splits: {column label:
    (train scales, test scales)}; fit_kwargs go to fit_law. The `objective` columns hold each
    fit's App. A.5 objective on its training split."""
    rows = []
    for variant in (VARIANTS if variants is None else variants):
        row = {"variant": variant}
        for label, (tr, te) in splits.items():
            res = holdout_eval(table, tr, te, law=variant, **fit_kwargs)
            row[f"{label} R²"], row[f"{label} MAPE %"] = res.r2, res.mape
            row[f"{label} objective"] = res.fit.objective
        pv = (paper or {}).get(variant)
        if pv:
            row.update({"paper S4 R²": pv[0], "paper S4 MAPE %": pv[1], "paper S5 R²": pv[2], "paper S5 MAPE %": pv[3]})
        rows.append(row)
    return pd.DataFrame(rows)


def prefix_forecast(dl, y, dl_mult, prefixes, min_points: int = 4,
                    **fit_kwargs) -> tuple[pd.DataFrame, dict[float, FitResult]]:
    """Fig. 6: fit Eq. 2, log(LongPPL) = Bl Dl^-beta_l + C', on the points with
    dl_mult <= each prefix and score it on every later point.

    dl (tokens), y (log LongPPL) and dl_mult (Dl/N) are one trajectory, sorted by Dl. A prefix
    with fewer than `min_points` points, or with nothing after it, is skipped. Returns the
    error table (MAPE in log space, max APE, final-LongPPL error, beta_l) and the fits;
    fit_kwargs go to fit_fixed_model_law.
    """
    dl, y, dl_mult = (np.asarray(a, dtype=float) for a in (dl, y, dl_mult))
    rows, fits = [], {}
    for pm in prefixes:
        inside = dl_mult <= pm + 1e-9
        if inside.sum() < min_points or (~inside).sum() == 0:
            continue
        f = fit_fixed_model_law(dl[inside], y[inside], **fit_kwargs)
        pred = f.predict(Dl=dl[~inside])
        ape = ape_log(y[~inside], pred)
        fits[pm] = f
        rows.append({"prefix": f"{pm:g}N", "points fitted": int(inside.sum()), "points predicted": int((~inside).sum()),
                     "MAPE % (log space)": ape.mean(), "max APE %": ape.max(),
                     "LongPPL error at the end %": 100 * (np.exp(pred[-1]) - np.exp(y[-1])) / np.exp(y[-1]),
                     "beta_l": f.absolute_params()["beta_l"]})
    return pd.DataFrame(rows), fits
