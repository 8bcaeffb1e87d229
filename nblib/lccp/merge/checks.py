"""Argument checks and memory accounting shared by the mergers (LCCP paper, App. B).

Imports only the standard library, numpy, torch and nblib.store.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from nblib.store.checkpoint import checkpoint_of, verify_checkpoint


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
