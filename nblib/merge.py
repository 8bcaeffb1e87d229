"""Checkpoint merging for Constant-Last4 (LCCP paper, Sec. 4.1 and App. B).

All methods read checkpoints ordered oldest (theta_1) to newest (theta_K):
- weighted averages (Eq. 3) with weights from LastM (Eq. 4), 1-Sqrt (Eqs. 5-6) or EMA (Eq. 7);
- task-vector merges DARE-linear and TIES, with task vectors delta_i = theta_i - theta_1.

Streaming: nothing here ever loads a whole checkpoint. Tensors are visited name by name
(sorted), and each tensor in blocks of rows (dim 0) of at most `chunk_numel` elements, read
from every checkpoint with `safe_open(...).get_slice`. Live memory is the merged output (one
model, in the checkpoints' dtype) plus a few fp32 block buffers, whatever the number of
checkpoints. TIES also holds one fp32 copy of one whole task-vector tensor (its trimming is
per tensor). Each function's docstring states its bound; an optional `tracker` sees every
tensor this module materialises, so tests can check the bound. With the default block
size (`default_chunk_numel`: 1/64 of the model) the peak stays below two models' worth as
long as no single row holds more than 1/64 of the model and, for TIES,
4 * n_max + (8 + b) * c <= model bytes (n_max: largest tensor's elements, b: stored bytes
per element, c: block elements).

CLI: python -m nblib.merge --method {lastM,one_sqrt,ema,dare,ties} CKPT... -o OUT.safetensors
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from safetensors import safe_open

from nblib.atomic import atomic_save_safetensors, clean_stale_temporaries
from nblib.checkpoint import checkpoint_of, verify_checkpoint
from nblib.cli import run_cli

CHUNK_NUMEL = 1 << 22  # cap on elements per row block: 16 MiB per fp32 buffer
METHODS = ("lastM", "one_sqrt", "ema", "dare", "ties")

# safetensors header dtype strings -> torch dtypes
_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U64": torch.uint64, "U32": torch.uint32, "U16": torch.uint16, "U8": torch.uint8,
    "BOOL": torch.bool,
}


# -----------------------------------------------------------------------------
# Memory accounting


class _NoTracker:
    """The default `tracker`: counts nothing. A tracker is any object with `track(t) -> t`,
    called on every tensor a merge materialises; tests/test_merge.py passes one that counts
    live bytes to check each method's memory bound."""

    def track(self, t):
        return t


# -----------------------------------------------------------------------------
# Argument checks


def _int_value(x, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        if isinstance(x, (float, np.floating)) and float(x).is_integer():
            return int(x)
        raise TypeError(f"{what} must be an integer, got {x!r}")
    return int(x)


def _positive_int(x, what: str) -> int:
    v = _int_value(x, what)
    if v < 1:
        raise ValueError(f"{what} must be >= 1, got {v}")
    return v


def _check_iterations(iterations, n: int | None = None) -> np.ndarray:
    """Training iterations t_1 < ... < t_K as float64 (exact for ints below 2**53)."""
    if isinstance(iterations, (str, bytes)) or not hasattr(iterations, "__len__"):
        raise TypeError(f"iterations must be a sequence of integers, got {iterations!r}")
    t = [_int_value(x, "each iteration") for x in iterations]
    if not t:
        raise ValueError("iterations is empty; give one iteration per checkpoint")
    if n is not None and len(t) != n:
        raise ValueError(f"got {len(t)} iterations for {n} checkpoints; give one per checkpoint")
    if t[0] < 0:
        raise ValueError(f"iterations must be >= 0, got {t[0]}")
    for i in range(1, len(t)):
        if t[i] <= t[i - 1]:
            raise ValueError(
                f"iterations must increase strictly (checkpoints ordered oldest to newest), "
                f"but position {i} has {t[i]} after {t[i - 1]}"
            )
    return np.asarray(t, dtype=np.float64)


def _check_rho(rho) -> float:
    if isinstance(rho, bool) or not isinstance(rho, (int, float, np.integer, np.floating)):
        raise TypeError(f"rho must be a number in (0, 1], got {rho!r}")
    if not 0.0 < float(rho) <= 1.0:
        raise ValueError(f"rho must lie in (0, 1], got {rho}")
    return float(rho)


def _check_beta(beta) -> float:
    if isinstance(beta, bool) or not isinstance(beta, (int, float, np.integer, np.floating)):
        raise TypeError(f"beta must be a number in (0, 1), got {beta!r}")
    if not 0.0 < float(beta) < 1.0:
        raise ValueError(f"beta must lie in (0, 1) (exclusive), got {beta}")
    return float(beta)


def _check_paths(paths) -> list[Path]:
    """Input files: .safetensors files, or nblib checkpoint folders (ckpt/step_N, read as their
    model.safetensors). A checkpoint's weights must match their recorded sha256; a plain file
    must be a whole safetensors file (header and data all present). Errors name the file."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        raise TypeError(f"paths must be a list of checkpoint files, got a single path {paths!r}")
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("no checkpoints given; pass at least one .safetensors file")
    out = []
    for p in paths:
        if p.is_dir():
            if not (p / "model.safetensors").is_file():
                raise FileNotFoundError(f"checkpoint not found: {p} is a folder without model.safetensors")
            p = p / "model.safetensors"
        if not p.is_file():
            raise FileNotFoundError(f"checkpoint not found: {p}")
        ckpt = checkpoint_of(p)
        if ckpt is not None:
            verify_checkpoint(ckpt, deep=True)  # raises CorruptCheckpointError naming the file
        _check_whole_file(p)
        out.append(p)
    return out


def _check_whole_file(p: Path) -> None:
    """Raise ValueError naming `p` unless it is a complete safetensors file."""
    size = p.stat().st_size
    try:
        with open(p, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if size < 8 or n <= 0 or 8 + n > size:
                raise ValueError("the header is cut off")
            header = json.loads(f.read(n))
        ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise ValueError(f"{p}: not a readable safetensors file ({size} bytes; {e})") from None
    if 8 + n + max(ends, default=0) != size:
        raise ValueError(f"{p}: truncated or padded safetensors file: {size} bytes, the header describes "
                         f"{8 + n + max(ends, default=0)}")


# -----------------------------------------------------------------------------
# Weight rules (App. B)


def last_m_weights(n: int, m: int) -> np.ndarray:
    """LastM (App. B, Eq. 4): weight 1/m on each of the newest m of n checkpoints, 0 before."""
    n, m = _positive_int(n, "n"), _positive_int(m, "m")
    if m > n:
        raise ValueError(f"m={m} exceeds the number of checkpoints n={n}; choose 1 <= m <= n")
    w = np.zeros(n)
    w[n - m:] = 1.0 / m
    return w


def one_sqrt_weights(iterations: Sequence[int]) -> np.ndarray:
    """1-Sqrt (App. B, Eqs. 5-6) on actual iterations: w_i ∝ 1 - sqrt((t_K - t_i)/(t_K - t_1)).

    The oldest checkpoint gets weight 0; a single checkpoint gets weight 1.
    """
    t = _check_iterations(iterations)
    if len(t) == 1:
        return np.ones(1)
    age = (t[-1] - t) / (t[-1] - t[0])  # Eq. 5, in [0, 1]
    w = 1.0 - np.sqrt(age)  # Eq. 6, unnormalised
    return w / w.sum()


def default_ema_delta(iterations: Sequence[int]) -> float:
    """Nominal checkpoint interval Delta for EMA (App. B, Eq. 7): the median gap t_{i+1} - t_i."""
    t = _check_iterations(iterations)
    return float(np.median(np.diff(t))) if len(t) > 1 else 1.0


def ema_weights(iterations: Sequence[int], beta: float, delta: float | None = None) -> np.ndarray:
    """Post-hoc EMA (App. B, Eq. 7): w_i ∝ beta ** ((t_K - t_i) / delta).

    `delta` is one nominal checkpoint interval in iterations (default: the median gap).
    Small beta concentrates mass on the newest checkpoint; beta near 1 approaches uniform.
    """
    t = _check_iterations(iterations)
    beta = _check_beta(beta)
    if delta is None:
        delta = default_ema_delta(iterations)
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.integer, np.floating)):
        raise TypeError(f"delta must be a positive number of iterations, got {delta!r}")
    if not (math.isfinite(delta) and delta > 0):
        raise ValueError(f"delta must be a positive number of iterations, got {delta}")
    w = beta ** ((t[-1] - t) / delta)  # newest gets beta**0 = 1, so the sum is >= 1
    return w / w.sum()


def spaced_indices(iterations: Sequence[int], m: int, spacing: int, target: int | None = None) -> list[int]:
    """Last4 spacing ablation (App. B.1): indices of the checkpoints at {T-(m-1)s, ..., T-s, T}.

    T is `target` (default: the newest iteration); every wanted iteration must be present.
    """
    t = [int(x) for x in _check_iterations(iterations)]
    m, spacing = _positive_int(m, "m"), _positive_int(spacing, "spacing")
    target = t[-1] if target is None else _int_value(target, "target")
    wanted = [target - j * spacing for j in range(m - 1, -1, -1)]
    missing = [x for x in wanted if x not in t]
    if missing:
        raise ValueError(
            f"Last{m} with spacing {spacing} at target {target} needs iterations {wanted}; "
            f"missing {missing} (available: {t})"
        )
    return [t.index(x) for x in wanted]


# -----------------------------------------------------------------------------
# Checkpoint files: iterations and headers

_STEP_RE = re.compile(r"^step_(\d+)$")


def read_iteration(path: str | os.PathLike) -> int:
    """Training iteration of one checkpoint: safetensors metadata "step", else the file name
    `step_000123.safetensors`, else the folder `step_000123/model.safetensors`.

    Raises ValueError if none is found, or if metadata and name disagree.
    """
    path = Path(path)
    with safe_open(str(path), "pt") as f:
        meta = f.metadata() or {}
    from_meta = None
    if "step" in meta:
        if not re.fullmatch(r"\d+", meta["step"].strip()):
            raise ValueError(f"{path}: metadata 'step' must be a non-negative integer, got {meta['step']!r}")
        from_meta = int(meta["step"])
    from_name = None
    for part in (path.stem, path.parent.name):
        match = _STEP_RE.match(part)
        if match:
            from_name = int(match.group(1))
            break
    if from_meta is not None and from_name is not None and from_meta != from_name:
        raise ValueError(f"{path}: metadata step {from_meta} disagrees with the name's step {from_name}")
    step = from_meta if from_meta is not None else from_name
    if step is None:
        raise ValueError(
            f"{path}: no training iteration found; pass iterations explicitly, or store "
            f"metadata 'step', or name the file step_<N>.safetensors or the folder step_<N>/"
        )
    return step


def resolve_iterations(paths, iterations=None, required: bool = True) -> np.ndarray | None:
    """Iterations of `paths` (oldest to newest): the explicit list if given, else read from each
    file (`read_iteration`). Checks one per checkpoint and strictly increasing.

    With required=False, returns None when some file carries no iteration.
    """
    paths = _check_paths(paths)
    if iterations is None:
        try:
            iterations = [read_iteration(p) for p in paths]
        except ValueError:
            if required:
                raise
            return None
    return _check_iterations(iterations, len(paths))


def _read_header(path: Path) -> dict[str, tuple[tuple[int, ...], str]]:
    try:
        with safe_open(str(path), "pt") as f:
            return {k: (tuple(f.get_slice(k).get_shape()), f.get_slice(k).get_dtype()) for k in f.keys()}
    except Exception as e:  # safetensors raises its own error type for bad files
        raise ValueError(f"{path}: not a readable safetensors file ({e})") from e


def check_compatible(paths) -> dict[str, tuple[tuple[int, ...], str]]:
    """Check that all checkpoints hold the same tensor names, shapes and dtypes.

    Returns {name: (shape, safetensors dtype)} in sorted name order; raises ValueError naming
    the file and the first mismatching key (sorted order) otherwise.
    """
    paths = _check_paths(paths)
    ref = _read_header(paths[0])
    for p in paths[1:]:
        hdr = _read_header(p)
        diff = sorted(set(ref) ^ set(hdr))
        if diff:
            key = diff[0]
            where = "missing from this file" if key in ref else f"not in {paths[0]}"
            raise ValueError(f"{p}: tensor names differ from {paths[0]}; first mismatching key {key!r} is {where}")
        for key in sorted(ref):
            if hdr[key][0] != ref[key][0]:
                raise ValueError(f"{p}: tensor {key!r} has shape {hdr[key][0]} but {paths[0]} has {ref[key][0]}")
            if hdr[key][1] != ref[key][1]:
                raise ValueError(f"{p}: tensor {key!r} has dtype {hdr[key][1]} but {paths[0]} has {ref[key][1]}")
    for key, (_, dt) in ref.items():
        if dt not in _DTYPES:
            raise ValueError(f"{paths[0]}: tensor {key!r} has unsupported dtype {dt}; known: {sorted(_DTYPES)}")
    return dict(sorted(ref.items()))


# -----------------------------------------------------------------------------
# Streaming machinery


def _row_blocks(shape: tuple[int, ...], chunk_numel: int):
    """Row ranges (start, stop) along dim 0 with at most max(chunk_numel, one row) elements.
    Yields None once for a 0-d tensor."""
    if len(shape) == 0:
        yield None
        return
    row = math.prod(shape[1:])
    step = max(1, chunk_numel // max(row, 1))
    for start in range(0, shape[0], step):
        yield start, min(start + step, shape[0])


def default_chunk_numel(header: dict) -> int:
    """Row-block size used when chunk_numel is None: 1/64 of the model's float elements, capped
    at CHUNK_NUMEL, so every method's block buffers (at most (24 + b) * c bytes) stay below
    half a model's bytes."""
    n = sum(math.prod(shape) for shape, dt in header.values() if _DTYPES[dt].is_floating_point)
    return max(1, min(CHUNK_NUMEL, n // 64))


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


class _Reader:
    """Open safetensors handles; reads row blocks as owned copies in the accumulation dtype."""

    def __init__(self, stack: contextlib.ExitStack, paths: list[Path], tracker):
        self.handles = [stack.enter_context(safe_open(str(p), "pt")) for p in paths]
        self.tracker = tracker

    def read(self, i: int, name: str, rows, dtype: torch.dtype) -> torch.Tensor:
        f = self.handles[i]
        view = f.get_tensor(name) if rows is None else f.get_slice(name)[rows[0]:rows[1]]
        self.tracker.track(view)  # a view of the file map: its pages while it lives
        return self.tracker.track(view.to(dtype, copy=True))

    def copy_whole(self, i: int, name: str) -> torch.Tensor:
        view = self.tracker.track(self.handles[i].get_tensor(name))
        return self.tracker.track(view.clone())


def _store(out: torch.Tensor, rows, block: torch.Tensor) -> None:
    (out if rows is None else out[rows[0]:rows[1]]).copy_(block)  # casts without a temporary


def _stream_merge(paths, header, tracker, newest: int,
                  merge_block: Callable, chunk_numel: int,
                  per_tensor: Callable | None = None) -> dict[str, torch.Tensor]:
    """Shared loop: for each float tensor name (sorted), ctx = per_tensor(reader, name, shape,
    acc_dtype, chunk_numel), then for each row block out[block] = merge_block(reader, name, rows, acc_dtype, ctx).
    Non-float tensors (integer buffers) are copied unchanged from checkpoint `newest`."""
    chunk_numel = default_chunk_numel(header) if chunk_numel is None else _positive_int(chunk_numel, "chunk_numel")
    tracker = tracker if tracker is not None else _NoTracker()
    out: dict[str, torch.Tensor] = {}
    with contextlib.ExitStack() as stack:
        reader = _Reader(stack, paths, tracker)
        for name, (shape, st_dtype) in header.items():
            dtype = _DTYPES[st_dtype]
            if not dtype.is_floating_point:
                out[name] = reader.copy_whole(newest, name)
                continue
            acc = _acc_dtype(dtype)
            ctx = per_tensor(reader, name, shape, acc, chunk_numel) if per_tensor else None
            merged = tracker.track(torch.empty(shape, dtype=dtype))
            for rows in _row_blocks(shape, chunk_numel):
                block = merge_block(reader, name, rows, acc, ctx)
                _store(merged, rows, block)
                del block
            out[name] = merged
    return out


# -----------------------------------------------------------------------------
# Weighted averages (Eq. 3)


def weighted_average(paths, weights, *, chunk_numel: int | None = None,
                     tracker=None) -> dict[str, torch.Tensor]:
    """Weighted parameter average (App. B, Eq. 3): theta = sum_i w_i theta_i, w_i >= 0, sum 1.

    Streams name by name and row block by row block (c <= max(chunk_numel, one row) elements;
    chunk_numel None: `default_chunk_numel`),
    skipping files with weight 0. Live tensors at any time: the output (one model, stored
    dtype) plus one fp32 accumulator block (4c bytes), one block view (b*c) and its fp32 copy
    (4c): peak <= model bytes + (8 + b) * c (fp64 checkpoints: 16 + b), for any number of
    checkpoints. Non-float tensors come from the newest checkpoint with non-zero weight
    (copying one adds its bytes once more while it is read).
    """
    paths = _check_paths(paths)
    header = check_compatible(paths)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (len(paths),):
        raise ValueError(f"got {w.size} weights for {len(paths)} checkpoints; give one weight per checkpoint")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or abs(w.sum() - 1.0) > 1e-6:
        raise ValueError(f"weights must be finite, >= 0 and sum to 1 (Eq. 3), got {w.tolist()}")
    used = [i for i in range(len(paths)) if w[i] > 0]
    used_w = [float(w[i]) for i in used]
    tr = tracker if tracker is not None else _NoTracker()

    def block(reader, name, rows, acc_dtype, _):
        acc = None
        for j, wj in enumerate(used_w):
            x = reader.read(j, name, rows, acc_dtype)
            if acc is None:
                acc = x.mul_(wj)  # first term: reuse the copy as the accumulator
            else:
                acc.add_(x, alpha=wj)
            del x
        return acc

    return _stream_merge([paths[i] for i in used], header, tr, len(used) - 1, block, chunk_numel)


def last_m_merge(paths, m: int = 4, *, spacing: int | None = None, iterations=None,
                 chunk_numel: int | None = None, tracker=None) -> dict[str, torch.Tensor]:
    """LastM (App. B, Eq. 4): equal weights 1/m on the newest m checkpoints (Last4: m=4).

    With `spacing` s (App. B.1), averages the checkpoints at iterations {T-(m-1)s, ..., T-s, T},
    T the newest; this needs iterations (explicit, or read from the files). Without spacing,
    iterations are only checked for order when available. Memory: as `weighted_average`.
    """
    paths = _check_paths(paths)
    m = _positive_int(m, "m")
    if spacing is None:
        resolve_iterations(paths, iterations, required=False)
        return weighted_average(paths, last_m_weights(len(paths), m), chunk_numel=chunk_numel, tracker=tracker)
    t = resolve_iterations(paths, iterations, required=True)
    picked = [paths[i] for i in spaced_indices(t.astype(np.int64).tolist(), m, spacing)]
    return weighted_average(picked, np.full(m, 1.0 / m), chunk_numel=chunk_numel, tracker=tracker)


def one_sqrt_merge(paths, iterations=None, *, chunk_numel: int | None = None,
                   tracker=None) -> dict[str, torch.Tensor]:
    """1-Sqrt merge (App. B, Eqs. 5-6) on actual iterations (explicit or read from the files).
    Memory: as `weighted_average`."""
    paths = _check_paths(paths)
    t = resolve_iterations(paths, iterations, required=True)
    return weighted_average(paths, one_sqrt_weights(t.tolist()), chunk_numel=chunk_numel, tracker=tracker)


def ema_merge(paths, iterations=None, beta: float = 0.9, delta: float | None = None, *,
              chunk_numel: int | None = None, tracker=None) -> dict[str, torch.Tensor]:
    """Post-hoc EMA merge (App. B, Eq. 7), beta in (0, 1) (paper: 0.1, 0.5, 0.9), delta = one
    nominal checkpoint interval in iterations (default: median gap). Memory: as `weighted_average`."""
    paths = _check_paths(paths)
    t = resolve_iterations(paths, iterations, required=True)
    w = ema_weights(t.tolist(), beta, delta)
    return weighted_average(paths, w, chunk_numel=chunk_numel, tracker=tracker)


# -----------------------------------------------------------------------------
# Task-vector merges: DARE-linear and TIES (App. B)


def _task_vector_setup(paths, iterations):
    paths = _check_paths(paths)
    if len(paths) < 2:
        raise ValueError(f"task-vector merging needs >= 2 checkpoints (a reference and a source), got {len(paths)}")
    resolve_iterations(paths, iterations, required=False)  # order check when available
    return paths, check_compatible(paths)


def dare_source_seeds(seed: int, n_sources: int) -> list[int]:
    """DARE (App. B): one generator seed per source, drawn by torch.Generator().manual_seed(seed)
    as torch.randint(0, 2**62, (n_sources,)), so that seeds s and s+1 share no mask stream."""
    seed = _int_value(seed, "seed")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2**62, (n_sources,), generator=g, dtype=torch.int64).tolist()


def dare_merge(paths, rho: float, seed: int = 42, *, iterations=None, chunk_numel: int | None = None,
               tracker=None) -> dict[str, torch.Tensor]:
    """DARE-linear (App. B; Yu et al., 2024) against the oldest checkpoint theta_1:

        theta = theta_1 + 1/(K-1) * sum_{i=2..K} (m_i * delta_i) / rho,  delta_i = theta_i - theta_1,

    m_i ~ Bernoulli(rho) independently per coordinate (keep with probability rho). The average
    runs over the K-1 sources (delta_1 = 0 is not a source), so rho = 1 gives
    theta_1 + mean_{i>1}(theta_i - theta_1) = mean_{i>1} theta_i, and for any rho the result is
    unbiased for that. Paper: rho in {0.1, 0.5}, seed 42.

    Randomness (`dare_source_seeds`): torch.Generator().manual_seed(seed) draws K-1 int64
    seeds, and source i (i = 2..K, oldest to newest) gets its own generator seeded with the
    (i-1)-th of them. Each source generator draws one float32 torch.rand value u per coordinate
    of each float tensor, tensors in sorted-name order, coordinates in row-major order; the
    mask is m = (u < rho). Row blocks read each stream in order, so the result does not depend
    on chunk_numel; different seeds give unrelated masks.

    Memory: output (one model) plus, per block of c elements, theta_1's fp32 block, the
    accumulator, one source's view (b * c, b = stored bytes per element) and fp32 copy, its
    uniforms and its bool mask: peak <= model bytes + max(12 + b, 17) * c <= model bytes +
    (17 + b) * c, for any K (fp32 accumulation; fp64 checkpoints double the fp buffers).
    """
    paths, header = _task_vector_setup(paths, iterations)
    rho = _check_rho(rho)
    n_src = len(paths) - 1
    gens = [torch.Generator().manual_seed(s) for s in dare_source_seeds(seed, n_src)]
    tr = tracker if tracker is not None else _NoTracker()

    def block(reader, name, rows, acc_dtype, _):
        ref = reader.read(0, name, rows, acc_dtype)  # theta_1 block
        acc = tr.track(torch.zeros_like(ref))
        for j in range(n_src):
            d = reader.read(j + 1, name, rows, acc_dtype).sub_(ref)  # delta_i block
            u = tr.track(torch.rand(d.shape, generator=gens[j], dtype=torch.float32))
            drop = tr.track(u >= rho)  # dropped with probability 1 - rho
            del u
            acc.add_(d.masked_fill_(drop, 0.0))
            del d, drop
        return acc.mul_(1.0 / (rho * n_src)).add_(ref)

    return _stream_merge(paths, header, tr, len(paths) - 1, block, chunk_numel)


def ties_keep_count(numel: int, rho: float) -> int:
    """TIES trimming (App. B): number of coordinates kept per task-vector tensor,
    k = max(1, floor(rho * numel + 1/2)), so rho = 1 keeps all."""
    return max(1, int(math.floor(_check_rho(rho) * numel + 0.5)))


def ties_merge(paths, rho: float, *, iterations=None, chunk_numel: int | None = None,
               tracker=None) -> dict[str, torch.Tensor]:
    """TIES (App. B; Yadav et al., 2023) against the oldest checkpoint theta_1, over the K-1
    task vectors delta_i = theta_i - theta_1 (i = 2..K):

    1. trim: per task vector and tensor keep the k = `ties_keep_count` largest |delta_i|
       (all coordinates tied with the k-th largest magnitude are kept), zero the rest;
    2. elect: s = sign(sum_i trimmed delta_i) per coordinate;
    3. disjoint mean: average the trimmed entries with sign(entry) == s (non-zero ones only;
       0 where none) and add to theta_1. rho = 1 with agreeing signs gives theta_1 + mean_i delta_i.
    Paper: rho in {0.1, 0.5}.

    Memory: pass 1 finds each source's magnitude threshold from one whole fp32 |delta_i|
    tensor (4 * n bytes, n = that tensor's numel; one source at a time, partitioned in place
    by numpy); pass 2 streams blocks of c elements, reading each source twice (elect, then
    mean). With b = stored bytes per element: pass 1 peak <= model bytes + 4 * n_max +
    (8 + b) * c; pass 2 peak <= model bytes + max(24, 20 + b) * c <= model bytes + (24 + b) * c
    (theta_1 block, elected sign, sum, count, one source's view, copy and mask); any K.
    """
    paths, header = _task_vector_setup(paths, iterations)
    rho = _check_rho(rho)
    n_src = len(paths) - 1
    tr = tracker if tracker is not None else _NoTracker()

    def thresholds(reader, name, shape, acc_dtype, chunk_numel):
        """Pass 1: tau_j = k-th largest |delta_j| over the whole tensor (0 keeps everything)."""
        n = math.prod(shape)
        k = ties_keep_count(n, rho) if n else 0
        if n == 0 or k >= n:
            return [0.0] * n_src
        taus = []
        for j in range(n_src):
            mag = tr.track(torch.empty(n, dtype=acc_dtype))  # |delta_j| flattened
            for rows in _row_blocks(shape, chunk_numel):
                d = reader.read(j + 1, name, rows, acc_dtype)
                d.sub_(reader.read(0, name, rows, acc_dtype)).abs_()
                lo = 0 if rows is None else rows[0] * (n // shape[0])
                mag[lo:lo + d.numel()].copy_(d.reshape(-1))
                del d
            arr = mag.numpy()
            arr.partition(n - k)  # in place: arr[n-k] is the k-th largest
            taus.append(float(arr[n - k]))
            del arr, mag
        return taus

    def trimmed(reader, j, name, rows, acc_dtype, ref, tau):
        d = reader.read(j + 1, name, rows, acc_dtype).sub_(ref)
        if tau > 0:
            keep = tr.track(d.abs()).ge_(tau)  # 1.0 where |delta| >= tau, else 0.0
            d.mul_(keep)
            del keep
        return d

    def block(reader, name, rows, acc_dtype, taus):
        ref = reader.read(0, name, rows, acc_dtype)
        sign = tr.track(torch.zeros_like(ref))
        for j in range(n_src):  # elect: sign of the summed trimmed task vectors
            sign.add_(trimmed(reader, j, name, rows, acc_dtype, ref, taus[j]))
        sign.sign_()
        total = tr.track(torch.zeros_like(ref))
        count = tr.track(torch.zeros_like(ref))
        for j in range(n_src):  # disjoint mean over entries agreeing with the elected sign
            d = trimmed(reader, j, name, rows, acc_dtype, ref, taus[j])
            agree = tr.track(d * sign).gt_(0)  # 1.0 where non-zero and same sign
            total.add_(d.mul_(agree))
            count.add_(agree)
            del d, agree
        del sign
        return total.div_(count.clamp_(min=1)).add_(ref)

    return _stream_merge(paths, header, tr, len(paths) - 1, block, chunk_numel, per_tensor=thresholds)


# -----------------------------------------------------------------------------
# Dispatcher, saving, CLI

_MERGERS = {"lastM": last_m_merge, "one_sqrt": one_sqrt_merge, "ema": ema_merge,
            "dare": dare_merge, "ties": ties_merge}


def merge(method: str, paths, **kw) -> dict[str, torch.Tensor]:
    """Merge checkpoints with one App. B method: lastM (m, spacing), one_sqrt, ema (beta, delta),
    dare (rho, seed), ties (rho); all take iterations=, chunk_numel=, tracker=."""
    if method not in _MERGERS:
        raise ValueError(f"unknown merge method {method!r}; choose one of {list(METHODS)}")
    out = _MERGERS[method](paths, **kw)
    for name, t in out.items():  # a non-finite input poisons the merge: say where, never hand it on
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise ValueError(f"merged tensor {name!r} has NaN or inf values: one of the inputs holds non-finite "
                             f"weights ({', '.join(str(p) for p in paths)})")
    return out


def save_merged(tensors: dict[str, torch.Tensor], out_path: str | os.PathLike, metadata: dict | None = None) -> None:
    """Write merged tensors to a safetensors file atomically. Metadata values that are not
    strings are stored as JSON."""
    meta = None
    if metadata is not None:
        meta = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()}
    atomic_save_safetensors(tensors, out_path, metadata=meta)


_METHOD_OPTIONS = {  # CLI options each method accepts, with defaults
    "lastM": {"m": 4, "spacing": None},
    "one_sqrt": {},
    "ema": {"beta": 0.9, "delta": None},
    "dare": {"rho": 0.5, "seed": 42},
    "ties": {"rho": 0.5},
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m nblib.merge",
        description="Merge safetensors checkpoints (oldest to newest) with an App. B method of "
                    "'Don't Stop Long-Context Continual Pre-Training Too Early'.",
    )
    p.add_argument("--method", required=True, choices=METHODS)
    p.add_argument("--m", type=int, help="lastM: number of newest checkpoints (default 4)")
    p.add_argument("--spacing", type=int, help="lastM: iteration gap s, averages {T-(m-1)s, ..., T} (App. B.1)")
    p.add_argument("--beta", type=float, help="ema: decay per nominal interval, in (0, 1) (default 0.9)")
    p.add_argument("--delta", type=float, help="ema: nominal checkpoint interval in iterations (default: median gap)")
    p.add_argument("--rho", type=float, help="dare/ties: keep fraction in (0, 1] (default 0.5)")
    p.add_argument("--seed", type=int, help="dare: random seed (default 42)")
    p.add_argument("--iterations", nargs="+", metavar="T",
                   help="training iteration of each checkpoint (default: read from metadata 'step' or step_<N> names)")
    p.add_argument("--chunk-numel", type=int, help="elements per streamed row block (default: model/64, capped)")
    p.add_argument("-o", "--output", required=True, help="output .safetensors file")
    p.add_argument("checkpoints", nargs="*", metavar="CKPT")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: python -m nblib.merge --method M [options] CKPT... -o OUT.safetensors. Exit 2 on bad usage."""
    parser = _parser()
    args = parser.parse_args(argv)
    ckpts = list(args.checkpoints)
    iterations = None
    if args.iterations is not None:
        # `--iterations 100 200 a.st b.st` also swallows the checkpoints: split at the first non-integer
        n_int = next((i for i, s in enumerate(args.iterations) if not re.fullmatch(r"\d+", s)), len(args.iterations))
        iterations = [int(s) for s in args.iterations[:n_int]]
        ckpts = args.iterations[n_int:] + ckpts
        if not iterations:
            parser.error("--iterations needs one non-negative integer per checkpoint")
    if not ckpts:
        parser.error("no checkpoints given")
    allowed = _METHOD_OPTIONS[args.method]
    kw = {}
    for opt in ("m", "spacing", "beta", "delta", "rho", "seed"):
        value = getattr(args, opt)
        if value is not None and opt not in allowed:
            parser.error(f"--{opt} does not apply to --method {args.method} (it takes: "
                         f"{', '.join('--' + o for o in allowed) or 'no options'})")
        if opt in allowed:
            kw[opt] = allowed[opt] if value is None else value
    out = Path(args.output)
    if out.is_dir():
        raise IsADirectoryError(f"-o {out} is a folder; allowed: a file path such as {out / 'merged.safetensors'}")
    for c in ckpts:
        src = Path(c) / "model.safetensors" if Path(c).is_dir() else Path(c)
        if out.exists() and src.exists() and out.resolve() == src.resolve():
            raise ValueError(f"-o {out} is also an input; allowed: a new file (the merge never overwrites its inputs)")
    ckpts = [str(p) for p in _check_paths(ckpts)]  # folders -> their weights; corrupt or truncated inputs named
    t = resolve_iterations(ckpts, iterations, required=args.method in ("one_sqrt", "ema") or bool(kw.get("spacing")))
    merged = merge(args.method, ckpts, iterations=None if t is None else t.astype(np.int64).tolist(),
                   chunk_numel=args.chunk_numel, **kw)
    metadata = {"merge_method": args.method, "merge_params": kw, "merge_sources": [str(p) for p in ckpts]}
    if t is not None:
        metadata["merge_iterations"] = t.astype(np.int64).tolist()
        metadata["step"] = str(int(t[-1]))
    clean_stale_temporaries(out.parent if str(out.parent) else Path("."), out.name)  # left by a killed merge
    save_merged(merged, out, metadata)
    print(f"merged {len(ckpts)} checkpoints with {args.method} {kw} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
