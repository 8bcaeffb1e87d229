"""nblib.lccp.monitor end to end on a smoke-budget Constant trajectory, and its refusals."""

import os
import subprocess
import sys

import pytest

import subproc

from nblib.budgets import get_budget
from nblib.lccp import grid
from nblib.lccp.evaluation import Evaluator
from nblib.lccp.monitor import MonitorError, forecast, last_m_windows
from nblib.store.runstore import RunStore
from nblib.training.runner import get_or_run, get_or_run_many

# one torch thread here and in the CLI's process: two threads per process on a busy 2-core
# machine made the smoke reference and short stage train 6-9x slower (9.2 s against 1.4 s)
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def test_forecast_refuses_too_few_points():
    with pytest.raises(MonitorError, match="at least 4"):
        forecast([{"Dl": 1e6 * i, "long_ppl": 3.0 - 0.1 * i} for i in range(1, 4)], [1e8])


def test_last4_windows_adjacent_and_spaced():
    steps = [10 * k for k in range(1, 11)]  # checkpoints at steps 10..100, shuffled order is sorted
    assert last_m_windows(steps[::-1], eval_every=5) == [[20, 30, 40, 50], [70, 80, 90, 100]]
    # App. B.1's Last4(2): the checkpoint and those 2, 4 and 6 checkpoints back; the first
    # window needs six predecessors, so the 5th checkpoint has none
    assert last_m_windows(steps, eval_every=5, spacing=2) == [[40, 60, 80, 100]]
    assert last_m_windows(steps, eval_every=1, spacing=3) == [[10, 40, 70, 100]]
    assert last_m_windows(steps[:3], eval_every=1) == []


def test_forecast_recovers_a_power_law():
    import numpy as np

    dl = np.geomspace(1e6, 1e8, 12)
    pts = [{"Dl": d, "long_ppl": float(np.exp(5 * (d / 1e9) ** -0.2 * 0.05 + 1.0))} for d in dl]
    fc = forecast(pts, [4e8], n_boot=30)
    future = [r for r in fc["predictions"] if not r["observed"]][0]
    truth = np.exp(5 * (4e8 / 1e9) ** -0.2 * 0.05 + 1.0)
    assert future["long_ppl"] == pytest.approx(truth, rel=1e-3)
    assert future["lo"] <= future["long_ppl"] <= future["hi"] and future["gain_per_1B_tokens"] > 0


@pytest.mark.slow
def test_monitor_cli_on_a_smoke_trajectory(tmp_path, capsys):
    from nblib.cli import run_cli
    from nblib.lccp import monitor

    b = get_budget("smoke")
    store = RunStore(tmp_path)
    Evaluator.build(b, store)  # trains the smoke reference, annotates the test set
    stage = grid.short_stage(b, "S1")
    short = grid.lccp_constant(b, "S1", b.ds_multiples[0], 3 * b.constant_ckpt_every)
    # the trajectory's ancestors only: the trunk and the one WSD branch it starts from
    get_or_run_many(store, [stage.trunk, stage.wsd[b.ds_multiples[0]], short], workers=1, progress=False)
    args = [str(store.run(short).path), "--eval-every", "1", "--n-boot", "5"]
    # refusals and the cached rerun in this process, through the CLI's one error path
    # (`python -m nblib.lccp.monitor` is run_cli(main)); the forecast itself as a real command
    assert run_cli(monitor.main, args) == 2 and "Last4 needs at least 4" in capsys.readouterr().err
    long = grid.lccp_constant(b, "S1", b.ds_multiples[0], 10 * b.constant_ckpt_every)  # same trajectory, extended
    assert long.hash == short.hash
    get_or_run(store, long, progress=False)
    cmd = [sys.executable, "-m", "nblib.lccp.monitor", *args]
    ok = subproc.run(cmd + ["--future", "1e6", "--plot", str(tmp_path / "m.png")], capture_output=True, text=True,
                     env=ENV, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "Eq. 2 fit" in ok.stdout and "7 Last4 evaluation points" in ok.stdout and (tmp_path / "m.png").exists()
    # the run's Last4 points share Evaluator.merged's cache with the chapters: 7 memo entries
    cached = list((store.run(long).path / "evals").glob("ppl-*-lastM-*.json"))
    assert len(cached) == 7
    assert run_cli(monitor.main, args) == 0  # everything cached now
