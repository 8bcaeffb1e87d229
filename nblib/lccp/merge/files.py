"""Checkpoint files for merging: iterations, safetensors headers, and the streaming reader
that visits every tensor in row blocks (nothing loads a whole checkpoint).

Imports nblib.store and `checks`.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from safetensors import safe_open

from nblib.lccp.merge.checks import _NoTracker, _check_iterations, _check_paths, _positive_int

CHUNK_NUMEL = 1 << 22  # cap on elements per row block: 16 MiB per fp32 buffer

# safetensors header dtype strings -> torch dtypes
_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U64": torch.uint64, "U32": torch.uint32, "U16": torch.uint16, "U8": torch.uint8,
    "BOOL": torch.bool,
}


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
