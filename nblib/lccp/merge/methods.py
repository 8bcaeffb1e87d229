"""The mergers: weighted averages (Eq. 3) and the task-vector merges DARE-linear and TIES
(App. B), the `merge` dispatcher and `save_merged`.

Imports `checks`, `weights`, `files` and nblib.store.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import torch

from nblib.store.atomic import atomic_save_safetensors
from nblib.lccp.merge.checks import _NoTracker, _check_paths, _check_rho, _int_value, _positive_int
from nblib.lccp.merge.files import _row_blocks, _stream_merge, check_compatible, resolve_iterations
from nblib.lccp.merge.weights import ema_weights, last_m_weights, one_sqrt_weights, spaced_indices

METHODS = ("lastM", "one_sqrt", "ema", "dare", "ties")


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
