"""Chapter 2's toy-design evidence (nblib.chapters.appendix.toy_design) on records whose answers are known."""

import numpy as np
import pandas as pd
import pytest

from nblib.chapters.appendix import toy_design as TD


def _record(batch, lr, losses, gains, seq_len=128, steps=(100, 200, 300, 400)):
    return {"name": "t", "d": 48, "layers": 4, "heads": 4, "kv": 2, "seq_len": seq_len, "batch": batch, "lr": lr,
            "tokens": steps[-1] * batch * seq_len, "steps": steps[-1], "n_params": 1000, "wall_s": 1.0,
            "points": [{"step": s, "heldout_loss": l, "copy_gain": {"32": g, "64": g / 2}}
                       for s, l, g in zip(steps, losses, gains)]}


RECORDS = pd.DataFrame([
    _record(8, 1e-2, [4.0, 3.8, 3.7, 3.69], [0.1, 0.5, 1.2, 1.5]),  # copies from step 300; flat second half
    _record(32, 1e-2, [3.9, 3.5, 3.3, 3.1], [0.0, 0.1, 0.2, 0.3], steps=(25, 50, 75, 100)),  # never copies
])


def test_table_has_one_row_per_point_with_tokens():
    t = TD.lr_batch_table(RECORDS)
    assert len(t) == 8
    assert list(t["tokens"][:4]) == [s * 8 * 128 for s in (100, 200, 300, 400)]
    assert {"copy gain @32", "copy gain @64"} <= set(t.columns)


def test_summary_finds_onset_best_and_flat_runs():
    s = TD.lr_batch_summary(TD.lr_batch_table(RECORDS)).set_index("batch")
    assert s.loc[8, "copies from step"] == 300 and s.loc[8, "copies from tokens"] == 300 * 8 * 128
    assert np.isnan(s.loc[32, "copies from step"])
    assert abs(s.loc[8, "fall over the second half"] - (3.8 - 3.69)) < 1e-12
    assert s.loc[32, "max copy gain @32"] == 0.3
    text = TD.lr_batch_findings(TD.lr_batch_summary(TD.lr_batch_table(RECORDS)))
    assert "lowest held-out loss after 0.4M tokens is 3.100, at batch 32" in text
    assert "the larger batch wins (8: 3.690, 32: 3.100" in text
    assert "batch 8, LR 0.01 from step 300" in text


def test_copy_mix_runs_are_their_own_shape():
    mixed = dict(_record(8, 1e-2, [4.0, 3.9, 3.8, 3.7], [0.0, 0.0, 0.1, 0.2]), copy_fraction=0.05)
    t = TD.lr_batch_table(pd.DataFrame([*RECORDS.to_dict("records"), mixed]))
    assert set(t["shape"]) == {"d48 x 4 layers, 4 heads", "d48 x 4 layers, 4 heads, 5% copy mix"}
    s = TD.lr_batch_summary(t)
    assert len(s) == 3  # the mixed run is not averaged into the plain batch-8 run


def test_grid_cost_counts_the_papers_stages():
    gflops = 10.0
    c = TD.copying_grid_cost([("S1", 48, 4, 4, 2), ("S5", 48, 4, 4, 2)], gflops, (9.0, 18.0), (1.0, 2.0), n_seeds=2)
    tok = c.set_index(["scale", "stage"])["tokens"]
    # trunk to 8/9 of the largest Ds, plus a ninth of every Ds for its decay
    assert tok[("S1", "short (trunk + decays)")] == int(18 * 8 / 9 + 27 / 9)
    assert tok[("S1", "Linear-Decay LCCP")] == 2 * 3  # every (Ds, Dl)
    assert tok[("S1", "Constant LCCP")] == 2 * 2 * 2  # seeds x Ds x the largest Dl
    assert tok[("S5", "Linear-Decay LCCP")] == 1 + 2  # the diagonal
    assert tok[("S5", "Constant LCCP")] == 2 * 2  # one trajectory of twice the largest Dl
    # minutes are tokens x FLOPs per token / rate, shared by two cores; LCCP tokens cost more (8x context)
    f_short = TD._flops(48, 4, 4, 2, 128)
    row = c[(c.scale == "S1") & (c.stage == "short (trunk + decays)")].iloc[0]
    assert np.isclose(row["core-minutes"], 19 * f_short / (gflops * 1e9) / 60)
    assert np.isclose(row["wall minutes (2 cores)"], row["core-minutes"] / 2)
    assert TD._flops(48, 4, 4, 2, 1024) > f_short


def test_lccp_table_and_ladder_verdict():
    lccp = TD.lccp_copy_table(pd.DataFrame([{
        "parent": "x", "d": 64, "layers": 4, "heads": 4, "n_params": 5, "long_seq_len": 1024, "rope_base": 5e5,
        "points": [{"step": 0, "tokens": 0, "copy_gain": {"32": 2.0, "128": 1.0, "256": 0.8, "512": 0.3}},
                   {"step": 10, "tokens": 1000, "copy_gain": {"32": 2.5, "128": 1.5, "256": 1.2, "512": 0.4}}]}]))
    assert lccp.loc[("d64 x 4 layers, heads of 16", 1000), "copy gain @256"] == 1.2
    summary = TD.lr_batch_summary(TD.lr_batch_table(pd.DataFrame([
        {**_record(16, 5e-3, [4.0, 3.8, 3.7, 3.6], [0.1, 0.5, 1.2, 1.5]), "d": 64, "n_params": 2000},
        {**_record(16, 5e-3, [4.0, 3.8, 3.7, 3.6], [0.1, 0.1, 0.2, 0.2]), "d": 32, "n_params": 500}])))
    costs = pd.DataFrame({"short (trunk + decays) (min)": [30.0], "total (min, 2 cores)": [120.0]},
                         index=pd.Index(["a"], name="design"))
    text = TD.ladder_findings(summary, lccp, costs, budget_min=60)
    assert "(N 2,000) from 0.6M tokens (step 300)" in text  # 300 steps x 16 x 128
    assert "(N 500) not within 1M tokens (largest gain 0.20)" in text
    assert "0.80 (before LCCP) -> 1.20" in text and "LCCP carries copying to twice the short context" in text
    assert "2.0x over the budget" in text and "75% of it" in text


def _ablation(variant, seed, gains, losses=(4.5, 4.2, 4.0, 3.9), d=32, heads=2):
    return {**_record(32, 1e-2, list(losses), list(gains)), "name": f"ablation-d{d}", "variant": variant,
            "seed": seed, "d": d, "layers": 2, "heads": heads, "kv": 1, "n_params": 20 * d, "wall_s": 50.0 + seed}


def test_smear_ablation_summary_and_verdict():
    """Plain runs stay below the bar and smeared ones pass it: the verdict says so, with the
    ranges over seeds at the last point; rows are ordered by width, then plain before smeared."""
    rec = pd.DataFrame([_ablation("smeared", 0, [0.1, 1.5, 2.5, 2.8]), _ablation("plain", 0, [0.0, 0.1, 0.0, -0.02]),
                        _ablation("plain", 1, [0.0, 0.0, 0.05, 0.04]), _ablation("smeared", 1, [0.0, 1.0, 2.0, 2.2]),
                        _ablation("plain", 0, [0.0] * 4, d=48, heads=3), _ablation("smeared", 0, [0, 1, 2, 3], d=48, heads=3)])
    table = TD.smear_ablation_table(rec)
    assert len(table) == 24 and table["shape"].iloc[0] == "d32 x 2 layers, 2 heads of 16, 1 KV head"
    s = TD.smear_ablation_summary(table)
    assert list(zip(s["variant"], s["seed"]))[:4] == [("plain", 0), ("plain", 1), ("smeared", 0), ("smeared", 1)]
    assert list(s["copy gain @32"][:4]) == [-0.02, 0.04, 2.8, 2.2] and set(s["tokens"]) == {400 * 32 * 128}
    text = TD.smear_ablation_findings(s)
    assert text.count("only the smeared model copies") == 2
    assert "copy gain @32 -0.02 to 0.04 nats plain, 2.20 to 2.80 smeared" in text


def test_smear_ablation_rejects_other_records():
    with pytest.raises(ValueError, match=r"lack columns \['seed', 'variant'\].*--variant"):
        TD.smear_ablation_table(RECORDS)


def test_lccp_rope_drops_and_s2_heads_table_known_answers():
    """The RoPE-base probe's drop of log LongPPL between two Dl points, its spread across scales
    (NaN with one scale), and the S2 head table's 'falls with Ds' verdict, on made-up records."""
    from nblib.chapters.appendix.toy_design import lccp_rope_drops, lccp_rope_table, s2_heads_table

    def rec(scale, base, ds, l10, l30, heads=1, hs=32):
        return {"scale": scale, "ds_mult": ds, "lr": 3e-4, "lr_frac": 0.03, "rope_base": base, "weight_decay": 0.1,
                "heads": heads, "head_size": hs,
                "points": [{"dl_mult": 10, "longppl": l10, "shortppl": 5.0}, {"dl_mult": 30, "longppl": l30, "shortppl": 4.0}]}
    recs = pd.DataFrame([rec("S1", 5e7, 270, np.e ** 3.4, np.e ** 3.2), rec("S4", 5e7, 270, np.e ** 3.0, np.e ** 2.7),
                         rec("S1", 5e5, 270, np.e ** 3.3, np.e ** 3.2)])
    drops = lccp_rope_drops(lccp_rope_table(recs), 0.03, 270, 10, 30)
    assert np.allclose(drops.loc[5e7, ["S1", "S4"]].to_numpy(float), [0.2, 0.3])
    assert np.isclose(drops.loc[5e7, "spread across scales"], 0.1) and np.isnan(drops.loc[5e5, "spread across scales"])
    s2 = pd.DataFrame([rec("S2", 5e7, ds, l10, l30, heads=h) for h, vals in ((1, (30, 29, 28)), (2, (30, 31, 28)))
                       for ds, l10, l30 in zip((90, 180, 270), vals, (20, 19, 18))])
    t = s2_heads_table(lccp_rope_table(s2, extra=("heads", "head_size")), 0.03)
    assert t.loc["1 x 32", "falls with Ds at every Dl"] and not t.loc["2 x 32", "falls with Ds at every Dl"]
    assert np.isclose(t.loc["2 x 32", "log LongPPL, Dl 10, Ds 180"], np.log(31))


def test_lccp_rate_drops_one_row_per_rate_at_one_base():
    from nblib.chapters.appendix.toy_design import lccp_rate_drops, lccp_rope_table

    def rec(scale, frac, base, l10, l30):
        return {"scale": scale, "ds_mult": 270, "lr": 1e-2 * frac, "lr_frac": frac, "rope_base": base,
                "weight_decay": 0.1,
                "points": [{"dl_mult": 10, "longppl": np.e ** l10, "shortppl": 5.0},
                           {"dl_mult": 30, "longppl": np.e ** l30, "shortppl": 4.0}]}
    recs = pd.DataFrame([rec("S1", 0.03, 5e7, 3.4, 3.2), rec("S4", 0.03, 5e7, 3.0, 2.7),
                         rec("S1", 0.10, 5e7, 3.2, 3.3), rec("S4", 0.10, 5e7, 2.9, 2.95),
                         rec("S1", 0.05, 5e5, 3.3, 3.2)])  # another base: not a row
    t = lccp_rate_drops(lccp_rope_table(recs), 5e7, 270, 10, 30)
    assert t.index.tolist() == [0.03, 0.10] and t.index.name == "LCCP LR / short LR"
    assert np.allclose(t.loc[0.03, ["S1", "S4"]].to_numpy(float), [0.2, 0.3])
    assert np.allclose(t.loc[0.10, ["S1", "S4", "spread across scales"]].to_numpy(float), [-0.1, -0.05, 0.05])


def test_grid_ladder_names_what_each_design_meets_and_what_none_reaches():
    from nblib.chapters.appendix.grid_ladder_findings import GRID_TARGETS, grid_ladder_findings, grid_ladder_table

    r2a, r2b, ccc, share = GRID_TARGETS
    recs = pd.DataFrame([
        {"design": "X", "change": "first", "code": "abc", r2a: 0.9, r2b: 0.85, ccc: 0.5, share: 10.0},
        {"design": "Y", "change": "second", "code": "", r2a: 0.1, r2b: 0.95, ccc: 0.7, share: None}])
    ladder = grid_ladder_table(recs)
    assert ladder[share].isna().tolist() == [False, True]
    text = grid_ladder_findings(ladder)
    assert f"**X** (first): meets {r2a}, {r2b}; misses {ccc} 0.5 (target 0.9), {share} 10 (target 85)." in text
    assert f"**Y** (second): meets {r2b}; misses {r2a} 0.1 (target 0.85), {ccc} 0.7 (target 0.9); not measured: {share}." in text
    assert f"No design reaches {ccc} ≥ 0.9: the best is 0.7 (Y)." in text
    assert f"No design reaches {r2a}" not in text and "Every target at once: no design so far." in text
    recs.loc[0, [ccc, share]] = [0.95, 90.0]
    assert "Every target at once: X." in grid_ladder_findings(grid_ladder_table(recs))
    with pytest.raises(ValueError, match="lack columns"):
        grid_ladder_table(recs.drop(columns=[ccc]))



def test_grid_ladder_reads_upper_bounds_for_the_trajectory_targets():
    from nblib.chapters.appendix.grid_ladder_findings import TRAJECTORY_TARGETS, grid_ladder_findings, grid_ladder_table

    rho, cl4a, cl4b = TRAJECTORY_TARGETS
    recs = pd.DataFrame([{"design": "X", "change": "a", "code": "", "S1-S3 -> S4 R²": 0.9, "S1-S4 -> S5 R²": 0.9,
                          "CCC Last4 vs LD (S4 LongPPL)": 0.95, "Last4 <= Raw (% of S1-S4 points)": 90.0,
                          rho: "-0.97", cl4a: 0.85, cl4b: 0.1},
                         {"design": "Y", "change": "b", "code": "", "S1-S3 -> S4 R²": 0.9, "S1-S4 -> S5 R²": 0.9,
                          "CCC Last4 vs LD (S4 LongPPL)": 0.95, "Last4 <= Raw (% of S1-S4 points)": 90.0,
                          rho: "-0.5", cl4a: None, cl4b: 0.2}])
    text = grid_ladder_findings(grid_ladder_table(recs), TRAJECTORY_TARGETS)
    assert f"**X** (a): meets {rho}, {cl4a}; misses {cl4b} 0.1 (target 0.85)." in text
    assert f"**Y** (b): meets none; misses {rho} -0.5 (target ≤ -0.9), {cl4b} 0.2 (target 0.85); not measured: {cl4a}." in text
    assert f"No design reaches {cl4b} ≥ 0.85: the best is 0.2 (Y)." in text and f"No design reaches {rho}" not in text
    assert "Every target at once: no design so far." in text
    recs.loc[0, cl4b] = 0.9
    assert "Every target at once: X." in grid_ladder_findings(grid_ladder_table(recs), TRAJECTORY_TARGETS)


def test_design_table_reads_the_toy_budget_and_the_papers_numbers():
    """The design table's words come from the budgets: the toy's settings, and in the paper
    column the `full` budget's, which are the LCCP paper's (§3.1, App. A.3, Table 1)."""
    from nblib.budgets import get_budget

    shapes = pd.DataFrame({"copies from tokens": [0.5e6, 1e6]})
    lccp = pd.DataFrame({"copy gain @256": [0.5, 2.0]}, index=pd.MultiIndex.from_tuples(
        [("d32, heads of 32, smeared", 0), ("d32, heads of 32, smeared", 250_000)], names=["parent", "LCCP tokens"]))
    t = TD.grid_design_table(get_budget("toy"), shapes, lccp)
    assert t.loc["LCCP / extension contexts", "toy"] == "1024 / 4096 (8x, 4x)"
    assert t.loc["RoPE bases", "toy"] == "1e4 / 5e7 / 5e8 (ABF x5,000 at LCCP, x10 at the extension)"
    assert t.loc["short stage", "toy"] == "32 x 128 tokens a step, LR 0.01, 40 warmup steps, WSD"
    assert t.loc["Ds", "toy"] == "270, 360, 450 x N(S1) = 6.40M, 8.54M, 10.67M"  # 23,714 tokens a unit
    assert t.loc["span of N", "measured"] == "two layers at every scale: width alone spans N, so S1 keeps a 32-dim head"
    assert t.loc["shapes", "measured"].startswith("copy gain 256 tokens back after 0.25-1M LCCP tokens: heads of 32 2.0-2.0")
    assert t.loc["Ds", "measured"] == "S1's smallest Ds (6.40M) is 6.4x past the latest onset"
    assert t["paper"].to_dict() == {
        "shapes": "Llama, 31M-821M non-embedding", "span of N": "26x", "short context": "4,096",
        "LCCP / extension contexts": "32K / 128K (8x, 4x)", "RoPE bases": "1e4 / 5e5 / 5e6 (x50, x10)",
        "token unit": "each scale's N", "Ds": "90-450 x N (5 values)", "Dl": "10-50 x N (5 values)",
        "S5": "9 configurations; trajectory to 120N", "short stage": "Table 7", "LCCP": "GBS / 8, LR / 10",
        "grid": "5 x 5 at S1-S4, 9 at S5; 3 seeds"}


def test_past_turn_findings_compare_a_design_with_the_books_grid_against_each_target():
    from nblib.chapters.appendix.grid_ladder_findings import grid_ladder_table, past_turn_findings
    from nblib.probes import grid_ladder as GL

    def row(design, r2, ccc, share, rho, cl4, spread, gap):
        return {"design": design, "change": "", "code": "", GL.R2["S1-S3 → S4"]: r2, GL.R2["S1-S4 → S5"]: r2,
                GL.CCC: ccc, GL.LAST4_LE_RAW: share, GL.S5_RHO: rho, GL.CL4_R2["held-out S4 R²"]: cl4,
                GL.CL4_R2["S5 trajectory R²"]: cl4, GL.S4_RANGE: spread, GL.GAP: gap}

    ladder = grid_ladder_table(pd.DataFrame([row(GL.BOOK_GRID_DESIGN, 0.94, 0.62, 29.2, -0.97, 0.9, 0.6, 0.3),
                                             row("Q", 0.1, 0.95, 90.0, -0.5, -2.0, 0.15, -0.15)]))
    text = past_turn_findings(ladder, "Q")
    assert f"{GL.CCC} 0.62 -> **0.95** (target 0.9: met)" in text
    assert f"{GL.LAST4_LE_RAW} 29.2 -> **90** (target 85: met)" in text
    assert f"{GL.S5_RHO} -0.97 -> **-0.5** (target ≤ -0.9: missed)" in text
    assert f"{GL.R2['S1-S3 → S4']} 0.94 -> **0.1** (target 0.85: missed)" in text
    assert "span 0.150 in log LongPPL on Q, 25% of the 0.600" in text
    assert "Q's Last4 sits 0.15 below Linear-Decay at S4 (mean LongPPL; the book's grid: +0.30)." in text
    with pytest.raises(ValueError, match=r"no ladder row for \['Z9'\]"):
        past_turn_findings(ladder, "Z9")
