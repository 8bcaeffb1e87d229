"""Tests for nblib.lccp.scaling against independent truth: formulas written out by hand here,
data generated from known parameters, closed forms, scipy's own Huber loss, and a second
fitting method (variable projection)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import subproc
from scipy.optimize import least_squares

from nblib.lccp import scaling as sc
from nblib.stats import lins_ccc

ROOT = Path(__file__).resolve().parents[1]

# Paper-like grid (Sec. 3.1, Table 1): N of S1-S5, Ds/N x Dl/N 5x5 for S1-S4, 9 S5 configs
SCALES = {"S1": 31.47e6, "S2": 60.84e6, "S3": 104.42e6, "S4": 245.41e6, "S5": 821.15e6}
S5_PAIRS = [(90, 10), (180, 20), (270, 30), (360, 40), (450, 50), (90, 50), (180, 40), (360, 20), (450, 10)]
TRUE = dict(A=2.0, alpha=0.3, Bs=1.5, beta_s=0.4, Bl=1.0, beta_l=0.5, C=-0.6)  # normalised units
FAST = dict(n_starts=4, grid={"alpha": (0.2, 0.5), "beta_s": (0.3, 0.6), "beta_l": (0.3, 0.6)})


def eq1_by_hand(p, N, Ds, Dl):
    """Eq. 1 on N/1e8, D/1e9, written out independently of nblib."""
    n, ds, dl = np.asarray(N) / 1e8, np.asarray(Ds) / 1e9, np.asarray(Dl) / 1e9
    return p["A"] * n ** -p["alpha"] + p["Bs"] * ds ** -p["beta_s"] + p["Bl"] * dl ** -p["beta_l"] + p["C"]


def paper_grid() -> pd.DataFrame:
    rows = []
    for s, n in SCALES.items():
        pairs = S5_PAIRS if s == "S5" else [(a, b) for a in (90, 180, 270, 360, 450) for b in (10, 20, 30, 40, 50)]
        rows += [dict(scale=s, N=n, Ds=a * n, Dl=b * n) for a, b in pairs]
    return pd.DataFrame(rows)


def eq1_table(noise=0.005, seed=0, p=TRUE) -> pd.DataFrame:
    t = paper_grid()
    y = eq1_by_hand(p, t.N, t.Ds, t.Dl) + np.random.default_rng(seed).normal(0, noise, len(t))
    return t.assign(longppl=np.exp(y))


@pytest.fixture(scope="module")
def noisy():
    return eq1_table(noise=0.005, seed=0)


# ---------------------------------------------------------------------------- laws

# Table 3 formulas written by hand: (natural params on normalised n, ds, dl)
BY_HAND = {
    "additive": lambda p, n, s, l: p["A"] * n ** -p["alpha"] + p["Bs"] * s ** -p["beta_s"] + p["Bl"] * l ** -p["beta_l"] + p["C"],
    "no_offset": lambda p, n, s, l: p["A"] * n ** -p["alpha"] + p["Bs"] * s ** -p["beta_s"] + p["Bl"] * l ** -p["beta_l"],
    "nonneg_offset": lambda p, n, s, l: p["A"] * n ** -p["alpha"] + p["Bs"] * s ** -p["beta_s"] + p["Bl"] * l ** -p["beta_l"] + p["C"],
    "combined_budget": lambda p, n, s, l: p["A"] * n ** -p["alpha"] + p["B"] * (s + l) ** -p["beta"] + p["C"],
    "effective_data": lambda p, n, s, l: p["A"] * n ** -p["alpha"] + p["B"] * (l + p["K"] * s) ** -p["beta"] + p["C"],
    "scale_dependent_effective_data": lambda p, n, s, l: (p["A"] * n ** -p["alpha"]
                                                          + p["B"] * (l + p["K"] * n ** p["nu"] * s) ** -p["beta"] + p["C"]),
    "powered_pair_N_Ds": lambda p, n, s, l: ((p["A"] * n ** -p["alpha"] + p["Bs"] * s ** -p["beta_s"]) ** p["k"]
                                             + p["Bl"] * l ** -p["beta_l"] + p["C"]),
    "powered_pair_N_Dl": lambda p, n, s, l: ((p["A"] * n ** -p["alpha"] + p["Bl"] * l ** -p["beta_l"]) ** p["k"]
                                             + p["Bs"] * s ** -p["beta_s"] + p["C"]),
    "powered_pair_Ds_Dl": lambda p, n, s, l: (p["A"] * n ** -p["alpha"]
                                              + (p["Bs"] * s ** -p["beta_s"] + p["Bl"] * l ** -p["beta_l"]) ** p["k"] + p["C"]),
    "cpt_interaction": lambda p, n, s, l: (p["A"] * n ** -p["alpha"] + p["Bs"] * s ** -p["beta_s"]
                                           + p["Bl"] / (l ** p["beta_l"] * n ** p["eta"]) + p["C"]),
}
EXAMPLE = dict(A=1.3, alpha=0.35, Bs=0.9, beta_s=0.45, Bl=0.7, beta_l=0.55, C=-0.4, B=1.1, beta=0.4,
               K=0.05, nu=0.2, k=1.4, eta=0.15)


def example_params(law):
    p = {k: EXAMPLE[k] for k in law.param_names}
    if law.offset == "nonneg":
        p["C"] = 0.3
    return p


def test_registry_names_match_table3():
    assert set(sc.VARIANTS) == set(BY_HAND)
    with pytest.raises(ValueError, match="allowed: additive"):
        sc.get_law("chinchilla")


@pytest.mark.parametrize("name", list(BY_HAND))
def test_variant_formula_matches_hand_written(name):
    law = sc.VARIANTS[name]
    p = example_params(law)
    t = paper_grid()
    n, s, l = t.N / 1e8, t.Ds / 1e9, t.Dl / 1e9
    np.testing.assert_allclose(law.predict(p, n, s, l), BY_HAND[name](p, n, s, l), rtol=1e-12)


@pytest.mark.parametrize("name", list(BY_HAND))
def test_absolute_params_give_the_same_function(name):
    """Table 11 units: the same formula with raw N, Ds, Dl must give identical predictions."""
    law = sc.VARIANTS[name]
    p = example_params(law)
    t = paper_grid()
    ab = law.to_absolute(p)
    np.testing.assert_allclose(BY_HAND[name](ab, t.N, t.Ds, t.Dl),
                               BY_HAND[name](p, t.N / 1e8, t.Ds / 1e9, t.Dl / 1e9), rtol=1e-10)


def test_absolute_params_additive_by_hand():
    ab = sc.VARIANTS["additive"].to_absolute(TRUE)
    assert ab["A"] == pytest.approx(2.0 * 1e8**0.3)
    assert ab["Bs"] == pytest.approx(1.5 * 1e9**0.4)
    assert ab["Bl"] == pytest.approx(1.0 * 1e9**0.5)
    assert (ab["alpha"], ab["beta_s"], ab["beta_l"], ab["C"]) == (0.3, 0.4, 0.5, -0.6)


def test_fixed_model_formula():
    dl = np.array([5.0, 40.0]) * 821.15e6
    p = dict(Bl=0.8, beta_l=0.45, C_prime=1.1)
    np.testing.assert_allclose(sc.FIXED_MODEL.predict(p, dl=dl / 1e9), 0.8 * (dl / 1e9) ** -0.45 + 1.1)
    assert sc.FIXED_MODEL.to_absolute(p)["Bl"] == pytest.approx(0.8 * 1e9**0.45)


# ---------------------------------------------------------------------------- metrics

def test_r2_mape_by_hand():
    y, yhat = [1.0, 2.0, 3.0, 4.0], [1.1, 1.9, 3.2, 3.8]
    # SS_res = .01+.01+.04+.04 = .10, SS_tot = 2.25+.25+.25+2.25 = 5
    assert sc.r2_log(y, yhat) == pytest.approx(1 - 0.10 / 5)
    # 100/4 * (.1/1 + .1/2 + .2/3 + .2/4)
    assert sc.mape_log(y, yhat) == pytest.approx(25 * (0.1 + 0.05 + 0.2 / 3 + 0.05))
    with pytest.raises(ValueError, match="same length"):
        sc.r2_log([1, 2], [1, 2, 3])


def test_lins_ccc_by_hand():
    # shifted by 1: s_x^2 = s_y^2 = s_xy = 2/3 (denominator n), mean gap 1 -> (4/3)/(7/3)
    assert lins_ccc([1, 2, 3], [2, 3, 4]) == pytest.approx(4 / 7)
    assert np.corrcoef([1, 2, 3], [2, 3, 4])[0, 1] == pytest.approx(1.0)  # Pearson is blind to the shift
    assert lins_ccc([1, 2, 3, 4], [1, 2, 3, 4]) == pytest.approx(1.0)
    # equal means and variances: CCC = Pearson = 0.75/1.25
    assert lins_ccc([1, 2, 3, 4], [2, 1, 4, 3]) == pytest.approx(0.6)
    assert sc.lins_ccc is lins_ccc


def test_huber_matches_scipy_convention():
    """Our per-residual Huber equals scipy least_squares' 0.5 f^2 rho((r/f)^2) with
    rho(z) = z (z <= 1), 2 sqrt(z) - 1 (z > 1) (scipy docs)."""
    r = np.array([-0.3, -0.05, -0.01, 0.0, 0.02, 0.05, 0.2, 1.5])
    f = 0.05
    z = (r / f) ** 2
    rho = np.where(z <= 1, z, 2 * np.sqrt(z) - 1)
    np.testing.assert_allclose(sc.huber(r, f), 0.5 * f**2 * rho, rtol=1e-12)


# ---------------------------------------------------------------------------- slices

def test_slice_median_equals_true_exponent_on_noiseless_data():
    t = eq1_table(noise=0.0)
    t = t[t.scale != "S5"]
    bl = sc.slice_exponents(t, "Dl")
    bs = sc.slice_exponents(t, "Ds")
    assert len(bl) == 20 and len(bs) == 20  # every fixed (N, Ds) and (N, Dl) slice of S1-S4
    np.testing.assert_allclose(bl["beta"], TRUE["beta_l"], atol=1e-6)
    np.testing.assert_allclose(bs["beta"], TRUE["beta_s"], atol=1e-6)
    th = sc.slice_thresholds(t)
    assert th["beta_l"] == pytest.approx(TRUE["beta_l"], abs=1e-6)
    assert th["beta_s"] == pytest.approx(TRUE["beta_s"], abs=1e-6)


def test_slices_group_realised_budgets():
    """Realised Dl of one nominal level differ by ~2% across Ds rows (Table 6): still one slice."""
    t = eq1_table(noise=0.0)
    t = t[t.scale != "S5"].copy()
    t["Dl"] *= 1 + 0.02 * np.random.default_rng(1).uniform(-1, 1, len(t))
    assert len(sc.slice_exponents(t, "Ds")) == 20
    assert sc.cluster_levels([0.58, 0.60, 0.59, 1.21, 1.20]).tolist() == [0, 0, 0, 1, 1]


def test_fit_slice_recovers_exact_power_law():
    d = np.array([1, 2, 3, 4, 5.0]) * 1e9
    b, beta, c = sc.fit_slice(d, 0.7 * (d / 1e9) ** -0.33 + 0.2)
    assert (b, beta, c) == pytest.approx((0.7, 0.33, 0.2), abs=1e-6)


# ---------------------------------------------------------------------------- joint fit

def test_recovers_eq1_and_extrapolates_to_s5(noisy):
    res = sc.holdout_eval(noisy, ["S1", "S2", "S3", "S4"], ["S5"])
    for k in ("alpha", "beta_s", "beta_l"):
        assert res.fit.params[k] == pytest.approx(TRUE[k], rel=0.10), k
    assert res.r2 > 0.95
    assert len(res.predictions) == 9 and set(res.predictions.scale) == {"S5"}
    assert res.fit.beta_bar["beta_l"] is not None  # thresholds came from the training split
    # held-out metrics are the App. A.2 formulas on the held-out rows
    y = np.log(res.predictions.longppl)
    assert res.r2 == pytest.approx(sc.r2_log(y, res.fit.predict_table(res.predictions)))


def test_s1_s3_to_s4(noisy):
    res = sc.holdout_eval(noisy, ["S1", "S2", "S3"], ["S4"], **FAST)
    assert res.r2 > 0.95 and res.mape < 2.0
    assert res.fit.n_train == 75


def test_slice_thresholds_use_training_split_only(noisy):
    train = noisy[noisy.scale.isin(["S1", "S2", "S3"])]
    res = sc.holdout_eval(noisy, ["S1", "S2", "S3"], ["S4"], **FAST)
    assert res.fit.beta_bar == sc.slice_thresholds(train)


@pytest.mark.parametrize("name", list(BY_HAND))
def test_every_variant_reaches_at_least_the_true_optimum(name):
    """Data generated by each law itself: the fitted objective is <= the objective at the truth."""
    law = sc.VARIANTS[name]
    p = example_params(law)
    t = paper_grid()
    t = t[t.scale != "S5"]
    y = BY_HAND[name](p, t.N / 1e8, t.Ds / 1e9, t.Dl / 1e9) + np.random.default_rng(2).normal(0, 0.003, len(t))
    t = t.assign(longppl=np.exp(y))
    fit = sc.fit_law(t, law, lam=0.0, n_starts=4)
    obj = sc.Objective(law, sc.table.table_inputs(t), y)
    assert fit.objective <= obj(law.to_internal(p)) + 1e-9
    assert fit.r2 > 0.999


def test_nonneg_offset_collapses_to_no_offset(noisy):
    """App. A.2: with a true C < 0, constraining C >= 0 drives C to 0 = the zero-offset law."""
    train = noisy[noisy.scale != "S5"]
    nn = sc.fit_law(train, "nonneg_offset", n_starts=4)
    no = sc.fit_law(train, "no_offset", n_starts=4)
    assert nn.params["C"] == pytest.approx(0.0, abs=1e-8)
    np.testing.assert_allclose(nn.predict_table(noisy), no.predict_table(noisy), atol=1e-4)


def test_regulariser_caps_exponent(noisy):
    """A threshold below the truth pulls beta_l down; lam = 0 ignores it."""
    train = noisy[noisy.scale != "S5"]
    low = {"beta_s": None, "beta_l": 0.3}
    free = sc.fit_law(train, lam=0.0, beta_bar=low, **FAST)
    capped = sc.fit_law(train, lam=100.0, beta_bar=low, **FAST)
    assert free.params["beta_l"] == pytest.approx(TRUE["beta_l"], rel=0.05)
    assert capped.params["beta_l"] < free.params["beta_l"] - 0.1


def test_huber_resists_one_outlier_least_squares_does_not():
    t = eq1_table(noise=0.003, seed=1)
    t = t[t.scale != "S5"].reset_index(drop=True)

    def fit_with_outlier(mag, f_scale):
        o = t.copy()
        o.loc[0, "longppl"] *= np.exp(mag)  # one S1 corner configuration, +mag in log space
        return sc.fit_law(o, f_scale=f_scale, lam=0.0, n_starts=4)

    hub, ls = fit_with_outlier(1.0, 0.05), fit_with_outlier(1.0, 1e6)  # f_scale 1e6: plain least squares
    err = lambda f: max(abs(f.params[k] / TRUE[k] - 1) for k in ("alpha", "beta_s", "beta_l"))
    assert err(hub) < 0.10
    assert err(ls) > 0.25
    # in Huber's linear region the outlier's pull is capped: moving it further changes nothing
    far = fit_with_outlier(2.0, 0.05)
    for k in TRUE:
        assert far.params[k] == pytest.approx(hub.params[k], rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("name", ["additive", "powered_pair_Ds_Dl", "scale_dependent_effective_data"])
def test_objective_gradient_matches_finite_differences(noisy, name):
    from scipy.optimize import approx_fprime

    law = sc.VARIANTS[name]
    train = noisy[noisy.scale != "S5"]
    x, y = sc.table.table_inputs(train), np.log(train.longppl.to_numpy())
    theta = law.to_internal(example_params(law)) + 0.05
    reg = tuple((law.param_names.index(k), 0.2, 1.0) for k in ("beta_s", "beta_l") if k in law.param_names)
    obj = sc.Objective(law, x, y, reg=reg)  # thresholds 0.2 < betas: the penalty is active
    val, grad = obj.value_and_grad(theta)
    assert val == pytest.approx(obj(theta))
    np.testing.assert_allclose(grad, approx_fprime(theta, obj, 1e-7), rtol=1e-4, atol=1e-6)


def test_blas_threads_restored_after_fit(noisy):
    from threadpoolctl import threadpool_info

    before = [(i["filepath"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]
    sc.fit_law(noisy[noisy.scale != "S5"], **FAST)
    assert [(i["filepath"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"] == before


def test_objective_matches_scipy_least_squares_huber(noisy):
    """Unregularised, our optimum is at least as good as scipy's TRF with loss='huber' and
    both report the same cost there."""
    law = sc.VARIANTS["additive"]
    train = noisy[noisy.scale != "S5"]
    fit = sc.fit_law(train, lam=0.0, **FAST)
    x, y = sc.table.table_inputs(train), np.log(train.longppl.to_numpy())
    res = least_squares(lambda t: law.fn(tuple(t), x) - y, fit.theta, loss="huber", f_scale=0.05)
    assert res.cost == pytest.approx(sc.Objective(law, x, y)(res.x), rel=1e-9)
    assert fit.objective <= res.cost + 1e-12


def test_varpro_agrees_with_lbfgsb(noisy):
    train = noisy[noisy.scale != "S5"]
    vp = sc.fit_varpro(train)
    lb = sc.fit_law(train, lam=0.0)
    assert vp.method == "varpro"
    for k in TRUE:
        assert vp.params[k] == pytest.approx(lb.params[k], rel=1e-3, abs=1e-4), k
    np.testing.assert_allclose(vp.predict_table(noisy), lb.predict_table(noisy), atol=1e-4)


def test_bootstrap_interval_covers_true_exponents():
    t = eq1_table(noise=0.01, seed=3)
    train = t[t.scale != "S5"]
    pts = t[t.scale == "S5"][["N", "Ds", "Dl"]]
    b = sc.bootstrap(train, n_boot=40, seed=0, points=pts, **FAST)
    iv = b.intervals()
    for k in ("alpha", "beta_l"):
        assert iv.loc[k, "lo"] <= TRUE[k] <= iv.loc[k, "hi"], (k, iv.loc[k].to_dict())
    assert (iv["lo"] <= iv["hi"]).all() and len(b.samples) == 40
    pi = b.pred_intervals()
    assert len(pi) == 9 and (pi.pred_lo <= pi.pred_hi).all()
    ab = b.intervals(absolute=True)  # percentiles commute with the monotone unit conversion
    assert ab.loc["alpha", "lo"] == iv.loc["alpha", "lo"]
    # the same seed gives the same resamples
    b2 = sc.bootstrap(train, n_boot=3, seed=0, **FAST)
    pd.testing.assert_frame_equal(b2.samples, b.samples.iloc[:3])


def test_bootstrap_in_worker_processes_equals_serial():
    t = eq1_table(noise=0.01, seed=4)
    train = t[t.scale != "S5"]
    pts = t[t.scale == "S5"][["N", "Ds", "Dl"]]
    serial = sc.bootstrap(train, n_boot=8, seed=1, points=pts, workers=1, **FAST)
    pooled = sc.bootstrap(train, n_boot=8, seed=1, points=pts, workers=2, **FAST)
    pd.testing.assert_frame_equal(serial.samples, pooled.samples)
    np.testing.assert_array_equal(serial.pred_samples, pooled.pred_samples)


# ---------------------------------------------------------------------------- Eq. 2

def test_fixed_model_prefix_fit_recovers_parameters():
    n = SCALES["S5"]
    dl = np.arange(5, 125, 5) * n  # the S5 Constant-Last4 trajectory: every 5N to 120N (Sec. 4.3)
    p = dict(Bl=0.9, beta_l=0.45, C_prime=1.2)
    y = p["Bl"] * (dl / 1e9) ** -p["beta_l"] + p["C_prime"]
    for prefix in (4, 8, 12):  # up to 20N, 40N, 60N
        fit = sc.fit_fixed_model_law(dl[:prefix], y[:prefix])
        for k in p:
            assert fit.params[k] == pytest.approx(p[k], rel=1e-4), (prefix, k)
    yn = y + np.random.default_rng(0).normal(0, 0.003, y.size)
    fit = sc.fit_fixed_model_law(dl[:12], yn[:12])
    assert fit.params["beta_l"] == pytest.approx(p["beta_l"], rel=0.10)
    assert np.abs(fit.predict(Dl=dl[12:]) - y[12:]).max() < 0.02  # the held-out rest of the trajectory
    with pytest.raises(ValueError, match="needs"):
        fit.predict(N=1e8)


# ---------------------------------------------------------------------------- analysis

def test_zero_contour_points_predict_zero(noisy):
    fit = sc.fit_law(noisy[noisy.scale != "S5"], **FAST)
    N = 10e9
    cont = sc.zero_contour_ds_dl(fit, N)
    finite = cont[np.isfinite(cont.Dl)]
    assert len(finite) > 10
    np.testing.assert_allclose(fit.predict(N, finite.Ds, finite.Dl), 0.0, atol=1e-9)
    # closed form for Eq. 1: Bl dl^-bl = -(A n^-a + Bs ds^-bs + C)
    p = fit.params
    rest = p["A"] * (N / 1e8) ** -p["alpha"] + p["Bs"] * (finite.Ds / 1e9) ** -p["beta_s"] + p["C"]
    np.testing.assert_allclose(finite.Dl, 1e9 * (p["Bl"] / -rest) ** (1 / p["beta_l"]), rtol=1e-8)
    # where the remaining terms stay positive there is no finite zero
    assert np.isinf(cont.Dl[~np.isfinite(cont.Dl)]).all()
    d = sc.zero_crossing_equal_budget(fit, N)
    assert fit.predict(N, d, d) == pytest.approx(0.0, abs=1e-9)
    assert d > noisy.Ds.max()  # far beyond the fitted range, as in App. A.2


def test_zero_crossing_absent_with_nonneg_offset(noisy):
    fit = sc.fit_law(noisy[noisy.scale != "S5"], "nonneg_offset", n_starts=4)
    assert sc.zero_crossing_equal_budget(fit, 10e9) == np.inf


def test_elasticity_matches_numerical_derivative(noisy):
    n = SCALES["S5"]
    dl = np.arange(5, 125, 5) * n
    fl = sc.fit_fixed_model_law(dl, 0.9 * (dl / 1e9) ** -0.45 + 1.2)
    fs = sc.fit_fixed_model_law(dl, 0.3 * (dl / 1e9) ** -0.3 + 2.0)
    h = 1e-5
    for fit in (fl, fs):
        num = np.abs((fit.predict(Dl=dl * np.exp(h)) - fit.predict(Dl=dl * np.exp(-h))) / (2 * h))
        np.testing.assert_allclose(sc.elasticity(fit, dl), num, rtol=1e-7)
    np.testing.assert_allclose(sc.elasticity_ratio(fl, fs, dl), sc.elasticity(fl, dl) / sc.elasticity(fs, dl))
    # the joint law's Dl term gives the same derivative at any N, Ds
    joint = sc.fit_law(noisy[noisy.scale != "S5"], **FAST)
    num = (joint.predict(n, 450 * n, dl * np.exp(-h)) - joint.predict(n, 450 * n, dl * np.exp(h))) / (2 * h)
    np.testing.assert_allclose(sc.elasticity(joint, dl), num, rtol=1e-7)
    with pytest.raises(ValueError, match="separate Bl"):
        sc.elasticity(sc.fit_law(noisy[noisy.scale != "S5"], "combined_budget", n_starts=2), dl)


# ---------------------------------------------------------------------------- input checks

def test_table_errors_name_the_problem(noisy):
    with pytest.raises(sc.TableError, match="'Dl'"):
        sc.fit_law(noisy.drop(columns="Dl"))
    bad = noisy.copy()
    bad.loc[7, "Ds"] = -1.0
    with pytest.raises(sc.TableError, match="column 'Ds' row 7"):
        sc.fit_law(bad)
    with pytest.raises(sc.TableError, match="5 points"):
        sc.fit_law(noisy.head(5))
    with pytest.raises(sc.TableError, match="unknown scale 'S9'"):
        sc.holdout_eval(noisy, ["S1"], ["S9"])
    with pytest.raises(sc.TableError, match="scale"):
        sc.holdout_eval(noisy.drop(columns="scale"))


# ---------------------------------------------------------------------------- CLI

def run_cli(*args):
    return subproc.run([sys.executable, "-m", "nblib.lccp.scaling", "fit", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def run_cli_here(capsys, *args) -> tuple[int, str]:
    """The command's exit status and stderr, run in this process through the same entry point
    (`nblib.cli.run_cli` over `main`, as `python -m nblib.lccp.scaling` runs it): the bad-table
    cases differ only in the table, so one real process (test_cli_bad_table_in_a_process) checks
    the process boundary and the others skip a Python start each."""
    from nblib.cli import run_cli as one_error_path
    from nblib.lccp.scaling.__main__ import main
    capsys.readouterr()
    try:
        rc = one_error_path(main, ["fit", *map(str, args)])
    except SystemExit as e:  # argparse's own refusals
        rc = e.code
    return rc, capsys.readouterr().err


def test_cli_good_table(tmp_path, noisy):
    runs, out = tmp_path / "runs.csv", tmp_path / "pred.csv"
    noisy.to_csv(runs, index=False)
    r = run_cli(runs, "--holdout", "S5", "--bootstrap", "4", "--n-starts", "2", "--out", out)
    assert r.returncode == 0, r.stderr
    assert "held-out S5 (9 configurations): R^2 = " in r.stdout
    assert "beta_l" in r.stdout and "bootstrap interval (4 refits)" in r.stdout
    pred = pd.read_csv(out)
    assert len(pred) == len(noisy) and (pred.split == "test").sum() == 9
    assert {"log_longppl", "pred_log_longppl", "pred_lo", "pred_hi"} <= set(pred.columns)
    np.testing.assert_allclose(pred.log_longppl, np.log(noisy.longppl.to_numpy()))


@pytest.mark.parametrize("case, needle", [
    ("missing_column", "'Dl'"),
    ("non_positive", "column 'Ds' row 3"),
    ("nan", "column 'longppl' row 5"),
    ("too_few", "4 points but the law has 7 parameters"),
    ("unknown_law", "allowed: additive"),
    ("unknown_scale", "unknown scale 'S9'"),
    ("holdout_without_scale", "'scale'"),
])
def test_cli_bad_table_exits_2(tmp_path, noisy, case, needle, capsys):
    t, extra = noisy.copy(), ["--bootstrap", "0"]
    if case == "missing_column":
        t = t.drop(columns="Dl")
    elif case == "non_positive":
        t.loc[3, "Ds"] = 0.0
    elif case == "nan":
        t.loc[5, "longppl"] = np.nan
    elif case == "too_few":
        t = t.head(4)
    elif case == "unknown_law":
        extra += ["--law", "chinchilla"]
    elif case == "unknown_scale":
        extra += ["--holdout", "S9"]
    elif case == "holdout_without_scale":
        t, extra = t.drop(columns="scale"), extra + ["--holdout", "S5"]
    runs = tmp_path / "runs.csv"
    t.to_csv(runs, index=False)
    rc, err = run_cli_here(capsys, runs, *extra)
    assert rc == 2, err
    assert needle in err


def test_cli_bad_table_in_a_process(tmp_path, noisy):
    runs = tmp_path / "runs.csv"
    noisy.drop(columns="Dl").to_csv(runs, index=False)
    r = run_cli(runs, "--bootstrap", "0")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [l for l in r.stderr.strip().splitlines() if l.startswith("error: ")]
    assert "'Dl'" in r.stderr
