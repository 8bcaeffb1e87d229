"""The all-global control's training-length ladder and the breakdown-by-length measures
(chapter 9): configs against the pair's, closed forms for the ratio and the trend."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from nblib.budgets import get_budget
from nblib.gemma import pair
from nblib.gemma.breakdown_length import breakdown_by_length, breakdown_row, breakdown_trend
from nblib.training.schedules import schedule_of


@pytest.mark.parametrize("budget", ["smoke", "toy"])
def test_control_ladder_branches_match_model_b_budgets(budget):
    b = get_budget(budget)
    control = pair.all_global_config(b)
    fractions = pair.control_fractions(b)
    assert fractions and all(f < b.pair.control_fraction for f in fractions)
    ladder = pair.ladder_configs(b, models=("B-global",))
    b_ladder = pair.ladder_configs(b, models=("B",))
    assert sorted(f for _, f in ladder) == list(fractions)
    for (_, f), c in ladder.items():
        assert c.init == {"run": control.hash, "step": c.init["step"], "mode": "continue"}
        assert c.init["step"] in control.ckpt_steps and control.keep_optimizer == "all"
        twin = b_ladder[("B", f)]  # the same steps, schedule and branch point as Model B's
        assert (c.total_steps, c.init["step"]) == (twin.total_steps, twin.init["step"])
        assert c.model == control.model and c.model["global_every"] == 1
        sc, sp = schedule_of(c), schedule_of(control)
        assert all(sc(t) == sp(t) for t in range(c.init["step"]))
    parts = pair.part2_configs(b)
    assert len({c.hash for c in parts}) == len(parts) == 2 + 2 * len(b.pair.length_fractions) + 1 + len(fractions)


def test_control_fraction_is_checked():
    b = get_budget("toy")
    bad = dataclasses.replace(b, pair=dataclasses.replace(b.pair, control_fraction=1.5))
    with pytest.raises(ValueError, match=r"control_fraction=1.5 is not allowed; allowed: a number in \(0, 1\]"):
        pair.all_global_config(bad)
    with pytest.raises(ValueError, match="model 'C' is not allowed"):
        pair.ladder_configs(b, models=("C",))
    full_length = dataclasses.replace(b, pair=dataclasses.replace(b.pair, control_fraction=1.0))
    assert pair.all_global_config(full_length).total_steps == pair.pair_configs(b)["B"].total_steps
    assert pair.control_fractions(full_length) == b.pair.length_fractions


def test_breakdown_row_closed_form():
    rng = np.random.default_rng(0)
    L, k = 8, 4
    v = rng.normal(2.0, 0.05, (300, 8 * L))
    v[:, L:] += 0.4  # every position past L costs 0.4 nats more
    r = breakdown_row(v, L, k)
    # the rise is the page mean over kL minus that over L: 0.4 x 3/4 plus the noise's difference
    noise = (v[:, :k * L].mean() - 0.4 * (k - 1) / k) - v[:, :L].mean()
    assert r["rise (nats/token)"] == pytest.approx(0.4 * (k - 1) / k + noise, abs=1e-9)
    assert abs(noise) < 0.01
    assert r["ratio"] == pytest.approx(r["ppl at kL"] / r["ppl at L"], rel=1e-9)
    assert r["95% lo"] < r["rise (nats/token)"] < r["95% hi"]
    with pytest.raises(ValueError, match="do not reach k\\*L = 128"):
        breakdown_row(v, L, 16)


def test_breakdown_trend_finds_where_a_log_line_reaches_the_bar():
    L, n_params = 4, 100
    rows = {}
    # rise = 0.1 + 0.05 ln(D/N) exactly, at D/N = 1, 2, 4 (losses past L raised so the page
    # mean over 4L rises by that much)
    for tpp in (1.0, 2.0, 4.0):
        rise = 0.1 + 0.05 * np.log(tpp)
        v = np.full((20, 4 * L), 2.0)
        v[:, L:] += rise * 4 / 3
        v[:10] += 0.01  # pages differ, the rise does not
        rows[("B-global", int(tpp * n_params))] = v
    table = breakdown_by_length(rows, L, (4,), n_params)
    assert list(table.index.names) == ["model", "page", "tokens per parameter"]
    t = breakdown_trend(table, "B-global", "4L", bar=1.5)
    assert t["slope"] == pytest.approx(0.05) and t["intercept"] == pytest.approx(0.1)
    assert t["reached_at"] == pytest.approx(np.exp((np.log(1.5) - 0.1) / 0.05), rel=1e-6)
    assert t["residual_sd"] == pytest.approx(0, abs=1e-9)
    assert breakdown_trend(table, "B-global", "4L", bar=1.05)["reached_at"] == 1.0  # already measured
    with pytest.raises(ValueError, match="a trend needs at least 3"):
        breakdown_trend(table.iloc[:2], "B-global", "4L")
    flat = table.copy()
    flat["rise (nats/token)"] = [0.3, 0.2, 0.1]
    assert breakdown_trend(flat, "B-global", "4L")["reached_at"] == float("inf")
    assert isinstance(table, pd.DataFrame)
