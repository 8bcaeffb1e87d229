"""nblib.store.call_cache: a cached fit is the fit, read back; any change to its inputs or to
the fitting code is a miss; a damaged cache file is recomputed, never trusted."""

import importlib
import sys

import numpy as np
import pandas as pd
import pytest

from nblib.lccp import scaling
from nblib.store import call_cache as C


def _counting():
    calls = []

    def f(table, splits, n_boot=2, seed=0):
        calls.append(1)
        return table.assign(y=table.x * n_boot + seed), dict(splits)

    return f, calls


def test_a_second_call_reads_the_first_and_any_changed_argument_is_a_miss(tmp_path):
    f, calls = _counting()
    table = pd.DataFrame({"x": [1.0, 2.0, 3.0], "s": ["S1", "S2", "S3"]})
    splits = {"a": (("S1", "S2"), ("S3",)), "b": (("S1",), ("S2", "S3"))}
    first = C.cached_call(tmp_path, f, table, splits, n_boot=4, seed=1)
    again = C.cached_call(tmp_path, f, table.copy(), dict(reversed(list(splits.items()))), seed=1, n_boot=4)
    assert len(calls) == 1  # the same table, the same dict in another order, kwargs in another order
    pd.testing.assert_frame_equal(again[0], first[0])
    assert again[1] == first[1]
    changed = [((table.assign(x=[1.0, 2.0, 3.0000001]), splits), {"n_boot": 4, "seed": 1}),
               ((table, {**splits, "b": (("S1",), ("S3",))}), {"n_boot": 4, "seed": 1}),
               ((table, splits), {"n_boot": 5, "seed": 1}),
               ((table.rename(columns={"s": "scale"}), splits), {"n_boot": 4, "seed": 1}),
               ((table.astype({"x": "float32"}), splits), {"n_boot": 4, "seed": 1})]
    for i, (args, kwargs) in enumerate(changed, start=2):
        C.cached_call(tmp_path, f, *args, **kwargs)
        assert len(calls) == i, (args, kwargs)


def test_a_damaged_file_is_recomputed_and_replaced(tmp_path):
    f, calls = _counting()
    table = pd.DataFrame({"x": [1.0, 2.0]})
    value = C.cached_call(tmp_path, f, table, {})
    path = C.cache_path(tmp_path, f, (table, {}), {})
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.warns(UserWarning, match="does not load"):
        again = C.cached_call(tmp_path, f, table, {})
    assert len(calls) == 2
    pd.testing.assert_frame_equal(again[0], value[0])
    C.cached_call(tmp_path, f, table, {})
    assert len(calls) == 2  # the replaced file is read


def test_an_argument_without_a_canonical_encoding_is_refused(tmp_path):
    f, calls = _counting()
    with pytest.raises(TypeError, match="cannot key an argument of type object"):
        C.cached_call(tmp_path, f, pd.DataFrame({"x": [1.0]}), {"a": object()})
    assert calls == []


def test_an_edit_to_the_functions_package_is_a_miss(tmp_path, monkeypatch):
    pkg = tmp_path / "src" / "fitpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("SCALE = 2\n")
    (pkg / "fit.py").write_text("from fitpkg.helpers import SCALE\n\ndef fit(x):\n    return [v * SCALE for v in x]\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    fit = importlib.import_module("fitpkg.fit").fit
    store = tmp_path / "store"
    assert C.cached_call(store, fit, [1, 2]) == [2, 4]
    # another file of the package changes the result (a different size too: a bytecode file
    # written in the same second would otherwise pass Python's own staleness check)
    (pkg / "helpers.py").write_text("SCALE = 30\n")
    for m in ("fitpkg.helpers", "fitpkg.fit"):
        sys.modules.pop(m)
    C.code_digest.cache_clear()
    fit = importlib.import_module("fitpkg.fit").fit
    assert C.cached_call(store, fit, [1, 2]) == [30, 60]  # not the stale [2, 4]
    for m in ("fitpkg", "fitpkg.helpers", "fitpkg.fit"):
        sys.modules.pop(m)
    C.code_digest.cache_clear()


def test_a_cached_law_fit_is_the_fit(tmp_path):
    """The chapters' use: holdout_evals (FitResult objects) read back from the cache predict as
    the fresh fit does."""
    rng = np.random.default_rng(0)
    rows = [{"scale": s, "N": n, "Ds": ds, "Dl": dl,
             "longppl": float(np.exp(1.5 + 40 * n ** -0.3 + 30 * ds ** -0.2 + 5 * dl ** -0.4 + rng.normal(0, 0.01)))}
            for s, n in (("S1", 1e6), ("S2", 3e6), ("S3", 1e7)) for ds in (1e8, 3e8) for dl in (1e7, 3e7)]
    table = pd.DataFrame(rows)
    splits = {"S3": (("S1", "S2"), ("S3",))}
    fresh = scaling.holdout_evals(table, splits)
    cached = C.cached_call(tmp_path, scaling.holdout_evals, table, splits)
    read = C.cached_call(tmp_path, scaling.holdout_evals, table, splits)
    for res in (cached, read):
        assert res["S3"].r2 == fresh["S3"].r2
        np.testing.assert_array_equal(res["S3"].fit.theta, fresh["S3"].fit.theta)
