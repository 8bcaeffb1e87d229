"""The numbers the chapters' prose names come from the budgets, the grid and the figures, and
each verdict the prose states changes when its input crosses the threshold."""

from __future__ import annotations

import dataclasses

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from nblib.book import budget_words, findings, metric_figures, toy_design  # noqa: E402
from nblib.book.figures import token_ticks  # noqa: E402
from nblib.budgets import SCALES, get_budget, grid_f  # noqa: E402
from nblib.lccp import grid, scaling  # noqa: E402


@pytest.mark.parametrize("name", ["smoke", "toy", "full"])
def test_the_run_count_and_grid_size_the_introduction_names_are_the_budgets(name):
    """A second count, stage by stage from the grid's builders, against the sentence."""
    b = get_budget(name)
    with grid.placeholder_corpus():
        short = sum(len(grid.short_stage(b, s).all()) for s in SCALES)
        ld = sum(len(grid.linear_decay_pairs(b, s)) for s in SCALES)
    text = budget_words.grid_size_words(b)
    assert f"trains {short + ld} runs ({short} short-stage, {ld} Linear-Decay" in text
    assert f"takes {len(b.ds_multiples)} x {len(b.dl_multiples)} of the paper's 5 x 5" in text
    assert f"S5's to {b.s5_trajectory:g} {b.unit}" in text


def test_the_departures_follow_the_budget():
    toy, f = get_budget("toy"), grid_f()
    ns = [toy.n_params(s) for s in SCALES]
    text = budget_words.departures_markdown(toy)
    assert f"N spans {ns[-1] / ns[0]:.1f}x ({ns[0]:,} .. {ns[-1]:,}" in text and "the paper's 26x" in text
    assert "A KV head per query head" in text and "23,714 tokens" in text and "S5's trajectory to 150" in text
    other = budget_words.departures_markdown(f)  # grid F shares one KV head: the line says so
    assert "KV heads shared by the query heads" in other and "S5's trajectory to 120" in other
    assert "fp32 on CPU" in other
    bf16 = budget_words.departures_markdown(dataclasses.replace(toy, long_precision="bf16"))
    assert "LCCP, the extension and SFT train under bf16 autocast" in bf16 and "fp32 on CPU" not in bf16


def _ladder(rows):
    cols = ["design", "S5 Last4 rho(Dl, LongPPL)", "S5 Last4 LongPPL at 30", "S5 Last4 LongPPL at 120",
            "S1-S3 -> S4 R²", "S1-S4 -> S5 R²", "Part 1 min"]
    return pd.DataFrame(rows, columns=cols)


def test_book_grid_findings_read_the_latest_row_of_each_grid_and_its_verdict():
    t = _ladder([("F", 0.1, 15.0, 16.0, .9, .9, 60.0), ("F3", 0.28, 14.95, 17.86, .874, .895, 79.8),
                 ("V", -0.95, 5.97, 4.82, .891, .971, 117.0)])
    text = toy_design.book_grid_findings(t, now="V")
    assert "**F** (row F3): S5's Last4 LongPPL 14.95 at 30 -> 17.86 at 120 (rho +0.28)" in text
    assert "Part 1 117.0 min" in text and "F no, V yes" in text
    t.loc[2, "S5 Last4 rho(Dl, LongPPL)"] = -0.79  # past the -0.8 target: V no longer meets it
    assert "F no, V no" in toy_design.book_grid_findings(t, now="V")


def _law_table(log_linear: bool) -> pd.DataFrame:
    """Eq. 1 evaluated on a 3 x 3 grid at five scales, no noise: a power law with interior
    exponents, or a sum of -a ln x terms (the form whose exponents run to the floor)."""
    rows = []
    for i, n in enumerate((1e5, 2e5, 4e5, 8e5, 1.6e6)):
        for ds in (2e6, 4e6, 8e6):
            for dl in (2e5, 4e5, 8e5):
                x = (n / 1e8, ds / 1e9, dl / 1e9)
                y = (-0.1 * np.log(x[0]) - 0.08 * np.log(x[1]) - 0.05 * np.log(x[2]) - 0.5 if log_linear else
                     0.4 * x[0] ** -0.3 + 0.3 * x[1] ** -0.4 + 0.2 * x[2] ** -0.5 + 0.5)
                rows.append({"scale": SCALES[i], "N": n, "Ds": ds, "Dl": dl, "longppl": float(np.exp(y)), "y": y})
    return pd.DataFrame(rows)


def test_a_fit_on_its_exponent_floor_is_named_log_linear_and_a_power_law_is_not():
    splits = {"S1-S3 → S4": (["S1", "S2", "S3"], ["S4"])}
    power = scaling.holdout_evals(_law_table(False), splits)
    assert scaling.floor_exponents(power["S1-S3 → S4"].fit) == []
    assert "every exponent inside its bounds" in findings.degenerate_fit_findings(power)
    flat = scaling.holdout_evals(_law_table(True), splits)
    floor = scaling.floor_exponents(flat["S1-S3 → S4"].fit)
    assert floor and set(floor) <= {"alpha", "beta_s", "beta_l"}
    text = findings.degenerate_fit_findings(flat)
    assert "at the search floor" in text and "log-linear in" in text


def test_table3_verdict_turns_when_another_form_beats_the_additive_one():
    t = pd.DataFrame({"variant": ["additive", "no_offset"], "S4 R²": [0.95, 0.90], "S5 R²": [0.93, 0.96],
                      "paper S4 R²": [0.9663, 0.7995], "paper S5 R²": [0.9516, -0.1031]})
    text = findings.table3_verdict(t)
    assert "Held out S4: best here **additive** (R² 0.950); additive 0.950 (as in the paper)." in text
    assert "Held out S5: best here **no_offset**" in text and "does not hold at this budget on S5" in text
    t.loc[0, "S5 R²"] = 0.97
    assert "does not hold" not in findings.table3_verdict(t)


def test_training_speed_counts_the_last_stretch_of_a_resumed_run():
    m = pd.DataFrame({"kind": ["train"] * 5, "step": [1, 10, 20, 21, 41], "elapsed_s": [1.0, 5.5, 10.5, 0.5, 10.5]})
    sp = metric_figures.training_speed(m)
    assert (sp["steps"], sp["seconds"], sp["steps_per_s"]) == (20, 10.0, 2.0)
    assert "20 steps in 10 s, 2.00 steps/s" in metric_figures.training_speed_line(m, "reference")
    assert np.isnan(metric_figures.training_speed(m.iloc[:1])["steps_per_s"])


def test_token_ticks_label_a_log_axis_narrower_than_a_decade():
    fig, ax = plt.subplots()
    ax.plot([6.4e6, 8.54e6, 10.67e6], [1, 2, 3])
    ax.set_xscale("log")
    token_ticks(ax, "x", [6.4e6, 8.54e6, 10.67e6])
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["6.4M", "8.54M", "10.7M"]
    plt.close(fig)


def test_trajectory_points_end_at_the_trajectory():
    from nblib.lccp.downstream import trajectory_points
    toy = get_budget("toy")
    assert trajectory_points(dataclasses.replace(toy, s5_trajectory=90)) == [10, 20, 40, 60, 80, 90]
    assert trajectory_points(dataclasses.replace(toy, s5_trajectory=120)) == [10, 20, 40, 60, 80, 100, 120]


def test_the_last_point_takes_more_prompts_per_needle():
    from nblib.lccp import downstream as D
    b = get_budget("smoke")
    points = D.trajectory_points(b)
    suites = D.code_needle_suites(b, points)
    sizes = {p: {len(v) for v in s.values() if isinstance(v, list)} for p, s in suites.items()}
    assert sizes[points[-1]] == {b.needle_samples_last} and all(sizes[p] == {b.ruler_samples} for p in points[:-1])
    same = D.code_needle_suites(dataclasses.replace(b, needle_samples_last=None), points)
    assert all(s is same[points[0]] for s in same.values())  # unset: one suite at every point


def test_the_speed_index_times_the_reference_step_in_fp32_and_refuses_what_it_cannot_time():
    """The speed index (chapter 2) is a step rate of the reference's own shape, whatever precision
    the reference trains at; a budget with an external reference, or no steps, is refused."""
    import dataclasses

    import pytest

    from nblib.budgets import get_budget
    from nblib.lccp.speed_index import reference_step_rate
    smoke = get_budget("smoke")
    assert smoke.long_precision == "bf16"  # the reference trains in bf16; the index still times fp32
    r = reference_step_rate(smoke, steps=3, warmup=1)
    assert 0 < r < float("inf")
    with pytest.raises(ValueError, match="external reference.*allowed: kind 'nblib'"):
        reference_step_rate(get_budget("full"))
    with pytest.raises(ValueError, match="steps=0.*allowed steps >= 1"):
        reference_step_rate(dataclasses.replace(smoke), steps=0)
