"""The toy grid designs of chapter 2's ladder and issue 66's probes (data/probes/grid_designs/*.toml):
each file reads, and is the design its comment says, stated against the budget it is written over:
which runs it changes and which it shares, so a probe on it reuses the runs it should.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from grid_runs import LCCP_STAGES, grid_hashes

from nblib.budgets import get_budget, grid_f
from nblib.budgets.budget_file import load_budget_file, read_budget_file
from nblib.lccp import grid

GRID_DESIGNS = sorted((Path(__file__).parents[1] / "data" / "probes" / "grid_designs").glob("*.toml"))


RATE_DESIGNS = {"W": 0.15, "X": 0.2, "Y": 0.3}  # issue 55's first rung: the book's grid at other LCCP rates
NOISE_DESIGNS = {"Z": (0.3, 2)}  # its second: a rate and fewer sequences an LCCP step
DL_DESIGNS = {"Z3": ("Z", (40, 60, 80))}  # its third: a noise design's grid at Dl past the turn
DS_DESIGNS = {"Z4": ("Z3", (90, 270, 450))}  # after it: the same grid on the ends of the paper's Ds range
SHORT_LR_DESIGNS = {"Vf": 5e-3}  # issue 66: the book's grid with another short-stage LR, LCCP's kept
LCCP_RATE_OVER = {"Ve2y": ("Ve2", 0.3)}  # issue 66: a design with another LCCP rate, its base's short stages
FP32_TWINS = {"Vf2": "Vf"}  # issue 66: a design with every run in fp32 (for a CPU without native bf16)


LADDER_DESIGNS = [p for p in GRID_DESIGNS if p.stem not in ("F", "V", *RATE_DESIGNS, *NOISE_DESIGNS, *DL_DESIGNS,
                                                     *DS_DESIGNS, *SHORT_LR_DESIGNS, *LCCP_RATE_OVER,
                                                     *FP32_TWINS)]


@pytest.mark.parametrize("path", LADDER_DESIGNS,
                         ids=lambda p: p.name)
def test_every_grid_design_of_the_ladder_reads_and_changes_the_toy(path):
    """Chapter 2's ladder rows I-U are budget files over grid F (F.toml); each changes F's LCCP
    runs, and none is the book's grid."""
    b, f = load_budget_file(path), load_budget_file(path.parent / "F.toml")
    assert read_budget_file(path).base == "toy" and b.name == "toy" and b.lccp_lr_frac == 0.1
    with grid.placeholder_corpus():
        grids = [grid_hashes(x) for x in (b, f, get_budget("toy"))]
        assert grid.long_trajectory(b).hash != grid.long_trajectory(f).hash
    assert grids[0] != grids[1] and grids[0] != grids[2]


def _only_lccp_runs_differ(b, toy) -> None:
    """Every LCCP run of `b`'s grid has another hash than the toy's, and no short-stage run
    does, so a probe on `b` reuses the book's short stages."""
    with grid.placeholder_corpus():
        for st, base in zip(grid.grid_runs(b), grid.grid_runs(toy)):
            for c, c0 in zip(st.configs, base.configs):
                assert (c.hash != c0.hash) == (st.stage in LCCP_STAGES), (st.what, c.label)


@pytest.mark.parametrize("stem", sorted(RATE_DESIGNS))
def test_a_rate_design_is_the_books_grid_at_another_lccp_rate(stem):
    """W, X, Y: the book's toy at 15 / 20 / 30% of the short LR for LCCP, every other field its
    own; they change every LCCP run (LR) and no short-stage run, so a probe reuses the book's."""
    b, toy = load_budget_file(GRID_DESIGNS[0].parent / f"{stem}.toml"), get_budget("toy")
    assert b == replace(toy, lccp_lr_frac=RATE_DESIGNS[stem])
    _only_lccp_runs_differ(b, toy)


@pytest.mark.parametrize("stem", sorted(NOISE_DESIGNS))
def test_a_noise_design_is_the_books_grid_at_another_rate_and_lccp_batch(stem):
    """Z: the book's toy with LCCP at another rate and fewer sequences a step at every scale;
    like the rate designs it changes every LCCP run and no short-stage run."""
    rate, batch = NOISE_DESIGNS[stem]
    b, toy = load_budget_file(GRID_DESIGNS[0].parent / f"{stem}.toml"), get_budget("toy")
    assert b == replace(toy, lccp_lr_frac=rate, scales={k: replace(v, batch_long=batch) for k, v in toy.scales.items()})
    _only_lccp_runs_differ(b, toy)


@pytest.mark.parametrize("stem", sorted(LCCP_RATE_OVER))
def test_a_rate_design_over_another_design_moves_only_its_lccp_runs(stem):
    """Ve2y: its base design (Ve2) with LCCP at another share of the short LR; the short stages are
    the base's runs and every Linear-Decay run is new."""
    base_stem, rate = LCCP_RATE_OVER[stem]
    b, base = (load_budget_file(GRID_DESIGNS[0].parent / f"{s}.toml") for s in (stem, base_stem))
    assert b == replace(base, lccp_lr_frac=rate)
    with grid.placeholder_corpus():
        for scale in ("S2", "S3"):
            assert grid.short_stage(b, scale, 1).wsd[270].hash == grid.short_stage(base, scale, 1).wsd[270].hash
            assert (grid.lccp_linear_decay(b, scale, 270, 10, short_seed=1).hash
                    != grid.lccp_linear_decay(base, scale, 270, 10, short_seed=1).hash)


@pytest.mark.parametrize("stem", sorted(SHORT_LR_DESIGNS))
def test_a_short_lr_design_moves_the_short_stage_and_keeps_lccp_lr(stem):
    """Vf: the book's toy with every scale's short-stage LR moved and lccp_lr_frac moved with it,
    so LCCP starts at the toy's LR (App. A.3: lr/10 of the toy's own short LR). Every other field
    is the toy's; every short-stage run is new (another schedule)."""
    lr, b, toy = SHORT_LR_DESIGNS[stem], load_budget_file(GRID_DESIGNS[0].parent / f"{stem}.toml"), get_budget("toy")
    frac = toy.lccp_lr_frac * toy.scale("S1").lr / lr
    assert b == replace(toy, lccp_lr_frac=frac, scales={k: replace(v, lr=lr) for k, v in toy.scales.items()})
    for s in b.scales:
        assert b.lccp_lr(s) == pytest.approx(toy.lccp_lr(s), rel=1e-12)
    with grid.placeholder_corpus():
        for s in ("S2", "S3"):
            assert grid.short_stage(b, s).trunk.hash != grid.short_stage(toy, s).trunk.hash
            assert grid.short_stage(b, s).trunk.schedule["lr"] == lr


@pytest.mark.parametrize("stem", sorted(FP32_TWINS))
def test_an_fp32_twin_is_its_base_with_every_run_in_fp32(stem):
    """Vf2: its base design (Vf) with every short stage and every long-context run in fp32. The
    short stages the base already trains in fp32 (S2's) are the same runs; S3's (bf16 in the base)
    and every LCCP run are new."""
    b, base = (load_budget_file(GRID_DESIGNS[0].parent / f"{s}.toml") for s in (stem, FP32_TWINS[stem]))
    assert b == replace(base, bf16_short_scales=(), long_precision="fp32")
    assert all(b.short_precision(s) is None for s in b.scales) and b.run_precision is None
    with grid.placeholder_corpus():
        assert grid.short_stage(b, "S2").trunk.hash == grid.short_stage(base, "S2").trunk.hash
        assert grid.short_stage(b, "S3").trunk.hash != grid.short_stage(base, "S3").trunk.hash
        assert grid.lccp_linear_decay(b, "S2", 270, 10).hash != grid.lccp_linear_decay(base, "S2", 270, 10).hash


@pytest.mark.parametrize("stem", sorted(DL_DESIGNS))
def test_a_dl_design_is_its_base_with_every_lccp_budget_moved(stem):
    """Z3: its base design with Dl (and S5's off-diagonal configurations, Ds paired with Dl in
    order) moved past the turn; every other field the base's, so chapters 3 and 4 keep one grid."""
    base_stem, dls = DL_DESIGNS[stem]
    b, base = (load_budget_file(GRID_DESIGNS[0].parent / f"{s}.toml") for s in (stem, base_stem))
    assert b == replace(base, dl_multiples=dls, s5_configs=tuple(zip(base.ds_multiples, dls)))


@pytest.mark.parametrize("stem", sorted(DS_DESIGNS))
def test_a_ds_design_is_its_base_with_the_short_budgets_moved(stem):
    """Z4: its base design with Ds (and S5's off-diagonal configurations, Ds paired with the
    base's Dl in order) moved; every other field the base's, and the short stages of its grid
    are new runs (their branch points moved) while its LCCP runs at the Ds it shares with the
    base are the base's."""
    base_stem, dss = DS_DESIGNS[stem]
    b, base = (load_budget_file(GRID_DESIGNS[0].parent / f"{s}.toml") for s in (stem, base_stem))
    assert b == replace(base, ds_multiples=dss, s5_configs=tuple(zip(dss, base.dl_multiples)))
    shared = sorted(set(dss) & set(base.ds_multiples))
    with grid.placeholder_corpus():
        for scale in ("S1", "S4"):
            for ds in shared:
                assert (grid.lccp_linear_decay(b, scale, ds, b.dl_multiples[-1]).hash
                        == grid.lccp_linear_decay(base, scale, ds, base.dl_multiples[-1]).hash)


def test_grid_f_is_the_earlier_toy_and_v_the_books():
    """F.toml restores the toy grid the book shipped before design V (one KV head, d32 .. d128,
    LCCP at 3% on 2 x 1,024 unaligned tokens, Ds 90-270, S5's trajectory to 120); V.toml, written
    over F, is the book's toy grid but for its trajectory's end, the prompts at its last point and
    its precision after the short stage (V was measured in fp32; the book trains those runs in bf16)."""
    f = load_budget_file(GRID_DESIGNS[0].parent / "F.toml")
    shapes = {s: (m.model["d_model"], m.model["n_heads"], m.model["n_kv_heads"], m.batch_long) for s, m in f.scales.items()}
    assert shapes == {"S1": (32, 1, 1, 2), "S2": (48, 2, 1, 2), "S3": (64, 2, 1, 2), "S4": (96, 3, 1, 2),
                      "S5": (128, 4, 1, 2)}
    assert (f.lccp_lr_frac, f.lccp_aligned, f.ds_multiples, f.s5_trajectory) == (0.03, False, (90, 180, 270), 120)
    assert f.n_params("S1") == f.token_unit_tokens == 23_714  # the unit the toy pins is F's S1's N
    assert f == grid_f()  # the probes' grid F (`--budget F`) is the file's
    toy, v = get_budget("toy"), load_budget_file(GRID_DESIGNS[0].parent / "V.toml")
    v_book = replace(v, s5_trajectory=toy.s5_trajectory, needle_samples_last=toy.needle_samples_last,
                     long_precision="bf16", bf16_short_scales=("S3", "S5"))
    assert v.long_precision == "fp32" and v_book == toy  # fp32: bf16_short_scales (from toy) is inert
    with grid.placeholder_corpus():  # a trajectory's hash ignores its length
        assert grid_hashes(replace(v, long_precision="bf16", bf16_short_scales=("S3", "S5"))) == grid_hashes(toy)
