"""Chapter 6's training-length ladder (nblib.gemma.training_length): the branches are the
shorter WSD runs they stand for, and the trend fit recovers a known line."""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from nblib.budgets import get_budget
from nblib.gemma import pair, training_length
from nblib.store.checkpoint import load_weights, save_checkpoint
from nblib.store.runstore import RunConfig, RunStore
from nblib.training.runner import get_or_run, get_or_run_many
from nblib.training.schedules import schedule_of


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_branch_steps_sit_in_the_parents_stable_phase():
    sched = {"kind": "wsd", "lr": 1e-2, "warmup_steps": 50, "decay_frac": 0.2, "final_lr_frac": 0.1}
    assert pair.branch_steps(1100, sched, 0.5) == (550, 440)
    assert pair.branch_steps(1100, sched, 0.125) == (138, 110)
    with pytest.raises(ValueError, match="fraction 0.05 puts the decay start at step 4"):
        pair.branch_steps(1100, sched, 0.05)  # would decay during warmup
    with pytest.raises(ValueError, match="allowed: distinct numbers in \\(0, 1\\)"):
        pair.check_fractions((0.5, 1.0))


def test_full_budget_branch_points_are_valid():  # its configs need the user's corpus; the steps do not
    p = get_budget("full").pair
    total = round(p.n_tokens / (p.batch_size * p.seq_len))
    sched = {"warmup_steps": p.warmup_steps, "decay_frac": p.decay_frac}
    for f in p.length_fractions:
        steps, start = pair.branch_steps(total, sched, f)
        assert p.warmup_steps <= start < steps < total


@pytest.mark.parametrize("budget", ["smoke", "toy"])
def test_ladder_branches_are_the_shorter_wsd_runs(budget):
    b = get_budget(budget)
    parents = pair.pair_configs(b)
    ladder = pair.ladder_configs(b)
    assert len(ladder) == 2 * len(b.pair.length_fractions)
    for (key, f), c in ladder.items():
        parent = parents[key]
        assert c.init == {"run": parent.hash, "step": c.init["step"], "mode": "continue"}
        assert c.init["step"] in parent.ckpt_steps and parent.keep_optimizer == "all"
        assert abs(c.total_steps / parent.total_steps - f) < 0.01
        # up to the branch point the two schedules are one, after it the branch decays
        s_parent, s_branch = schedule_of(parent), schedule_of(c)
        assert all(s_parent(s) == s_branch(s) for s in range(c.init["step"]))
        assert s_branch.decay_start == c.init["step"]
        assert s_branch(c.total_steps - 1) == pytest.approx(c.schedule["lr"] * c.schedule["final_lr_frac"])


def test_a_branch_trains_to_the_same_weights_as_the_run_alone(tmp_path):
    b = get_budget("smoke")
    parent = pair.pair_configs(b)["B"]
    branch = pair.ladder_configs(b)[("B", b.pair.length_fractions[0])]
    store = RunStore(tmp_path / "ladder")
    get_or_run_many(store, [parent, branch], workers=1, progress=False)
    alone = dataclasses.replace(branch, init=None)
    assert alone.hash != branch.hash
    ref = get_or_run(RunStore(tmp_path / "alone"), alone, progress=False)
    wb, wa = load_weights(store.run(branch).checkpoint()), load_weights(ref.checkpoint())
    assert wb.keys() == wa.keys()
    for k in wb:
        assert torch.equal(wb[k], wa[k]), k


def _fake_ladder(fractions, steps, tokens_per_step=100):
    def run(f):
        return SimpleNamespace(config=SimpleNamespace(realized_tokens=int(f * steps) * tokens_per_step))
    return {f: {"A": run(f), "B": run(f)} for f in fractions}


def test_gap_trend_recovers_a_known_line_and_its_zero():
    fractions = (0.125, 0.25, 0.5, 1.0)
    ladder = _fake_ladder(fractions, steps=10_000)
    n_params = 1_000
    rng = np.random.default_rng(0)
    a_true, b_true = -0.8, 0.1  # gap = a + b ln(D/N): 0 at exp(8) ~ 2981 tokens per parameter, past the last point
    per_window = {}
    for f in fractions:
        x = np.log(ladder[f]["A"].config.realized_tokens / n_params)
        loss_a = 3 + rng.normal(0, 0.3, 200)
        noise = rng.normal(0, 0.01, 200)
        per_window[f] = {"A": loss_a, "B": loss_a + a_true + b_true * x + noise - noise.mean()}
    table = training_length.gap_table(ladder, per_window, n_params, n_boot=200)
    assert list(table.index) == pytest.approx([125, 250, 500, 1000])
    assert (table["95% lo"] < table["B - A"]).all() and (table["B - A"] < table["95% hi"]).all()
    trend = training_length.fit_gap_trend(table, per_window, target=79, n_boot=200)
    assert trend["intercept"] == pytest.approx(a_true, abs=1e-9) and trend["slope"] == pytest.approx(b_true, abs=1e-9)
    assert trend["at_target"] == pytest.approx(a_true + b_true * np.log(79))
    assert trend["lo"] <= trend["at_target"] <= trend["hi"]
    assert trend["zero_at"] == pytest.approx(np.exp(-a_true / b_true))
    assert trend["zero_lo"] <= trend["zero_at"] <= trend["zero_hi"]


def test_gap_trend_needs_three_lengths_and_reports_no_zero_when_the_gap_widens():
    ladder = _fake_ladder((0.25, 0.5, 1.0), steps=10_000)
    per_window = {f: {"A": np.full(50, 3.0), "B": np.full(50, 3.0) - 0.1 - 0.05 * np.log(f * 1000) + np.linspace(-1e-3, 1e-3, 50)}
                  for f in ladder}
    table = training_length.gap_table(ladder, per_window, 1_000, n_boot=200)
    trend = training_length.fit_gap_trend(table, per_window, n_boot=200)
    assert trend["slope"] < 0 and trend["zero_at"] == float("inf")
    with pytest.raises(ValueError, match="at least 3"):
        training_length.fit_gap_trend(table.iloc[:2], per_window)


def test_data_format_reads_the_pairs_stream():
    fmt = pair.data_format(get_budget("smoke"), n_steps=5)
    assert fmt["windows cut across documents"] and fmt["attention crosses documents"]
    assert fmt["windows measured"] == 5 * get_budget("smoke").pair.batch_size
    assert 0 <= fmt["windows with a separator"] <= 1 and fmt["separators per window"] >= 0


def test_prediction_interval_matches_the_ols_formula_and_holds_the_line():
    ladder = _fake_ladder((0.125, 0.25, 0.5, 1.0), steps=10_000)
    x = np.log([125, 250, 500, 1000])
    wobble = np.array([0.05, -0.05, -0.05, 0.05])  # off the line: residual SD > 0
    per_window = {f: {"A": np.full(30, 3.0), "B": np.full(30, 3.0) - 0.5 + 0.02 * xi + w + np.linspace(-1e-3, 1e-3, 30)}
                  for f, xi, w in zip(ladder, x, wobble)}
    table = training_length.gap_table(ladder, per_window, 1_000, n_boot=200)
    tr = training_length.fit_gap_trend(table, per_window, target=79, n_boot=200)
    # closed form: a two-parameter fit to 4 points leaves 2 degrees of freedom
    X = np.stack([np.ones(4), x], 1)
    coef, res, *_ = np.linalg.lstsq(X, table["B - A"].to_numpy(), rcond=None)
    s = np.sqrt(res[0] / 2)
    x0 = np.log(79)
    se = s * np.sqrt(1 + 1 / 4 + (x0 - x.mean()) ** 2 / ((x - x.mean()) ** 2).sum())
    half = 4.302652729911275 * se  # t(0.975, 2)
    assert tr["residual_sd"] == pytest.approx(s, rel=1e-6)
    assert tr["pred_lo"] == pytest.approx(tr["at_target"] - half, rel=1e-6)
    assert tr["pred_hi"] == pytest.approx(tr["at_target"] + half, rel=1e-6)
    assert tr["pred_hi"] - tr["pred_lo"] > tr["hi"] - tr["lo"]  # the lengths' scatter widens it


def test_token_ratio_inverts_a_known_loss_curve():
    # A's loss falls 0.5 nats per doubling; B's sits where A would be at 1.5x the tokens
    x = np.array([100.0, 200.0, 400.0, 800.0])
    loss_a = 5 - 0.5 * np.log2(x / 100)
    loss_b = 5 - 0.5 * np.log2(1.5 * x / 100)
    table = pd.DataFrame({"loss A": loss_a, "loss B": loss_b}, index=pd.Index(x, name="tokens per parameter"))
    r = training_length.token_ratio(table)
    assert r.iloc[:3].to_numpy() == pytest.approx([1.5, 1.5, 1.5]) and np.isnan(r.iloc[3])  # last: past A's range
    with pytest.raises(ValueError, match="must fall"):
        training_length.token_ratio(table.assign(**{"loss A": loss_a[::-1]}))


def test_every_ladder_loss_is_its_own_runs_final_weights(tmp_path):
    """Issue 65's check of the toy table, where Model B at half the tokens (2.7379395869) sat
    7e-8 from Model A's final loss (2.7379395161): each (model, fraction) of the ladder is a
    distinct run of its own family and length, its loss is that run's own final checkpoint
    (loaded here from the file, apart from the ladder's code and cache), no two runs share a
    loss, and the table's columns are A's and B's. A branch reading another run's checkpoint,
    a hash collision or a swapped column fails here."""
    from nblib.models import build_model

    b = get_budget("smoke")
    store = RunStore(tmp_path / "runs")
    get_or_run_many(store, pair.part2_configs(b), workers=1, progress=False)
    ladder = training_length.length_ladder(store, b)
    windows = pair.eval_windows(b)
    per_window = training_length.ladder_losses(ladder, windows)
    assert sorted(ladder) == sorted([*b.pair.length_fractions, 1.0])
    runs = [(f, k, r) for f, rs in ladder.items() for k, r in rs.items()]
    assert len({r.hash for _, _, r in runs}) == len(runs) == 2 * (len(b.pair.length_fractions) + 1)
    total = pair.pair_configs(b)["A"].total_steps
    for f, k, r in runs:
        assert r.config.model["family"] == pair.MODELS[k][0]
        assert r.config.total_steps == (total if f == 1.0 else pair.branch_steps(total, r.config.schedule, f)[0])
        assert r.path.name == r.hash and r.checkpoint().path.is_relative_to(r.path)
        cfg = dict(r.config.model)
        model = build_model(cfg.pop("family"), cfg)
        model.load_state_dict(load_weights(r.checkpoint()))
        np.testing.assert_array_equal(per_window[f][k], pair.heldout_loss(model.eval(), windows))
    means = {(f, k): per_window[f][k].mean() for f, k, _ in runs}
    for (x, mx), (y, my) in [(p, q) for p in means.items() for q in means.items() if p[0] < q[0]]:
        assert abs(mx - my) > 1e-6, (x, y, mx, my)
    table = training_length.gap_table(ladder, per_window, n_params=1000, n_boot=200)
    for f, row in table.set_index("fraction").iterrows():
        assert row["loss A"] == per_window[f]["A"].mean() and row["loss B"] == per_window[f]["B"].mean()
        assert row["B - A"] == pytest.approx(row["loss B"] - row["loss A"])
    # A cached loss belongs to the weights it was computed on: a run whose final checkpoint is
    # written again (here B's full weights saved as the short B branch's final step) is scored
    # again, never read from the old cache entry. (Before, the ladder's cache entry named no
    # checkpoint, and Run.memo never reads such an entry back: every chapter run re-scored
    # every ladder run. Now it is read back, keyed by the final checkpoint's sha256.)
    f = b.pair.length_fractions[0]
    short_b, full_b = ladder[f]["B"], ladder[1.0]["B"]
    end = short_b.checkpoint()
    save_checkpoint(short_b.path, end.step, end.tokens, load_weights(full_b.checkpoint()))
    again = training_length.ladder_losses(ladder, windows)
    np.testing.assert_array_equal(again[f]["B"], per_window[1.0]["B"])
    np.testing.assert_array_equal(again[f]["A"], per_window[f]["A"])
