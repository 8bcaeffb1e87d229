"""The scorecard (nblib.book.scorecard): every claim's verdict turns when a value is planted on
either side of its rule's threshold in a figures folder, each number is read from that folder,
and the page lists every claim."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nblib.book import scorecard as SC


def _put(root, chapter, name, df):
    (root / chapter).mkdir(parents=True, exist_ok=True)
    df.to_csv(root / chapter / f"{name}.csv", index=False)


def _r2(root, v):
    _put(root, "03_scaling_law", "fig03_r2_intervals", pd.DataFrame(
        {"split": ["S1-S3 → S4", "S1-S4 → S5"], "R²": [v, v + 0.01], "R² lo": [v - .1] * 2, "R² hi": [v + .05] * 2}))


def _table3(root, k):
    best = {"S4": "additive" if k >= 1 else "no_offset", "S5": "additive" if k >= 2 else "no_offset"}
    _put(root, "03_scaling_law", "table03_variant_ablation", pd.DataFrame(
        {"variant": ["additive", "no_offset"], **{f"{s} R²": [0.9 if best[s] == "additive" else 0.8,
                                                             0.8 if best[s] == "additive" else 0.9] for s in best}}))


def _ccc(root, v):
    _put(root, "04_constant_last4", "fig04b_ccc", pd.DataFrame(
        {"metric": ["longppl"], "rule": ["last4"], "CCC": [v], "mean gap to LD": [0.1]}))


def _protocols(root, share, who):
    """S1's 20 points: Raw 10; `who` (Last4 or LD) at or below Raw on `share` % of them."""
    rows, n = [], 20
    for i in range(n):
        low = i < round(share / 100 * n)
        rows += [{"scale": "S1", "Ds": 90, "Dl": i + 1, "seed": 0, "protocol": "Raw", "longppl": 10.0, "shortppl": 5},
                 {"scale": "S1", "Ds": 90, "Dl": i + 1, "seed": 0, "protocol": who,
                  "longppl": 9.0 if low else 11.0, "shortppl": 5}]
        if who == "LD":
            rows.append({"scale": "S1", "Ds": 90, "Dl": i + 1, "seed": 0, "protocol": "Last4", "longppl": 10.0,
                         "shortppl": 5})
    _put(root, "04_constant_last4", "protocols_s1_s4", pd.DataFrame(rows))


def _cl4(root, v):
    _put(root, "04_constant_last4", "table04_variant_ablation_cl4", pd.DataFrame(
        {"variant": ["additive"], "held-out S4 R²": [v], "S5 trajectory R²": [v + 0.01], "paper S4 R²": [0.97]}))


def _trajectory(root, sign):
    """S5's trajectory, Last4 LongPPL falling (sign -1) or rising (+1) with Dl; ShortPPL barely moves."""
    dl = np.arange(5, 155, 5.0)
    lp = 10 * (dl / 5) ** (0.3 * sign)
    sp = 5 * (dl / 5) ** (-0.01)
    _put(root, "04_constant_last4", "s5_trajectory", pd.DataFrame({"dl": dl, "protocol": "Last4", "longppl": lp,
                                                                   "shortppl": sp}))


def _prefix(root, v):
    _put(root, "04_constant_last4", "fig06_prefix_errors", pd.DataFrame(
        {"prefix": ["20N", "60N"], "LongPPL error at the end %": [50.0, v]}))


def _needles(root, sign, end_score):
    dl = [10.0, 20, 40, 60, 80, 100, 120, 150]
    rows = [{"dl": d, "protocol": p, "prompts": 100 if d == 150 else 20,
             "score": end_score if d == 150 else 0.0, "control_score": 0.0,
             "piece_hit": 0.5 + sign * 0.002 * d, "needle_gain": 1 + sign * 0.01 * d} for d in dl for p in ("Raw", "Last4")]
    _put(root, "05_downstream", "needle_trajectory", pd.DataFrame(rows))


def _table14(root, deltas):
    stages = ["4x extension", "long-context SFT", "long-context SFT, 2x budget"]
    _put(root, "05_downstream", "table14", pd.DataFrame(
        {"stage": ["LCCP"] + stages, "metric": "m", "Raw": 1.0, "Last4": 1.0, "Delta": [0.0] + deltas}))


def _retrieval(root, v):
    _put(root, "05_downstream", "retrieval_heads", pd.DataFrame(
        {"dl": [10.0, 10, 150, 150], "layer": 1, "head": [0, 1, 0, 1], "score": [0.2, 0.05, v, 0.01], "tracked": True}))


def _pair(root, v):
    _put(root, "06_models_ab", "gap_by_training_length", pd.DataFrame(
        {"fraction": [0.5, 1.0], "B - A": [-1.0, -v / 2], "95% lo": [-1.1, -v], "95% hi": [-0.9, v / 3]}))


def _kv(root, v):
    _put(root, "07_kv_cache", "kv_cache_bytes", pd.DataFrame(
        {"model": ["A", "B"], "tokens": [1, 1], "measured bytes": [100.0, 200 * (1 + v)], "formula bytes": [100.0, 200]}))


def _slow(root, v):
    """Four heads of 16 bands, 9 slow (an even spread: 9/16); each head's slow share 9/16 + v."""
    groups = ["fast"] + ["middle"] * 6 + ["slow"] * 9
    rows = []
    for h in range(4):
        slow = 9 / 16 + v
        rows += [{"layer": 0, "head": h, "band": j + 1, "group": g, "share": slow / 9 if g == "slow" else (1 - slow) / 7}
                 for j, g in enumerate(groups)]
    _put(root, "08_position", "band_weights", pd.DataFrame(rows))
    _put(root, "08_position", "band_groups", pd.DataFrame(
        {"row": ["blog: h=64, L=1024", "toy: h=32, L=256"], "fast": [6, 1], "middle": [12, 6], "slow": [14, 9],
         "complete a turn": [18, 7], "bands": [32, 16]}))


def _yarn(root, zero, ft):
    _put(root, "09_yarn", "yarn_intervals", pd.DataFrame(
        {"difference": ["plain RoPE - zero-shot YaRN, whole page", "zero-shot YaRN - fine-tuned, whole page"],
         "tokens": 1024, "ppl a": [10.0, 10.0], "ppl b": [10 - 10 * zero, 10 - 10 * ft],
         "a - b": [10 * zero, 10 * ft], "95% lo": [0.0, 0.0], "95% hi": [1.0, 1.0]}))


def _distance(root, ratio):
    _put(root, "10_attention", "head_measures", pd.DataFrame(
        {"model": ["Model A (GPT-2)", "Model B (Gemma 3-style)"], "layer": 0, "head": 0, "distance": [50 * ratio, 50.0],
         "first_position": 0.0, "separator": 0.0}))


def _induction(root, gap):
    _put(root, "10_attention", "induction_scores", pd.DataFrame(
        {"model": ["Model A (GPT-2)", "Model B (Gemma 3-style)"] * 2, "distance": [64, 64, 192, 192], "layer": 0,
         "head": 0, "score": [0.9, 0.9, 0.5 + gap / 2, 0.5 - gap / 2], "previous_token": 0.0}))


# (claim index in SC.CLAIMS, planter of a passing value, planter of a failing one)
PLANTS = [
    (0, lambda r: _r2(r, 0.9), lambda r: _r2(r, -0.5)),
    (1, lambda r: _table3(r, 2), lambda r: _table3(r, 0)),
    (2, lambda r: _ccc(r, 0.95), lambda r: _ccc(r, 0.3)),
    (3, lambda r: _protocols(r, 90, "Last4"), lambda r: _protocols(r, 20, "Last4")),
    (4, lambda r: _protocols(r, 90, "LD"), lambda r: _protocols(r, 20, "LD")),
    (5, lambda r: _cl4(r, 0.9), lambda r: _cl4(r, -0.4)),
    (6, lambda r: _trajectory(r, -1), lambda r: _trajectory(r, +1)),
    (7, lambda r: _prefix(r, -3.0), lambda r: _prefix(r, 30.0)),
    (8, lambda r: _trajectory(r, -1), lambda r: _trajectory(r, +1)),
    (9, lambda r: _needles(r, +1, 20.0), lambda r: _needles(r, -1, 20.0)),
    (10, lambda r: _needles(r, +1, 20.0), lambda r: _needles(r, +1, 0.0)),
    (11, lambda r: _table14(r, [0.5, 0.4, 0.3]), lambda r: _table14(r, [-0.5, 0.0, -0.1])),
    (12, lambda r: _retrieval(r, 0.9), lambda r: _retrieval(r, 0.05)),
    (13, lambda r: _pair(r, 0.03), lambda r: _pair(r, 0.4)),
    (14, lambda r: _kv(r, 0.0), lambda r: _kv(r, 0.1)),
    (15, lambda r: _slow(r, 0.1), lambda r: _slow(r, -0.1)),
    (16, lambda r: _yarn(r, 0.3, 0.1), lambda r: _yarn(r, -0.1, 0.1)),
    (17, lambda r: _yarn(r, 0.3, 0.1), lambda r: _yarn(r, 0.3, -0.1)),
    (18, lambda r: _distance(r, 1.6), lambda r: _distance(r, 0.8)),
    (19, lambda r: _induction(r, 0.8), lambda r: _induction(r, -0.3)),
]


def test_every_claim_has_a_planted_pair():
    assert sorted(i for i, _, _ in PLANTS) == list(range(len(SC.CLAIMS)))


@pytest.mark.parametrize("i, good, bad", PLANTS, ids=[SC.CLAIMS[i].claim[:40] for i, _, _ in PLANTS])
def test_a_planted_value_on_each_side_of_the_threshold_turns_the_verdict(tmp_path, i, good, bad):
    claim = SC.CLAIMS[i]
    good(tmp_path / "good")
    bad(tmp_path / "bad")
    verdict = {k: SC.scorecard(SC.Figures(tmp_path / k, "toy"), [claim]).iloc[0]
               for k in ("good", "bad")}
    assert verdict["good"].verdict == "reproduced", verdict["good"].toy
    assert verdict["bad"].verdict == "not", verdict["bad"].toy
    assert SC.scorecard(SC.Figures(tmp_path / "empty", "toy"), [claim]).iloc[0].verdict == "not measured"


@pytest.mark.parametrize("higher", [True, False])
def test_a_rule_names_its_thresholds_and_reads_partly_between_them(higher):
    r = SC.Rule(0.9, 0.5) if higher else SC.Rule(5, 20, higher=False, unit="%")
    assert r.verdict(0.7 if higher else 10) == "partly" and r.verdict(float("nan")) == "not measured"
    assert r.words() == ("reproduced ≥ 0.9; partly ≥ 0.5" if higher else "reproduced ≤ 5%; partly ≤ 20%")


def test_the_page_lists_every_claim_with_a_verdict(tmp_path):
    for _, good, _ in PLANTS:
        good(tmp_path)
    text = SC.scorecard_markdown(SC.Figures(tmp_path, "toy"))
    for c in SC.CLAIMS:
        assert SC._cell(c.claim) in text
    assert f"Verdicts: {len(SC.CLAIMS)} reproduced, 0 partly, 0 not, 0 not measured." in text


def test_the_host_spread_counts_the_book_grids_reruns_that_measured_the_column(tmp_path, monkeypatch):
    """Beside R² and S5's ρ, the page gives the spread over the design ladder's rows of the book's
    grid (its re-runs on other hosts), counting only the rows that measured that number, and
    nothing for a build that is not the toy's."""
    g = SC.GL.BOOK_GRID_DESIGN
    ladder = pd.DataFrame({"design": [g, f"{g}2", f"{g}3", "F"],
                           SC.GL.S5_RHO: [-0.967, -0.951, np.nan, 0.283],
                           **{c: [0.886, 0.874, 0.902, 0.5] for c in SC.GL.R2.values()}})
    monkeypatch.setattr(SC, "records", lambda name: ladder)
    _trajectory(tmp_path, -1)
    _r2(tmp_path, 0.9)
    toy = SC.Figures(tmp_path, "toy")
    assert SC._s5_trajectory(toy).shown.endswith("; 2 hosts: -0.967 to -0.951")
    assert SC._r2_law(toy).shown.endswith("; 3 hosts: 0.874 to 0.902 / 0.874 to 0.902")
    assert "hosts" not in SC._s5_trajectory(SC.Figures(tmp_path, "smoke")).shown
    monkeypatch.setattr(SC, "records", lambda name: ladder.iloc[[0, 3]])
    assert "hosts" not in SC._s5_trajectory(toy).shown
