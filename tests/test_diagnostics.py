"""Tests for the grid diagnostics (nblib.lccp.diagnostics), the held-out loss probe and the
held-out R^2 intervals, against hand-built tables with known answers and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from nblib.lccp import diagnostics as dg
from nblib.lccp import scaling as sc
from nblib.metrics.probes import heldout_loss

pytestmark = pytest.mark.usefixtures("one_thread")


class _Tok:
    def encode(self, text):
        return [int(c) for c in text.split()]


def test_heldout_loss_of_a_uniform_model_is_log_v_and_drops_remainders(uniform_model):
    texts = [" ".join(["1"] * 10), " ".join(["2"] * 3)]  # one text shorter than a window
    assert heldout_loss(uniform_model(7), texts, _Tok(), 4) == pytest.approx(math.log(7))
    with pytest.raises(ValueError, match="no text has 20 tokens"):
        heldout_loss(uniform_model(7), texts, _Tok(), 20)


def _ld_table(rises=None):
    """A 3 x 3 grid at S1-S4 plus S5's diagonal with log(LongPPL) = 2 - 0.1 i(N) - 0.05 j(Ds)
    - 0.02 k(Dl): strictly falling everywhere; `rises` adds to chosen rows' log values."""
    rows = []
    for i, s in enumerate(["S1", "S2", "S3", "S4", "S5"]):
        pairs = [(0, 0), (1, 1), (2, 2)] if s == "S5" else [(j, k) for j in range(3) for k in range(3)]
        for j, k in pairs:
            y = 2 - 0.1 * i - 0.05 * j - 0.02 * k + (rises or {}).get((s, j, k), 0.0)
            rows.append({"scale": s, "N": 1e4 * 2 ** i, "Ds": 1e6 * (j + 1), "Dl": 1e5 * (k + 1),
                         "ds_mult": 90 * (j + 1), "dl_mult": 10 * (k + 1), "longppl": math.exp(y),
                         "shortppl": math.exp(y - 0.5)})
    return pd.DataFrame(rows)


def test_a_falling_grid_has_no_rise():
    mono = dg.monotonicity_table(_ld_table(), spread=0.01)
    assert (mono["verdict"] == "falls").all()
    # N: 9 configurations at S1-S4 (3 steps each; the 3 diagonal ones a 4th step to S5);
    # Ds and Dl: 2 steps per scale S1-S4; both metrics
    assert len(mono) == 2 * (9 * 3 + 3 + 4 * 2 + 4 * 2)


def test_rises_are_sized_and_judged_against_the_spread():
    # S2, Ds index 1, every Dl: +0.08 -> the Ds mean at S2 rises 0.03 from j=0 to j=1;
    # along N, each of those three configurations rises S1 -> S2 by 0.08 - 0.1 < 0 (falls)
    # and falls S2 -> S3 by more. A single cell +0.2 at S3 (j=2, k=2) rises along N and Dl.
    t = _ld_table({("S2", 1, 0): 0.08, ("S2", 1, 1): 0.08, ("S2", 1, 2): 0.08, ("S3", 2, 2): 0.2})
    mono = dg.monotonicity_table(t, spread=0.05, metrics=("longppl",))
    ds = mono[(mono.axis == "Ds (mean over Dl)") & (mono["at"] == "S2")]
    assert ds["change (nats)"].iloc[0] == pytest.approx(0.03)
    assert ds["verdict"].iloc[0] == "rise within the seed spread"
    n = mono[(mono.axis == "N") & (mono["at"] == "Ds=270, Dl=30")]
    s2_s3 = n[(n["from"] == "S2") & (n["to"] == "S3")].iloc[0]
    assert s2_s3["change (nats)"] == pytest.approx(0.1) and s2_s3["verdict"] == "FAILS"
    summary = dg.monotonicity_summary(mono)
    assert summary.loc[("longppl", "N"), "failures"] == 1
    assert summary.loc[("longppl", "Dl (mean over Ds)"), "largest rise (nats)"] == pytest.approx(0.2 / 3 - 0.02)


def test_seed_spread_and_stable_verdicts():
    stable = pd.DataFrame([
        {"scale": "S1", "seed": 0, "loss_mid": 4.0, "loss_end": 3.8, "drop": 0.2},
        {"scale": "S1", "seed": 1, "loss_mid": 4.1, "loss_end": 3.83, "drop": 0.27},
        {"scale": "S2", "seed": 0, "loss_mid": 3.5, "loss_end": 3.48, "drop": 0.02},
        {"scale": "S4", "seed": 0, "loss_mid": 3.0, "loss_end": 2.9, "drop": 0.1},
        {"scale": "S4", "seed": 1, "loss_mid": 3.0, "loss_end": 2.95, "drop": 0.05},
    ])
    assert dg.seed_spread(stable) == pytest.approx(0.05)
    v = dg.stable_phase_verdicts(stable, 0.05)
    assert v["learning"].to_dict() == {"S1": True, "S2": False, "S4": True}
    with pytest.raises(ValueError, match="two seeds"):
        dg.seed_spread(stable[stable.seed == 0])


def test_copy_verdicts_pick_the_two_targets():
    rows = []
    for s, g_short, g_long in (("S1", 1.5, 1.2), ("S2", 0.4, 2.0)):
        for ds in (1e6, 2e6):
            rows += [{"scale": s, "stage": "short", "Ds": ds, "Dl": 0, "distance": 32,
                      "gain": g_short if ds == 1e6 else 9.0}]
            for dl in (1e5, 2e5):
                top = ds == 2e6 and dl == 2e5
                rows += [{"scale": s, "stage": "LCCP", "Ds": ds, "Dl": dl, "distance": 256,
                          "gain": g_long if top else -9.0}]
    v = dg.copy_verdicts(pd.DataFrame(rows), 128).set_index(["scale", "endpoint"])
    assert v.loc[("S1", "short stage, smallest Ds"), "gain"] == 1.5
    assert v.loc[("S2", "LCCP, largest Ds and Dl"), "gain"] == 2.0
    assert v["copies"].tolist() == [True, True, False, True]


def test_holdout_r2_intervals_bracket_the_point_estimate():
    """Data from Eq. 1 with known parameters plus small noise: the held-out R^2 is near 1 and
    its bootstrap interval contains the full-data estimate."""
    rng = np.random.default_rng(0)
    p = dict(A=2.0, alpha=0.3, Bs=1.5, beta_s=0.4, Bl=1.0, beta_l=0.5, C=-0.6)
    rows = []
    for s, n in {"S1": 3e7, "S2": 6e7, "S3": 1e8, "S4": 2.5e8}.items():
        for a in (90, 180, 270):
            for b in (10, 20, 30):
                y = (p["A"] * (n / 1e8) ** -p["alpha"] + p["Bs"] * (a * n / 1e9) ** -p["beta_s"]
                     + p["Bl"] * (b * n / 1e9) ** -p["beta_l"] + p["C"])
                rows.append({"scale": s, "N": n, "Ds": a * n, "Dl": b * n, "longppl": math.exp(y + rng.normal(0, 0.002))})
    t = pd.DataFrame(rows)
    out = sc.holdout_r2_intervals(t, {"S1-S3 → S4": (["S1", "S2", "S3"], ["S4"])}, n_boot=8, seed=0)
    r = out.loc["S1-S3 → S4"]
    assert r["R²"] > 0.9 and 0.5 < r["R² lo"] <= r["R² hi"] <= 1
    assert r["MAPE lo"] <= r["MAPE hi"]
    direct = sc.holdout_eval(t, ["S1", "S2", "S3"], ["S4"])
    assert r["R²"] == pytest.approx(direct.r2, abs=1e-9)


def test_grid_checks_findings_state_each_verdict():
    from nblib.chapters.part1.law_findings import grid_checks_findings

    copy = pd.DataFrame([{"scale": "S1", "endpoint": "short stage, smallest Ds", "distance": 32, "gain": 2.5, "copies": True},
                         {"scale": "S1", "endpoint": "LCCP, largest Ds and Dl", "distance": 256, "gain": 0.7,
                          "copies": False}])
    stable = dg.stable_phase_verdicts(pd.DataFrame([
        {"scale": "S1", "seed": 0, "loss_mid": 4.0, "loss_end": 3.8, "drop": 0.2},
        {"scale": "S2", "seed": 0, "loss_mid": 3.5, "loss_end": 3.49, "drop": 0.01}]), 0.05)
    mono = dg.monotonicity_summary(dg.monotonicity_table(_ld_table({("S3", 2, 2): 0.2}), 0.05, metrics=("longppl",)))
    r2 = pd.DataFrame([{"split": "S1-S3 → S4", "R²": 0.85, "R² lo": 0.7, "R² hi": 0.9, "refits at a bound": "0/8"}]
                      ).set_index("split")
    text = grid_checks_findings(copy, stable, 0.05, mono, r2)
    assert "short stage, smallest Ds, 32 tokens back: S1 2.50 (every scale copies)" in text
    assert "**below 1 nat at S1**" in text and "**not beyond the spread at S2**" in text
    assert ("longppl along N: 30 steps, 0 rise(s) within the short stage's seed spread (S1's two trunks, a "
            "held-out-loss spread, not LongPPL's), **1 beyond it**") in text
    assert "0.850 (95% bootstrap interval 0.700 to 0.900; 0/8 refits" in text and "meets the 0.85 target" in text


def test_kernel_spread_joins_runs_and_sizes_the_differences(tmp_path):
    from nblib.lccp import kernel_spread as ks

    for name, scale_ppl in (("a", 10.0), ("b", 10.3)):
        (tmp_path / name / "03_scaling_law").mkdir(parents=True)
        (tmp_path / name / "04_constant_last4").mkdir(parents=True)
        pd.DataFrame({"scale": ["S1", "S2"], "run": ["r1", "r2"], "longppl": [scale_ppl, 5.0],
                      "shortppl": [2.0, 1.0]}).to_csv(tmp_path / name / "03_scaling_law" / "runs_linear_decay.csv")
        pd.DataFrame({"scale": ["S1"], "Ds": [1e6], "Dl": [1e5], "longppl": [8.0], "shortppl": [2.0]}).to_csv(
            tmp_path / name / "04_constant_last4" / "runs_constant_last4.csv")
    spread = ks.kernel_spread(tmp_path / "a", tmp_path / "b")
    ld = spread[(spread.table == "03_scaling_law") & (spread.metric == "longppl")].set_index("run")
    assert ld.loc["r1", "relative difference"] == pytest.approx(0.03) and ld.loc["r2", "relative difference"] == 0
    assert len(spread) == 2 * 2 + 2
    s = ks.summary(spread, tolerance=0.02)
    assert s.loc[("03_scaling_law", "longppl"), "beyond 2%"] == 1
    assert s.loc[("03_scaling_law", "longppl"), "max |rel. diff.|"] == pytest.approx(0.03)
    with pytest.raises(ValueError, match="does not exist"):
        ks.kernel_spread(tmp_path / "a", tmp_path / "missing")


def test_tail_nll_is_the_mean_token_nll_past_start():
    """tail_nll against token_nll written out: the mean over positions [start, max_len) of
    every text, texts no longer than start skipped."""
    from nblib.data import get_tokenizer
    from nblib.metrics import tail_nll
    from nblib.metrics.probes import token_nll
    from nblib.models import build_model

    torch.manual_seed(0)
    tok = get_tokenizer("byte")
    m = build_model("llama", dict(vocab_size=tok.vocab_size, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1,
                                  d_ff=32, max_seq_len=64)).eval()
    texts = ["def f(x):\n    return x + 1\n" * 3, "short"]
    got = tail_nll(m, tok, texts, start=8, max_len=40)
    ids = torch.tensor(np.asarray(tok.encode(texts[0])[:40], dtype=np.int64))[None]
    want = token_nll(m, ids)[0, 7:].mean()  # entry t-1 is the loss of token t: tokens 8..39
    assert got == pytest.approx(float(want), rel=1e-5)
    with pytest.raises(ValueError, match="no text is longer than start=100"):
        tail_nll(m, tok, texts, start=100)
