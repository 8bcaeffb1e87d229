"""Chapter 5's tables (nblib.lccp.downstream) on hand-made inputs."""

import numpy as np
import pandas as pd
import pytest

from nblib.budgets import get_budget
from nblib.lccp import downstream as D


def test_points_are_the_papers_scaled():
    # multiple_scale 1 (in N(S1)); the toy's trajectory runs to 150, past the paper's last point
    assert D.trajectory_points(get_budget("toy")) == [10, 20, 40, 60, 80, 100, 120, 150]
    assert D.trajectory_points(get_budget("smoke")) == [0.2, 0.4, 0.8, 1.2, 1.6, 2.0, 2.4]
    assert D.trajectory_points(get_budget("full")) == list(D.PAPER_POINTS)


def test_retrieval_summary_counts_and_tracks():
    heads = pd.DataFrame({"dl": [1, 1, 1, 2, 2, 2], "layer": [0, 0, 1] * 2, "head": [0, 1, 0] * 2,
                          "score": [0.2, 0.05, 0.3, 0.4, 0.15, 0.0], "tracked": [True, False, True] * 2})
    s = D.retrieval_summary(heads)
    assert s["heads above threshold"].tolist() == [2, 2]
    assert np.allclose(s["tracked heads' mean"], [0.25, 0.2])
    assert np.allclose(s["best head"], [0.3, 0.4])


def test_table14_is_last4_minus_raw():
    longppl = pd.DataFrame({"dl_mult": [1, 1, 2, 2], "rule": ["raw", "last4"] * 2, "longppl": [10.0, 9.0, 8.0, 8.5]})
    ruler = pd.DataFrame({"dl": [1, 1, 1, 1, 2, 2], "protocol": ["Raw", "Raw", "Last4", "Last4", "Raw", "Last4"],
                          "task": ["a", "b", "a", "b", "a", "a"], "score": [10, 20, 30, 40, 5, 5]})
    t = D.table14_by_point(longppl, ruler)
    assert t["LCCP LongPPL"].tolist() == [-1.0, 0.5]
    assert t["RULER at the LCCP context"].tolist() == [20.0, 0.0]
    assert t["SFT average"].isna().all()
    # the paper's form: means over the points, Delta = Last4 - Raw, points counted
    sft = pd.DataFrame({"dl": [1, 1, 1, 1], "protocol": ["Raw", "Raw", "Last4", "Last4"], "seed": [0, 1, 0, 1],
                        "average": [10.0, 12.0, 13.0, 15.0]})
    p = D.table14(longppl, ruler, sft=sft)
    assert p.loc[("LCCP", "LongPPL (lower is better)"), "Raw"] == 9.0
    assert p.loc[("LCCP", "LongPPL (lower is better)"), "Delta"] == -0.25
    assert p.loc[("LCCP", "RULER, LCCP context"), "Delta"] == 10.0
    assert p.loc[("long-context SFT", "benchmark average")].tolist() == [11.0, 14.0, 3.0, 1]
    assert p.loc[("4x extension", "RULER, extended context"), "points"] == 0


def test_needle_lever_table_means_over_tasks_and_keeps_the_last_record():
    rows = []
    for task, score, gain, hit in (("a", 0.0, 0.1, 0.0), ("b", 30.0, 0.5, 0.5), ("c", 60.0, 0.9, 1.0)):
        rows.append(dict(layers=2, haystack_form="prose", key_form="word", length=64, dl=10, protocol="Raw", task=task,
                         score=score, needle_gain=gain, first_token_hit=hit))
    # a re-run of task "a" replaces the first record
    rows.append(dict(rows[0], score=90.0, needle_gain=1.1, first_token_hit=1.0))
    t = D.needle_lever_table(pd.DataFrame(rows))
    row = t.loc[(2, "prose", "word", "ruler", 64, 10, "Raw")]
    assert row["score"] == 60.0 and np.isclose(row["needle gain (nats/token)"], 2.5 / 3)
    assert np.isclose(row["first-token hit"], 2.5 / 3) and row["tasks"] == 3
    # another depth is another row, not a re-run
    deeper = D.needle_lever_table(pd.DataFrame(rows + [dict(rows[1], layers=4, score=0.0)]))
    assert deeper.loc[(2, "prose", "word", "ruler", 64, 10, "Raw"), "score"] == 60.0
    assert deeper.loc[(4, "prose", "word", "ruler", 64, 10, "Raw"), "score"] == 0.0
    with pytest.raises(ValueError, match="layers"):
        D.needle_lever_table(pd.DataFrame(rows).drop(columns=["layers"]))
    # the per-piece measures: averaged where recorded, NaN for records written before them
    newer = [dict(r, layers=4, value_piece_hit=h, whole_value_hit=float(h == 1.0))
             for r, h in zip(rows[:3], (0.5, 1.0, 0.0))]
    both = D.needle_lever_table(pd.DataFrame(rows + newer))
    assert np.isclose(both.loc[(4, "prose", "word", "ruler", 64, 10, "Raw"), "value-piece hit"], 0.5)
    assert np.isclose(both.loc[(4, "prose", "word", "ruler", 64, 10, "Raw"), "whole-value hit"], 1 / 3)
    assert np.isnan(both.loc[(2, "prose", "word", "ruler", 64, 10, "Raw"), "value-piece hit"])


def test_needle_lever_findings_reads_each_depth_between_its_own_points():
    from nblib.chapters.appendix.probe_findings import needle_lever_findings

    rows = [dict(layers=layers, haystack_form="code", key_form="magic", length=64, dl=dl, protocol=protocol,
                 task="a", score=score, needle_gain=gain, first_token_hit=hit)
            for layers, points in ((2, (10, 120)), (4, (10, 30)))
            for dl, score, gain, hit in zip(points, (0.0, 0.0 if layers == 2 else 20.0), (1.0, 0.5), (0.25, 0.5))
            for protocol in ("Raw", "Last4")]
    text = needle_lever_findings(D.needle_lever_table(pd.DataFrame(rows)))
    assert "2 layers, haystack `code`, key `magic`, ruler values, 64 tokens: score 0.0 (Raw) / 0.0 (Last4) at Dl/N = 120" in text
    assert "4 layers, haystack `code`, key `magic`, ruler values, 64 tokens: score 20.0 (Raw) / 20.0 (Last4) at Dl/N = 30" in text
    assert "+1.00 -> +0.50" in text and "25% -> 50%" in text and "(Raw, Dl/N = 10 -> 30)" in text
    assert "Answered (score > 0): 2 of 8" in text and "value piece" not in text  # not recorded
    for r in rows:
        r.update(value_piece_hit=0.75, whole_value_hit=0.5)
    text = needle_lever_findings(D.needle_lever_table(pd.DataFrame(rows)))
    assert "a value piece is the argmax on 75% of pieces and every piece on 50% of prompts (Raw, Dl/N = 30)" in text


def test_needle_lever_table_keeps_value_forms_and_controls_apart():
    base = dict(layers=2, haystack_form="code", key_form="magic", length=64, dl=10, protocol="Raw", task="a",
                score=0.0, needle_gain=0.5, first_token_hit=0.5)
    t = D.needle_lever_table(pd.DataFrame([base, dict(base, value_form="short", score=40.0, control_score=5.0)]))
    assert t.loc[(2, "code", "magic", "ruler", 64, 10, "Raw"), "score"] == 0.0  # an old record: RULER's values
    assert np.isnan(t.loc[(2, "code", "magic", "ruler", 64, 10, "Raw"), "control score"])
    assert t.loc[(2, "code", "magic", "short", 64, 10, "Raw"), "control score"] == 5.0


def test_needle_trajectory_means_over_the_three_needles_per_point_and_protocol():
    rows = [dict(dl=dl, protocol=p, task=t, score=s, control_score=0.0, piece_hit=h, needle_gain=g,
                 first_hit=h, whole_hit=0.0)
            for dl in (10, 20) for p in ("Raw", "Last4")
            for t, s, h, g in (("a", 10.0 * dl, 0.1, 1.0), ("b", 0.0, 0.4, 2.0), ("c", 20.0, 0.7, 3.0))]
    t = D.needle_trajectory(pd.DataFrame(rows))
    assert list(t.columns) == ["dl", "protocol", "score", "control_score", "piece_hit", "needle_gain"]
    row = t.set_index(["dl", "protocol"]).loc[(20, "Last4")]
    assert np.isclose(row.score, 220 / 3) and np.isclose(row.piece_hit, 0.4) and np.isclose(row.needle_gain, 2.0)
    assert len(t) == 4


def test_needle_trajectory_findings_give_rank_correlations_and_the_control():
    from nblib.chapters.part1.downstream_findings import needle_trajectory_findings

    traj = pd.DataFrame([dict(dl=dl, protocol=p, score=s, control_score=1.0, piece_hit=h, needle_gain=g)
                         for p in ("Raw", "Last4")
                         for dl, s, h, g in ((10, 5.0, 0.2, 1.0), (20, 15.0, 0.3, 0.9), (40, 25.0, 0.5, 1.2))])
    text = needle_trajectory_findings(traj, traj[traj.dl == 40])
    assert "Last4, Dl/N = 10 -> 40: per-piece hit rate 0.20 -> 0.50 (Spearman rho +1.00)" in text
    assert "needle gain +1.00 -> +1.20 nats per value token (rho +0.50)" in text
    assert "score 5.0 -> 25.0 against the control's 1.0 -> 1.0" in text
    assert "After the 4x extension" in text and "Last4 Dl/N = 40: 25.0 (1.0)" in text


def test_needle_design_table_reads_the_ladder_designs_only():
    base = dict(layers=2, haystack_form="code", key_form="magic", value_form="short", length=64, dl=10,
                protocol="Last4", score=30.0, control_score=0.0, value_piece_hit=0.5, needle_gain=1.0)
    rows = [dict(base, budget="toy", task="a"),  # the book's own trajectory: chapter 5's lever table
            dict(base, budget="data/probes/grid_designs/K.toml", task="a"),
            dict(base, budget="data/probes/grid_designs/K.toml", task="b", score=60.0, value_piece_hit=1.0),
            dict(base, budget="data/probes/grid_designs/L.toml", task="a", dl=120)]
    t = D.needle_design_table(pd.DataFrame(rows))
    assert list(t.index.get_level_values("design").unique()) == ["K", "L"]
    k = t.loc[("K", "code", "magic", "short", 10, "Last4", 20)]
    assert k.score == 45.0 and k.piece_hit == 0.75 and k.tasks == 2
    # binomial SE of a mean of two needles at 20 prompts: sqrt(.3*.7/20 + .6*.4/20) / 2 = 0.075
    assert k.score_se == pytest.approx(7.5)
    # a re-measure with more prompts is a row of its own, not a replacement
    t2 = D.needle_design_table(pd.DataFrame(rows + [dict(rows[1], n=100, score=10.0)]))
    assert t2.loc[("K", "code", "magic", "short", 10, "Last4", 20)].score == 45.0
    assert t2.loc[("K", "code", "magic", "short", 10, "Last4", 100)].score == 10.0
    assert "best_retrieval_head" not in t  # records from before the probe scored heads
    assert D.needle_design_table(pd.DataFrame(rows[:1])).empty
    # the best retrieval head is Fig. 18's: niah_single_2's, not the mean over the needles
    heads = [dict(r, retrieval_best=0.2 * (i + 1), task="niah_single_2_code" if i == 2 else r["task"])
             for i, r in enumerate(rows)]
    t = D.needle_design_table(pd.DataFrame(heads))
    assert t.loc[("K", "code", "magic", "short", 10, "Last4", 20)].best_retrieval_head == pytest.approx(0.6)
    assert np.isnan(t.loc[("L", "code", "magic", "short", 120, "Last4", 20)].best_retrieval_head)  # no niah_single_2 row


def test_needle_design_findings_read_last4_from_first_to_last_point():
    from nblib.chapters.appendix.probe_findings import needle_design_findings

    base = dict(layers=2, haystack_form="code", key_form="magic", value_form="short", length=64, control_score=5.0,
                task="a", budget="data/probes/grid_designs/K.toml")
    rows = [dict(base, dl=dl, protocol=p, score=10.0 * i, value_piece_hit=0.1 * (3 - i if p == "Raw" else i),
                 needle_gain=0.2 * i) for p in ("Raw", "Last4") for i, dl in enumerate((10, 40, 120))]
    text = needle_design_findings(D.needle_design_table(pd.DataFrame(rows)))
    assert text.count("Design K") == 1 and "Last4, Dl/N = 10 -> 120: score 0.0 ± 0.0 -> 20.0 ± 8.9 (control 5.0 -> 5.0)" in text
    assert "per-piece hit 0.00 -> 0.20, rho +1.00" in text and "needle gain +0.00 -> +0.40 nats per value token." in text
    rows = [dict(r, task="niah_single_2_code", retrieval_best=0.3 + r["dl"] / 200) for r in rows]
    text = needle_design_findings(D.needle_design_table(pd.DataFrame(rows)))
    assert "nats per value token, best retrieval head 0.35 -> 0.90." in text
    more = [dict(rows[-1], n=100, score=30.0)]  # one point re-measured with 100 prompts: a line of its own
    text = needle_design_findings(D.needle_design_table(pd.DataFrame(rows + more)))
    assert text.count("Design K") == 2 and "Last4, Dl/N = 10 -> 120: score 0.0 ± 0.0 -> 20.0 ± 8.9" in text
    assert "Last4 at Dl/N = 120 only, 100 prompts per needle: score 30.0 ± 4.6 (control 5.0)" in text
    assert "peak" not in text  # every trajectory above rises to its end
    hump = [dict(r, score=40.0) if r["dl"] == 40 else r for r in rows]  # a score that peaks mid-way is named
    text = needle_design_findings(D.needle_design_table(pd.DataFrame(hump)))
    assert "score 0.0 ± 0.0 -> 20.0 ± 8.9 (control 5.0 -> 5.0), peak 40.0 ± 11.0 at Dl/N = 40," in text


def test_needle_trajectory_findings_name_a_constant_measure_instead_of_a_nan_rho():
    from nblib.chapters.part1.downstream_findings import needle_trajectory_findings

    traj = pd.DataFrame([dict(dl=dl, protocol="Last4", score=0.0, control_score=0.0, piece_hit=h, needle_gain=g)
                         for dl, h, g in ((10, 0.2, 1.0), (20, 0.3, 1.5), (40, 0.5, 1.2))])
    text = needle_trajectory_findings(traj)
    assert "(rho undefined: constant)" in text and "nan" not in text and "rho +1.00" in text

