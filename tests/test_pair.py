"""Models A and B (nblib.gemma.pair), the paired bootstrap (nblib.stats)."""

import numpy as np
import pandas as pd
import pytest
import torch

from nblib.budgets import get_budget
from nblib.gemma import pair
from nblib.models import build_model
from nblib.models.gemma3 import Gemma3Config
from nblib.models.gpt2 import GPT2Config
from nblib.stats import paired_bootstrap


def meta(family, cfg):
    with torch.device("meta"):
        return build_model(family, cfg)


def test_full_pair_is_the_blogs_exact_models():
    p = get_budget("full").pair
    assert meta("gpt2", p.model_a).n_params(non_embedding=False) == 124_439_808
    assert meta("gemma3", p.model_b).n_params(non_embedding=False) == 112_990_464
    assert p.model_a == {k: getattr(GPT2Config.gpt2_124m(), k) for k in p.model_a}
    assert p.model_b == {k: getattr(Gemma3Config.gemma3_113m(), k) for k in p.model_b}


@pytest.mark.parametrize("budget", ["smoke", "toy"])
def test_small_pairs_keep_the_blogs_proportions(budget):
    p = get_budget(budget).pair
    a, b = p.model_a, p.model_b
    assert a["d_model"] == b["d_model"] and a["n_layers"] == b["n_layers"] and a["n_heads"] == b["n_heads"]
    assert b["n_heads"] == 4 * b["n_kv_heads"]  # GQA 4:1
    assert b["n_layers"] % 4 == 0  # three local layers of four
    assert b["window"] * 2 == p.seq_len == a["max_seq_len"]
    assert a["d_model"] // a["n_heads"] == b["head_dim"]
    assert abs(b["d_ff"] / b["d_model"] - 2048 / 768) < 0.1


@pytest.mark.parametrize("family", ["gpt2", "gemma3"])
def test_parameter_breakdown_adds_up_to_the_closed_forms(family):
    p = get_budget("full").pair
    model = meta(family, p.model_a if family == "gpt2" else p.model_b)
    t = pair.parameter_table({"m": model})["m"]
    assert t["total"] == model.n_params(non_embedding=False)
    assert t["non-embedding"] == model.n_params(non_embedding=True)
    d, L = 768, 12
    if family == "gpt2":  # attention 4d^2 + 4d, MLP 8d^2 + 5d, two LayerNorms 4d per layer (+2d final)
        assert t["attention"] == L * (4 * d * d + 4 * d) and t["MLP"] == L * (8 * d * d + 5 * d)
        assert t["norms"] == L * 4 * d + 2 * d and t["position embedding"] == 1024 * d
    else:  # q,o: d x 768; k,v: d x 192; GeGLU 3 d d_ff; 4 sandwich norms + 2 QK-norms per layer
        assert t["attention"] == L * (2 * d * 768 + 2 * d * 192) and t["MLP"] == L * 3 * d * 2048
        assert t["norms"] == L * (4 * d + 2 * 64) + d and t["position embedding"] == 0


def test_pair_configs_share_everything_but_the_model():
    cfgs = pair.pair_configs(get_budget("smoke"))
    a, b = cfgs["A"], cfgs["B"]
    assert a.data == b.data and a.schedule == b.schedule and a.n_tokens == b.n_tokens
    assert a.batch_size == b.batch_size and a.seed == b.seed and a.optimizer == b.optimizer
    assert a.model["family"] == "gpt2" and b.model["family"] == "gemma3" and a.hash != b.hash


def test_eval_windows_are_held_out_document_starts():
    b = get_budget("smoke")
    w = pair.eval_windows(b)
    assert w.shape == (b.pair.n_eval_windows, b.pair.seq_len + 1)
    assert torch.equal(w, pair.eval_windows(b))
    with pytest.raises(ValueError, match="held-out documents"):
        pair.eval_windows(b, length=10**7)


def test_paired_bootstrap_covers_the_true_difference_at_about_the_nominal_rate():
    """Synthetic paired data with a known mean difference 0.3: over 300 data sets the 95%
    interval covers it 89-99% of the time (percentile intervals run a little narrow at n=40)."""
    rng = np.random.default_rng(0)
    hits = 0
    for rep in range(300):
        base = rng.standard_normal(40) * 2  # per-document difficulty, shared by both models
        a = base + 0.3 + rng.standard_normal(40) * 0.5
        b = base + rng.standard_normal(40) * 0.5
        r = paired_bootstrap(a, b, n_boot=400, seed=rep)
        assert r["lo"] <= r["diff"] <= r["hi"]
        hits += r["lo"] <= 0.3 <= r["hi"]
    assert 0.89 <= hits / 300 <= 0.99


def test_paired_bootstrap_rejects_bad_input():
    with pytest.raises(ValueError, match="same length"):
        paired_bootstrap([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="n_boot=10"):
        paired_bootstrap([1, 2, 3], [1, 2, 4], n_boot=10)
    with pytest.raises(ValueError, match="NaN"):
        paired_bootstrap([1, np.nan, 3], [1, 2, 4])


def test_all_global_variant_is_model_b_with_no_window():
    b_cfg = pair.pair_configs(get_budget("toy"))["B"]
    g_cfg = pair.all_global_config(get_budget("toy"))
    assert {k: v for k, v in g_cfg.model.items() if k != "global_every"} == b_cfg.model
    assert g_cfg.data == b_cfg.data and g_cfg.schedule == b_cfg.schedule
    assert g_cfg.n_tokens == b_cfg.n_tokens and g_cfg.total_steps == b_cfg.total_steps  # toy: as long as B
    # smoke trains it on 3/4 of the pair's tokens: the budget of Model B's 0.75 branch
    smoke = get_budget("smoke")
    twin = pair.ladder_configs(smoke)[("B", smoke.pair.control_fraction)]
    assert pair.all_global_config(smoke).total_steps == twin.total_steps
    b, g = meta("gemma3", {k: v for k, v in b_cfg.model.items() if k != "family"}), \
        meta("gemma3", {k: v for k, v in g_cfg.model.items() if k != "family"})
    assert b.layer_windows.count(None) == 2 and g.layer_windows == [None] * g.config.n_layers  # toy: G L L L G L L L
    assert b.n_params() == g.n_params()  # the same weights; only the attention mask differs


def test_breakdown_measures_match_closed_forms():
    from nblib.gemma import extension as X

    rng = np.random.default_rng(0)
    L, n = 16, 200
    base = rng.normal(3.0, 0.1, (n, 4 * L))
    plain, yarn, tuned = base.copy(), base.copy(), base.copy()
    plain[:, L:] += 1.0  # every position past L costs 1 nat more
    yarn[:, L:] += 0.4
    tuned[:, L:] += 0.1
    t = X.breakdown_table({"plain": plain, "yarn": yarn}, L, (1, 4))
    assert np.isclose(t.loc["plain", "ppl 4L / ppl L"], np.exp(plain.mean()) / np.exp(plain[:, :L].mean()))
    iv = X.breakdown_intervals({"plain": plain, "yarn": yarn, "tuned": tuned}, L, 4, "plain", "yarn", "tuned")
    rise, rec, more = iv["nats/token"]
    assert np.isclose(rise, plain.mean() - plain[:, :L].mean())  # ~ 3/4 of 1 nat plus noise
    assert np.isclose(rec, 0.75 * 0.6) and np.isclose(more, 0.75 * 0.3)  # exact: same base
    assert np.isclose(iv["share of the rise"].iloc[1], rec / rise)
    assert (iv["95% lo"] <= iv["nats/token"]).all() and (iv["nats/token"] <= iv["95% hi"]).all()


def test_training_cost_sums_each_process_clock_and_skips_the_parents_steps():
    from types import SimpleNamespace

    def fake(records, init=None, tokens_per_step=10):
        m = pd.DataFrame([{"kind": "train", "step": s, "elapsed_s": e} for s, e in records])
        return SimpleNamespace(metrics=lambda: m, config=SimpleNamespace(init=init, tokens_per_step=tokens_per_step))

    # a run killed after step 30 (30 s in) and resumed: its new process logs 5 s to step 40
    solo = fake([(1, 1.0), (10, 10.0), (30, 30.0), (31, 1.0), (40, 5.0)])
    branch = fake([(101, 2.0), (120, 20.0)], init={"run": "p", "step": 100, "mode": "continue"})
    t = pair.training_cost({"solo": solo, "branch": branch})
    assert t.loc["solo", "wall (min)"] == pytest.approx(35 / 60)
    assert t.loc["solo", "steps trained"] == 40 and t.loc["branch", "steps trained"] == 20
    assert t.loc["branch", "tokens/s"] == pytest.approx(200 / 20)
