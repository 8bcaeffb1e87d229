"""The run store: every training run named by a hash of its full configuration.

A run folder `<run_root>/<hash>/` holds
  config.json     the configuration (what the hash is computed from)
  metrics.jsonl   one JSON line per logged step (append-only; resumed runs may repeat steps)
  train.log       human-readable log
  ckpt/step_*/    checkpoints (nblib.checkpoint): safetensors weights, optimizer + RNG state
  manifest.json   written when the run reaches its target: realized steps/tokens, code version
  evals/*.json    cached evaluations of this run's checkpoints (LongPPL, merges...)
  LOCK            flock'd while a process writes the run

The store only stores: it names runs, reads and writes their folders, and locks them.
Training them is `nblib.runner.get_or_run(store, config)`, which returns the finished run,
or starts it, or resumes it from its last valid checkpoint. A constant-LR run is extensible:
its length is not part of its identity, so asking for more tokens resumes the same
trajectory and trains only the new tokens.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import filelock
import pandas as pd

from nblib.atomic import atomic_write_json, atomic_write_text
from nblib.checkpoint import CheckpointInfo, list_checkpoints, load_weights
from nblib.models import build_model
from nblib.provenance import REPO_ROOT
from nblib.schedules import Schedule

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

    def make_schedule(self) -> Schedule:
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


class RunLock:
    """An exclusive lock on `<run>/LOCK`, so two processes never write one run.

    The lock is `filelock`'s flock on the file, opened with O_NOFOLLOW: a symlink planted
    at LOCK is refused, never followed. The holder's pid goes to `<run>/LOCK.owner`
    (written atomically, by rename), so a refused writer can say who holds the run.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = filelock.FileLock(str(self.path), mode=0o644, thread_local=False)

    @property
    def owner_path(self) -> Path:
        return self.path.with_name(self.path.name + ".owner")

    def holder(self) -> str:
        try:
            return self.owner_path.read_text().strip() or "?"
        except OSError:
            return "?"

    def acquire(self, blocking: bool = False, timeout: float | None = None, poll: float = 0.5) -> None:
        """Take the lock. Not blocking: raise RunLockedError at once if another process holds
        it. Blocking: wait (saying so once on stderr) up to `timeout` seconds, or forever."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_symlink():
            raise RunLockedError(f"{self.path} is a symbolic link; a run's LOCK must be a plain file "
                                 f"(remove the link)")
        try:
            self._lock.acquire(timeout=0, poll_interval=poll)
        except filelock.Timeout:
            if not blocking:
                raise self._locked_error() from None
            print(f"[nblib] run {self.path.parent.name} is being written by pid {self.holder()}; waiting for it "
                  f"to finish" + (f" (up to {timeout:g} s)" if timeout is not None else ""), file=sys.stderr,
                  flush=True)
            try:
                self._lock.acquire(timeout=-1 if timeout is None else timeout, poll_interval=poll)
            except filelock.Timeout:
                raise self._locked_error() from None
        atomic_write_text(self.owner_path, f"{os.getpid()}\n")

    def _locked_error(self) -> "RunLockedError":
        return RunLockedError(f"run {self.path.parent.name} is being written by another process "
                              f"(pid {self.holder()}); wait for it or stop it")

    def release(self) -> None:
        if self._lock.is_locked:
            self.owner_path.unlink(missing_ok=True)
            self._lock.release()

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
        cfg = dict(self.config.model)
        family = cfg.pop("family")
        model = build_model(family, cfg)
        if self.config.init and self.config.init.get("rope_base"):
            model.set_rope_base(self.config.init["rope_base"])
        model.load_state_dict(state_dict if state_dict is not None else self.load_state_dict(step))
        return model.eval()

    def metrics(self):
        """The metrics log as a pandas DataFrame (the last record wins for a repeated step)."""
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

    def lock(self, run: Run) -> RunLock:
        """The write lock of `run` (take it before writing the run's folder)."""
        return RunLock(run.path / "LOCK")

    def check_parent(self, config: RunConfig) -> None:
        """Raise if config.init names a parent run that has not been trained."""
        if config.init is None:
            return
        parent = self.by_hash(config.init["run"])
        if not parent.is_complete() and parent.manifest is None:
            raise RuntimeError(f"run {config.hash} starts from run {parent.hash}, which has not been trained; "
                               f"train it first (nblib.runner.get_or_run_many orders dependencies)")

    def write_config(self, run: Run) -> None:
        """Write run/config.json, keeping the longest target an extensible run has had and
        every extra checkpoint step ever asked for (non-identity fields may change)."""
        p = run.path / "config.json"
        cfg = run.config.to_dict()
        if p.exists():
            old = json.loads(p.read_text())
            if run.config.extensible and old.get("n_tokens", 0) > cfg["n_tokens"]:
                cfg["n_tokens"] = old["n_tokens"]
            cfg["ckpt_steps"] = sorted(set(cfg["ckpt_steps"]) | set(old.get("ckpt_steps", [])))
        atomic_write_json(p, cfg)
