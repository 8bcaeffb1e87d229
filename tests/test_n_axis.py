"""nblib.probes.n_axis: the short-seed runs it trains are the grid's own configs (seed 0 is the
book's run), its pair table against hand-computed values, and its refusals of bad input."""

import numpy as np
import pandas as pd
import pytest

from nblib.budgets import get_budget
from nblib.lccp import grid
from nblib.probes import n_axis


def test_seed_zero_is_the_grids_own_linear_decay_run():
    b = get_budget("toy")
    for ds, dl in [(270, 10), (450, 30)]:
        assert grid.lccp_linear_decay(b, "S3", ds, dl, short_seed=0).hash == grid.lccp_linear_decay(b, "S3", ds, dl).hash
    one = grid.lccp_linear_decay(b, "S3", 270, 10, short_seed=1)
    assert one.hash != grid.lccp_linear_decay(b, "S3", 270, 10).hash
    # seed 1's LCCP starts from seed 1's short stage, with the same LCCP data order (seed 0)
    assert one.init["run"] == grid.short_stage(b, "S3", 1).wsd[270].hash and one.seed == 0


def _records():
    # S2 and S3 at one point, two short seeds each; S3's second seed is worse
    rows = []
    for scale, n, ppls in [("S2", 100, (10.0, 11.0)), ("S3", 200, (9.0, 12.0))]:
        for seed, ppl in enumerate(ppls):
            rows.append({"budget": "toy", "scale": scale, "n_params": n, "short_seed": seed, "ds": 270, "dl": 10,
                         "longppl": ppl})
    return pd.DataFrame(rows)


def test_pair_table_against_hand_computed_logs():
    t = n_axis.n_axis_table(_records())
    assert len(t) == 1
    row = t.iloc[0]
    assert row["pair"] == "S2 -> S3" and row["seeds"] == 2
    assert row["log LongPPL smaller"] == pytest.approx((np.log(10) + np.log(11)) / 2)
    assert row["log LongPPL larger"] == pytest.approx((np.log(9) + np.log(12)) / 2)
    assert row["larger - smaller"] == pytest.approx(np.log(9 * 12 / 110) / 2)
    # the widest seed gap of either scale: S3's log(12 / 9)
    assert row["short-seed spread"] == pytest.approx(np.log(12 / 9))
    # two seeds: a sample variance of (a - b)^2 / 2 per scale, over n = 2
    var = (np.log(11 / 10) ** 2 + np.log(12 / 9) ** 2) / 2
    assert row["difference SE"] == pytest.approx(np.sqrt(var / 2))


def test_the_findings_give_standard_errors_from_three_seeds_on():
    from nblib.chapters.appendix.probe_findings import n_axis_findings

    two = n_axis_findings(n_axis.n_axis_table(_records()))
    assert "standard errors" not in two and "1 of 1 differences lie inside the spread" in two
    rows = [{"budget": "toy", "scale": sc, "n_params": n, "short_seed": k, "ds": 270, "dl": 10, "longppl": p}
            for sc, n, ppls in [("S2", 100, (10.0, 11.0, 10.5)), ("S3", 200, (12.0, 13.0, 12.5))]
            for k, p in enumerate(ppls)]
    t = n_axis.n_axis_table(pd.DataFrame(rows))
    z = t["larger - smaller"].iloc[0] / t["difference SE"].iloc[0]
    assert z > 2  # S3 sits above S2 at every seed
    assert f"the difference is {z:+.1f} to {z:+.1f} standard errors (0 of 1 within two)" in n_axis_findings(t)


def test_pair_table_uses_only_the_seeds_both_scales_have():
    recs = _records()
    recs = recs[~((recs["scale"] == "S3") & (recs["short_seed"] == 1))]
    row = n_axis.n_axis_table(recs).iloc[0]
    assert row["seeds"] == 1 and row["larger - smaller"] == pytest.approx(np.log(9 / 10))


@pytest.mark.parametrize("args, said", [
    (["--scales", "S9"], "--scales S9 not allowed; allowed: S1, S2, S3, S4, S5"),
    (["--ds", "100"], "--ds 100 is not allowed; allowed: this budget's Ds multiples 270, 360, 450"),
    (["--seeds", "0", "0"], "allowed: distinct seeds >= 0"),
])
def test_bad_input_is_refused_before_any_training(args, said, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        n_axis.main([*args, "--run-root", str(tmp_path / "store"), "--out", str(tmp_path / "r.jsonl")])
    assert e.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "store").exists() and not (tmp_path / "r.jsonl").exists()


def test_a_record_written_twice_counts_once():
    """A later probe command that names a scale again re-records its cached runs: the pair table
    and the LCCP seed spread read each (budget, scale, seed, Ds, Dl) once, the last written."""
    from nblib.probes import short_seeds

    recs = _records()
    again = pd.concat([recs, recs[recs["scale"] == "S3"]], ignore_index=True)
    pd.testing.assert_frame_equal(n_axis.n_axis_table(again), n_axis.n_axis_table(recs))
    spread = short_seeds.lccp_seed_spread(again)
    assert spread["seeds"].tolist() == [2, 2]
    # the last record of a key wins
    newer = pd.concat([recs, recs.iloc[[3]].assign(longppl=9.5)], ignore_index=True)
    assert n_axis.n_axis_table(newer).iloc[0]["log LongPPL larger"] == pytest.approx((np.log(9) + np.log(9.5)) / 2)


def test_seed_noise_against_hand_computed_values():
    """sigma pools the per-point sample variances; the effect is the largest scale's mean minus
    the smallest's; the seeds needed are ceil(8 sigma^2 / per_step^2)."""
    from nblib.chapters.appendix.probe_findings import seed_noise_findings

    rows = [{"budget": "Vx", "scale": sc, "n_params": n, "short_seed": k, "ds": ds, "dl": 10,
             "longppl": float(np.exp(base + off + (0.1 if k else -0.1)))}
            for sc, n, base in [("S2", 100, 3.0), ("S3", 150, 2.95), ("S4", 200, 2.9)]
            for ds, off in [(270, 0.0), (450, -0.2)] for k in (0, 1)]
    t = n_axis.seed_noise_table(pd.DataFrame(rows)).iloc[0]
    # every point: two seeds at mean +- 0.1, sample variance 0.02
    assert t["sigma"] == pytest.approx(np.sqrt(0.02)) and t["effect"] == pytest.approx(-0.1)
    assert t["steps"] == 2 and t["per_step"] == pytest.approx(-0.05) and t["n_ratio"] == 2.0
    assert t["seeds_needed"] == 64  # 8 x 0.02 / 0.05^2
    text = seed_noise_findings(n_axis.seed_noise_table(pd.DataFrame(rows)))
    assert "standard deviation of 0.141 nats" in text and "only with 64 short seeds per scale" in text
    rising = pd.DataFrame(rows).assign(longppl=lambda r: np.where(r["scale"] == "S4", r["longppl"] * 2, r["longppl"]))
    assert not np.isfinite(n_axis.seed_noise_table(rising).iloc[0]["seeds_needed"])
    assert "no number of seeds shows a fall" in seed_noise_findings(n_axis.seed_noise_table(rising))
