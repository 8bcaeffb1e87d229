"""Checkpoints: safetensors weights, optimizer and RNG state, written atomically and verified.

Layout of one checkpoint folder `ckpt/step_00001234/`:
  model.safetensors   weights (metadata: step, tokens)
  optim.safetensors   optimizer tensors + RNG state (optional: kept on the latest checkpoint)
  state.json          step, tokens, optimizer structure (non-tensor fields)
  COMPLETE.json       sha256 and size of every file above; written last

The folder is assembled under a temporary name and renamed into place, so a checkpoint
is either complete or absent. A folder without COMPLETE.json, or whose files do not
match it, is corrupt: it is reported and skipped, never taken as the latest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file

from nblib.cli import UserError
from nblib.store.atomic import atomic_write_json, save_safetensors

CKPT_DIR = "ckpt"


class CorruptCheckpointError(UserError, RuntimeError):
    """A checkpoint whose files are missing, truncated or do not match their recorded hash."""


@dataclass(frozen=True)
class CheckpointInfo:
    step: int
    tokens: int
    path: Path
    has_optimizer: bool

    @property
    def weights(self) -> Path:
        return self.path / "model.safetensors"


def step_dirname(step: int) -> str:
    return f"step_{step:08d}"


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in 1 MiB blocks (what COMPLETE.json records per file)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _flatten_optimizer(state: dict, prefix: str, tensors: dict) -> dict:
    """Split an optimizer state_dict into tensors (for safetensors) and a JSON skeleton."""
    skeleton = {"param_groups": state["param_groups"], "state": {}}
    for pid, pstate in state["state"].items():
        entry = {}
        for key, val in pstate.items():
            if torch.is_tensor(val):
                name = f"{prefix}.state.{pid}.{key}"
                tensors[name] = val.detach().cpu()
                entry[key] = {"tensor": name}
            else:
                entry[key] = {"value": val}
        skeleton["state"][str(pid)] = entry
    return skeleton


def _unflatten_optimizer(skeleton: dict, tensors: dict) -> dict:
    state = {}
    for pid, entry in skeleton["state"].items():
        key = int(pid) if pid.isdigit() else pid  # index-keyed (torch) or FQN-keyed (torch.distributed)
        state[key] = {k: (tensors[v["tensor"]] if "tensor" in v else v["value"]) for k, v in entry.items()}
    groups = skeleton["param_groups"]
    for g in groups:  # JSON turns tuples into lists; optimizers expect tuples for some fields
        for k, v in list(g.items()):
            if isinstance(v, list) and k != "params":
                g[k] = tuple(v)
    return {"state": state, "param_groups": groups}


def save_checkpoint(run_dir: str | os.PathLike, step: int, tokens: int, model_state: dict,
                    optim_states: dict | None = None, extra: dict | None = None) -> CheckpointInfo:
    """Write checkpoint `step` atomically: assemble in a temp folder, fsync, rename.

    optim_states: {name: optimizer state dict} (the trainer saves one FQN-keyed dict for
    all its optimizers, from torch.distributed.checkpoint's get_optimizer_state_dict); the
    CPU RNG state is saved with them so a resumed run continues bit-identically.
    """
    root = Path(run_dir) / CKPT_DIR
    root.mkdir(parents=True, exist_ok=True)
    final = root / step_dirname(step)
    tmp = root / f".{step_dirname(step)}.tmp-{os.getpid()}-{time.time_ns()}"
    tmp.mkdir()
    try:
        meta = {"step": str(step), "tokens": str(tokens)}
        save_safetensors({k: v.detach().cpu() for k, v in model_state.items()}, tmp / "model.safetensors", meta)
        state = {"step": step, "tokens": tokens, "extra": extra or {}, "optimizers": None}
        if optim_states is not None:
            tensors = {"rng.torch_cpu": torch.get_rng_state()}
            state["optimizers"] = {name: _flatten_optimizer(s, name, tensors) for name, s in optim_states.items()}
            save_safetensors(tensors, tmp / "optim.safetensors", meta)
        (tmp / "state.json").write_text(json.dumps(state, sort_keys=True))
        files = {p.name: {"sha256": file_sha256(p), "bytes": p.stat().st_size} for p in sorted(tmp.iterdir())}
        for p in tmp.iterdir():
            with open(p, "rb") as f:
                os.fsync(f.fileno())
        atomic_write_json(tmp / "COMPLETE.json", {"files": files, "step": step, "tokens": tokens})
        if final.exists():  # rewriting a step (e.g. after a corrupt copy): move the old one aside first
            shutil.rmtree(final)
        os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return CheckpointInfo(step, tokens, final, optim_states is not None)


# Files whose sha256 was checked in this process, by what identifies their bytes: a write
# changes the size, mtime or (what no user can set) ctime, so an unchanged stat means the
# same bytes and the file is not hashed again.
_VERIFIED: dict = {}


def _stat_key(f: Path) -> tuple:
    st = f.stat()
    return (str(f.resolve()), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read_record(path: Path) -> dict:
    marker = path / "COMPLETE.json"
    if not marker.exists():
        raise CorruptCheckpointError(f"checkpoint {path} has no COMPLETE.json (interrupted write)")
    try:
        record = json.loads(marker.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorruptCheckpointError(f"checkpoint {path}: unreadable COMPLETE.json ({e})") from None
    ok = (isinstance(record, dict) and isinstance(record.get("files"), dict) and record["files"]
          and isinstance(record.get("step"), int) and isinstance(record.get("tokens"), int)
          and all(isinstance(v, dict) and isinstance(v.get("sha256"), str) and isinstance(v.get("bytes"), int)
                  for v in record["files"].values()))
    if not ok or "model.safetensors" not in record["files"]:
        raise CorruptCheckpointError(f"checkpoint {path}: COMPLETE.json lacks the step, tokens or the sha256 and "
                                     f"size of model.safetensors")
    return record


def verify_checkpoint(path: str | os.PathLike, deep: bool = True) -> dict:
    """Return the COMPLETE record of checkpoint folder `path`, or raise CorruptCheckpointError.

    deep=True checks every file's sha256 (once per process while the file is unchanged);
    deep=False checks presence and sizes only.
    """
    path = Path(path)
    record = _read_record(path)
    for name, info in record["files"].items():
        f = path / name
        if not f.is_file() or f.is_symlink():
            raise CorruptCheckpointError(f"checkpoint {path}: file {name} is missing")
        if f.stat().st_size != info["bytes"]:
            raise CorruptCheckpointError(
                f"checkpoint {path}: {name} has {f.stat().st_size} bytes, expected {info['bytes']} (truncated?)")
        if deep:
            key = _stat_key(f)
            if _VERIFIED.get(key) != info["sha256"]:
                if file_sha256(f) != info["sha256"]:
                    raise CorruptCheckpointError(f"checkpoint {path}: {name} does not match its sha256 (corrupted)")
                _VERIFIED[key] = info["sha256"]
    return record


def weights_sha256(path: str | os.PathLike) -> str:
    """The recorded sha256 of a checkpoint folder's model.safetensors, after verifying it:
    what cached evaluations of that checkpoint are keyed by."""
    return verify_checkpoint(path, deep=True)["files"]["model.safetensors"]["sha256"]


def checkpoint_of(weights: str | os.PathLike) -> Path | None:
    """The checkpoint folder a weights file belongs to (it sits beside a COMPLETE.json), else None."""
    p = Path(weights)
    if p.is_dir() and (p / "COMPLETE.json").exists():
        return p
    if p.name == "model.safetensors" and (p.parent / "COMPLETE.json").exists():
        return p.parent
    return None


def list_checkpoints(run_dir: str | os.PathLike, deep: bool = False, report=None, only=None) -> list[CheckpointInfo]:
    """Valid checkpoints of a run, oldest first. Corrupt ones are reported and skipped.

    report: callable(str) for messages about skipped checkpoints (default: warnings.warn).
    only: checkpoint folders to consider (default: every step_* folder of the run).
    """
    report = report or (lambda msg: warnings.warn(msg, stacklevel=2))
    root = Path(run_dir) / CKPT_DIR
    out = []
    if not root.exists():
        return out
    for p in sorted(root.glob("step_*") if only is None else map(Path, only)):
        if not p.is_dir() or not p.name[5:].isdigit():
            continue
        try:
            rec = verify_checkpoint(p, deep=deep)
        except (CorruptCheckpointError, OSError) as e:
            report(f"skipping corrupt checkpoint: {e}")
            continue
        out.append(CheckpointInfo(rec["step"], rec["tokens"], p, "optim.safetensors" in rec["files"]))
    return out


def clean_checkpoint_temporaries(run_dir: str | os.PathLike) -> list[Path]:
    """Remove the temporary folders interrupted checkpoint writes left in <run>/ckpt/ (and
    temporary files of interrupted atomic writes in <run>/). Call it only while holding the
    run's lock: then no other process is writing them. Returns what was removed."""
    run_dir = Path(run_dir)
    removed = []
    root = run_dir / CKPT_DIR
    for p in (sorted(root.glob(".step_*.tmp-*")) if root.exists() else []):
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    for p in sorted(run_dir.glob(".*.tmp")) if run_dir.exists() else []:
        if p.is_file() and not p.is_symlink():
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


def quarantine(path: str | os.PathLike) -> Path:
    """Rename a corrupt checkpoint folder out of the way (kept for inspection, never loaded)."""
    path = Path(path)
    dest = path.with_name(f".{path.name}.corrupt-{time.time_ns()}")
    os.rename(path, dest)
    return dest


def load_weights(ckpt: CheckpointInfo | str | os.PathLike, verify: bool = True) -> dict:
    """Weights of a checkpoint folder (or a bare .safetensors file) as a dict of CPU tensors."""
    path = ckpt.path if isinstance(ckpt, CheckpointInfo) else Path(ckpt)
    if path.is_file():
        try:
            return load_file(str(path))
        except Exception as e:  # safetensors raises its own error types for truncated headers
            raise CorruptCheckpointError(f"cannot read weights {path}: {e}") from None
    if verify:
        verify_checkpoint(path, deep=True)
    return load_file(str(path / "model.safetensors"))


def load_training_state(ckpt: CheckpointInfo) -> tuple[dict, dict, dict]:
    """(weights, {name: optimizer state_dict}, state.json) of a checkpoint saved with optimizer."""
    record = verify_checkpoint(ckpt.path, deep=True)
    state = json.loads((ckpt.path / "state.json").read_text())
    if not state.get("optimizers") or "optim.safetensors" not in record["files"]:
        raise CorruptCheckpointError(f"checkpoint {ckpt.path} has no optimizer state; cannot resume from it")
    tensors = load_file(str(ckpt.path / "optim.safetensors"))
    optims = {name: _unflatten_optimizer(sk, tensors) for name, sk in state["optimizers"].items()}
    state["rng_torch_cpu"] = tensors["rng.torch_cpu"]
    return load_file(str(ckpt.path / "model.safetensors")), optims, state


def drop_optimizer_state(ckpt: CheckpointInfo) -> None:
    """Remove optimizer state from an older checkpoint (weights stay; saves disk)."""
    rec = verify_checkpoint(ckpt.path, deep=False)
    if "optim.safetensors" not in rec["files"]:
        return
    rec["files"].pop("optim.safetensors")
    atomic_write_json(ckpt.path / "COMPLETE.json", rec)
    (ckpt.path / "optim.safetensors").unlink()
