"""The variable-projection search of nblib.lccp.scaling (profile.py) against independent
truth: scipy's least_squares on the inner problem, a denser grid polished by scipy's TRF, the
first implementation (method="multistart"), and a known run table.

tests/data/toy_linear_decay_plain.csv is chapter 3's Linear-Decay table of the toy book
before smeared keys (commit 453845c): 100 configurations at S1-S4, on which Eq. 1 has its
exponent alpha on its upper bound (S1-S3) and no interior optimum (S1-S4).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import least_squares

from nblib.lccp import scaling as sc
from nblib.lccp.scaling.profile import EXP_FLOOR, Profile, huber_regression, separable
from nblib.lccp.scaling.table import table_inputs, table_target

DATA = Path(__file__).parent / "data" / "toy_linear_decay_plain.csv"
TRUE = dict(A=2.0, alpha=0.3, Bs=1.5, beta_s=0.4, Bl=1.0, beta_l=0.5, C=-0.6)


def no_worse(a: float, b: float, rtol: float = 1e-9) -> bool:
    """Objective a is no worse than b, within rtol relative."""
    return a <= b * (1 + rtol)


def eq1_table(noise=0.01, seed=0) -> pd.DataFrame:
    """Eq. 1 on a paper-like S1-S4 grid (normalised units written out by hand), Gaussian noise."""
    rows = []
    for s, n in {"S1": 31.47e6, "S2": 60.84e6, "S3": 104.42e6, "S4": 245.41e6}.items():
        rows += [dict(scale=s, N=n, Ds=a * n, Dl=b * n) for a in (90, 180, 270, 360, 450) for b in (10, 20, 30, 40, 50)]
    t = pd.DataFrame(rows)
    p = TRUE
    y = (p["A"] * (t.N / 1e8) ** -p["alpha"] + p["Bs"] * (t.Ds / 1e9) ** -p["beta_s"]
         + p["Bl"] * (t.Dl / 1e9) ** -p["beta_l"] + p["C"])
    y = y + np.random.default_rng(seed).normal(0, noise, len(t))
    return t.assign(longppl=np.exp(y))


def huber_cost(r, d):
    a = np.abs(r)
    return float(np.sum(np.where(a <= d, 0.5 * r * r, d * (a - 0.5 * d))))


# ---------------------------------------------------------------------------- the inner solve

@pytest.mark.parametrize("offset", ["free", "nonneg", "none"])
def test_inner_solve_matches_scipy_least_squares(offset):
    """The batched, sign-constrained Huber regression against scipy's TRF (loss='huber')
    with bounds, problem by problem; some problems have their optimum on a face (a
    coefficient at 0), which the face enumeration must find."""
    rng = np.random.default_rng(0)
    G, n, m, delta = 6, 40, 3, 0.05
    F = np.exp(rng.normal(0, 1, (G, n, m)))
    truth = np.array([1.0, -0.7, 0.5])  # a negative coefficient: the constrained optimum sets it to 0
    y = F[0] @ truth + (0.3 if offset != "none" else 0) + rng.standard_t(2, n) * 0.05
    coef, loss = huber_regression(F, y, delta, offset)
    for g in range(G):
        X = F[g] if offset == "none" else np.column_stack([F[g], np.ones(n)])
        lo = np.r_[np.zeros(m), [] if offset == "none" else [0.0 if offset == "nonneg" else -np.inf]]
        best = np.inf
        for x0 in (np.full(X.shape[1], 0.1), np.clip(np.linalg.lstsq(X, y, rcond=None)[0], 0, None) + 1e-3):
            r = least_squares(lambda c: X @ c - y, np.maximum(x0, lo + 1e-6), bounds=(lo, np.inf), loss="huber",
                              f_scale=delta, method="trf", ftol=1e-15, xtol=1e-15, gtol=1e-15, max_nfev=20000)
            best = min(best, huber_cost(X @ r.x - y, delta))
        assert np.all(coef[g][:m] >= 0)
        assert loss[g] == pytest.approx(huber_cost(X @ coef[g] - y, delta), rel=1e-12)
        assert no_worse(loss[g], best, 1e-9), (g, loss[g], best)
        assert loss[g] == pytest.approx(best, rel=1e-6)
    assert np.any(coef[:, :m] == 0)  # the face enumeration was exercised


# ---------------------------------------------------------------------------- the search

def dense_reference(table: pd.DataFrame, n_grid: int = 30) -> float:
    """Eq. 1 without the regulariser, found a second way: a 30^3 exponent grid with the
    exact inner solve, then scipy's TRF (loss='huber') on all seven parameters from the best
    five grid points. Returns the objective."""
    law = sc.get_law("additive")
    form = separable(law)
    x, y = table_inputs(table), table_target(table)
    prof = Profile(form, x, y, sc.F_SCALE, {})
    axis = np.geomspace(EXP_FLOOR, 3.0, n_grid)
    phi = np.array(np.meshgrid(axis, axis, axis, indexing="ij")).reshape(3, -1).T
    vals, coefs = prof(phi)
    obj = sc.Objective(law, x, y)
    lo, hi = np.array([(-np.inf if b[0] is None else b[0], np.inf if b[1] is None else b[1])
                       for b in law.bounds_internal()]).T
    lo[[1, 3, 5]] = EXP_FLOOR
    best = np.inf
    for i in np.argsort(vals)[:5]:
        theta0 = np.clip(form.to_theta(phi[i], coefs[i])[0], lo + 1e-12, hi - 1e-12)
        r = least_squares(lambda t: law.fn(tuple(t), x) - y, theta0, bounds=(lo, hi), loss="huber",
                          f_scale=sc.F_SCALE, method="trf", x_scale="jac", ftol=1e-15, xtol=1e-15, gtol=1e-15,
                          max_nfev=5000)
        best = min(best, obj(r.x), vals[i])
    return best


@pytest.fixture(scope="module")
def synthetic():
    t = eq1_table(noise=0.01, seed=5)
    return t, dense_reference(t)


def test_fit_is_no_worse_than_a_dense_grid_polished_by_trf(synthetic):
    t, ref = synthetic
    fit = sc.fit_law(t, lam=0.0)
    assert no_worse(fit.objective, ref), (fit.objective, ref)
    for k in ("alpha", "beta_s", "beta_l"):
        assert fit.params[k] == pytest.approx(TRUE[k], rel=0.25), k


def test_a_wrong_start_without_polishing_fails_the_same_check(synthetic):
    """The check above can fail: the exact inner solve at a wrong exponent triple, with no
    polishing, is clearly worse than the reference."""
    t, ref = synthetic
    form = separable(sc.get_law("additive"))
    prof = Profile(form, table_inputs(t), table_target(t), sc.F_SCALE, {})
    unpolished = float(prof(np.array([2.5, 2.5, 2.5]))[0][0])
    assert not no_worse(unpolished, ref)


def test_bootstrap_start_reaches_the_full_fit(synthetic):
    """Polishing from the full-data optimum on the full data returns the same optimum."""
    t, _ = synthetic
    full = sc.fit_law(t)
    again = sc.fit_law(t, start=full.theta)
    assert again.objective == pytest.approx(full.objective, rel=1e-9)
    assert no_worse(again.objective, full.objective)


def test_eq2_no_worse_than_a_dense_exponent_scan():
    rng = np.random.default_rng(1)
    dl = np.linspace(1, 24, 24) * 1e8
    y = 0.8 * (dl / 1e9) ** -0.35 + 1.1 + rng.normal(0, 0.01, dl.size)
    fit = sc.fit_fixed_model_law(dl, y)
    form = separable(sc.FIXED_MODEL)
    prof = Profile(form, table_inputs(pd.DataFrame({"N": 1.0, "Ds": 1.0, "Dl": dl, "longppl": 1.0})), y,
                   sc.F_SCALE, {})
    scan = prof(np.geomspace(EXP_FLOOR, 3.0, 4000)[:, None])[0].min()
    assert no_worse(fit.objective, scan)
    assert fit.params["beta_l"] == pytest.approx(0.35, rel=0.2)


def test_multistart_method_is_the_first_implementation(synthetic):
    t, _ = synthetic
    old = sc.fit_law(t, method="multistart", n_starts=4)
    new = sc.fit_law(t)
    assert old.method == "multistart" and new.method == "profile"
    assert no_worse(new.objective, old.objective)
    with pytest.raises(ValueError, match="unknown method 'lbfgs'.*profile, multistart"):
        sc.fit_law(t, method="lbfgs")


# ---------------------------------------------------------------------------- a known table

@pytest.fixture(scope="module")
def toy():
    return pd.read_csv(DATA)


def test_toy_s1_s3_matches_table11_and_reports_alpha_on_its_bound(toy):
    """Table 11's S1-S3 estimates as the first implementation printed them (chapter 3,
    commit 453845c), to 3 significant digits; alpha sits on its upper bound 3."""
    fit = sc.fit_law(toy[toy.scale.isin(["S1", "S2", "S3"])])
    committed = dict(A=757669761802.3486, alpha=3.0, Bs=21968333.288273435, beta_s=1.5508719096484072,
                     Bl=1.6160341485693401, beta_l=0.1552298226049951, C=4.658044336161739)
    for k, v in committed.items():
        assert fit.absolute_params()[k] == pytest.approx(v, rel=5e-4), k
    assert fit.at_bound == ("additive fit on 75 points: alpha at its upper bound 3",)
    old = sc.fit_law(toy[toy.scale.isin(["S1", "S2", "S3"])], method="multistart")
    assert no_worse(fit.objective, old.objective)


def test_toy_s1_s4_reports_the_runaway(toy):
    """S1-S4 has no interior optimum: the objective falls as the exponents go to 0 and C to
    -inf. The fit stops at the search floor and says so, below the first implementation's
    objective (which stopped where its iteration limit did)."""
    fit = sc.fit_law(toy[toy.scale != "S5"])
    assert any(line.startswith("additive fit on 100 points: alpha ran to the search floor 0.001")
               and "C -> -inf" in line for line in fit.at_bound), fit.at_bound
    assert fit.params["alpha"] == pytest.approx(EXP_FLOOR)
    assert fit.params["C"] < -30
    assert fit.objective < 0.120229  # the first implementation's objective on this table
    assert fit.report("S1-S4: ").startswith("S1-S4: additive fit")
