"""One source for the grid's counts: `make plan` (nblib.book.plan), the GPU check
(benchmarks/gpu_check.py) and chapter 2's design table (nblib.chapters.appendix.toy_design) count the runs,
tokens and steps of chapters 2-4 from nblib.lccp.grid's run configs.

The second count here does not use `grid.grid_runs` or `grid.trained_tokens`: it takes the
configs the chapters themselves train (the reference, `linear_decay_grid`, chapter 4's
`constant_configs`) and walks each run's `init` to its parent: a run that continues its
parent's training state (a WSD decay) trains its realized tokens minus the parent's steps it
inherits, every other run all of its realized tokens."""

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from nblib.book import plan as P
from nblib.budgets import SCALES, get_budget
from nblib.chapters import budget_words as BW
from nblib.chapters.appendix import toy_design as TD
from nblib.gemma import pair
from nblib.lccp import experiments, grid

BUDGETS = ("smoke", "toy", "full")
SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


def chapter_configs(b) -> dict:
    """{chapter: the configs it trains}, from the functions the chapters call (counting only:
    the corpus is not read, so `full` works without its inputs)."""
    with grid.placeholder_corpus():
        out = {"03_scaling_law": grid.linear_decay_grid(b, SCALES), "04_constant_last4": experiments.constant_configs(b)}
        if b.reference["kind"] == "nblib":
            out["02_setup"] = [grid.reference_config(b)]
    return out


def walk_trained_tokens(configs, everything) -> int:
    """Tokens `configs` train themselves, following each run's init to its parent in `everything`."""
    by_hash = {c.hash: c for c in everything}
    total = 0
    for c in configs:
        inherited = 0
        if c.init is not None:
            parent = by_hash[c.init["run"]]  # every parent is itself a run of the grid
            assert 0 < c.init["step"] <= parent.total_steps
            if c.init["mode"] == "continue":
                assert c.init["step"] in parent.ckpt_steps  # the branch point is a kept checkpoint
                assert parent.tokens_per_step == c.tokens_per_step
                inherited = c.init["step"] * parent.tokens_per_step
        total += c.total_steps * c.tokens_per_step - inherited
    return total


def kept_checkpoints(c) -> int:
    """Checkpoints a run keeps: its extra steps and final step, or one every k steps of a Constant trajectory."""
    if c.ckpt_every_tokens:
        k = c.meta["ckpt_every_steps"]
        assert c.total_steps % k == 0
        return c.total_steps // k
    return len(set(c.ckpt_steps) | {c.total_steps})


@pytest.fixture(scope="module")
def gc():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module", params=BUDGETS)
def setup(request):
    b = get_budget(request.param)
    chapters = chapter_configs(b)
    everything = [c for cs in chapters.values() for c in cs]
    with grid.placeholder_corpus():
        stages = grid.grid_runs(b)
    return b, chapters, everything, stages


def test_grid_runs_are_the_runs_the_chapters_train(setup):
    b, chapters, everything, stages = setup
    listed = [c.hash for st in stages for c in st.configs]
    assert len(listed) == len(set(listed))  # each run once
    assert set(listed) == {c.hash for c in everything}
    for st in stages:
        assert {c.hash for c in st.configs} <= {c.hash for c in chapters[st.chapter]}
    assert walk_trained_tokens(everything, everything) == sum(st.trained_tokens for st in stages)


def test_plan_counts_are_sums_over_the_grid(setup):
    b, chapters, everything, _ = setup
    rows = [r for r in P.run_list(b) if r["chapter"] in chapters]
    for chapter, configs in chapters.items():
        assert sum(r["tokens"] for r in rows if r["chapter"] == chapter) == walk_trained_tokens(configs, everything)
    for scale in SCALES:  # and scale by scale
        mine = [c for c in everything if c.meta.get("scale") == scale]
        assert sum(r["tokens"] for r in rows if r["what"].startswith(scale + " ")) == walk_trained_tokens(mine, everything)
        assert (sum(r["checkpoints"] for r in rows if r["what"].startswith(scale + " "))
                == sum(kept_checkpoints(c) for c in mine))
    table = P.compute_table(b, chapters=list(chapters))
    for chapter, configs in chapters.items():
        assert table[table.chapter == chapter]["tokens"].sum() == walk_trained_tokens(configs, everything)


def test_gpu_check_counts_are_sums_over_the_grid(setup, gc):
    b, _, everything, _ = setup
    for scale in SCALES:
        for context, seq_len in (("short", b.short_seq_len), ("long", b.long_seq_len)):
            mine = [c for c in everything if c.meta.get("scale") == scale and c.seq_len == seq_len]
            assert mine and gc.grid_tokens(b, scale, context) == walk_trained_tokens(mine, everything)


def test_design_table_counts_are_the_grids(setup):
    b, chapters, everything, _ = setup
    shapes = pd.DataFrame({"copies from tokens": [1e5, 2e5]})
    lccp = pd.DataFrame({"copy gain @256": [2.0, 1.0]},
                        index=pd.MultiIndex.from_tuples([("d32, heads of 32, smeared", 0), ("d32, heads of 32, smeared", 10)],
                                                        names=["parent", "LCCP tokens"]))
    table = TD.grid_design_table(b, shapes, lccp)
    t = table[b.name]
    ld = {s: [c for c in everything if c.meta["stage"] == "lccp-ld" and c.meta["scale"] == s] for s in SCALES}
    const = [c for c in chapters["04_constant_last4"] if c.meta["scale"] == "S1"]
    n_ds, n_dl = len({c.meta["ds_mult"] for c in ld["S1"]}), len({c.meta["dl_mult"] for c in ld["S1"]})
    assert n_ds * n_dl == len(ld["S1"])
    seeds = len(const) // n_ds
    assert t["grid"] == f"{n_ds} x {n_dl} at S1-S4, {len(ld['S5'])} at S5; {seeds} Constant seeds"
    steps = min(c.total_steps for c in ld["S1"])
    assert f"the smallest Dl still takes {steps} steps" in table.loc["LCCP", "measured"]
    wsd = next(c for c in everything if c.meta["stage"] == "short" and c.meta["scale"] == "S1")
    assert t["short stage"].startswith(f"{wsd.batch_size} x {wsd.seq_len} tokens a step")


def test_nominal_short_stage_is_the_grid_before_rounding(setup):
    """The idealised count chapter 2 prices designs with is the grid's short stage within
    half a step per run (the trunk and each decay round to whole steps)."""
    b, _, everything, _ = setup
    for scale in SCALES:
        short = [c for c in everything if c.meta.get("scale") == scale and c.meta["stage"].startswith("short")]
        decays = [c for c in short if c.meta["stage"] == "short"]
        tps = decays[0].tokens_per_step
        nominal = grid.nominal_short_stage_tokens([c.realized_tokens for c in decays])
        assert abs(walk_trained_tokens(short, everything) - nominal) <= (len(decays) + 1) / 2 * tps


def test_placeholder_corpus_changes_names_not_counts():
    b = get_budget("toy")
    with grid.placeholder_corpus("x"):
        fake = grid.short_stage(b, "S1")
    real = grid.short_stage(b, "S1")
    assert fake.trunk.data["corpus_id"] == "x" and real.trunk.data["corpus_id"] != "x"  # not memoized across
    assert [grid.trained_tokens(c) for c in fake.all()] == [grid.trained_tokens(c) for c in real.all()]
    with grid.placeholder_corpus("x"):  # Models A and B too: `make plan` at full needs no FineWeb
        assert pair.pair_configs(get_budget("full"))["B"].data["corpus_id"] == "x"


def test_toy_shape_words_are_the_budgets():
    assert BW.shape_words(get_budget("toy")) == (
        "S1 d64 (2 x 32-dim heads, 2 KV heads), S2 d80 (3 x 32-dim heads, 3 KV heads), S3 d96 (3 x 32-dim heads, "
        "3 KV heads), S4 d112 (4 x 32-dim heads, 4 KV heads), S5 d128 (4 x 32-dim heads, 4 KV heads); 2 layers, "
        "tied embeddings, smeared keys")
    full = BW.shape_words(get_budget("full"))
    assert full.startswith("S1 d512 x 11 layers (8 x 64-dim heads, 4 KV heads), S2 d768 x 10 layers")
    assert "smeared" not in full and "tied" not in full


def test_the_long_trajectory_has_one_home():
    """Chapter 4's S5 trajectory is `grid.long_trajectory`, the run chapter 4's Constant configs
    end with (experiments.trajectory_config, its copy, is gone)."""
    b = get_budget("toy")
    assert not hasattr(experiments, "trajectory_config")
    assert experiments.constant_configs(b)[-1].hash == grid.long_trajectory(b, "S5").hash
    assert experiments.trajectory_lineage(b, "S5")[-1].hash == grid.long_trajectory(b, "S5").hash
