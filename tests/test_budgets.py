"""Budgets and scales: one place, paper numbers at full, clear errors for bad values."""

import dataclasses

import pytest

from nblib.budgets import (BUDGETS, PAPER_DL_MULTIPLES, PAPER_DS_MULTIPLES, PAPER_N, PAPER_S5_CONFIGS, SCALES, BudgetError, get_budget, get_scale)
from nblib.training.schedules import Schedule, wsd_stable_steps


def test_bad_budget_names_value_and_allowed():
    with pytest.raises(BudgetError) as e:
        get_budget("huge")
    msg = str(e.value)
    assert "huge" in msg and all(b in msg for b in BUDGETS)


def test_bad_scale_names_value_and_allowed():
    with pytest.raises(BudgetError) as e:
        get_scale("toy", "S9")
    assert "S9" in str(e.value) and all(s in str(e.value) for s in SCALES)


def test_full_budget_carries_paper_grid():
    b = get_budget("full")
    assert b.ds_multiples == (90, 180, 270, 360, 450)
    assert b.dl_multiples == (10, 20, 30, 40, 50)
    assert len(b.s5_configs) == 9 and set(b.s5_configs) == set(PAPER_S5_CONFIGS)
    diag = [c for c in b.s5_configs if c[0] == 9 * c[1]]
    assert len(diag) == 5  # §3.1: five on the diagonal Ds = 9 Dl
    assert b.s5_trajectory == 120
    assert (b.short_seq_len, b.long_seq_len, b.ext_seq_len) == (4096, 32768, 131072)
    assert b.rope_bases == (1e4, 5e5, 5e6)
    # Table 7: LCCP GBS 16, 16, 32, 32, 64 and 4K GBS eight times larger (App. A.3).
    assert [b.scale(s).batch_long for s in SCALES] == [16, 16, 32, 32, 64]
    assert all(b.scale(s).batch_short == 8 * b.scale(s).batch_long for s in SCALES)
    # LCCP starts at the 4K terminal LR (lr/10): Table 7 lists 9.766e-5 (9.542e-5 at S2).
    assert b.scale("S2").lr / 10 == pytest.approx(9.542e-5)
    assert b.scale("S1").warmup_steps == 500 and b.scale("S4").warmup_steps == 1000


def test_full_scales_within_two_percent_of_paper_n():
    b = get_budget("full")
    for s in SCALES:
        assert b.n_params(s) == pytest.approx(PAPER_N[s], rel=0.02), s


def test_s1_warmup_fraction_matches_app_a3():
    # App. A.3: at S1, 500 warmup steps are 9.3% of the 90N budget (GBS 128 x 4096 tokens).
    b = get_budget("full")
    frac = 500 * 128 * 4096 / (90 * PAPER_N["S1"])
    assert frac == pytest.approx(0.093, abs=0.001)
    assert b.scale("S1").batch_short * b.short_seq_len == 128 * 4096


@pytest.mark.parametrize("name", ["toy", "smoke"])
def test_scaled_budgets_keep_the_paper_ratios(name):
    """Every scaled budget takes its token multiples from the paper's (§3.1), scaled by
    multiple_scale: smoke every other one, toy the upper three Ds and the lower three Dl (a 3 x 3
    grid whose short stages are all long past the copying onset)."""
    b = get_budget(name)
    k = b.multiple_scale
    ds_picks = {"smoke": slice(None, None, 2), "toy": slice(2, None)}[name]
    dl_picks = {"smoke": slice(None, None, 2), "toy": slice(None, 3)}[name]
    assert b.ds_multiples == pytest.approx([m * k for m in PAPER_DS_MULTIPLES[ds_picks]])
    assert b.dl_multiples == pytest.approx([m * k for m in PAPER_DL_MULTIPLES[dl_picks]])
    assert all(d2 > d1 for d1, d2 in zip(b.ds_multiples, b.ds_multiples[1:]))
    assert b.long_seq_len == 8 * b.short_seq_len and b.ext_seq_len == 4 * b.long_seq_len
    ns = [b.n_params(s) for s in SCALES]
    assert ns == sorted(ns) and len(set(ns)) == 5


def test_token_unit_sizes_every_scale_by_one_n():
    """token_unit: a multiple counts the named scale's N at every scale (its pinned
    token_unit_tokens where set: the toy's, the d32 S1's 23,714); None, each scale's own."""
    toy, full = get_budget("toy"), get_budget("full")
    assert toy.token_unit == "S1" and toy.unit == "N(S1)" and full.unit == "N"
    assert toy.token_unit_tokens == 23_714 != toy.n_params("S1")
    assert {toy.n_tokens(s, 90) for s in SCALES} == {90 * 23_714}
    unpinned = dataclasses.replace(toy, token_unit_tokens=None)
    assert {unpinned.n_tokens(s, 90) for s in SCALES} == {90 * toy.n_params("S1")}
    assert [full.n_tokens(s, 90) for s in SCALES] == [round(90 * full.n_params(s)) for s in SCALES]
    assert get_budget("smoke").token_unit is None


def test_toy_scales_can_copy_past_the_short_context():
    """Chapter 2, "toy budget": two layers, heads of 32 dimensions with a KV head each, smeared
    keys and at least d64 at every scale (one shared KV head, or d32, lost long-range copying
    over a long constant-LR LCCP); a span of N of about 4x; S1's smallest Ds past the copy
    onset (~1M tokens at d32)."""
    b = get_budget("toy")
    ns = [b.n_params(s) for s in SCALES]
    assert PAPER_N["S5"] / PAPER_N["S1"] == pytest.approx(26.1, rel=0.01)
    assert 3.5 <= ns[-1] / ns[0] <= 5 and ns == sorted(ns) and len(set(ns)) == 5
    for s in SCALES:
        m = b.scale(s).model
        assert m["n_layers"] == 2 and (m.get("head_size") or m["d_model"] // m["n_heads"]) == 32 and m["tie_embeddings"]
        assert m["n_kv_heads"] == m["n_heads"] and m["smear_keys"] and m["d_model"] >= 64
    assert b.tokenizer.startswith("bpe:")
    assert b.n_tokens("S1", b.ds_multiples[0]) >= 2_000_000
    assert b.longppl.trunc_len == b.short_seq_len and b.longppl.min_doc_len == b.long_seq_len


def test_wsd_schedule_phases():
    s = Schedule("wsd", lr=1.0, total_steps=90, warmup_steps=10)
    assert s(0) == pytest.approx(0.1) and s(9) == pytest.approx(1.0)
    assert s.decay_start == 80 == wsd_stable_steps(90)
    assert s(79) == 1.0 and s(80) == 1.0 and s(89) == pytest.approx(0.1)
    # 8:1 ratio of warmup+stable to decay steps
    assert s.decay_start / (90 - s.decay_start) == pytest.approx(8)


def test_linear_decay_and_constant():
    s = Schedule("linear_decay", lr=2.0, total_steps=11)
    assert s(0) == 2.0 and s(10) == pytest.approx(0.2) and s(5) == pytest.approx(1.1)
    c = Schedule("constant", lr=3.0)
    assert c(0) == c(10**9) == 3.0


def test_schedule_rejects_bad_kind():
    with pytest.raises(ValueError, match="cosine.*allowed"):
        Schedule("cosine", lr=1.0, total_steps=5)


def test_with_model_changes_one_scales_model_only():
    b = get_budget("toy")
    v = b.with_model("S5", n_layers=4)
    assert v.scale("S5").model == {**b.scale("S5").model, "n_layers": 4}
    assert b.scale("S5").model["n_layers"] == 2  # the budget itself is untouched
    assert all(v.scale(s) == b.scale(s) for s in ("S1", "S2", "S3", "S4"))
    assert dataclasses.replace(v, scales=b.scales) == b  # nothing else moved
    with pytest.raises(BudgetError, match="S9"):
        b.with_model("S9", n_layers=4)


def test_a_pinned_token_unit_needs_a_token_unit():
    replace = dataclasses.replace
    with pytest.raises(BudgetError, match="token_unit_tokens=23714 .*token_unit=None"):
        replace(get_budget("smoke"), token_unit_tokens=23714)  # smoke counts each scale in its own N
    assert replace(get_budget("toy"), token_unit_tokens=23714).n_tokens("S3", 2) == 47428
    with pytest.raises(BudgetError, match="needle_value_form='long'"):
        replace(get_budget("toy"), needle_value_form="long")


def test_long_precision_reaches_every_long_context_run_and_the_bf16_short_scales_only():
    from nblib.lccp import grid
    assert get_budget("toy").long_precision == "bf16" and get_budget("toy").bf16_short_scales == ("S3", "S5")
    # smoke trains every run in fp32 (autocast is emulated on CPUs without bf16 matmuls): its grid
    # with the toy's precision is the same grid in bf16, hashes aside
    assert get_budget("smoke").long_precision == "fp32" and get_budget("smoke").bf16_short_scales == ()
    b = dataclasses.replace(get_budget("smoke"), long_precision="bf16", bf16_short_scales=("S3", "S5"))
    assert grid.lccp_constant(b, "S2", b.ds_multiples[0], b.dl_multiples[0]).precision == "bf16"
    assert grid.lccp_linear_decay(b, "S2", b.ds_multiples[0], b.dl_multiples[0]).precision == "bf16"
    short = grid.short_stage(b, "S2")
    assert short.trunk.precision is None and all(c.precision is None for c in short.wsd.values())
    # the reference (trained at the long context) and the short stages of bf16_short_scales follow it
    assert b.bf16_short_scales == ("S3", "S5") and grid.reference_config(b).precision == "bf16"
    for s in ("S3", "S5"):
        st = grid.short_stage(b, s)
        assert st.trunk.precision == "bf16" and all(c.precision == "bf16" for c in st.wsd.values())
    # the short stage keeps fp32, so its runs (and their hashes) are the fp32 budget's
    fp32 = dataclasses.replace(b, long_precision="fp32")
    assert short.trunk.hash == grid.short_stage(fp32, "S2").trunk.hash
    assert grid.lccp_constant(fp32, "S2", fp32.ds_multiples[0], 1).precision is None  # fp32 keeps the hashes runs had before
    assert grid.reference_config(fp32).precision is None and grid.short_stage(fp32, "S3").trunk.precision is None
    with pytest.raises(BudgetError, match=r"bf16_short_scales names \['S9'\].*allowed: S1, S2, S3, S4, S5"):
        dataclasses.replace(b, bf16_short_scales=("S9",))
    with pytest.raises(BudgetError, match=r"long_precision='fp16'.*fp32, bf16"):
        dataclasses.replace(fp32, long_precision="fp16")
