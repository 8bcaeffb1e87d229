"""The erosion probe's measures (nblib.probes.erosion) and chapter 2's tables of them
(nblib.chapters.appendix.toy_erosion), against closed forms and planted records."""

import numpy as np
import pandas as pd
import pytest
import torch

from nblib.budgets import get_budget
from nblib.chapters.appendix import toy_erosion
from nblib.models import build_model
from nblib.probes import erosion


def _uniform_attention_model(T=64):
    """A smoke Llama whose queries are zero: every score is 0, so each query attends uniformly
    to itself and every earlier key (1 / (q + 1) each)."""
    b = get_budget("smoke")
    cfg = {**b.scale("S4").model, "max_seq_len": T}
    torch.manual_seed(0)
    m = build_model("llama", cfg)
    with torch.no_grad():
        for blk in m.blocks:
            blk.attn.q_proj.weight.zero_()
    return m.eval()


def test_attention_by_distance_matches_the_closed_form_of_uniform_attention():
    T = 64
    m = _uniform_attention_model(T)
    windows = torch.randint(1, 200, (2, T))
    rows = erosion.attention_by_distance(m, windows, bins=(0, 16, 32))
    assert {r["layer"] for r in rows} == set(range(len(m.blocks)))
    qs = np.arange(T // 2, T)
    expect = {"0-15": np.mean(16 / (qs + 1)), "16-31": np.mean(16 / (qs + 1)),
              "32+": np.mean((qs - 31) / (qs + 1))}
    for r in rows:
        for k, v in expect.items():
            assert r[k] == pytest.approx(v, rel=1e-5)
        assert sum(r[k] for k in expect) == pytest.approx(1.0, rel=1e-6)


def test_bins_at_or_beyond_the_window_are_dropped():
    m = _uniform_attention_model(32)
    rows = erosion.attention_by_distance(m, torch.randint(1, 200, (1, 32)), bins=(0, 16, 128, 512))
    assert set(rows[0]) == {"layer", "head", "0-15", "16+"}


def test_smear_gates_are_the_sigmoid_of_the_logits():
    m = _uniform_attention_model()
    with torch.no_grad():
        m.blocks[0].attn.k_smear.fill_(2.0)
    gates = erosion.smear_gates(m)
    assert len(gates) == len(m.blocks)
    assert gates[0][0] == pytest.approx(1 / (1 + np.exp(-2.0)), rel=1e-6)
    assert gates[1][0] == pytest.approx(0.5)


def test_probe_budget_changes_only_the_probed_scale():
    b = get_budget("toy")
    heads, kv = b.scale("S4").model["n_heads"], b.scale("S4").model["n_kv_heads"]
    other = heads if kv == 1 else 1  # the layout the grid does not use: one KV head, or one per query head
    p = erosion.probe_budget(b, "S4", 0.05, 2, n_kv_heads=other)
    assert p.scale("S4").model["n_kv_heads"] == other and p.scale("S4").model["n_heads"] == heads
    assert p.scale("S4").batch_long == 2 and p.lccp_lr_frac == 0.05
    assert p.scale("S3") == b.scale("S3") and p.n_tokens("S4", 10) == b.n_tokens("S4", 10)
    # the budget's own design probes the grid's own trajectory (same hash: the store reuses it)
    plain = erosion.probe_budget(b, "S4", b.lccp_lr_frac, b.scale("S4").batch_long, kv)
    assert erosion.trajectory(plain, "S4", 270, 30).hash == erosion.trajectory(b, "S4", 270, 30).hash
    assert erosion.trajectory(p, "S4", 270, 30).hash != erosion.trajectory(b, "S4", 270, 30).hash
    bad = next(k for k in range(2, heads + 2) if heads % k)  # a KV head count that does not divide the heads
    with pytest.raises(ValueError, match=f"n_kv_heads={bad} is not allowed at S4"):
        erosion.probe_budget(b, "S4", 0.1, 4, n_kv_heads=bad)


def _record(dl, kv, longppl, far, rerun=0.0):
    return {"scale": "S4", "n_heads": 3, "n_kv_heads": kv, "n_params": 1000 + kv, "lr_frac": 0.1, "batch_long": 4,
            "dl": dl, "longppl": longppl + rerun, "shortppl": 5.0 - dl / 100, "longppl_middle": longppl - 1,
            "copy_gain": {"256": 1.0 - dl / 200}, "smear": [[0.5, 0.7, 0.9], [0.6]],
            "attention": [{"layer": 0, "head": h, "0-15": 1 - far * h, "128-511": far * h / 2, "512+": far * h / 2}
                          for h in range(3)]}


def test_erosion_table_and_findings_on_planted_records():
    recs = pd.DataFrame([_record(30, 1, 15.8, 0.1), _record(120, 1, 21.2, 0.05),
                         _record(30, 3, 7.5, 0.2), _record(120, 3, 6.5, 0.3),
                         _record(120, 3, 6.5, 0.3, rerun=0.1)])  # a re-measured point: the newest is kept
    t = toy_erosion.erosion_table(recs)
    assert len(t) == 4
    kv = t[t["variant"].str.startswith("a KV head")].set_index("Dl")
    assert kv.loc[120, "LongPPL (beginnings)"] == pytest.approx(6.6)
    assert kv.loc[120, "far attention L0 (best head)"] == pytest.approx(0.6)  # head 2: 0.3 * 2
    assert t.loc[0, "smear gate L0"] == pytest.approx(0.7)
    text = toy_erosion.erosion_findings(t)
    assert "1 KV head for 3 query heads**: LongPPL +5.40 on beginnings" in text
    assert "a KV head per query head (3)**: LongPPL -0.90" in text


def test_erosion_table_names_missing_columns():
    with pytest.raises(ValueError, match="lack columns.*longppl_middle"):
        toy_erosion.erosion_table(pd.DataFrame([{k: v for k, v in _record(30, 1, 1, 0).items()
                                                 if k != "longppl_middle"}]))


def test_expanding_kv_heads_changes_nothing_the_model_computes():
    """expand_kv_heads copies each shared KV head for its query heads: the model with a KV head
    per query head computes the same logits as the grouped one it came from (SDPA's enable_gqa
    pairing), and the LCCP init applies it when the parent has fewer KV heads."""
    from nblib.models.llama import expand_kv_heads
    torch.manual_seed(0)
    cfg = dict(vocab_size=64, d_model=48, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=64, rope_base=1e4,
               max_seq_len=64, tie_embeddings=True, smear_keys=True, head_size=16)
    small = build_model("llama", cfg).eval()
    with torch.no_grad():
        for blk in small.blocks:
            blk.attn.k_smear.copy_(torch.randn(2))  # distinct smear gates per KV head
    big = build_model("llama", {**cfg, "n_kv_heads": 4}).eval()
    big.load_state_dict(expand_kv_heads(small.state_dict(), 2, 4, 16))
    x = torch.randint(0, 64, (2, 40))
    with torch.no_grad():
        ys, yb = small(x), big(x)
    ys, yb = (ys[0], yb[0]) if isinstance(ys, tuple) else (ys, yb)
    torch.testing.assert_close(yb, ys)
    assert not torch.equal(small.state_dict()["blocks.0.attn.k_smear"][0], small.state_dict()["blocks.0.attn.k_smear"][1])
    with pytest.raises(ValueError, match="n_kv_to=3 is not allowed"):
        expand_kv_heads(small.state_dict(), 2, 3, 16)


def test_expanded_probe_trajectory_starts_from_the_budgets_own_short_stage():
    b = get_budget("toy")
    heads, kv = b.scale("S4").model["n_heads"], b.scale("S4").model["n_kv_heads"]
    other = heads if kv == 1 else 1
    p = erosion.probe_budget(b, "S4", 0.1, 4, n_kv_heads=other)
    cfg = erosion.trajectory(p, "S4", 270, 120, short_from=b)
    own = erosion.trajectory(p, "S4", 270, 120)
    parent = erosion.grid.short_stage(b, "S4").wsd[270]
    assert cfg.init["run"] == parent.hash and own.init["run"] != parent.hash
    assert cfg.model == own.model and cfg.hash != own.hash and cfg.meta["kv_expanded_from"] == kv
    assert toy_erosion.variant_name(3, 3, 1.0) == "a KV head per query head (3), copied from 1 at LCCP"
    assert toy_erosion.variant_name(3, 1, float("nan")) == "1 KV head for 3 query heads"
    assert toy_erosion.variant_name(3, 1, None, True) == "1 KV head for 3 query heads, aligned windows"
    assert toy_erosion.variant_name(1, 1, float("nan"), float("nan")) == "one head"
