"""Issue 65's controls in chapters 9 and 10: the YaRN fine-tune's control (Model B continued at L
with plain RoPE), the extension's intervals inside and past L, and attention distance read the
blog's way (unfiltered windows, a window-bootstrap interval on A / B, sinks excluded)."""

import numpy as np
import pandas as pd
import pytest
import torch

from nblib.budgets import get_budget
from nblib.gemma import attention as AT
from nblib.gemma import extension as X
from nblib.gemma import pair
from nblib.store.runstore import Run


def _parent(budget):
    cfg = pair.pair_configs(budget)["B"]
    return Run("/nonexistent", cfg)


@pytest.mark.parametrize("name", ["smoke", "toy"])
def test_the_continued_control_is_the_fine_tune_at_L_without_yarn(name):
    b = get_budget(name)
    parent = _parent(b)
    ft, cont = X.finetune_config(b, parent), X.continued_config(b, parent)
    assert cont.total_steps == ft.total_steps and cont.tokens_per_step == ft.tokens_per_step
    assert cont.n_tokens == ft.n_tokens and cont.schedule == ft.schedule and cont.optimizer == ft.optimizer
    assert cont.init == ft.init == {"run": parent.hash, "step": parent.config.total_steps, "mode": "weights+optimizer"}
    assert cont.model == parent.config.model  # plain RoPE, context L
    assert "rope_scaling" not in cont.model and ft.model["rope_scaling"]["type"] == "yarn"
    assert cont.seq_len == b.pair.seq_len and ft.seq_len == b.pair.seq_len * b.pair.yarn_factor
    assert cont.batch_size == ft.batch_size * b.pair.yarn_factor
    assert {k: v for k, v in cont.data.items() if k != "seq_len"} == {k: v for k, v in ft.data.items() if k != "seq_len"}
    assert cont.hash != ft.hash


def _nll(rng, n, T, level):
    return rng.normal(level, 0.2, (n, T))


def test_intervals_read_the_span_each_row_names():
    rng = np.random.default_rng(0)
    L, s, n = 16, 4, 40
    base = _nll(rng, n, s * L, 3.0)
    nll = {"plain RoPE": base.copy(), "zero-shot YaRN": base + 0.05, "YaRN fine-tuned": base - 0.1,
           X.CONTINUED: base.copy()}
    nll[X.CONTINUED][:, L:] += 0.3  # the control breaks past L only
    nll["YaRN fine-tuned"][:, :L // 4] -= 0.2
    t = X.extension_intervals(nll, L, n_boot=200, comparisons=X.FINETUNE_COMPARISONS).set_index("difference")
    past, first = t.loc[f"{X.CONTINUED} - fine-tuned, past L"], t.loc[f"{X.CONTINUED} - fine-tuned, first L/4"]
    assert (past["positions"], past["tokens"]) == (f"{L}-{s * L}", (s - 1) * L)
    assert (first["positions"], first["tokens"]) == (f"0-{L // 4}", L // 4)
    want = np.exp(nll[X.CONTINUED][:, L:].mean()) - np.exp(nll["YaRN fine-tuned"][:, L:].mean())
    assert past["ppl a"] - past["ppl b"] == pytest.approx(want) and past["95% lo"] <= past["a - b"] <= past["95% hi"]
    assert t.loc[f"{X.CONTINUED} - plain RoPE, first L (more training alone)", "a - b"] == pytest.approx(0)
    # the blog's four rows come first and keep their names (the chapter's findings read them by position)
    blog = X.extension_intervals(nll, L, n_boot=200)
    assert list(blog.difference) == [c[0] for c in X.COMPARISONS]
    with pytest.raises(ValueError, match="nll lacks"):
        X.extension_intervals(nll, L, comparisons=X.CONTROL_COMPARISONS)
    with pytest.raises(ValueError, match="span"):
        X.extension_intervals(nll, L, comparisons=(("x", "plain RoPE", "zero-shot YaRN", "2L"),))


def test_the_scorecards_control_rows_are_named_as_it_reads_them():
    names = [c[0] for c in X.CONTROL_COMPARISONS + X.FINETUNE_COMPARISONS]
    assert "all-global control: plain RoPE - zero-shot YaRN, whole page" in names
    assert "plain continued - fine-tuned, whole page" in names
    assert len(set(names)) == len(names)


def test_zero_shot_table_closed_forms():
    L = 8
    nll = {"a": np.full((3, 4 * L), 2.0), "b": np.concatenate([np.full((3, L), 1.0), np.full((3, 3 * L), 3.0)], 1)}
    t = X.zero_shot_table(nll, L)
    assert t.loc["a"].tolist() == pytest.approx([np.exp(2)] * 3 + [1])
    assert t.loc["b", "ppl, first L"] == pytest.approx(np.e) and t.loc["b", "ppl, past L"] == pytest.approx(np.exp(3))
    assert t.loc["b", "ppl, whole page"] == pytest.approx(np.exp(2.5))


def test_heldout_windows_are_not_chosen_for_a_separator():
    b = get_budget("smoke")
    from nblib.data import get_tokenizer
    from nblib.metrics import attention_maps as M
    eos = get_tokenizer(b.pair.tokenizer).eos_id
    w = AT.heldout_windows(b, 16)
    assert w.shape == (16, b.pair.seq_len) and torch.equal(w, AT.heldout_windows(b, 16))
    assert not (w[:, : b.pair.seq_len // 2] == eos).any(1).all()  # some hold no separator in their first half
    f = M.packed_eval_windows(b, 4)
    assert (f[:, : b.pair.seq_len // 2] == eos).any(1).all()  # the separator share's windows still do
    with pytest.raises(ValueError, match="asked for n"):
        AT.heldout_windows(b, 10 ** 7)


def _uniform_probs(x):
    """Every query attends uniformly to keys 0..q: two layers of two heads."""
    B, T = x.shape
    p = torch.tril(torch.ones(T, T))
    p = p / p.sum(-1, keepdim=True)
    return {layer: p.expand(B, 2, T, T).clone() for layer in range(2)}


def test_window_distances_closed_forms(monkeypatch):
    monkeypatch.setattr(AT.M, "attention_probs", lambda model, x: _uniform_probs(x))
    T, sep = 8, 99
    x = torch.arange(T)[None].repeat(3, 1)
    x[1, 5] = sep  # a separator among the keys of window 1
    d = AT.window_distances(None, x, sep, batch=2)
    assert d["all"].shape == d["sinks excluded"].shape == (3, 2, 2)
    q = np.arange(T // 2, T)
    np.testing.assert_allclose(d["all"], np.full((3, 2, 2), (q / 2).mean()))  # uniform over 0..q: mean q / 2
    # sinks excluded: keys 1..q (and not the separator at 5), uniform
    plain = np.mean([np.mean(q_ - np.arange(1, q_ + 1)) for q_ in q])
    with_sep = np.mean([np.mean(q_ - np.array([k for k in range(1, q_ + 1) if k != 5])) for q_ in q])
    np.testing.assert_allclose(d["sinks excluded"][[0, 2]], plain)
    np.testing.assert_allclose(d["sinks excluded"][1], with_sep)


def test_distance_table_ratio_and_intervals():
    rng = np.random.default_rng(0)
    n = 30
    a = rng.normal(60, 5, (n, 2, 3))
    b = a / 1.5 + rng.normal(0, 1, (n, 2, 3))
    dist = {"A": {"all": a, "sinks excluded": a + 5}, "B": {"all": b, "sinks excluded": b + 5}}
    names = {"A": "Model A (GPT-2)", "B": "Model B (Gemma 3-style)"}
    t = AT.distance_table(dist, names, n_boot=500)
    assert list(t.columns) == ["model", "measure", "mean", "95% lo", "95% hi", "windows"]
    assert list(t.measure.unique()) == list(AT.DISTANCE_MEASURES.values())  # the blog's reading first
    first = t[t.measure == t.measure.iloc[0]].set_index("model")
    assert first.loc[names["A"], "mean"] == pytest.approx(a.mean())
    r = first.loc["ratio A / B"]
    assert r["mean"] == pytest.approx(a.mean() / b.mean()) and r["95% lo"] < r["mean"] < r["95% hi"]
    assert 1 < r["95% lo"]  # A looks clearly further back here
    assert (t["95% lo"] <= t["mean"]).all() and (t["mean"] <= t["95% hi"]).all()
    with pytest.raises(ValueError, match="same ones"):
        AT.distance_table({"A": dist["A"], "B": {k: v[:10] for k, v in dist["B"].items()}}, names)


def test_attention_findings_read_the_distance_table():
    from nblib.chapters.part2 import blog_findings
    names = {"A": "Model A (GPT-2)", "B": "Model B (Gemma 3-style)"}
    rows = []
    for measure, (ma, mb) in zip(AT.DISTANCE_MEASURES.values(), ((60.0, 40.0), (50.0, 45.0))):
        rows += [{"model": names["A"], "measure": measure, "mean": ma, "95% lo": ma - 2, "95% hi": ma + 2, "windows": 32},
                 {"model": names["B"], "measure": measure, "mean": mb, "95% lo": mb - 2, "95% hi": mb + 2, "windows": 32},
                 {"model": "ratio A / B", "measure": measure, "mean": ma / mb, "95% lo": 0.95 if ma == 50 else 1.3,
                  "95% hi": 1.4, "windows": 32}]
    text = blog_findings._distance_text(pd.DataFrame(rows), None, names["A"], names["B"], 256)
    assert "A / B 1.50 [1.30, 1.40]" in text and "A looks further back" in text
    assert "With the sinks dropped" in text and "no difference at this budget" in text
