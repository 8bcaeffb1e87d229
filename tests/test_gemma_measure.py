"""The measurements chapters 6-10 run over their models (nblib.gemma: pair, position, extension,
breakdown_length, attention) against independent truth: a second, straightforward
implementation written here (full forward passes, cross-entropy from the logits, a greedy
loop without the cache, heads zeroed in the weights), closed forms (a model with uniform
logits has loss ln V everywhere; one with uniform attention attends 1/(q+1) to every key it
sees), and invariants (the RoPE bands add up to the score)."""

import math
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from nblib.budgets import get_budget
from nblib.data import get_tokenizer
from nblib.gemma import attention as AT
from nblib.gemma import breakdown_length
from nblib.gemma import extension as X
from nblib.gemma import pair
from nblib.gemma import position as P
from nblib.metrics import attention_maps as M
from nblib.models import build_model
from nblib.stats import paired_bootstrap

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

V = 257  # the byte tokenizer's vocabulary, EOS = 256
SHAPES = {
    "gpt2": dict(vocab_size=V, max_seq_len=96, d_model=32, n_layers=2, n_heads=4),
    "gemma3": dict(vocab_size=V, d_model=32, n_layers=4, n_heads=4, n_kv_heads=2, head_dim=8, d_ff=48,
                   max_seq_len=96, window=16),
}


def model_of(family, seed=0):
    """A small model with random (not initial) weights everywhere, norms and biases included."""
    torch.manual_seed(seed)
    m = build_model(family, SHAPES[family])
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return m.eval()


def uniform_attention_gpt2(seed=0):
    """A GPT2 whose queries are zero: every score is 0, so each query attends 1/(q+1) to keys 0..q."""
    m = model_of("gpt2", seed)
    d = m.d_model
    with torch.no_grad():
        for block in m.blocks:
            block.attn.c_attn.weight[:d] = 0
            block.attn.c_attn.bias[:d] = 0
    return m


def direct_nll(model, x):
    """(B, T-1) next-token loss from one full forward pass, in float64: the second implementation."""
    with torch.no_grad():
        logits, _ = model(x[:, :-1])
    logp = torch.log_softmax(logits.double(), -1)
    return -logp.gather(-1, x[:, 1:, None])[..., 0]


def tokens(n, T, seed=0, vocab=V - 1):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, vocab, (n, T)).astype(np.int64))


class FakeRun:
    """What the measurements read of a run: load_model(step), checkpoints(), memo(), hash, config."""

    def __init__(self, make, hash="h", realized_tokens=0, steps=(), max_seq_len=96):
        self.make, self.hash, self.steps = make, hash, list(steps)
        self.config = SimpleNamespace(realized_tokens=realized_tokens, model={"max_seq_len": max_seq_len})
        self.loads, self.memo_keys = [], []

    def load_model(self, step="final"):
        self.loads.append(step)
        return self.make(step)

    def checkpoints(self):
        return [SimpleNamespace(step=s) for s in self.steps]

    def memo(self, key, fn, steps=()):
        self.memo_keys.append((key, tuple(steps)))
        return fn()


# ---------------------------------------------------------------------------------------
# chapter 6: nblib.gemma.pair
# ---------------------------------------------------------------------------------------
def test_heldout_losses_are_each_models_mean_loss_per_window(uniform_model):
    w = tokens(5, 33)
    models = {"uniform": uniform_model(V), "gpt2": model_of("gpt2")}
    out = pair.heldout_losses(models, w)
    assert list(out) == ["uniform", "gpt2"]
    assert np.allclose(out["uniform"], math.log(V), rtol=1e-6)  # closed form: ln V at every token
    assert out["gpt2"].shape == (5,)
    assert np.allclose(out["gpt2"], direct_nll(models["gpt2"], w).mean(1).numpy(), atol=1e-5)


def test_shape_parameter_table_counts_what_real_models_hold():
    b = get_budget("smoke").pair
    shapes = {"A": ("gpt2", b.model_a), "B": ("gemma3", b.model_b)}
    table = pair.shape_parameter_table(shapes)
    built = {k: build_model(f, dict(s)) for k, (f, s) in shapes.items()}  # real tensors, on the CPU
    assert table.equals(pair.parameter_table(built))
    for k, m in built.items():
        assert table.loc["total", k] == sum(p.numel() for p in m.parameters())


def test_untrained_model_is_the_seeded_initialisation():
    b = get_budget("smoke")
    got = pair.untrained_model(b, "B", seed=3)
    torch.manual_seed(3)
    want = build_model("gemma3", dict(b.pair.model_b))
    assert not got.training and type(got) is type(want)
    assert all(torch.equal(x, y) for x, y in zip(got.state_dict().values(), want.state_dict().values()))
    other = pair.untrained_model(b, "B", seed=4)
    assert not all(torch.equal(x, y) for x, y in zip(got.state_dict().values(), other.state_dict().values()))
    assert sum(p.numel() for p in pair.untrained_model(b, "A").parameters()) == \
        sum(p.numel() for p in build_model("gpt2", dict(b.pair.model_a)).parameters())
    with pytest.raises(ValueError, match="allowed"):
        pair.untrained_model(b, "C")


# ---------------------------------------------------------------------------------------
# chapter 8: nblib.gemma.position
# ---------------------------------------------------------------------------------------
def test_picked_bands_add_up_to_the_direct_score_and_a_planted_error_shows():
    model = model_of("gemma3", seed=1)
    bands = P.rope_bands(model.head_dim, model.config.rope_global_base, 48)
    text = tokens(3, 48, seed=2)
    g, loc = model.config.global_layers[0], model.layer_windows.index(model.config.window)  # layers 0 and 1
    picks = {"global": pd.Series({"layer": g, "head": 1}), "local": pd.Series({"layer": loc, "head": 2})}
    decomp = P.picked_band_scores(model, text, picks, bands)
    assert list(decomp) == ["global", "local"]
    assert decomp["global"].delta.max() == 47 and decomp["local"].delta.max() == model.layer_windows[loc] - 1
    errors = P.band_sum_errors(model, text, picks, decomp)
    assert max(errors.values()) < 1e-6  # the blog's appendix: the bands sum to the score (cos, sin in fp32)
    planted = {k: d.copy() for k, d in decomp.items()}
    planted["local"].loc[planted["local"].delta == 3, "score"] += 0.5 / len(bands)  # +0.5 on S(3)
    bad = P.band_sum_errors(model, text, picks, planted)
    assert bad["global"] < 1e-6 and abs(bad["local"] - 0.5) < 1e-6


def test_random_table_similarity_is_a_seeded_gaussian_table():
    table = torch.zeros(20, 8)
    got = P.random_table_similarity(table, seed=5)
    torch.manual_seed(5)
    g = torch.randn(20, 8).double()
    g = g / g.norm(dim=1, keepdim=True)
    assert np.allclose(got, (g @ g.T).numpy(), atol=1e-12)
    assert np.allclose(np.diag(got), 1) and np.allclose(got, got.T)
    assert np.array_equal(got, P.random_table_similarity(table, seed=5))


# ---------------------------------------------------------------------------------------
# chapter 9: nblib.gemma.extension and breakdown_length
# ---------------------------------------------------------------------------------------
def test_page_nlls_are_one_pass_losses_of_each_model(uniform_model):
    docs = tokens(3, 41)
    models = {"g": model_of("gemma3"), "u": uniform_model(V)}
    out = X.page_nlls(models, docs)
    assert list(out) == ["g", "u"]
    assert np.allclose(out["g"], direct_nll(models["g"], docs).numpy(), atol=1e-5)
    assert np.allclose(out["u"], math.log(V), rtol=1e-6)


def test_breakdown_nlls_read_every_family_and_model_in_order():
    docs = tokens(2, 41, seed=1)
    b, tuned = model_of("gemma3", 0), model_of("gemma3", 1)
    families = {"F": (FakeRun(lambda s: b, max_seq_len=16), FakeRun(lambda s: tuned)),
                "G": (FakeRun(lambda s: tuned, max_seq_len=16), FakeRun(lambda s: b))}
    out = X.breakdown_nlls(families, docs, (2, 4))
    assert list(out) == [f"{f}: {m}" for f in "FG" for m in ("plain RoPE", "zero-shot YaRN x2", "zero-shot YaRN x4",
                                                            "YaRN fine-tuned")]
    assert np.allclose(out["F: plain RoPE"], direct_nll(b, docs).numpy(), atol=1e-5)
    assert np.allclose(out["F: YaRN fine-tuned"], direct_nll(tuned, docs).numpy(), atol=1e-5)
    assert np.allclose(out["G: plain RoPE"], direct_nll(tuned, docs).numpy(), atol=1e-5)
    yarn = X.with_yarn(b, {"type": "yarn", "factor": 4.0, "original_max_seq_len": 16})
    assert np.allclose(out["F: zero-shot YaRN x4"], direct_nll(yarn, docs).numpy(), atol=1e-5)
    assert not np.allclose(out["F: zero-shot YaRN x2"], out["F: zero-shot YaRN x4"])


def test_finetune_snapshots_score_every_snapshot_after_zero_shot(uniform_model):
    docs = tokens(3, 21)
    run = FakeRun(lambda s: uniform_model(V), steps=(2, 4, 6))
    zero = np.array([[1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 2.0, 2.0]])
    t = X.finetune_snapshots(run, docs, 2, zero)
    assert list(t.columns) == ["step", "whole page", "first L"] and t.step.tolist() == [0, 2, 4, 6]
    assert t.loc[0, "whole page"] == pytest.approx(np.exp(2.25)) and t.loc[0, "first L"] == pytest.approx(np.exp(1.75))
    assert np.allclose(t.loc[1:, ["whole page", "first L"]].to_numpy(), V, rtol=1e-5)  # exp(ln V)
    assert run.loads == [2, 4, 6] and [s for _, s in run.memo_keys] == [(2,), (4,), (6,)]
    assert all(k.startswith("page_nll_long_docs_3x21_step") for k, _ in run.memo_keys)


def test_whole_vs_window_table_against_brute_force_scoring():
    model = model_of("gpt2", seed=2)
    docs = tokens(4, 41, seed=3)
    window, last = 16, 5
    T = docs.size(1) - 1
    whole = np.zeros((4, last))
    short = np.zeros((4, last))
    for i in range(4):  # every target scored by its own forward pass: full prefix, then the last `window`
        for j, t in enumerate(range(T - last + 1, T + 1)):
            with torch.no_grad():
                lw, _ = model(docs[i:i + 1, :t])
                ls, _ = model(docs[i:i + 1, t - window:t])
            whole[i, j] = -torch.log_softmax(lw[0, -1].double(), -1)[docs[i, t]].item()
            short[i, j] = -torch.log_softmax(ls[0, -1].double(), -1)[docs[i, t]].item()
    table = X.whole_vs_window_table({"m": model}, docs, window=window, last=last)
    assert list(table.columns) == ["loss, whole page", "loss, last 16 only", "gain", "95% lo", "95% hi"]
    row = table.loc["m"]
    assert row["loss, whole page"] == pytest.approx(whole.mean(), abs=1e-5)
    assert row["loss, last 16 only"] == pytest.approx(short.mean(), abs=1e-5)
    assert row["gain"] == pytest.approx(short.mean() - whole.mean(), abs=1e-5)
    r = paired_bootstrap(short.mean(1), whole.mean(1))
    assert row["95% lo"] == pytest.approx(r["lo"], abs=1e-4) and row["95% hi"] == pytest.approx(r["hi"], abs=1e-4)


class PasskeyOracle(torch.nn.Module):
    """Answers every passkey prompt: reads the needle's digits out of the decoded prompt. With
    `wrong`, answers 'xxxxx' instead. Records the prompt lengths it saw."""

    def __init__(self, tok, wrong=False):
        super().__init__()
        self.tok, self.wrong, self.lengths = tok, wrong, []

    def generate(self, idx, n_new, temperature=1.0):
        assert temperature == 0.0
        self.lengths.append(idx.size(1))
        rows = []
        for row in idx:
            key = "xxxxx" if self.wrong else re.search(r'PASSKEY = "(\d{5})"', self.tok.decode(row)).group(1)
            ans = torch.from_numpy(self.tok.encode(f'{key}"' + " " * n_new))[:n_new]
            rows.append(torch.cat([row, ans]))
        return torch.stack(rows)


def test_passkey_table_rows_and_accuracies_follow_the_models():
    budget = get_budget("smoke")
    tok = get_tokenizer(budget.pair.tokenizer)
    L, sL = budget.pair.seq_len, budget.pair.seq_len * budget.pair.yarn_factor
    ext = {"oracle": PasskeyOracle(tok), "wrong": PasskeyOracle(tok, wrong=True)}
    short = {"short oracle": PasskeyOracle(tok)}
    t = X.passkey_table(budget, ext, short, depths=(0.25, 0.75), n_per_depth=2, tokenizer=tok, seed=1)
    assert t.index.tolist() == [("oracle", sL - 8), ("wrong", sL - 8), ("short oracle", L - 8),
                                ("oracle, repeated prefix", sL - 8), ("wrong, repeated prefix", sL - 8),
                                ("short oracle, repeated prefix", L - 8)]
    assert t.columns.tolist() == [0.25, 0.75, "all depths"]
    want = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    assert t["all depths"].tolist() == want and t[0.25].tolist() == want and t[0.75].tolist() == want
    assert set(ext["oracle"].lengths) == {sL - 8} and set(short["short oracle"].lengths) == {L - 8}
    # the task's prompts and the repeated-prefix prompts: same haystacks and keys, another query
    a = X.passkey_prompts(budget, sL - 8, (0.25, 0.75), 2, seed=1)
    r = X.passkey_prompts(budget, sL - 8, (0.25, 0.75), 2, seed=1, query="repeat")
    assert [p["answer"] for p in a] == [p["answer"] for p in r]


def test_ladder_page_nll_reads_each_run_once_and_reuses_known_ones(uniform_model):
    pages = tokens(2, 17)

    def never(step):
        raise AssertionError("a known run was loaded")

    known = np.full((2, 16), 7.0)
    ladder = {("B", 0.5): FakeRun(lambda s: uniform_model(V), hash="a", realized_tokens=500),
              ("B", 1.0): FakeRun(never, hash="b", realized_tokens=1000),
              ("B-global", 0.75): FakeRun(lambda s: uniform_model(V), hash="c", realized_tokens=750)}
    out = breakdown_length.ladder_page_nll(ladder, pages, known={"b": known})
    assert list(out) == [("B", 500), ("B", 1000), ("B-global", 750)]
    assert out[("B", 1000)] is known
    assert np.allclose(out[("B", 500)], math.log(V), rtol=1e-6) and out[("B-global", 750)].shape == (2, 16)
    assert [len(r.loads) for r in ladder.values()] == [1, 0, 1]


# ---------------------------------------------------------------------------------------
# chapter 10: nblib.gemma.attention
# ---------------------------------------------------------------------------------------
def greedy_without_cache(model, x, n_new):
    for _ in range(n_new):
        with torch.no_grad():
            logits, _ = model(x)
        x = torch.cat([x, logits[:, -1].argmax(-1, keepdim=True)], 1)
    return x


def test_greedy_continuations_match_a_greedy_loop_without_the_cache():
    tok = get_tokenizer("byte")
    models = {"A": model_of("gpt2", 3), "B": model_of("gemma3", 3)}
    text = "def f(x):\n    return x"
    for max_tokens in (None, 10):
        got = AT.greedy_continuations(models, tok, text, 6, max_tokens=max_tokens)
        assert list(got) == ["A", "B"]
        start = torch.tensor([[tok.eos_id, *tok.encode(text).tolist()]])[:, :max_tokens]
        for k, m in models.items():
            assert got[k] == tok.decode(greedy_without_cache(m, start, 6)[0, start.size(1):])


def test_layer_maps_of_uniform_attention_are_one_over_q_plus_one():
    tok = get_tokenizer("byte")
    models = {"A": uniform_attention_gpt2(0), "B": model_of("gemma3", 1)}
    texts = {"A": "ab\ncd", "B": "x = 1\ny = 2\nz = 3"}
    maps = AT.layer_maps(models, tok, texts, max_tokens=12)
    labels, mean_maps = maps["A"]
    assert labels == ["⟨eos⟩", "a", "b", "↵", "c", "d"]
    T = len(labels)
    closed = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]
    assert all(torch.allclose(mean_maps[layer], closed, atol=1e-6) for layer in range(2))
    labels_b, maps_b = maps["B"]
    assert len(labels_b) == 12 and labels_b[0] == "⟨eos⟩"  # cut to max_tokens
    for layer, mp in maps_b.items():  # rows sum to 1; nothing above the diagonal or outside a local window
        assert mp.shape == (12, 12) and torch.allclose(mp.sum(1), torch.ones(12), atol=1e-5)
        assert torch.all(torch.triu(mp, 1) == 0)


def uniform_measures(windows, sep):
    """Closed forms for a head that attends 1/(q+1) to each key 0..q, over the queries of the
    second half: distance q/2, first position 1/(q+1), separators (#sep in 0..q)/(q+1), the
    last averaged over the windows holding a separator."""
    T = windows.size(1)
    qs = np.arange(T // 2, T)
    has = [w for w in windows if (w == sep).any()]
    seps = [np.mean([(w[:q + 1] == sep).sum().item() / (q + 1) for q in qs]) for w in has]
    return {"distance": np.mean(qs / 2), "first_position": np.mean(1 / (qs + 1)),
            "separator": np.mean(seps) if has else np.nan}


def test_head_measure_table_matches_uniform_attention_closed_forms():
    sep = V - 1
    w = tokens(10, 24, seed=4, vocab=V - 1)
    w[[0, 3, 4, 9], [2, 5, 11, 20]] = sep  # 4 of 10 windows hold a separator; two batches of 8 and 2
    models = {"A": uniform_attention_gpt2(0), "B": uniform_attention_gpt2(1)}
    t = AT.head_measure_table(models, w, sep, {"A": "model a", "B": "model b"})
    assert t.model.tolist() == ["model a"] * 8 + ["model b"] * 8
    want = uniform_measures(w, sep)
    for col, v in want.items():
        assert np.allclose(t[col], v, atol=1e-5), col


def test_sinks_by_length_orders_the_ladder_and_counts_tokens_per_parameter():
    sep = V - 1
    w = tokens(4, 24, seed=5, vocab=V - 1)
    w[:, 3] = sep

    def run(n_tokens):
        return FakeRun(lambda s: uniform_attention_gpt2(0), realized_tokens=n_tokens)
    ladder = {1.0: {"A": run(4000), "B": run(4000)}, 0.25: {"A": run(1000), "B": run(1000)},
              0.5: {"A": run(2000), "B": run(2000)}}
    t = AT.sinks_by_length(ladder, w, sep, n_params=100, names={"A": "a", "B": "b"})
    assert t["tokens per parameter"].tolist() == [10, 10, 20, 20, 40, 40] and t.model.tolist() == ["a", "b"] * 3
    want = uniform_measures(w, sep)
    assert np.allclose(t["first position, max layer"], want["first_position"], atol=1e-5)
    assert np.allclose(t["separator, max layer"], want["separator"], atol=1e-5)


def test_induction_tests_and_tables_match_closed_forms_and_direct_losses():
    models = {"A": uniform_attention_gpt2(0), "B": uniform_attention_gpt2(1)}
    n, dists, n_seqs = 6, (12, 20), 3
    tests = AT.induction_tests(models, V, V - 1, n, dists, n_seqs, seed=2)
    assert list(tests) == [("A", 12), ("A", 20), ("B", 12), ("B", 20)]
    for (k, d), t in tests.items():
        ts = np.arange(d, d + n - 1)  # the repeat; the token after the twin is one of the q + 1 keys
        assert np.allclose(t["scores"].score, np.mean(1 / (ts + 1)), atol=1e-6)
        qs = np.arange(1, d + n)
        assert np.allclose(t["scores"].previous_token, np.mean(1 / (qs + 1)), atol=1e-6)
        x, start = M.repeated_block_sequences(V, V - 1, n, d, n_seqs, seed=2)
        nll = direct_nll(models[k], x)
        assert t["first"] == pytest.approx(nll[:, :n - 1].mean().item(), abs=1e-5)
        assert t["repeat"] == pytest.approx(nll[:, d:d + n - 1].mean().item(), abs=1e-5)
    scores, induction = AT.induction_tables(tests, {"A": "a", "B": "b"})
    assert len(scores) == 4 * 8 and scores.groupby(["model", "distance"]).size().tolist() == [8] * 4
    assert induction[["model", "distance"]].values.tolist() == [["a", 12], ["a", 20], ["b", 12], ["b", 20]]
    assert (induction["heads > 0.3"] == 0).all() and (induction["best head"] == "layer 0, head 0").all()  # all tie
    assert induction["best score"].tolist() == pytest.approx([t["scores"].score.max() for t in tests.values()])


def test_ablation_heads_picks_induction_previous_token_and_control_heads():
    s = pd.DataFrame({"layer": [0, 0, 1, 1, 1, 1], "head": [0, 1, 0, 1, 2, 3],
                      "score": [0.1, 0.5, 0.4, 0.05, 0.0, 0.2], "previous_token": [0.9, 0.0, 0.1, 0.3, 0.8, 0.0]})
    sets = AT.ablation_heads(s)
    assert list(sets) == ["none", "induction heads", "previous-token heads", "lowest on both (control)"]
    as_heads = {k: sorted(zip(v.layer, v["head"])) for k, v in sets.items() if v is not None}
    assert as_heads == {"induction heads": [(0, 1), (1, 0)], "previous-token heads": [(0, 0), (1, 2)],
                        "lowest on both (control)": [(1, 1), (1, 3)]}
    best_only = AT.ablation_heads(s.assign(score=s.score / 10))  # none above 0.3: the best head alone
    assert sorted(zip(best_only["induction heads"].layer, best_only["induction heads"]["head"])) == [(0, 1)]


def zeroed_copy(model, heads):
    """The second implementation of ablation: the heads' input columns of the output projection set to zero."""
    m = model_of("gpt2", 0)
    m.load_state_dict(model.state_dict())
    hd = model.head_dim
    with torch.no_grad():
        for layer, hs in heads.items():
            for h in hs:
                m.blocks[layer].attn.c_proj.weight[:, h * hd:(h + 1) * hd] = 0
    return m.eval()


def test_ablation_table_matches_heads_zeroed_in_the_weights():
    model = model_of("gpt2", 0)
    models = {"A": model}
    n, dists, n_seqs = 6, (12, 20), 3
    natural = tokens(3, 25, seed=6)
    tests = AT.induction_tests(models, V, V - 1, n, dists, n_seqs, seed=0)
    before = direct_nll(model, natural)
    t = AT.ablation_table(models, tests, dists, natural, V, V - 1, n, n_seqs, 0, {"A": "a"})
    assert t.ablated.tolist() == ["none", "induction heads", "previous-token heads", "lowest on both (control)"]
    assert t.heads.iloc[0] == "-"
    assert torch.equal(direct_nll(model, natural), before)  # the hooks are gone
    sets = AT.ablation_heads(tests[("A", dists[0])]["scores"])
    for i, (label, heads) in enumerate(sets.items()):
        spec = {} if heads is None else heads.groupby("layer")["head"].apply(list).to_dict()
        assert t.heads.iloc[i] == (", ".join(f"L{la}h{h}" for la, hs in spec.items() for h in hs) or "-")
        m = zeroed_copy(model, spec)
        for d in dists:  # fresh blocks: seed + 1
            x, _ = M.repeated_block_sequences(V, V - 1, n, d, n_seqs, seed=1)
            assert t[f"repeat loss @{d}"].iloc[i] == pytest.approx(direct_nll(m, x)[:, d:d + n - 1].mean().item(),
                                                                    abs=1e-5)
        assert t["held-out loss"].iloc[i] == pytest.approx(direct_nll(m, natural).mean().item(), abs=1e-5)
    assert t["held-out loss"].nunique() > 1  # switching heads off changes the loss
