"""Checkpoint merging (LCCP paper, App. B): streaming merges against in-memory formulas."""

import math
import os
import subprocess
import sys
import weakref
from pathlib import Path

import numpy as np
import pytest

import subproc
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from nblib import cli
from nblib.lccp import merge as M


class MemoryTracker:
    """The tests' `tracker` for nblib.lccp.merge: live bytes of every tensor a merge materialises,
    and the peak.

    `track(t)` adds `t.numel() * t.element_size()` until `t` is garbage collected (a weakref
    finalizer subtracts it), so the count follows real object lifetimes. Counted: row blocks
    read from files (safetensors returns views of a copy-on-write file map; their pages are
    counted while the view lives), their fp32 copies, accumulators, RNG draws, masks and the
    output tensors. Not counted: the OS page cache behind the file maps, and torch's own
    scratch inside single kernels (nblib.lccp.merge writes arithmetic in-place or with named
    outputs so that no hidden full-size temporaries arise).
    """

    def __init__(self):
        self.live_bytes = 0
        self.peak_bytes = 0
        self._live: dict[int, int] = {}  # id(tensor) -> bytes

    def track(self, t: torch.Tensor) -> torch.Tensor:
        if id(t) in self._live:  # the same object again (e.g. `.to` returned self)
            return t
        nbytes = t.numel() * t.element_size()
        self._live[id(t)] = nbytes
        self.live_bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        weakref.finalize(t, self._free, id(t))
        return t

    def _free(self, key: int) -> None:
        self.live_bytes -= self._live.pop(key)


REPO = Path(__file__).resolve().parents[1]
SHAPES = {"attn.w": (12, 5), "bias": (7,), "conv": (3, 4, 2), "scale": ()}


def make_thetas(k, shapes=SHAPES, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [{n: torch.randn(s, generator=g).to(dtype) for n, s in shapes.items()} for _ in range(k)]


def write(tmp_path, thetas, iterations=None, extra=None):
    """One file per checkpoint, named step_<t>.safetensors (t = iteration, default 100, 200, ...)."""
    iterations = iterations or [100 * (i + 1) for i in range(len(thetas))]
    paths = []
    for t, theta in zip(iterations, thetas):
        p = tmp_path / f"step_{t:06d}.safetensors"
        save_file({**theta, **(extra or {})}, str(p))
        paths.append(p)
    return paths


def close(a, b, **kw):
    torch.testing.assert_close(a, b, check_dtype=False, **kw)


def in_memory_average(thetas, w):
    return {n: sum(float(wi) * th[n].double() for wi, th in zip(w, thetas)) for n in thetas[0]}


# ----------------------------------------------------------------------------- weight rules


def test_last_m_weights_eq4():
    np.testing.assert_array_equal(M.last_m_weights(6, 4), [0, 0, 0.25, 0.25, 0.25, 0.25])
    np.testing.assert_array_equal(M.last_m_weights(3, 3), [1 / 3] * 3)
    with pytest.raises(ValueError, match="m=5 exceeds"):
        M.last_m_weights(4, 5)
    with pytest.raises(ValueError, match="m must be >= 1"):
        M.last_m_weights(4, 0)


def test_one_sqrt_weights_eqs5_6_on_actual_iterations():
    t = [100, 250, 300, 700, 1000]  # uneven gaps: the rule must use t, not ranks
    raw = [1 - math.sqrt((t[-1] - ti) / (t[-1] - t[0])) for ti in t]
    expected = [r / sum(raw) for r in raw]
    w = M.one_sqrt_weights(t)
    np.testing.assert_allclose(w, expected, rtol=1e-12)
    assert w[0] == 0.0 and abs(w.sum() - 1) < 1e-12
    assert np.all(np.diff(w) > 0)
    # known answer, three evenly spaced checkpoints: raw weights 0, 1 - 1/sqrt(2), 1
    r = 1 - 1 / math.sqrt(2)
    np.testing.assert_allclose(M.one_sqrt_weights([0, 5, 10]), [0, r / (1 + r), 1 / (1 + r)], rtol=1e-12)
    np.testing.assert_array_equal(M.one_sqrt_weights([7]), [1.0])


def test_ema_weights_eq7():
    t = [100, 250, 300, 700, 1000]
    raw = [0.9 ** ((t[-1] - ti) / 100) for ti in t]
    np.testing.assert_allclose(M.ema_weights(t, 0.9, 100), [r / sum(raw) for r in raw], rtol=1e-12)
    # evenly spaced, default delta = the gap: geometric weights, w_K = (1 - beta) / (1 - beta^K)
    for beta in (0.1, 0.5, 0.9):
        w = M.ema_weights([0, 10, 20, 30, 40, 50], beta)
        assert abs(w.sum() - 1) < 1e-12
        assert w[-1] == pytest.approx((1 - beta) / (1 - beta**6), rel=1e-12)
        np.testing.assert_allclose(w[:-1] / w[1:], beta, rtol=1e-12)
    assert M.default_ema_delta([0, 10, 20, 35, 45]) == 10.0  # median gap
    assert M.ema_weights(t, 1e-6)[-1] > 0.999  # small beta: all mass on the newest
    w = M.ema_weights(t, 1 - 1e-9)
    assert w.max() - w.min() < 1e-6  # beta -> 1: uniform


def test_spaced_indices_app_b1():
    t = [100 * i for i in range(1, 13)]
    assert M.spaced_indices(t, 4, 300) == [2, 5, 8, 11]  # {T-3s, T-2s, T-s, T}, T = 1200
    assert M.spaced_indices(t, 4, 100, target=800) == [4, 5, 6, 7]
    with pytest.raises(ValueError, match="missing"):
        M.spaced_indices(t, 4, 400)  # needs iteration 0


# ----------------------------------------------------------------------------- weighted averages


@pytest.mark.parametrize("chunk_numel", [1, 7, None])
def test_weighted_average_matches_in_memory(tmp_path, chunk_numel):
    thetas = make_thetas(5)
    w = np.random.default_rng(0).dirichlet(np.ones(5))
    out = M.weighted_average(write(tmp_path, thetas), w, chunk_numel=chunk_numel)
    expected = in_memory_average(thetas, w)
    assert list(out) == sorted(SHAPES)
    for n in SHAPES:
        assert out[n].dtype == torch.float32 and out[n].shape == SHAPES[n]
        close(out[n], expected[n], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_last4_is_mean_of_last_four(tmp_path, dtype):
    thetas = make_thetas(7, dtype=dtype)
    ints = {"step_counter": torch.arange(3)}
    out = M.last_m_merge(write(tmp_path, thetas, extra=ints), m=4, chunk_numel=10)
    for n in SHAPES:
        expected = torch.stack([th[n].float() for th in thetas[-4:]]).mean(0).to(dtype)
        assert out[n].dtype == dtype
        close(out[n], expected)
    assert torch.equal(out["step_counter"], torch.arange(3))  # non-float: copied from the newest


def test_last4_spacing_app_b1(tmp_path):
    thetas = make_thetas(12)
    paths = write(tmp_path, thetas)  # iterations 100..1200 from the file names
    out = M.last_m_merge(paths, m=4, spacing=300)  # {300, 600, 900, 1200}
    for n in SHAPES:
        close(out[n], torch.stack([thetas[i][n] for i in (2, 5, 8, 11)]).mean(0))
    with pytest.raises(ValueError, match="missing"):
        M.last_m_merge(paths, m=4, spacing=500)


def test_one_sqrt_and_ema_merges_use_file_iterations(tmp_path):
    t = [100, 300, 400, 800, 1000]
    thetas = make_thetas(5)
    paths = write(tmp_path, thetas, iterations=t)
    for out, w in [
        (M.one_sqrt_merge(paths), M.one_sqrt_weights(t)),
        (M.ema_merge(paths, beta=0.5), M.ema_weights(t, 0.5, delta=200)),  # median gap 200
        (M.ema_merge(paths, t, 0.9, 250), M.ema_weights(t, 0.9, 250)),
    ]:
        expected = in_memory_average(thetas, w)
        for n in SHAPES:
            close(out[n], expected[n], rtol=1e-6, atol=1e-6)


def test_iterations_from_metadata_filename_and_folder(tmp_path):
    th = make_thetas(1)[0]
    save_file(th, str(tmp_path / "a.safetensors"), metadata={"step": "123"})
    save_file(th, str(tmp_path / "step_000456.safetensors"))
    (tmp_path / "step_000789").mkdir()
    save_file(th, str(tmp_path / "step_000789" / "model.safetensors"))
    save_file(th, str(tmp_path / "step_000001.safetensors"), metadata={"step": "2"})
    save_file(th, str(tmp_path / "plain.safetensors"))
    assert M.read_iteration(tmp_path / "a.safetensors") == 123
    assert M.read_iteration(tmp_path / "step_000456.safetensors") == 456
    assert M.read_iteration(tmp_path / "step_000789" / "model.safetensors") == 789
    with pytest.raises(ValueError, match="disagrees"):
        M.read_iteration(tmp_path / "step_000001.safetensors")
    with pytest.raises(ValueError, match="no training iteration"):
        M.one_sqrt_merge([tmp_path / "a.safetensors", tmp_path / "plain.safetensors"])


# ----------------------------------------------------------------------------- DARE


def slow_dare(thetas, rho, seed):
    """In-memory twin of the documented DARE: Generator(seed) draws one int64 seed per source,
    each source's generator then draws one torch.rand per coordinate, tensors in sorted-name order."""
    base = torch.Generator().manual_seed(seed)
    seeds = torch.randint(0, 2**62, (len(thetas) - 1,), generator=base, dtype=torch.int64).tolist()
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    out = {}
    for n in sorted(thetas[0]):
        ref = thetas[0][n]
        upd = [(torch.rand(ref.shape, generator=g) < rho) * (th[n] - ref) / rho for g, th in zip(gens, thetas[1:])]
        out[n] = ref + torch.stack(upd).mean(0)
    return out


def test_dare_rho_one_is_mean_of_task_vectors(tmp_path):
    thetas = make_thetas(6)
    out = M.dare_merge(write(tmp_path, thetas), rho=1.0, chunk_numel=5)
    for n in SHAPES:
        expected = thetas[0][n] + torch.stack([th[n] - thetas[0][n] for th in thetas[1:]]).mean(0)
        close(out[n], expected, rtol=1e-6, atol=1e-6)


def test_dare_reproducible_and_matches_documented_masks(tmp_path):
    thetas = make_thetas(5)
    paths = write(tmp_path, thetas)
    a = M.dare_merge(paths, rho=0.5, seed=42, chunk_numel=4)
    b = M.dare_merge(paths, rho=0.5, seed=42, chunk_numel=4)
    c = M.dare_merge(paths, rho=0.5, seed=42)  # other block size reads the same streams
    d = M.dare_merge(paths, rho=0.5, seed=43)
    twin = slow_dare(thetas, 0.5, 42)
    for n in SHAPES:
        assert torch.equal(a[n], b[n])
        close(a[n], c[n], rtol=1e-6, atol=1e-6)
        close(a[n], twin[n], rtol=1e-6, atol=1e-6)
    assert not torch.equal(a["attn.w"], d["attn.w"])


def test_dare_unbiased_over_seeds(tmp_path):
    """Mean over S seeds -> the rho = 1 result; z-scores use the exact per-seed variance
    (1/(K-1))^2 * sum_i delta_i^2 (1 - rho) / rho, which also checks independent masks."""
    k, rho, n_seeds = 4, 0.5, 200
    thetas = make_thetas(k, shapes={"w": (10, 20)})
    paths = write(tmp_path, thetas)
    runs = torch.stack([M.dare_merge(paths, rho, seed=s)["w"].double() for s in range(n_seeds)])
    deltas = torch.stack([th["w"].double() - thetas[0]["w"].double() for th in thetas[1:]])
    truth = thetas[0]["w"].double() + deltas.mean(0)
    sd = (deltas.pow(2).sum(0) * (1 - rho) / rho).sqrt() / (k - 1)
    z = (runs.mean(0) - truth) / (sd / math.sqrt(n_seeds))
    assert z.abs().max() < 5
    assert 0.7 < z.pow(2).mean() < 1.3  # 200 coordinates: chi^2/200 has sd 0.1


# ----------------------------------------------------------------------------- TIES


def slow_ties(thetas, rho):
    """In-memory TIES with exact top-k (torch.topk) per task vector and tensor."""
    out = {}
    for n in sorted(thetas[0]):
        ref = thetas[0][n].double().reshape(-1)
        deltas = torch.stack([th[n].double().reshape(-1) - ref for th in thetas[1:]])
        k = max(1, math.floor(rho * ref.numel() + 0.5))
        trimmed = torch.zeros_like(deltas)
        for i, d in enumerate(deltas):
            idx = d.abs().topk(k).indices
            trimmed[i, idx] = d[idx]
        sign = trimmed.sum(0).sign()
        agree = (trimmed * sign) > 0
        mean = (trimmed * agree).sum(0) / agree.sum(0).clamp(min=1)
        out[n] = (ref + mean).reshape(thetas[0][n].shape)
    return out


def test_ties_rho_one_agreeing_signs_is_mean_of_task_vectors(tmp_path):
    g = torch.Generator().manual_seed(1)
    base = {n: torch.randn(s, generator=g) for n, s in SHAPES.items()}
    sign = {n: torch.randn(s, generator=g).sign() for n, s in SHAPES.items()}
    thetas = [base] + [{n: base[n] + sign[n] * (0.1 + torch.rand(s, generator=g)) for n, s in SHAPES.items()}
                       for _ in range(4)]
    out = M.ties_merge(write(tmp_path, thetas), rho=1.0, chunk_numel=3)
    for n in SHAPES:
        close(out[n], base[n] + torch.stack([th[n] - base[n] for th in thetas[1:]]).mean(0), rtol=1e-6, atol=1e-6)


def test_ties_hand_built_sign_election(tmp_path):
    theta1 = torch.ones(6)
    d2 = torch.tensor([2.0, -1.0, 3.0, 0.0, -4.0, 1.0])
    d3 = torch.tensor([-1.5, -3.0, 1.0, 0.0, 2.0, -0.5])
    paths = write(tmp_path, [{"w": theta1}, {"w": theta1 + d2}, {"w": theta1 + d3}])
    # rho = 1: sum = [.5, -4, 4, 0, -2, .5] -> signs [+, -, +, 0, -, +];
    # agreeing means [2, (-1-3)/2, (3+1)/2, 0, -4, 1]
    assert torch.equal(M.ties_merge(paths, 1.0)["w"], torch.tensor([3.0, -1.0, 3.0, 1.0, -3.0, 2.0]))
    # rho = 0.5, k = 3: trimmed d2 = [2, 0, 3, 0, -4, 0], d3 = [-1.5, -3, 0, 0, 2, 0];
    # sum = [.5, -3, 3, 0, -2, 0] -> agreeing means [2, -3, 3, 0, -4, 0]
    assert M.ties_keep_count(6, 0.5) == 3
    assert torch.equal(M.ties_merge(paths, 0.5)["w"], torch.tensor([3.0, -2.0, 4.0, 1.0, -3.0, 1.0]))


@pytest.mark.parametrize("rho", [0.1, 0.3, 0.5])
def test_ties_matches_in_memory_topk(tmp_path, rho):
    thetas = make_thetas(5, seed=3)
    paths = write(tmp_path, thetas)
    twin = slow_ties(thetas, rho)
    for chunk_numel in (2, None):
        out = M.ties_merge(paths, rho, chunk_numel=chunk_numel)
        for n in SHAPES:
            close(out[n], twin[n], rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- streaming memory


STREAM_SHAPES = {f"layer{i}.w": (32, 24) for i in range(8)} | {"norm": (24,)}
BOUNDS = {  # extra live bytes beyond the output, from the docstrings (c elements a block, b bytes each)
    "lastM": lambda b, c, n_max: (8 + b) * c,
    "one_sqrt": lambda b, c, n_max: (8 + b) * c,
    "ema": lambda b, c, n_max: (8 + b) * c,
    "dare": lambda b, c, n_max: (17 + b) * c,
    "ties": lambda b, c, n_max: max(4 * n_max + (8 + b) * c, (24 + b) * c),
}
KW = {"lastM": {"m": 4}, "one_sqrt": {}, "ema": {"beta": 0.9}, "dare": {"rho": 0.5}, "ties": {"rho": 0.5}}


@pytest.mark.parametrize("chunk_numel", [100, None])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("method", M.METHODS)
def test_streaming_memory_bound_with_12_checkpoints(tmp_path, method, dtype, chunk_numel):
    thetas = make_thetas(12, shapes=STREAM_SHAPES, dtype=dtype)
    paths = write(tmp_path, thetas)
    model_bytes = sum(t.numel() * t.element_size() for t in thetas[0].values())
    b = thetas[0]["norm"].element_size()
    # 100 elements -> blocks of 4 rows of 24; default: 6168 // 64 = 96 -> also 4 rows
    assert M.default_chunk_numel(M.check_compatible(paths)) == 96
    c = 24 * 4
    n_max = max(math.prod(s) for s in STREAM_SHAPES.values())
    tracker = MemoryTracker()
    out = M.merge(method, paths, chunk_numel=chunk_numel, tracker=tracker, **KW[method])
    assert tracker.live_bytes == model_bytes  # only the output is left
    assert model_bytes < tracker.peak_bytes <= model_bytes + BOUNDS[method](b, c, n_max)
    assert tracker.peak_bytes <= 2 * model_bytes  # never two models' worth, with 12 going in
    del out
    assert tracker.live_bytes == 0  # every tracked tensor was released


def test_tracker_counts_lifetimes():
    tr = MemoryTracker()
    x = tr.track(torch.zeros(10))
    y = tr.track(torch.zeros(5, dtype=torch.float64))
    assert tr.track(x) is x and tr.live_bytes == 80
    del x
    assert tr.live_bytes == 40 and tr.peak_bytes == 80
    del y
    assert tr.live_bytes == 0


# ----------------------------------------------------------------------------- validation


def test_mismatched_keys_shapes_dtypes(tmp_path):
    good = tmp_path / "good.safetensors"
    save_file({"a": torch.zeros(2, 3), "b": torch.zeros(4)}, str(good))
    cases = {
        "missing.safetensors": ({"a": torch.zeros(2, 3)}, r"missing\.safetensors.*first mismatching key 'b' is missing"),
        "extra.safetensors": ({"a": torch.zeros(2, 3), "b": torch.zeros(4), "c": torch.zeros(1)},
                              r"extra\.safetensors.*'c' is not in"),
        "shape.safetensors": ({"a": torch.zeros(3, 2), "b": torch.zeros(4)},
                              r"shape\.safetensors: tensor 'a' has shape \(3, 2\) but .*good\.safetensors has \(2, 3\)"),
        "dtype.safetensors": ({"a": torch.zeros(2, 3), "b": torch.zeros(4, dtype=torch.float16)},
                              r"dtype\.safetensors: tensor 'b' has dtype F16"),
    }
    for name, (tensors, pattern) in cases.items():
        save_file(tensors, str(tmp_path / name))
        for method, kw in KW.items():
            if method in ("one_sqrt", "ema"):
                kw = {**kw, "iterations": [1, 2]}
            if method == "lastM":
                kw = {"m": 2}
            with pytest.raises(ValueError, match=pattern):
                M.merge(method, [good, tmp_path / name], **kw)


def test_bad_arguments(tmp_path):
    paths = write(tmp_path, make_thetas(3))
    with pytest.raises(ValueError, match="no checkpoints"):
        M.last_m_merge([])
    with pytest.raises(TypeError, match="list of checkpoint files"):
        M.last_m_merge(str(paths[0]))
    with pytest.raises(FileNotFoundError, match="nope"):
        M.last_m_merge([tmp_path / "nope.safetensors"], m=1)
    with pytest.raises(ValueError, match="m=4 exceeds the number of checkpoints n=3"):
        M.last_m_merge(paths, m=4)
    for rho in (0, -0.1, 1.5, float("nan")):
        for fn in (M.dare_merge, M.ties_merge):
            with pytest.raises(ValueError, match="rho must lie in"):
                fn(paths, rho)
    for beta in (0, 1, 1.5):
        with pytest.raises(ValueError, match="beta must lie in"):
            M.ema_merge(paths, beta=beta)
    with pytest.raises(ValueError, match="increase strictly"):
        M.one_sqrt_merge(paths, iterations=[100, 300, 200])
    with pytest.raises(ValueError, match="increase strictly"):
        M.one_sqrt_weights([100, 100])
    with pytest.raises(ValueError, match="increase strictly"):  # file names out of order
        M.dare_merge(paths[::-1], 0.5)
    with pytest.raises(ValueError, match="2 iterations for 3 checkpoints"):
        M.ema_merge(paths, iterations=[1, 2])
    with pytest.raises(ValueError, match="sum to 1"):
        M.weighted_average(paths, [0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match=">= 2 checkpoints"):
        M.ties_merge(paths[:1], 0.5)
    with pytest.raises(ValueError, match="unknown merge method 'mean'"):
        M.merge("mean", paths)


# ----------------------------------------------------------------------------- saving and CLI


def test_save_merged_roundtrip(tmp_path):
    out = M.last_m_merge(write(tmp_path, make_thetas(4)), m=2)
    M.save_merged(out, tmp_path / "m.safetensors", {"method": "lastM", "m": 2})
    back = load_file(str(tmp_path / "m.safetensors"))
    assert all(torch.equal(back[n], out[n]) for n in out)
    with safe_open(str(tmp_path / "m.safetensors"), "pt") as f:
        assert f.metadata() == {"method": "lastM", "m": "2"}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left


def run_cli(args):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subproc.run([sys.executable, "-m", "nblib.lccp.merge", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)


def test_cli_subprocess_round_trip_and_bad_usage(tmp_path):
    paths = write(tmp_path, make_thetas(5))
    out = tmp_path / "ema.safetensors"
    r = run_cli(["--method", "ema", "--beta", "0.5", "--iterations", 10, 20, 40, 50, 60, *paths, "-o", out])
    assert r.returncode == 0, r.stderr
    api = M.ema_merge(paths, [10, 20, 40, 50, 60], 0.5)
    back = load_file(str(out))
    assert all(torch.equal(back[n], api[n]) for n in api)
    with safe_open(str(out), "pt") as f:
        meta = f.metadata()
    assert meta["merge_method"] == "ema" and meta["step"] == "60"
    r = run_cli(["--method", "dare", "--rho", "1.5", *paths, "-o", tmp_path / "bad.safetensors"])
    assert r.returncode == 2 and "rho must lie in (0, 1]" in r.stderr
    assert not (tmp_path / "bad.safetensors").exists()


@pytest.mark.parametrize("method,opts", [
    ("lastM", ["--m", "3"]),
    ("lastM", ["--m", "2", "--spacing", "200"]),
    ("one_sqrt", []),
    ("ema", ["--beta", "0.1"]),
    ("dare", ["--rho", "0.1", "--seed", "7"]),
    ("ties", ["--rho", "0.5"]),
])
def test_cli_matches_api(tmp_path, method, opts):
    paths = write(tmp_path, make_thetas(5))  # iterations 100..500 from the names
    out = tmp_path / "out.safetensors"
    assert M.main(["--method", method, *opts, *map(str, paths), "-o", str(out)]) == 0
    kw = {o[2:]: (float(v) if o in ("--beta", "--rho") else int(v)) for o, v in zip(opts[::2], opts[1::2])}
    api = M.merge(method, paths, **kw)
    back = load_file(str(out))
    assert sorted(back) == sorted(api) and all(torch.equal(back[n], api[n]) for n in api)


def _exit_code(argv) -> int:
    """What `python -m nblib.lccp.merge ARGV` exits with (argparse errors exit 2 themselves)."""
    try:
        return cli.run_cli(M.main, argv)
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize("argv,message", [
    (["--method", "mean"], "invalid choice"),
    (["--method", "lastM", "--beta", "0.5"], "--beta does not apply to --method lastM"),
    (["--method", "lastM", "--m", "9"], "m=9 exceeds"),
    (["--method", "ema", "--beta", "1.0"], "beta must lie in"),
    (["--method", "ties", "--iterations", "3", "2", "1"], "increase strictly"),
    (["--method", "lastM", "--iterations", "1", "2"], "2 iterations for 3 checkpoints"),
])
def test_cli_bad_usage_exits_2(tmp_path, capsys, argv, message):
    paths = [str(p) for p in write(tmp_path, make_thetas(3))]
    # checkpoints right after any --iterations, as in the usage line
    assert _exit_code(argv + paths + ["-o", str(tmp_path / "o.safetensors")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert _exit_code(["--method", "lastM", "-o", str(tmp_path / "o.safetensors")]) == 2
