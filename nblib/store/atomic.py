"""Atomic writes: a temporary file in the same folder, fsync, then os.replace.

A reader never sees a half-written file: either the old content or the new. Files get the
mode the umask gives (0644 usually), never safetensors' or mkstemp's 0600, and logs are
opened without following symbolic links, so a link planted in a shared run store cannot
redirect a write into another user's file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Iterator

from safetensors import SafetensorError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to `path`; on success rename it onto `path`.

    On an exception the temporary file is removed and `path` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix + ".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, file_mode())  # mkstemp (and safetensors) make 0600: the usual mode instead
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


def file_mode() -> int:
    """The mode a new file gets under the current umask (0644 under the usual 022)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def save_safetensors(tensors: dict, path: str | os.PathLike, metadata: dict | None = None) -> None:
    """safetensors' save_file, then two fixes: the metadata in sorted key order (safetensors
    writes it in hash order, so identical saves differ byte-wise) and the umask's file mode."""
    # imported here: safetensors.torch imports torch (2 s), and this module's JSON and text
    # writers serve commands that need no torch (the law's fit, the plan)
    from safetensors.torch import save_file

    try:
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
    except SafetensorError as e:  # its I/O errors end "(os error 28)": give them back as the OSError they are
        m = re.search(r"\(os error (\d+)\)", str(e))
        if m is None:
            raise
        code = int(m.group(1))
        raise OSError(code, os.strerror(code) if code in errno.errorcode else str(e), str(path)) from e
    if metadata:
        canonical_metadata_order(path)
    os.chmod(path, file_mode())


def canonical_metadata_order(path: str | os.PathLike) -> None:
    """Rewrite a safetensors header in place with its __metadata__ keys sorted. The header
    keeps its length (same keys and values), so the tensor data is not touched."""
    with open(path, "r+b") as f:
        n = int.from_bytes(f.read(8), "little")
        raw = f.read(n)
        header = json.loads(raw)
        meta = header.get("__metadata__")
        if not meta:
            return
        ordered = {"__metadata__": dict(sorted(meta.items())), **{k: v for k, v in header.items() if k != "__metadata__"}}
        new = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode()
        if len(new) > n:  # never expected: the same content cannot grow
            raise ValueError(f"{path}: canonical safetensors header longer than the original")
        f.seek(8)
        f.write(new + b" " * (n - len(new)))


def atomic_save_safetensors(tensors: dict, path: str | os.PathLike, metadata: dict | None = None) -> None:
    """Save a dict of tensors with safetensors, atomically and byte-reproducibly."""
    with atomic_path(path, suffix=".safetensors") as tmp:
        save_safetensors(tensors, tmp, metadata)


def clean_stale_temporaries(folder: str | os.PathLike, name: str) -> list[Path]:
    """Remove leftovers of interrupted atomic writes of `name` in `folder` (our
    `.<name>.*.tmp` files). Call it only while no other writer of that file can run
    (under the run's lock, or for a file only this command writes). Returns what it removed."""
    folder = Path(folder)
    removed = []
    for p in folder.glob(f".{name}.*.tmp"):
        if p.is_file() and not p.is_symlink():
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


def open_no_follow(path: str | os.PathLike, mode: str = "a"):
    """Open a text file for appending or writing without following a symbolic link at `path`
    (O_NOFOLLOW): a link raises OSError (ELOOP) instead of redirecting the write."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    flags |= os.O_APPEND if mode == "a" else os.O_TRUNC
    fd = os.open(path, flags, 0o666)
    return os.fdopen(fd, mode, encoding="utf-8")


def append_jsonl(path: str | os.PathLike, record: dict) -> None:
    """Append one JSON line and flush it (a log: appends, never rewrites; no fsync per line)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_no_follow(path, "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")
