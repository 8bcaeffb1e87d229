"""After LCCP (LCCP paper §5.2-5.3): a Last4 start is the uniform average of its four
checkpoints (checked against the merge library), the extension recipe is the paper's
(ABF to the next base, 4x context, LR to a hundredth, documents isolated), Raw and Last4
starts differ only in their weights, and the run store refuses a malformed merged start."""

import numpy as np
import pytest
import torch

from nblib.budgets import get_budget
from nblib.lccp import grid, post_training
from nblib.lccp.merge import merge
from nblib.store.runstore import ConfigError, RunConfig, RunStore
from nblib.training.runner import get_or_run
from nblib.training.train import average_weights

V = 257
TINY = {"family": "llama", "vocab_size": V, "d_model": 16, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1, "d_ff": 32,
        "max_seq_len": 64}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def parent_config(tmp_path) -> RunConfig:
    data = {"corpus": "python-stdlib", "tokenizer": "byte", "split": "train", "stream": "packed", "seq_len": 32}
    return RunConfig(model=TINY, data=data, schedule={"kind": "constant", "lr": 1e-2, "warmup_steps": 0},
                     n_tokens=8 * 4 * 32, batch_size=4, seed=0, budget="smoke", ckpt_steps=(2, 4, 6),
                     label="parent")


def test_average_weights_equals_the_merge_library(tmp_path):
    store = RunStore(tmp_path / "runs")
    run = get_or_run(store, parent_config(tmp_path), progress=False)
    steps = [2, 4, 6, 8]
    ours = average_weights([run.load_state_dict(s) for s in steps])
    lib = merge("lastM", [run.checkpoint(s).weights for s in steps], iterations=steps)
    assert ours.keys() == lib.keys()
    for k in ours:
        torch.testing.assert_close(ours[k], lib[k].to(ours[k].dtype), rtol=1e-6, atol=1e-7)  # 1 ulp: fp64 vs fp32 sums
    # and it is not just the last checkpoint
    assert any(not torch.equal(ours[k], run.load_state_dict(8)[k]) for k in ours)


def test_a_merged_start_trains_from_the_average(tmp_path):
    store = RunStore(tmp_path / "runs")
    parent = get_or_run(store, parent_config(tmp_path), progress=False)
    avg = average_weights([parent.load_state_dict(s) for s in (2, 4, 6, 8)])
    child_cfg = RunConfig(model=TINY, data=parent.config.data, schedule={"kind": "constant", "lr": 1e-3},
                          n_tokens=4 * 32, batch_size=4, seed=1, budget="smoke", ckpt_steps=(),
                          init={"run": parent.hash, "step": 8, "mode": "weights", "average_steps": [2, 4, 6, 8]})
    child = get_or_run(store, child_cfg, progress=False)
    log = (child.path / "train.log").read_text()
    assert "uniform average" in log and "[2, 4, 6, 8]" in log
    # one small step from the average: every tensor stays close to it, far from any single checkpoint
    w = child.load_state_dict()
    d_avg = sum(float((w[k] - avg[k]).abs().sum()) for k in w)
    d_last = sum(float((w[k] - parent.load_state_dict(8)[k]).abs().sum()) for k in w)
    assert d_avg < d_last / 3


@pytest.mark.parametrize("bad", [[2, 4, 6], [4, 2, 8], [2, 2, 8], []])
def test_malformed_average_steps_are_refused(bad):
    with pytest.raises(ConfigError, match="average_steps"):
        RunConfig(model=TINY, data={"corpus": "python-stdlib", "tokenizer": "byte", "split": "train",
                                    "stream": "packed", "seq_len": 32},
                  schedule={"kind": "constant", "lr": 1e-3}, n_tokens=128, batch_size=4, seed=0, budget="smoke",
                  init={"run": "0123456789abcdef", "step": 8, "mode": "weights", "average_steps": bad})


def test_extension_recipe_is_the_papers():
    b = get_budget("toy")
    traj = grid.lccp_constant(b, "S5", b.ds_multiples[-1], b.s5_trajectory, 0, ckpt_every=b.s5_ckpt_every)

    class FakeRun:  # start_points only reads the trajectory's config
        config = traj
    starts = post_training.start_points(b, FakeRun, [4.0, 8.0])
    assert [s["protocol"] for s in starts] == ["Raw", "Last4"] * 2
    raw, last4 = starts[2], starts[3]
    assert raw["step"] == last4["step"] == grid.checkpoint_step(traj, 8.0)
    spacing = grid.checkpoint_step(traj, b.s5_ckpt_every)
    assert last4["average_steps"] == [raw["step"] - k * spacing for k in (3, 2, 1, 0)]
    c_raw = post_training.extension_config(b, "S5", traj, raw)
    c_l4 = post_training.extension_config(b, "S5", traj, last4)
    assert c_raw.init["rope_base"] == b.rope_bases[2] and traj.init["rope_base"] == b.rope_bases[1]
    assert c_raw.data["seq_len"] == b.ext_seq_len == 4 * b.long_seq_len and c_raw.data["doc_isolation"]
    # the LCCP rate: a tenth of the short stage's in the paper, the budget's lccp_lr_frac (toy: 3%)
    assert c_raw.schedule == {"kind": "linear_decay", "lr": b.scale("S5").lr * b.lccp_lr_frac, "final_lr_frac": 0.01}
    assert get_budget("full").lccp_lr("S5") == get_budget("full").scale("S5").lr * 0.1
    assert c_raw.realized_tokens >= 8 * c_raw.tokens_per_step
    # §5.2's 2.10B tokens at N = 821M, scaled by the budget's token multiple
    expect = b.n_tokens("S5", 2.10e9 / 821.15e6 * b.multiple_scale)
    assert abs(post_training.extension_tokens(b, "S5") - max(expect, 8 * c_raw.tokens_per_step)) <= 1
    # Raw and Last4 differ only in the start's weights
    assert c_l4.init["average_steps"] == last4["average_steps"] and "average_steps" not in c_raw.init
    assert {**c_raw.to_dict(), "init": None, "label": None, "meta": None} == \
           {**c_l4.to_dict(), "init": None, "label": None, "meta": None}
    assert c_raw.hash != c_l4.hash


def test_extended_ruler_length_scales_with_the_context():
    toy, smoke = get_budget("toy"), get_budget("smoke")
    assert post_training.extended_ruler_len(toy) == 4 * toy.long_seq_len
    assert post_training.extended_ruler_len(smoke) == smoke.ruler_len * smoke.ext_seq_len // smoke.long_seq_len


def test_code_needles_after_extension_are_the_three_single_needles_at_the_extended_length():
    from nblib.evals import code_niah

    smoke = get_budget("smoke")
    suite = post_training.extended_code_needle_suite(smoke)
    assert list(suite) == list(code_niah.TASKS)
    n = post_training.extended_ruler_len(smoke)
    for samples in suite.values():
        assert len(samples) == (smoke.post_training_samples or smoke.ruler_samples)
        assert all(0.99 * n <= s.n_tokens <= n for s in samples)


def test_sft_average_is_mean_min_max_over_seeds():
    import pandas as pd

    rows = []
    for seed, (a, b_) in enumerate([(10.0, 30.0), (20.0, 40.0), (30.0, 20.0)]):
        rows += [{"dl": 1.0, "protocol": "Raw", "seed": seed, "benchmark": "longbench", "task": "t1", "score": a},
                 {"dl": 1.0, "protocol": "Raw", "seed": seed, "benchmark": "graphwalks", "task": "t2", "score": b_}]
    scores = pd.DataFrame(rows)
    per = post_training.model_averages(scores)
    assert per["average"].tolist() == [20.0, 30.0, 25.0] and per["benchmarks"].tolist() == [2, 2, 2]
    avg = post_training.sft_average(scores)
    assert np.allclose(avg.loc[(1.0, "Raw")].to_numpy(), [25.0, 20.0, 30.0])
