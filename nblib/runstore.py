"""The run store: every training run named by a hash of its full configuration.

A run folder `<run_root>/<hash>/` holds
  config.json     the configuration (what the hash is computed from)
  metrics.jsonl   one JSON line per logged step (append-only; resumed runs may repeat steps)
  train.log       human-readable log
  ckpt/step_*/    checkpoints (nblib.checkpoint): safetensors weights, optimizer + RNG state
  manifest.json   written when the run reaches its target: realized steps/tokens, code version
  evals/*.json    cached evaluations of this run's checkpoints (LongPPL, merges...)
  LOCK            flock'd while a process writes the run

`get_or_run(config)` returns the finished run, or starts it, or resumes it from its last
valid checkpoint. A constant-LR run is extensible: its length is not part of its identity,
so asking for more tokens resumes the same trajectory and trains only the new tokens.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from nblib.atomic import atomic_write_json
from nblib.checkpoint import CheckpointInfo, list_checkpoints, load_weights

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RUN_ROOT = REPO_ROOT / "runs"
STREAM_KINDS = ("packed", "long_mixture")
INIT_MODES = ("weights", "continue")


class RunLockedError(RuntimeError):
    """Another process holds the write lock of this run."""


def default_run_root() -> Path:
    return Path(os.environ.get("NBLIB_RUN_ROOT", DEFAULT_RUN_ROOT))


@dataclass
class RunConfig:
    """Full configuration of one training run. Fields marked 'not identity' do not change the
    trained weights, so they are left out of the hash.

    model:    {"family": "llama"|"gpt2"|"gemma3", **config fields}
    data:     {"corpus", "tokenizer", "stream": "packed"|"long_mixture", "seq_len",
               "mixture": [[edges], [weights]] (long_mixture only), "doc_isolation": bool}
    schedule: nblib.schedules.Schedule fields except total_steps (derived from n_tokens)
    init:     None, or {"run": parent hash, "step": int, "mode": "weights"|"continue",
               "rope_base": float|None}. "weights" loads the parent's weights into a fresh
               optimizer at step 0 (a new stage, e.g. LCCP from a 4K checkpoint, with ABF
               via rope_base). "continue" resumes the parent's full training state at that
               step (a WSD decay branched from a shared stable run).
    """

    model: dict
    data: dict
    schedule: dict
    n_tokens: int
    batch_size: int
    seed: int = 0
    budget: str = "toy"
    optimizer: dict = field(default_factory=lambda: {"name": "muon+adamw", "weight_decay": 0.1, "clip": 1.0,
                                                     "betas": [0.9, 0.95], "muon_adjust_lr": "match_rms_adamw"})
    init: dict | None = None
    label: str = ""  # not identity
    meta: dict = field(default_factory=dict)  # not identity: scale, ds_mult, dl_mult, ckpt_every_mult...
    ckpt_every_tokens: int | None = None  # not identity: kept checkpoints every k*N tokens
    ckpt_steps: tuple = ()  # not identity: extra steps to checkpoint (WSD branch points)
    keep_optimizer: str = "last"  # not identity: "last" or "all"
    micro_batch_size: int | None = None  # not identity: gradient accumulation for memory
    log_every: int = 10  # not identity

    NON_IDENTITY = ("label", "meta", "ckpt_every_tokens", "ckpt_steps", "keep_optimizer", "micro_batch_size", "log_every")

    def __post_init__(self):
        if self.data.get("stream") not in STREAM_KINDS:
            raise ValueError(f"data.stream={self.data.get('stream')!r}; allowed: {', '.join(STREAM_KINDS)}")
        if self.n_tokens <= 0 or self.batch_size <= 0:
            raise ValueError(f"n_tokens and batch_size must be > 0 (got {self.n_tokens}, {self.batch_size})")
        if self.init is not None and self.init.get("mode") not in INIT_MODES:
            raise ValueError(f"init.mode={self.init.get('mode')!r}; allowed: {', '.join(INIT_MODES)}")
        if self.keep_optimizer not in ("last", "all"):
            raise ValueError(f"keep_optimizer={self.keep_optimizer!r}; allowed: last, all")
        self.ckpt_steps = tuple(sorted(set(int(s) for s in self.ckpt_steps)))

    # -- derived quantities -------------------------------------------------------------
    @property
    def seq_len(self) -> int:
        return int(self.data["seq_len"])

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len

    @property
    def total_steps(self) -> int:
        """Optimizer steps: the token budget rounded to whole steps (App. A.3 'realized')."""
        return max(1, int(round(self.n_tokens / self.tokens_per_step)))

    @property
    def realized_tokens(self) -> int:
        return self.total_steps * self.tokens_per_step

    @property
    def extensible(self) -> bool:
        return self.schedule["kind"] == "constant"

    def make_schedule(self):
        from nblib.schedules import Schedule

        total = None if self.extensible else self.total_steps
        return Schedule(total_steps=total, **self.schedule)

    # -- identity ------------------------------------------------------------------------
    def identity(self) -> dict:
        d = dataclasses.asdict(self)
        for k in self.NON_IDENTITY:
            d.pop(k)
        if self.extensible:  # a constant-LR trajectory is one run however far it goes
            d.pop("n_tokens")
        return d

    @property
    def hash(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"), default=_json_default)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(self), default=_json_default))

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown RunConfig fields {sorted(unknown)}; allowed: {sorted(known)}")
        return cls(**d)

    def with_tokens(self, n_tokens: int) -> "RunConfig":
        return dataclasses.replace(self, n_tokens=int(n_tokens))


def _json_default(o):
    if isinstance(o, tuple):
        return list(o)
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {o!r}")


def code_version() -> dict:
    """git revision of the repository (and whether the tree had uncommitted changes)."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        rev, dirty = "", False
    from nblib import __version__

    return {"git": rev or "unknown", "dirty": dirty, "nblib": __version__}


class RunLock:
    """An exclusive flock on `<run>/LOCK`, so two processes never write one run."""

    def __init__(self, path: Path):
        self.path = path
        self._fd = None

    def acquire(self, blocking: bool = False, timeout: float | None = None, poll: float = 0.5) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        start = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                if not blocking or (timeout is not None and time.monotonic() - start > timeout):
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
                    os.close(fd)
                    raise RunLockedError(
                        f"run {self.path.parent.name} is being written by another process "
                        f"(pid {holder or '?'}); wait for it or stop it") from None
                time.sleep(poll)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


class Run:
    """A run folder in the store: its config, checkpoints, metrics and cached evaluations."""

    def __init__(self, root: Path, config: RunConfig):
        self.config = config
        self.hash = config.hash
        self.path = Path(root) / self.hash

    def __repr__(self):
        return f"Run({self.hash}, label={self.config.label!r}, tokens={self.tokens_done})"

    @property
    def manifest(self) -> dict | None:
        p = self.path / "manifest.json"
        return json.loads(p.read_text()) if p.exists() else None

    @property
    def tokens_done(self) -> int:
        m = self.manifest
        return int(m["realized_tokens"]) if m else 0

    def is_complete(self) -> bool:
        """True when the manifest says the run reached this config's step target."""
        m = self.manifest
        return bool(m) and m["steps"] >= self.config.total_steps and self._has_required_ckpts()

    def _has_required_ckpts(self) -> bool:
        have = {c.step for c in self.checkpoints()}
        need = set(s for s in self.config.ckpt_steps if s <= self.config.total_steps)
        need.add(self.config.total_steps)
        return need <= have

    def checkpoints(self, report=None) -> list[CheckpointInfo]:
        return list_checkpoints(self.path, deep=False, report=report)

    def checkpoint(self, step: int | str = "final") -> CheckpointInfo:
        """Checkpoint at `step` (an int, or "final" for this config's last step)."""
        target = self.config.total_steps if step == "final" else int(step)
        for c in self.checkpoints():
            if c.step == target:
                return c
        have = [c.step for c in self.checkpoints()]
        raise KeyError(f"run {self.hash} has no checkpoint at step {target}; it has {have}")

    def load_state_dict(self, step: int | str = "final") -> dict:
        return load_weights(self.checkpoint(step))

    def load_model(self, step: int | str = "final", state_dict: dict | None = None):
        """An nn.Module of this run's architecture with the weights of `step` (eval mode)."""
        from nblib.models import build_model

        cfg = dict(self.config.model)
        family = cfg.pop("family")
        model = build_model(family, cfg)
        if self.config.init and self.config.init.get("rope_base"):
            model.set_rope_base(self.config.init["rope_base"])
        model.load_state_dict(state_dict if state_dict is not None else self.load_state_dict(step))
        return model.eval()

    def metrics(self):
        """The metrics log as a pandas DataFrame (the last record wins for a repeated step)."""
        import pandas as pd

        p = self.path / "metrics.jsonl"
        if not p.exists():
            return pd.DataFrame()
        rows = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
        df = pd.DataFrame(rows)
        if "step" in df and "kind" in df:
            df = df.drop_duplicates(subset=["kind", "step"], keep="last").sort_values(["kind", "step"])
        return df.reset_index(drop=True)

    def memo(self, key: str, fn):
        """Cached evaluation: return evals/<key>.json, computing and storing fn() if absent."""
        p = self.path / "evals" / f"{key}.json"
        if p.exists():
            return json.loads(p.read_text())
        value = fn()
        atomic_write_json(p, value)
        return value


class RunStore:
    """A folder of runs. Notebooks read from it and never retrain what it already has."""

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else default_run_root()
        self.root.mkdir(parents=True, exist_ok=True)

    def run(self, config: RunConfig) -> Run:
        return Run(self.root, config)

    def by_hash(self, run_hash: str) -> Run:
        p = self.root / run_hash / "config.json"
        if not p.exists():
            raise KeyError(f"no run {run_hash} in {self.root}")
        return Run(self.root, RunConfig.from_dict(json.loads(p.read_text())))

    def get_or_run(self, config: RunConfig, progress: bool = True, wait: bool = True,
                   timeout: float | None = None) -> Run:
        """Return the finished run; or start it; or resume it from its last valid checkpoint.

        When another process holds the run's lock: wait for it (wait=True) or raise
        RunLockedError. A parent run named in config.init must already be complete.
        """
        run = self.run(config)
        if run.is_complete():
            return run
        if config.init is not None:
            parent = self.by_hash(config.init["run"])
            if not parent.is_complete() and parent.manifest is None:
                raise RuntimeError(f"run {run.hash} starts from run {parent.hash}, which has not been trained; "
                                   f"train it first (get_or_run_many orders dependencies)")
        lock = RunLock(run.path / "LOCK")
        lock.acquire(blocking=wait, timeout=timeout)
        try:
            if run.is_complete():  # finished by the process we waited for
                return run
            self._write_config(run)
            from nblib.train import train

            train(run, progress=progress)
        finally:
            lock.release()
        return run

    def _write_config(self, run: Run) -> None:
        p = run.path / "config.json"
        cfg = run.config.to_dict()
        if p.exists():
            old = json.loads(p.read_text())
            # Keep the longest target for an extensible run; non-identity fields may change.
            if run.config.extensible and old.get("n_tokens", 0) > cfg["n_tokens"]:
                cfg["n_tokens"] = old["n_tokens"]
            cfg["ckpt_steps"] = sorted(set(cfg["ckpt_steps"]) | set(old.get("ckpt_steps", [])))
        atomic_write_json(p, cfg)

    def get_or_run_many(self, configs: list[RunConfig], workers: int | None = None, progress: bool = True,
                        desc: str = "runs") -> list[Run]:
        """get_or_run for many configs, in parallel worker processes, parents before children.

        Each worker trains with one thread (tiny models train faster as two single-thread
        processes than as one two-thread process, measured on a 2-core CPU). Returns runs in the
        order of `configs`.
        """
        from nblib.parallel import run_dag

        return run_dag(self, configs, workers=workers, progress=progress, desc=desc)
