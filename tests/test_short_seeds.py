"""nblib.probes.short_seeds: the runs it trains are the grid's own short stages with one scale's
LR replaced (the budget's own LR gives the grid's runs), its table against hand-computed values,
one end-to-end run at smoke, and its refusals of bad input."""

import json

import numpy as np
import pandas as pd
import pytest

from nblib.budgets import get_budget
from nblib.lccp import grid
from nblib.probes import short_seeds


def test_the_budgets_own_lr_gives_the_grids_short_stage_and_another_lr_only_that_scales():
    b = get_budget("toy")
    with grid.placeholder_corpus():
        own = short_seeds.with_short_lr(b, "S2", b.scale("S2").lr)
        assert grid.short_stage(own, "S2", 1).trunk.hash == grid.short_stage(b, "S2", 1).trunk.hash
        half = short_seeds.with_short_lr(b, "S2", b.scale("S2").lr / 2)
        trunk = grid.short_stage(half, "S2", 1).trunk
        assert trunk.hash != grid.short_stage(b, "S2", 1).trunk.hash
        assert trunk.schedule["lr"] == b.scale("S2").lr / 2
        assert half.lccp_lr("S2") == pytest.approx(b.lccp_lr("S2"))  # LCCP starts where the grid's does
        assert all(grid.short_stage(half, s, 0).trunk.hash == grid.short_stage(b, s, 0).trunk.hash
                   for s in ("S1", "S3", "S4", "S5"))


def test_table_against_hand_computed_values():
    rows = [{"budget": "toy", "scale": "S2", "lr": lr, "ds": 270, "seed": s, "heldout_loss": v}
            for lr, vals in [(1e-2, (3.0, 3.2, 3.9)), (5e-3, (3.1, 3.15))] for s, v in enumerate(vals)]
    t = short_seeds.short_seed_table(pd.DataFrame(rows)).set_index("lr")
    assert t.loc[1e-2, "seeds"] == 3 and t.loc[1e-2, "mean"] == pytest.approx(np.mean([3.0, 3.2, 3.9]))
    assert t.loc[1e-2, "spread"] == pytest.approx(0.9) and t.loc[5e-3, "spread"] == pytest.approx(0.05)
    assert (t.loc[5e-3, "lowest"], t.loc[5e-3, "highest"]) == (3.1, 3.15)


def test_a_smoke_run_writes_one_record_per_scale_lr_seed_and_ds_from_the_grids_runs(tmp_path):
    out, b = tmp_path / "r.jsonl", get_budget("smoke")
    assert short_seeds.main(["--budget", "smoke", "--scales", "S1", "--seeds", "0", "1", "--ds", "5.4", "--dls", "0.6",
                             "--run-root", str(tmp_path / "store"), "--out", str(out)]) == 0
    everything = [json.loads(line) for line in out.read_text().splitlines()]
    recs, lccp = [r for r in everything if "dl" not in r], [r for r in everything if "dl" in r]
    assert sorted((r["seed"], r["ds"]) for r in recs) == [(0, 5.4), (1, 5.4)]
    assert sorted((r["seed"], r["ds"], r["dl"]) for r in lccp) == [(0, 5.4, 0.6), (1, 5.4, 0.6)]
    for r in lccp:  # the grid's own Linear-Decay run from that seed's short stage, at the budget's LCCP LR
        assert r["run"] == grid.lccp_linear_decay(b, "S1", r["ds"], 0.6, short_seed=r["seed"]).hash
        assert r["lccp_lr"] == pytest.approx(b.lccp_lr("S1"))
        assert np.isfinite(r["long_loss_below_8"]) and np.isfinite(r["long_loss_from_8"])
    assert len(short_seeds.short_seed_table(pd.DataFrame(everything))) == 1  # (S1, Ds, LR): short rows only
    assert {r["lr"] for r in recs} == {b.scale("S1").lr}  # without --lrs: the budget's own
    for r in recs:  # the grid's own short stage (its constant trunk extends: one run whatever the Ds), scored
        assert r["run"] == grid.short_stage(b, "S1", r["seed"]).wsd[r["ds"]].hash
        assert np.isfinite(r["heldout_loss"]) and np.isfinite(r["stable_loss"]) and {"copy_gain_2", "copy_gain_4"} <= set(r)


@pytest.mark.parametrize("args, said", [
    (["--scales", "S9"], "--scales S9 not allowed; allowed: S1, S2, S3, S4, S5"),
    (["--lrs", "0"], "allowed: LRs > 0"),
    (["--seeds", "0", "0"], "allowed: distinct seeds >= 0"),
    (["--ds", "270", "270"], "allowed: distinct Ds multiples > 0"),
    (["--ds", "0.001"], "too few for its WSD decay"),
    (["--dls", "10", "10"], "allowed: distinct Dl multiples > 0"),
])
def test_bad_input_is_refused_before_any_training(args, said, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        short_seeds.main([*args, "--run-root", str(tmp_path / "store"), "--out", str(tmp_path / "r.jsonl")])
    assert e.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "store").exists() and not (tmp_path / "r.jsonl").exists()


def test_findings_name_the_lr_with_the_lowest_mean_and_the_smallest_spread():
    from nblib.chapters.appendix.probe_findings import short_seed_findings
    rows = [{"budget": "Vx", "scale": "S2", "lr": lr, "ds": ds, "seed": s, "heldout_loss": v - 0.1 * (ds == 270)}
            for lr, vals in [(1e-2, (3.0, 3.2, 3.9)), (5e-3, (3.1, 3.15, 3.12))] for ds in (90, 270)
            for s, v in enumerate(vals)]
    text = short_seed_findings(short_seeds.short_seed_table(pd.DataFrame(rows)))
    assert "Ds 90 -> 270 -0.100" in text and "Ds 270: 3.267 (spread 0.900)" in text
    assert "the lowest mean is LR 0.005's and the smallest seed spread LR 0.005's (0.050 against 0.900)" in text
    flipped = short_seed_findings(short_seeds.short_seed_table(pd.DataFrame(rows).assign(
        heldout_loss=lambda r: np.where(r["lr"] == 5e-3, r["heldout_loss"] + 1.0, r["heldout_loss"]))))
    assert "the lowest mean is LR 0.01's and the smallest seed spread LR 0.005's" in flipped


def test_lccp_spread_reads_each_records_budget_from_any_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nbval runs a chapter in its own folder
    recs = pd.DataFrame([{"budget": b, "scale": "S2", "ds": 270, "dl": 10, "short_seed": s, "longppl": v}
                         for b in ("toy", "data/probes/grid_designs/Vf.toml") for s, v in enumerate((10.0, 12.0))])
    t = short_seeds.lccp_seed_spread(recs).set_index("budget")
    assert t.loc["toy", "lr"] == get_budget("toy").scale("S2").lr and t.loc["data/probes/grid_designs/Vf.toml", "lr"] == 5e-3
    assert t["spread"].tolist() == pytest.approx([np.log(1.2)] * 2) and t["seeds"].tolist() == [2, 2]


def _lccp_records():
    rows = []
    for scale, far in [("S2", {10: (2.7, 2.8, 2.75), 30: (2.4, 2.6, 2.45)}), ("S3", {10: (2.65, 2.7, 2.66), 30: (2.35, 2.5, 2.4)})]:
        for dl, vals in far.items():
            for seed, v in enumerate(vals):
                rows.append({"budget": "Vx", "scale": scale, "lr": 1e-2, "seed": seed, "ds": 270, "dl": dl,
                             "lccp_lr": 1e-3, "heldout_loss": 2.6 + 0.02 * seed, "long_loss_below_128": 3.0 + 0.01 * seed,
                             "long_loss_from_128": v})
    rows.append({"budget": "Vx", "scale": "S2", "lr": 1e-2, "seed": 0, "ds": 270, "heldout_loss": 2.6})  # a short row
    return pd.DataFrame(rows)


def test_lccp_table_and_findings_against_hand_computed_values():
    from nblib.chapters.appendix.probe_findings import short_seed_lccp_findings
    t = short_seeds.short_seed_lccp_table(_lccp_records()).set_index(["scale", "dl"])
    assert len(t) == 4 and (t["seeds"] == 3).all()
    assert t.loc[("S2", 30), "long_loss_from_128 spread"] == pytest.approx(0.2)
    assert t.loc[("S2", 30), "long_loss_from_128 mean"] == pytest.approx(np.mean([2.4, 2.6, 2.45]))
    assert t.loc[("S3", 10), "short_spread"] == pytest.approx(0.04) and t.loc[("S3", 10), "long_loss_below_128 spread"] == pytest.approx(0.02)
    text = short_seed_lccp_findings(short_seeds.short_seed_lccp_table(_lccp_records()))
    assert "Dl 30: 0.200 beyond, 0.020 within (5.0x the short stage's 0.040)" in text
    assert f"Dl 30: mean loss beyond the first 128 tokens S2 {np.mean([2.4, 2.6, 2.45]):.3f}, S3 {np.mean([2.35, 2.5, 2.4]):.3f}" in text
    assert short_seeds.short_seed_lccp_table(_lccp_records().query("dl != dl")).empty  # short rows only: no table
    # seeds of another short-stage LR whose LCCP starts at the same LR are rows of their own, never pooled
    two = pd.concat([_lccp_records(), _lccp_records().assign(lr=5e-3, long_loss_from_128=2.0)])
    t2 = short_seeds.short_seed_lccp_table(two)
    assert len(t2) == 8 and (t2["seeds"] == 3).all() and (t2[t2["lr"] == 5e-3]["long_loss_from_128 spread"] == 0).all()
