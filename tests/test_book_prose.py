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

from nblib.budgets import SCALES, get_budget, grid_f  # noqa: E402
from nblib.chapters import budget_words  # noqa: E402
from nblib.chapters.appendix import grid_ladder_findings  # noqa: E402
from nblib.chapters.figures import token_ticks  # noqa: E402
from nblib.chapters.part1 import law_findings, metric_figures  # noqa: E402
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
    text = grid_ladder_findings.book_grid_findings(t, now="V")
    assert "**F** (row F3): S5's Last4 LongPPL 14.95 at 30 -> 17.86 at 120 (rho +0.28)" in text
    assert "Part 1 117.0 min" in text and "F no, V yes" in text
    t.loc[2, "S5 Last4 rho(Dl, LongPPL)"] = -0.79  # past the -0.8 target: V no longer meets it
    assert "F no, V no" in grid_ladder_findings.book_grid_findings(t, now="V")


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
    assert "every exponent inside its bounds" in law_findings.degenerate_fit_findings(power)
    flat = scaling.holdout_evals(_law_table(True), splits)
    floor = scaling.floor_exponents(flat["S1-S3 → S4"].fit)
    assert floor and set(floor) <= {"alpha", "beta_s", "beta_l"}
    text = law_findings.degenerate_fit_findings(flat)
    assert "at the search floor" in text and "log-linear in" in text


def test_table3_verdict_turns_when_another_form_beats_the_additive_one():
    t = pd.DataFrame({"variant": ["additive", "no_offset"], "S4 R²": [0.95, 0.90], "S5 R²": [0.93, 0.96],
                      "paper S4 R²": [0.9663, 0.7995], "paper S5 R²": [0.9516, -0.1031]})
    text = law_findings.table3_verdict(t)
    assert "Held out S4: best here **additive** (R² 0.950); additive 0.950 (as in the paper)." in text
    assert "Held out S5: best here **no_offset**" in text and "does not hold at this budget on S5" in text
    t.loc[0, "S5 R²"] = 0.97
    assert "does not hold" not in law_findings.table3_verdict(t)


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
    from nblib.lccp import grid
    smoke = dataclasses.replace(get_budget("smoke"), long_precision="bf16")
    assert grid.reference_config(smoke).precision == "bf16"  # the reference trains in bf16; the index times fp32
    r = reference_step_rate(smoke, steps=3, warmup=1)
    assert 0 < r < float("inf")
    with pytest.raises(ValueError, match="external reference.*allowed: kind 'nblib'"):
        reference_step_rate(get_budget("full"))
    with pytest.raises(ValueError, match="steps=0.*allowed steps >= 1"):
        reference_step_rate(dataclasses.replace(smoke), steps=0)


# ---------------------------------------------------------------------------------------
# Facts the prose names against the budget and the disk (issue 64, "stale facts"): a context
# length, the LongPPL chunk, the book's grid among the design ladder's rows, a file
# ---------------------------------------------------------------------------------------
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import jupytext  # noqa: E402

from nblib.probes import grid_ladder as GL  # noqa: E402
from nblib.probes import records  # noqa: E402
from nblib.store.provenance import REPO_ROOT  # noqa: E402

NOTEBOOKS = REPO_ROOT / "notebooks"
# the chapters whose prose describes the toy's own setup and its design (Part 1 and appendices A-B)
PROSE_CHAPTERS = ("02_setup", "03_scaling_law", "04_constant_last4", "05_downstream", "11_toy_design",
                  "12_toy_ladders")
KERNEL_CSV = REPO_ROOT / "figures" / "02_setup" / "cpu_kernel_spread.csv"


def _cells(name: str, kind: str) -> str:
    """The sources of one chapter's cells of one kind ("markdown": its static prose; "code")."""
    return "\n".join(c.source for c in jupytext.read(NOTEBOOKS / f"{name}.py").cells if c.cell_type == kind)


def _prose(name: str) -> str:
    return re.sub(r"\s+", " ", _cells(name, "markdown"))  # a phrase may wrap across comment lines


@pytest.mark.parametrize("name", PROSE_CHAPTERS)
def test_every_context_length_the_prose_names_is_one_the_toy_budget_has(name):
    """"a 256-token context" at a toy whose contexts are 128 / 1,024 / 4,096: a context length
    typed into the prose must be one of the budget's (the book's default is toy)."""
    toy = get_budget("toy")
    contexts = {toy.short_seq_len, toy.long_seq_len, toy.ext_seq_len}
    named = {int(m.replace(",", "")) for m in re.findall(r"(\d[\d,]*)-token context\b", _prose(name))}
    assert named <= contexts, f"{name} names a {sorted(named - contexts)}-token context; toy's are {sorted(contexts)}"


def test_the_short_documents_line_reads_the_lccp_target_from_the_budget():
    """Chapter 2's Table 9 line: the bucket under half the LCCP target, with the target read
    from the budget (1,024 at toy, not the 256 the prose once typed) and the repeat factor
    from the table."""
    toy = get_budget("toy")
    assert "budget_words.short_documents_words(b, mix)" in _cells("02_setup", "code")
    half = toy.long_seq_len // 2
    mix = pd.DataFrame({"bucket": [f"<{half}", f">={half}"], "paper 32K mix": [0.5257, 0.4743],
                        "natural mix": [0.0066, 0.9934], "n_docs": [333, 1265], "n_tokens": [72_915, 11_002_774]})
    text = budget_words.short_documents_words(toy, mix)
    assert f"the LCCP target is {toy.long_seq_len:,} tokens: 333 documents" in text and f"(bucket <{half})" in text
    assert "0.7% of the tokens" in text and "80 times as often" in text and "256" not in text
    same = budget_words.short_documents_words(toy, mix.assign(**{"natural mix": mix["paper 32K mix"]}))
    assert "times as often" not in same  # a budget on Table 9's own shares repeats nothing
    longer = dataclasses.replace(toy, long_seq_len=2048)
    assert "the LCCP target is 2,048 tokens" in budget_words.short_documents_words(longer, mix)


@pytest.mark.parametrize("name", ["smoke", "toy", "full"])
def test_the_copy_curve_distance_is_past_two_local_chunks_and_fits_twice_in_the_context(name):
    b = get_budget(name)
    d, spec = budget_words.far_copy_distance(b), b.longppl
    assert d > 2 * spec.trunc_len and 2 * d <= b.long_seq_len
    assert d >= 2 * (spec.trunc_len + spec.sliding_window)  # past two whole chunk windows, not only two chunks
    words = budget_words.far_copy_words(b)
    assert f"distance {d:,}, just past two local chunks" in words and f"trunc_len {spec.trunc_len:,}" in words


def test_a_copy_distance_capped_by_the_context_does_not_claim_two_chunks():
    toy = get_budget("toy")
    wide = dataclasses.replace(toy, longppl=dataclasses.replace(toy.longppl, trunc_len=256))
    d = budget_words.far_copy_distance(wide)
    assert d == wide.long_seq_len // 2
    words = budget_words.far_copy_words(wide)
    assert "just past two local chunks" not in words and "do not fit twice" in words


def test_chapter3_measures_its_copy_curve_at_the_budget_distance_and_names_it_from_the_budget():
    """Chapter 3 once typed "distance 64, just past two local chunks" and measured at
    min(64, L // 2) while toy's chunk is 128: the distance, the measured segment lengths and the
    words must all come from `budget_words.far_copy_distance`."""
    code, prose = _cells("03_scaling_law", "code"), _prose("03_scaling_law")
    assert "far = budget_words.far_copy_distance(b)" in code and "budget_words.far_copy_words(b)" in code
    assert not re.search(r"min\(\d+, L // 2\)", code), "a copy distance typed as a number"
    assert "d = far\n" in code and "copy_distance=far)" in code
    assert not re.search(r"distance \d", prose), "the prose types a copy distance; generate it from the budget"
    seg_line = next(line for line in code.splitlines() if line.startswith("seg_lens = "))
    for name in ("smoke", "toy", "full"):
        b = get_budget(name)
        far = budget_words.far_copy_distance(b)
        seg_lens = eval(seg_line.split("=", 1)[1], {"L": b.long_seq_len, "far": far})  # the chapter's own line
        assert far in seg_lens and all(2 * s <= b.long_seq_len for s in seg_lens)


@pytest.mark.parametrize("name", PROSE_CHAPTERS)
def test_the_prose_names_the_book_grid_as_the_ladder_does(name):
    """"Why the book's grid is V", "V became the book's grid": the book's grid is
    `grid_ladder.BOOK_GRID_DESIGN` (Vc), and a design the prose says it descends from must be in
    its lineage in the ladder."""
    prose, book = _prose(name), GL.BOOK_GRID_DESIGN
    ladder = records("toy_grid_ladder")
    for pattern in (r"book's (?:toy )?grid is (?:design )?\**([A-Z][A-Za-z0-9]*)\b",
                    r"\b([A-Z][A-Za-z0-9]*) became the book's (?:toy )?grid"):
        for named in re.findall(pattern, prose):
            assert named == book, f"{name} calls {named} the book's grid; it is {book}"
    for origin in re.findall(r"book's (?:toy )?grid descends from (?:design )?([A-Z][A-Za-z0-9]*)\b", prose):
        assert origin in budget_words.grid_lineage(ladder, book), (name, origin)
    assert "Why the book's grid is V\n" not in _cells(name, "markdown") + "\n"


def test_the_book_grid_words_follow_the_ladder():
    ladder = records("toy_grid_ladder")
    lineage = budget_words.grid_lineage(ladder, GL.BOOK_GRID_DESIGN)
    assert lineage[0] == GL.BOOK_GRID_DESIGN and "V" in lineage and lineage.index("F") > lineage.index("V")
    text = budget_words.book_grid_words(ladder, origin="V")
    assert text.startswith(f"The book's grid is design **{GL.BOOK_GRID_DESIGN}**: V changed by")
    assert all(f" {d} (" in text for d in lineage[:lineage.index("V")])
    with pytest.raises(ValueError, match="does not descend from design Z3"):
        budget_words.book_grid_words(ladder, origin="Z3")
    toy_ladder = pd.DataFrame({"design": ["F", "V", "Vb"], "change": ["as E, ...", "design F's ...", "V with bf16"]})
    assert budget_words.grid_lineage(toy_ladder, "Vb") == ["Vb", "V", "F"]
    assert budget_words.book_grid_words(toy_ladder, origin="V", design="V") == "The book's grid is design **V** itself."


def test_no_chapter_names_a_kernel_spread_table_that_does_not_exist():
    """Chapter 2 said chapters 2-4 were re-run under AVX2 and that both spread tables are read
    from the committed outputs, while figures/02_setup/cpu_kernel_spread.csv was long gone."""
    if not KERNEL_CSV.is_file():
        for name in PROSE_CHAPTERS:
            prose = _prose(name)
            assert KERNEL_CSV.name not in prose, f"{name} names {KERNEL_CSV.name}, which does not exist"
            assert "a second time under AVX2" not in prose and "Both tables are read" not in prose, name
    code = _cells("02_setup", "code")
    assert "if kernel_csv.is_file():" in code and "No run-by-run comparison of two executions" in code


def test_the_spread_of_the_book_grid_is_named_by_what_varied(monkeypatch):
    """Chapter 2's precision-and-kernel spread: the ladder's rows of the book's grid (Vc and its
    AVX2-fp32 repeat Vb2), never called a host spread when one host ran them."""
    assert "budget_words.grid_repeats_words(ladder)" in _cells("02_setup", "code")
    ladder = records("toy_grid_ladder")
    rows = list(GL.book_grid_rows(ladder)["design"])
    text = budget_words.grid_repeats_words(ladder)
    assert all(f"**{d}**" in text for d in rows) and "`data/probes/toy_grid_ladder.csv`" in text
    assert f"What varied between them: {GL.what_varied(rows)}." in text
    ran = [GL.RAN_ON.get(d) for d in rows]
    if None not in ran and len({r[0] for r in ran}) == 1 and len({r[1] for r in ran}) > 1:
        assert "not a host spread" in text
    monkeypatch.setattr(GL, "RAN_ON", {d: (f"host {i}", "fp32") for i, d in enumerate(rows)})
    assert "not a host spread" not in budget_words.grid_repeats_words(ladder)
    monkeypatch.setattr(GL, "RAN_ON", {d: ("one host", "fp32") for d in rows})  # nothing varied but the code
    assert "precision-and-instruction-set spread" not in budget_words.grid_repeats_words(ladder)
    alone = ladder[ladder.design == GL.BOOK_GRID_DESIGN]
    assert "no repeat of it is measured" in budget_words.grid_repeats_words(alone)


def test_appendix_a_says_which_design_takes_longer_only_as_the_ladder_times_it():
    """"V trains wider models ... so its Part 1 takes longer" while the book's grid's row (Vc,
    bf16) timed Part 1 faster than F's latest: a claim on Part 1's minutes must match the rows."""
    ladder = records("toy_grid_ladder")
    f, now = (GL.book_grid_rows(ladder, d).iloc[-1][GL.PART1_MIN] for d in ("F", GL.BOOK_GRID_DESIGN))
    if "Part 1 takes longer" in _prose("11_toy_design"):
        assert float(now) > float(f), f"the book's grid timed {now} min against F's {f}"


@pytest.mark.parametrize("name", PROSE_CHAPTERS)
def test_every_file_the_prose_names_exists(name):
    """A path in backticks (`data/probes/x.jsonl`), or a bare record or table name, is on disk:
    in the repository, data/probes/ or a chapter's figures folder."""
    prose = _prose(name)
    for path in re.findall(r"`([\w./-]+/[\w.-]+\.(?:csv|jsonl|toml|json|py))`", prose):
        assert (REPO_ROOT / path).exists(), f"{name} names {path}"
    for bare in re.findall(r"`([\w-]+\.(?:csv|jsonl))`", prose):
        found = (REPO_ROOT / "data" / "probes" / bare).exists() or any((REPO_ROOT / "figures").glob(f"*/{bare}"))
        assert found, f"{name} names {bare}"


def test_the_chunk_share_the_prose_names_is_the_budgets():
    """"the chunk is 1/8 of the long context": printed from the budget now; a share typed in
    the prose must be toy's."""
    toy = get_budget("toy")
    for name in PROSE_CHAPTERS:
        for n in re.findall(r"chunk is 1/(\d+)", _prose(name)):
            assert toy.longppl.trunc_len * int(n) == toy.long_seq_len, name
    assert "spec.trunc_len / b.long_seq_len" in _cells("02_setup", "code")
