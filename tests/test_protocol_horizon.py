"""nblib.probes.protocol_horizon at smoke on a scratch store: Linear-Decay, Constant-Raw and
Last4 at each Dl, checked against chapter 3's and chapter 4's own tables where the Dl is on the
grid, and the design-probe entry point's refusals."""

import json

import pytest

from nblib.budgets import get_budget
from nblib.lccp import experiments, grid
from nblib.lccp.evaluation import Evaluator, evaluate_many
from nblib.probes import design_probe
from nblib.probes import protocol_horizon as P
from nblib.store.runstore import RunStore

# the smallest scale: the probe's records and their agreement with the chapters do not depend on N,
# and S1's smoke short stage and LCCP train in a third of S4's time
SCALE = "S1"


@pytest.fixture(scope="module")
def horizon(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    out = root / "horizon.jsonl"
    b = get_budget("smoke")
    dls = [b.dl_multiples[-1], 2 * b.dl_multiples[-1]]  # the grid's largest Dl, and twice it
    assert P.main(["--budget", "smoke", "--scales", SCALE, "--dls", *map(str, dls), "--run-root", str(root),
                   "--out", str(out)]) == 0
    return b, root, dls, [json.loads(line) for line in out.read_text().splitlines()]


def test_one_record_per_dl_and_protocol_from_the_grids_configs(horizon):
    b, root, dls, rows = horizon
    assert [(r["dl"], r["protocol"]) for r in rows] == [(d, p) for d in dls for p in ("LD", "Raw", "Last4")]
    ds = b.ds_multiples[-1]
    for r in rows:
        assert r["scale"] == SCALE and r["ds"] == ds and r["budget"] == "smoke" and r["longppl"] > 1
        want = (grid.lccp_linear_decay(b, SCALE, ds, r["dl"]) if r["protocol"] == "LD"
                else grid.lccp_constant(b, SCALE, ds, max(dls), 0, ckpt_every=b.constant_ckpt_every))
        assert r["run"] == want.hash


def test_on_the_grid_it_agrees_with_chapters_3_and_4(horizon):
    """At the grid's largest Dl the probe's LD is chapter 3's table and its Raw and Last4 are
    chapter 4's (the seed-0 trajectory, extended past the grid, scored at the same checkpoint)."""
    b, root, dls, rows = horizon
    store = RunStore(root)
    ev = Evaluator.build(b, store)
    at = {r["protocol"]: r for r in rows if r["dl"] == b.dl_multiples[-1]}
    ds, dl = b.ds_multiples[-1], b.dl_multiples[-1]
    # the chapters' own evaluation of the same configurations (linear_decay_table's and
    # constant_table's jobs), on the runs the probe trained: only the grid point is scored
    ld = store.run(grid.lccp_linear_decay(b, SCALE, ds, dl))
    const = store.run(grid.lccp_constant(b, SCALE, ds, max(dls), 0, ckpt_every=b.constant_ckpt_every))
    res = evaluate_many(ev, [(ld.hash, "raw", "final", None, {}),
                             (const.hash, "raw", experiments.step_at(const, dl), None, {}),
                             (const.hash, "merged", experiments.last4_steps(const, dl, b.last4_gap(b.constant_ckpt_every)),
                              "lastM", {"m": 4})])
    for (protocol, r) in zip(("LD", "Raw", "Last4"), res):
        assert at[protocol]["longppl"] == pytest.approx(r["long_ppl"], rel=1e-9), protocol


def test_a_finished_evaluation_is_read_from_its_cache_without_a_worker_pool(horizon, monkeypatch):
    """evaluate_many over jobs the run folders have already scored returns the same values and
    starts no pool: a chapter re-executed over a finished store (a rebuild) pays no worker start-up."""
    from nblib.training import runner

    b, root, dls, rows = horizon
    store = RunStore(root)
    ev = Evaluator.build(b, store)
    ds = b.ds_multiples[-1]
    lds = [store.run(grid.lccp_linear_decay(b, SCALE, ds, dl)) for dl in dls]
    jobs = [(r.hash, "raw", "final", None, {}) for r in lds] * 5  # over memo_many's one-job serial path
    first = evaluate_many(ev, jobs, workers=2)

    def no_pool(workers):
        raise AssertionError("a cached evaluation started a worker pool")

    monkeypatch.setattr(runner, "memo_pool", no_pool)
    again = evaluate_many(ev, jobs, workers=2)
    assert again == first
    by_dl = {r["dl"]: r["longppl"] for r in rows if r["protocol"] == "LD"}
    assert [v["long_ppl"] for v in again[:len(dls)]] == pytest.approx([by_dl[d] for d in dls], rel=1e-9)


def test_bad_input_names_the_value_and_what_is_allowed(tmp_path):
    with pytest.raises(SystemExit, match=r"--ds 7 is not one of this budget's Ds multiples"):
        P.main(["--budget", "smoke", "--ds", "7", "--run-root", str(tmp_path)])
    every = get_budget("smoke").constant_ckpt_every  # Last4's four checkpoints this far apart
    with pytest.raises(SystemExit, match=rf"allowed: Dl >= {4 * every:g}"):
        P.main(["--budget", "smoke", "--dls", "0.02", "--run-root", str(tmp_path)])
    with pytest.raises(SystemExit, match=r"--spacings 0.5 needs every Dl above 1.5"):
        P.main(["--budget", "smoke", "--dls", "1", "--spacings", "0.5", "--run-root", str(tmp_path)])
    with pytest.raises(SystemExit, match=r"probe 'pair' does not take a budget file; allowed: .*protocol_horizon"):
        design_probe.main(["--budget-file", "data/probes/grid_designs/R.toml", "pair"])


def test_the_table_pairs_protocols_and_the_findings_name_where_ld_turns():
    import pandas as pd

    from nblib.chapters.appendix.probe_findings import protocol_horizon_findings

    rows = [dict(budget="data/probes/grid_designs/R.toml", scale="S4", ds=450, dl=dl, protocol=p, longppl=v)
            for dl, vals in ((30, (6.3, 6.0, 5.9)), (60, (5.5, 5.5, 5.4)), (120, (4.8, 5.0, 4.9)))
            for p, v in zip(("LD", "Raw", "Last4"), vals)]
    rows.append(dict(rows[0], longppl=6.4))  # a later record of the same point wins
    t = experiments.protocol_horizon_table(pd.DataFrame(rows))
    assert list(t.columns) == ["design", "scale", "ds", "dl", "LD", "Raw", "Last4", "LD - Raw", "LD - Last4"]
    assert t.design.unique().tolist() == ["R"] and t.dl.tolist() == [30, 60, 120]
    assert t["LD - Raw"].round(2).tolist() == [0.4, 0.0, -0.2] and t["LD - Last4"].round(2).tolist() == [0.5, 0.1, -0.1]
    text = protocol_horizon_findings(t)
    assert "LD - Raw +0.40, +0.00, -0.20" in text and "at or below Raw from Dl = 60 on" in text
    text = protocol_horizon_findings(t[t.dl < 60])
    assert "stays above Raw at every Dl probed" in text
    wide = [dict(r, protocol="Last4(3N)", longppl=r["longppl"] - 0.5) for r in rows if r["protocol"] == "Last4"]
    t = experiments.protocol_horizon_table(pd.DataFrame(rows + wide))
    assert list(t.columns)[4:] == ["LD", "Raw", "Last4", "Last4(3N)", "LD - Raw", "LD - Last4", "LD - Last4(3N)"]
    assert t["LD - Last4(3N)"].round(2).tolist() == [1.0, 0.6, 0.4]
    assert "; LD - Last4(3N) +1.00, +0.60, +0.40 (LongPPL" in protocol_horizon_findings(t)


def test_a_probe_run_through_design_probe_records_the_command_that_reruns_it():
    from nblib.probes import results

    assert results.probe_command("nblib.probes.protocol_horizon", ["--dls", "30"]) == \
        "python -m nblib.probes protocol_horizon --dls 30"
    with results.started_by("python -m nblib.book.design_probe --budget-file 'a b.toml'"):
        assert results.probe_command("nblib.probes.protocol_horizon", ["--dls", "30"]) == \
            "python -m nblib.book.design_probe --budget-file 'a b.toml' protocol_horizon --dls 30"
    assert results.probe_command("nblib.probes.x", []) == "python -m nblib.probes x"


def test_the_turn_line_names_where_ld_stays_below_raw_and_a_single_dip():
    import pandas as pd

    from nblib.chapters.part1.protocol_findings import protocol_turn_line

    gaps = {("toy", "S4"): (0.5, 0.4, 0.3), ("A", "S4"): (0.2, -0.1, -0.3), ("A", "S2"): (0.3, -0.1, 0.2)}
    rows = [dict(design=d, scale=s, dl=dl, **{"LD - Raw": g})
            for (d, s), gs in gaps.items() for dl, g in zip((30, 60, 120), gs)]
    line = protocol_turn_line(pd.DataFrame(rows), {"toy": 0.1, "A": 0.3}, "toy")
    assert "LCCP at 10% of the short LR): S4 not by 120 N(S1) (LD - Raw +0.30 there)" in line
    assert "A (LCCP at 30%): S2 not by 120 N(S1) (LD - Raw +0.20 there; at or below Raw at Dl = 60 only)" in line
    assert "S4 from Dl = 60 N(S1) (LD - Raw -0.10)" in line
    named = protocol_turn_line(pd.DataFrame(rows), {"toy": 0.1, "A": 0.3}, "toy", labels={"toy": "Vb"})
    assert "On design Vb (the toy budget when these rows were measured; the book's grid is now" in named
