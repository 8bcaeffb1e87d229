"""The Gemma blog's inference-cost numbers, recomputed: KV-cache bytes measured against the
closed form, the 7B-class cache table, k̄ of local and global layers, and the FLOPs table of
the scaled recipes, each to the precision the blog prints."""

import pytest

from nblib.gemma.inference_cost import (BLOG_RECIPES, kv_cache_table, kv_layouts_7b, long_context_flops, mean_keys_table,
                                        measured_cache_bytes)
from nblib.models.gemma3 import Gemma3Config
from nblib.models.gpt2 import GPT2Config

MODELS = {"A": ("gpt2", GPT2Config.gpt2_124m()), "B": ("gemma3", Gemma3Config.gemma3_113m())}


def test_measured_cache_bytes_equal_the_formula_including_past_the_window():
    t = measured_cache_bytes(MODELS, [1, 2, 511, 512, 513, 1024, 2048, 4096])
    assert (t["measured bytes"] == t["formula bytes"]).all()
    assert set(t[t.model == "A"].tokens) == {1, 2, 511, 512, 513, 1024}  # A's position table stops at 1024
    b = t[t.model == "B"].set_index("tokens")["positions kept"]
    assert b[4096] - b[2048] == 3 * 2048  # past the window only the 3 global layers grow


def test_cache_at_1024_tokens_is_the_blogs_75_5_and_11_8_mb():
    t = measured_cache_bytes(MODELS, [1024]).set_index("model")["measured bytes"]
    assert round(t["A"] / 1e6, 1) == 75.5 and round(t["B"] / 1e6, 1) == 11.8
    assert round(t["A"] / t["B"], 1) == 6.4


def test_7b_class_cache_table_matches_the_blog():
    t = kv_cache_table(kv_layouts_7b()).set_index("tokens")
    blog = {8192: (4.3, 1.1, 0.31), 32768: (17.2, 4.3, 0.91), 131072: (68.7, 17.2, 3.3)}
    for T, (mha, gqa, win) in blog.items():
        row = t.loc[T]
        assert (round(row.iloc[0], 1), round(row.iloc[1], 1)) == (mha, gqa)
        assert round(row.iloc[2], 2 if win < 1 else 1) == win
    assert round(t.loc[32768].iloc[0] / t.loc[32768].iloc[2]) == 19  # "≈19× at 32k"


def test_mean_keys_table_matches_the_blog():
    t = mean_keys_table().set_index("context T")
    assert t.loc[1024].tolist()[:2] == [512.5, 384.25]
    assert t.loc[131072, "global k̄"] == 65536.5 and round(t.loc[131072].iloc[1], 1) == 511.0
    assert round(t.loc[1024].iloc[2], 2) == 1.33 and round(t.loc[131072].iloc[2]) == 128


@pytest.mark.parametrize("name,params,g1k,g128k,growth,share", [
    ("Model A's recipe, 6.7B", 6.7, 13.6, 47.7, 3.5, 0.72),
    ("Model A's recipe, 15.4B", 15.4, 31.2, 95.1, 3.0, 0.68),
    ("Model B's recipe, 5.8B", 5.8, 11.9, 20.5, 1.7, 0.43),
    ("Model B's recipe, 13.5B", 13.5, 27.3, 43.4, 1.6, 0.38),
])
def test_long_context_flops_table_matches_the_blog(name, params, g1k, g128k, growth, share):
    row = long_context_flops({name: BLOG_RECIPES[name]}).iloc[0]
    assert round(row["parameters (B)"], 1) == params
    assert round(row["GFLOPs/token at 1,024"], 1) == g1k and round(row["GFLOPs/token at 131,072"], 1) == g128k
    assert round(row["growth 1,024 -> 131,072"], 1) == growth and round(row["attention share at 131,072"], 2) == share


def test_profiler_counts_the_analytic_linear_flops_exactly():
    small = {"A": ("gpt2", GPT2Config(vocab_size=97, max_seq_len=64, d_model=32, n_layers=2, n_heads=4)),
             "B": ("gemma3", Gemma3Config(vocab_size=97, d_model=32, n_layers=4, n_heads=4, n_kv_heads=1,
                                          head_dim=8, d_ff=64, window=8))}
    from nblib.gemma.inference_cost import profiler_flops

    t = profiler_flops(small, seq_len=24)
    assert (t["ratio"] == 1.0).all()
