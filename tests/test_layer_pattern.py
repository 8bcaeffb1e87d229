"""Model B's layer layout as the Gemma blog numbers it (global layers 0, 4, 8 of 12), the Hugging
Face rule as an option (3, 7, 11), and RoPE stretched on every layer or on the global layers
only (nblib.models.gemma3, nblib.models.layers)."""

import pytest
import torch

from nblib.budgets import get_budget
from nblib.models import build_model
from nblib.models import layers as A
from nblib.models.gemma3 import Gemma3Config, global_layers, layer_pattern_of

V = 257


def gemma(**kw):
    cfg = dict(vocab_size=V, d_model=32, n_layers=8, n_heads=4, n_kv_heads=1, head_dim=8, d_ff=48, max_seq_len=64,
               window=16)
    torch.manual_seed(0)
    return build_model("gemma3", {**cfg, **kw}).eval()


def test_the_blogs_model_b_has_global_layers_0_4_8_and_hf_3_7_11():
    blog = Gemma3Config.gemma3_113m()
    assert blog.layer_pattern == "blog" and blog.global_layers == [0, 4, 8]
    w = blog.layer_windows
    assert w[8] is None and w[6] == 512 and w[0] is None  # "global layer 8", "layer 6, a local layer", layer 0 global
    hf = Gemma3Config.gemma3_113m(layer_pattern="hf")
    assert hf.global_layers == [3, 7, 11] and hf.layer_windows[8] == 512
    assert global_layers(12, 4, "blog") == [0, 4, 8] and global_layers(12, 4, "hf") == [3, 7, 11]
    assert global_layers(6, 1, "blog") == global_layers(6, 1, "hf") == list(range(6))  # all-global control
    with pytest.raises(ValueError, match="allowed: blog, hf"):
        Gemma3Config.gemma3_113m(layer_pattern="last")


@pytest.mark.parametrize("budget, want", [("smoke", [0, 4]), ("toy", [0, 4]), ("full", [0, 4, 8])])
def test_every_budget_places_model_b_global_layers_as_the_blog_numbers_them(budget, want):
    b = get_budget(budget).pair.model_b
    cfg = Gemma3Config(**b)
    assert cfg.layer_pattern == "blog" and b["layer_pattern"] == "blog"  # in the run config, so in its hash
    assert cfg.global_layers == want == [i for i in range(b["n_layers"]) if i % 4 == 0]
    # a global layer after local ones (the toy's four-layer B had its only global layer last)
    assert any(g > 0 and cfg.layer_windows[g - 1] is not None for g in cfg.global_layers)


def test_the_toy_pair_is_eight_layers_and_a_and_b_as_deep():
    p = get_budget("toy").pair
    assert p.model_a["n_layers"] == p.model_b["n_layers"] == 8
    assert Gemma3Config(**p.model_b).layer_windows == [None, 128, 128, 128, None, 128, 128, 128]


def test_the_layout_reads_back_from_its_windows():
    for n, every in ((12, 4), (8, 4), (8, 2), (6, 6), (5, 1)):
        for pattern in ("blog", "hf"):
            cfg = Gemma3Config(vocab_size=V, d_model=16, n_layers=n, n_heads=4, n_kv_heads=1, head_dim=4, d_ff=32,
                               window=8, global_every=every, layer_pattern=pattern)
            got_every, got_pattern = layer_pattern_of(cfg.layer_windows)
            again = Gemma3Config(**{**vars(cfg), "global_every": got_every, "layer_pattern": got_pattern})
            assert again.layer_windows == cfg.layer_windows
    with pytest.raises(ValueError, match="follow no layer pattern"):
        layer_pattern_of([None, 8, None, None])


def test_the_two_patterns_differ_only_in_which_layers_are_global():
    a, b = gemma(layer_pattern="blog"), gemma(layer_pattern="hf")
    assert [blk.window for blk in a.blocks] == [None, 16, 16, 16, None, 16, 16, 16]
    assert [blk.window for blk in b.blocks] == [16, 16, 16, None, 16, 16, 16, None]
    assert a.n_params() == b.n_params()
    b.load_state_dict(a.state_dict())  # same weights, another mask: different outputs past the window
    idx = torch.randint(0, V - 1, (1, 40))
    assert not torch.allclose(a(idx)[0], b(idx)[0])


def test_linear_interpolation_divides_every_frequency():
    rot = A.Rotary(8, 1e4, {"type": "linear", "factor": 4})
    torch.testing.assert_close(rot.inv_freq, A.rope_inv_freq(8, 1e4) / 4)
    plain = A.Rotary(8, 1e4)
    p = torch.arange(0, 64, 4)
    torch.testing.assert_close(rot(p)[0], plain(p // 4)[0])  # position p reads as p / s
    assert rot.mscale == 1.0  # no attention temperature
    with pytest.raises(ValueError, match="factor must be >= 1"):
        A.check_rope_scaling({"type": "linear", "factor": 0.5})


def test_global_only_scaling_leaves_the_local_layers_plain():
    lin = {"type": "linear", "factor": 4.0}
    m = gemma(rope_scaling=lin, rope_scaling_layers="global")
    assert m.rotary_global.rope_scaling == lin and m.rotary_local.rope_scaling is None
    torch.testing.assert_close(m.rotary_local.inv_freq, A.rope_inv_freq(8, 1e4))
    every = gemma(rope_scaling=lin)
    assert every.rotary_local.rope_scaling == lin
    plain = gemma()
    idx = torch.randint(0, V - 1, (1, 12))  # shorter than the window: only the rotations differ
    m.load_state_dict(plain.state_dict())
    every.load_state_dict(plain.state_dict())
    outs = [x(idx)[0] for x in (plain, m, every)]
    assert not torch.allclose(outs[0], outs[1]) and not torch.allclose(outs[1], outs[2])
    with pytest.raises(ValueError, match="rope_scaling_layers"):
        gemma(rope_scaling=lin, rope_scaling_layers="local")


def test_with_scaling_keeps_the_weights_and_stretches_the_layers_asked():
    from nblib.gemma import extension as X
    b = gemma()
    pi = X.with_scaling(b, {"type": "linear", "factor": 4.0}, layers="global")
    assert pi.config.rope_scaling_layers == "global" and pi.rotary_local.rope_scaling is None
    assert all(torch.equal(x, y) for x, y in zip(b.state_dict().values(), pi.state_dict().values()))
    yarn = X.with_yarn(b, {"type": "yarn", "factor": 4.0, "original_max_seq_len": 16})
    assert yarn.rotary_local.rope_scaling == yarn.rotary_global.rope_scaling  # the blog: every layer
    assert b.config.rope_scaling is None  # the source model is untouched


def test_a_config_stored_without_the_field_keeps_the_layout_it_was_trained_with():
    """Run configs written before issue 65 have no layer_pattern and were trained L L L G: they
    still load so, while Model B's configs name "blog" and so hash apart from them."""
    old = {"vocab_size": V, "d_model": 16, "n_layers": 8, "n_heads": 4, "n_kv_heads": 1, "head_dim": 4, "d_ff": 32,
           "window": 8}
    assert Gemma3Config(**old).global_layers == [3, 7]
    from nblib.gemma import pair
    b = pair.pair_configs(get_budget("toy"))["B"]
    assert b.model["layer_pattern"] == "blog"
    stripped = {k: v for k, v in b.model.items() if k != "layer_pattern"}
    assert type(b).from_dict({**b.to_dict(), "model": stripped}).hash != b.hash
