"""Atomic writes: a temporary file in the same folder, fsync, then os.replace.

A reader never sees a half-written file: either the old content or the new.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Iterator

from safetensors.torch import save_file


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to `path`; on success rename it onto `path`.

    On an exception the temporary file is removed and `path` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix + ".tmp", dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual permissions
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj, indent: int = 2) -> None:
    """Write `obj` as JSON to `path` atomically (keys sorted, so output is stable)."""
    atomic_write_text(path, json.dumps(obj, indent=indent, sort_keys=True) + "\n")


def atomic_save_safetensors(tensors: dict, path: str | os.PathLike, metadata: dict | None = None) -> None:
    """Save a dict of tensors with safetensors, atomically."""
    with atomic_path(path, suffix=".safetensors") as tmp:
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata=metadata)


def append_jsonl(path: str | os.PathLike, record: dict) -> None:
    """Append one JSON line and flush it (a log: appends, never rewrites; no fsync per line)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")
