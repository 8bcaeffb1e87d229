"""The run store: every training run named by a hash of its full configuration.

A run folder `<run_root>/<hash>/` holds
  config.json     the configuration (what the hash is computed from)
  metrics.jsonl   one JSON line per logged step (append-only; resumed runs may repeat steps)
  train.log       human-readable log
  ckpt/step_*/    checkpoints (nblib.store.checkpoint): safetensors weights, optimizer + RNG state
  manifest.json   written when the run reaches its target: realized steps/tokens, code version
  evals/*.json    cached evaluations of this run's checkpoints (LongPPL, merges...)
  LOCK            flock'd while a process writes the run

The store only stores: it names runs, reads and writes their folders, and locks them.
Training them is `nblib.training.runner.get_or_run(store, config)`, which returns the finished run,
or starts it, or resumes it from its last valid checkpoint. A constant-LR run is extensible:
its length is not part of its identity, so asking for more tokens resumes the same
trajectory and trains only the new tokens.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from nblib.cli import UserError
from nblib.models import build_model
from nblib.store.atomic import atomic_write_json
from nblib.store.checkpoint import (CheckpointInfo, CorruptCheckpointError, list_checkpoints, load_weights,
                                    verify_checkpoint, weights_sha256)
from nblib.store.lock import RunLock
from nblib.store.provenance import REPO_ROOT

DEFAULT_RUN_ROOT = REPO_ROOT / "runs"
STREAM_KINDS = ("packed", "long_mixture", "doc_starts", "sft")
INIT_MODES = ("weights", "continue", "weights+optimizer")
BUDGET_NAMES = ("smoke", "toy", "full")
DATA_KEYS = {"corpus": str, "corpus_id": str, "tokenizer": str, "split": str, "stream": str, "seq_len": int,
             "mixture": str, "aligned": bool, "doc_isolation": bool, "copy_fraction": float, "copy_len": list, "copy_vocab": int,
             "sft_file": str, "sft_sha256": str}
SCHEDULE_KEYS = {"kind": str, "lr": float, "warmup_steps": int, "decay_frac": float, "final_lr_frac": float}
OPTIMIZER_KEYS = {"name": str, "weight_decay": float, "clip": float, "betas": list, "muon_adjust_lr": str}
INIT_KEYS = {"run": str, "step": int, "mode": str, "rope_base": float, "average_steps": list}
MUON_ADJUST_LR = ("original", "match_rms_adamw")


MEMO_SHA_KEY = "_checkpoint_sha256"  # in cached evaluations: {step: sha256 of the weights evaluated}


class RunNotFoundError(UserError, KeyError):
    """No run with that hash in the store."""

    def __str__(self):  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ConfigError(ValueError):
    """A run configuration field with a value outside what is allowed (the message names both)."""


def _is(value, kind) -> bool:
    """Type check that keeps bool out of int/float and accepts an int where a float is asked."""
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is list:
        return isinstance(value, (list, tuple))
    return isinstance(value, kind)


def _need(ok: bool, field_name: str, value, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"{field_name}={value!r} is not allowed; allowed: {allowed}")


def _check_section(section: str, d, keys: dict, required=()) -> None:
    _need(isinstance(d, dict), section, d, "a mapping")
    unknown = sorted(set(d) - set(keys))
    _need(not unknown, f"{section} keys", unknown, ", ".join(keys))
    for k in required:
        _need(k in d, f"{section}.{k}", None, "a value (the key is required)")
    for k, v in d.items():
        if v is None and k in ("rope_base", "copy_vocab", "corpus_id"):
            continue
        _need(_is(v, keys[k]), f"{section}.{k}", v, f"a {keys[k].__name__}")


def check_config(c: "RunConfig") -> None:
    """The run-config schema: types, ranges and allowed keys of every field, checked when a
    RunConfig is made, so a bad config fails with the field's name before any run folder
    exists. Hand-written over typed dataclass fields: the rules are few and depend on each
    other (schedule kinds, init modes, micro-batches dividing the batch), and a schema
    library would be one more dependency for a dozen checks. The model section is checked
    by building the model (on the meta device) in `check_buildable`."""
    _need(isinstance(c.model, dict) and isinstance(c.model.get("family"), str), "model", c.model,
          "a mapping with a 'family' (llama, gpt2, gemma3) and that family's config fields")
    _check_section("data", c.data, DATA_KEYS, required=("corpus", "tokenizer", "stream", "seq_len"))
    _need(c.data["stream"] in STREAM_KINDS, "data.stream", c.data["stream"], ", ".join(STREAM_KINDS))
    _need(c.data["seq_len"] >= 2, "data.seq_len", c.data["seq_len"], "an int >= 2")
    if c.data["stream"] == "sft":  # the example file and its content hash (nblib.data.sft)
        _need(bool(c.data.get("sft_file")), "data.sft_file", c.data.get("sft_file"),
              "the SFT example file (absolute, or relative to the data cache folder)")
        sha = c.data.get("sft_sha256")
        _need(isinstance(sha, str) and len(sha) == 64 and all(ch in "0123456789abcdef" for ch in sha),
              "data.sft_sha256", sha, "the sha256 of the SFT example file (64 lowercase hex digits)")
    else:
        extra = sorted(k for k in ("sft_file", "sft_sha256") if k in c.data)
        _need(not extra, "data keys", extra, "sft_file and sft_sha256 only with stream 'sft'")
    _check_section("schedule", c.schedule, SCHEDULE_KEYS, required=("kind", "lr"))
    _need(c.schedule["kind"] in ("wsd", "linear_decay", "constant"), "schedule.kind", c.schedule["kind"],
          "wsd, linear_decay, constant")
    _need(c.schedule["lr"] > 0 and c.schedule["lr"] < float("inf"), "schedule.lr", c.schedule["lr"], "a number > 0")
    _need(c.schedule.get("warmup_steps", 0) >= 0, "schedule.warmup_steps", c.schedule.get("warmup_steps"), "an int >= 0")
    _need(0 < c.schedule.get("decay_frac", 0.5) <= 1, "schedule.decay_frac", c.schedule.get("decay_frac"), "(0, 1]")
    _need(0 <= c.schedule.get("final_lr_frac", 0.1) <= 1, "schedule.final_lr_frac", c.schedule.get("final_lr_frac"),
          "[0, 1]")
    for name in ("n_tokens", "batch_size"):
        v = getattr(c, name)
        _need(_is(v, int) and v > 0, name, v, "an int > 0")
    _need(_is(c.seed, int) and c.seed >= 0, "seed", c.seed, "an int >= 0")
    _need(c.threads is None or (_is(c.threads, int) and c.threads >= 1), "threads", c.threads, "null or an int >= 1")
    _need(c.budget in BUDGET_NAMES, "budget", c.budget, ", ".join(BUDGET_NAMES))
    _need(c.precision in (None, "bf16"), "precision", c.precision, "null (fp32), 'fp32' or 'bf16'")
    _check_section("optimizer", c.optimizer, OPTIMIZER_KEYS, required=("name",))
    o = c.optimizer
    _need(o["name"] == "muon+adamw", "optimizer.name", o["name"], "muon+adamw")
    _need(o.get("weight_decay", 0.1) >= 0, "optimizer.weight_decay", o.get("weight_decay"), "a number >= 0")
    _need(o.get("clip", 1.0) > 0, "optimizer.clip", o.get("clip"), "a number > 0")
    betas = o.get("betas", [0.9, 0.95])
    _need(len(betas) == 2 and all(_is(b, float) and 0 <= b < 1 for b in betas), "optimizer.betas", betas,
          "two numbers in [0, 1)")
    _need(o.get("muon_adjust_lr", "match_rms_adamw") in MUON_ADJUST_LR, "optimizer.muon_adjust_lr",
          o.get("muon_adjust_lr"), ", ".join(MUON_ADJUST_LR))
    if c.init is not None:
        _check_section("init", c.init, INIT_KEYS, required=("run", "step", "mode"))
        _need(c.init["mode"] in INIT_MODES, "init.mode", c.init["mode"], ", ".join(INIT_MODES))
        _need(c.init["step"] >= 0, "init.step", c.init["step"], "an int >= 0")
        _need(len(c.init["run"]) == 16 and all(ch in "0123456789abcdef" for ch in c.init["run"]), "init.run",
              c.init["run"], "a run hash (16 hex digits)")
        avg = c.init.get("average_steps")
        _need(avg is None or (c.init["mode"] == "weights" and len(avg) >= 1 and list(avg) == sorted(set(avg))
                              and avg[-1] == c.init["step"] and all(isinstance(s, int) and s >= 0 for s in avg)),
              "init.average_steps", avg, "None, or (mode 'weights' only) increasing checkpoint steps ending at init.step")
        rb = c.init.get("rope_base")
        _need(rb is None or rb > 1, "init.rope_base", rb, "None or a number > 1")
    _need(c.ckpt_every_tokens is None or (_is(c.ckpt_every_tokens, int) and c.ckpt_every_tokens > 0),
          "ckpt_every_tokens", c.ckpt_every_tokens, "None or an int > 0")
    _need(all(_is(s, int) and s >= 1 for s in c.ckpt_steps), "ckpt_steps", c.ckpt_steps, "ints >= 1")
    _need(c.keep_optimizer in ("last", "all"), "keep_optimizer", c.keep_optimizer, "last, all")
    _need(c.micro_batch_size is None or (_is(c.micro_batch_size, int) and c.micro_batch_size >= 1
                                         and c.batch_size % c.micro_batch_size == 0),
          "micro_batch_size", c.micro_batch_size, f"None or an int >= 1 dividing batch_size={c.batch_size}")
    _need(_is(c.log_every, int) and c.log_every >= 1, "log_every", c.log_every, "an int >= 1")
    _need(isinstance(c.label, str), "label", c.label, "a string")
    _need(isinstance(c.meta, dict), "meta", c.meta, "a mapping")


def check_buildable(c: "RunConfig", vocab_size: int | None = None) -> None:
    """The model section builds (on the meta device: no memory), and its vocabulary holds
    the tokenizer's (`vocab_size`, when given)."""
    cfg = dict(c.model)
    family = cfg.pop("family")
    try:
        with torch.device("meta"):
            build_model(family, cfg)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"model: {e}") from None
    if vocab_size is not None:
        _need(_is(cfg.get("vocab_size"), int) and cfg["vocab_size"] >= vocab_size, "model.vocab_size",
              cfg.get("vocab_size"), f"an int >= {vocab_size} (the tokenizer {c.data.get('tokenizer')!r})")


def default_run_root() -> Path:
    return Path(os.environ.get("NBLIB_RUN_ROOT", DEFAULT_RUN_ROOT))


@dataclass
class RunConfig:
    """Full configuration of one training run. Fields marked 'not identity' do not change the
    trained weights, so they are left out of the hash.

    model:    {"family": "llama"|"gpt2"|"gemma3", **config fields}
    data:     {"corpus", "tokenizer", "stream": "packed"|"long_mixture"|"doc_starts"|"sft", "seq_len",
               "mixture": [[edges], [weights]] (long_mixture only), "doc_isolation": bool,
               "sft_file": path, "sft_sha256": hex (sft only: nblib.data.sft's example file)}
    schedule: nblib.training.schedules.Schedule fields except total_steps (derived from n_tokens;
              `schedule_of(config)` builds the Schedule)
    init:     None, or {"run": parent hash, "step": int, "mode": "weights"|"continue"|"weights+optimizer",
               "rope_base": float|None, "average_steps": [int]|None}. "weights" loads the parent's
               weights into a fresh optimizer at step 0 (a new stage, e.g. LCCP from a 4K
               checkpoint, with ABF via rope_base); with average_steps, the uniform average of
               those checkpoints (a Last4 start, LCCP paper §5.2). "continue" resumes the parent's full training state at that
               step (a WSD decay branched from a shared stable run). "weights+optimizer"
               starts a new stage at step 0 with the parent's weights and optimizer state
               (the Gemma blog's YaRN fine-tune: new data, no new warmup).
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
    threads: int | None = None  # CPU threads it trains at (None: 1); identity (nblib.training.threads)
    precision: str | None = None  # CPU training precision (None: fp32; "bf16": autocast); identity

    NON_IDENTITY = ("label", "meta", "ckpt_every_tokens", "ckpt_steps", "keep_optimizer", "micro_batch_size", "log_every")

    def __post_init__(self):
        if self.precision == "fp32":  # one spelling, one hash
            self.precision = None
        _need(isinstance(self.ckpt_steps, (list, tuple)), "ckpt_steps", self.ckpt_steps, "a list of ints >= 1")
        check_config(self)
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

    # -- identity ------------------------------------------------------------------------
    def identity(self) -> dict:
        d = dataclasses.asdict(self)
        for k in self.NON_IDENTITY:
            d.pop(k)
        if self.extensible:  # a constant-LR trajectory is one run however far it goes
            d.pop("n_tokens")
        if self.threads is None:  # the default (1 thread) keeps the hashes runs had before the field
            d.pop("threads")
        if self.precision is None:  # fp32, likewise
            d.pop("precision")
        return d

    @property
    def hash(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"), default=_json_default)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(self), default=_json_default))

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        """A RunConfig from its JSON form; ConfigError names any bad or missing field."""
        _need(isinstance(d, dict), "run config", type(d).__name__, "a JSON object of RunConfig fields")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - set(fields))
        _need(not unknown, "run config fields", unknown, ", ".join(fields))
        missing = [n for n, f in fields.items() if n not in d and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        _need(not missing, "run config fields missing", missing, "every required field present")
        return cls(**d)

    def with_tokens(self, n_tokens: int) -> "RunConfig":
        return dataclasses.replace(self, n_tokens=int(n_tokens))


def _json_default(o):
    if isinstance(o, tuple):
        return list(o)
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {o!r}")


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
        if not p.exists():
            return None
        try:
            m = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None  # unreadable: the run is not complete, and training rewrites it
        return m if isinstance(m, dict) else None

    @property
    def tokens_done(self) -> int:
        m = self.manifest
        return int(m["realized_tokens"]) if m else 0

    def is_complete(self) -> bool:
        """True when the manifest says the run reached this config's step target and every
        checkpoint the config asks for is present and matches its recorded sha256."""
        m = self.manifest
        return bool(m) and m.get("steps", -1) >= self.config.total_steps and self._has_required_ckpts()

    def _has_required_ckpts(self) -> bool:
        have = {c.step: c for c in self.checkpoints()}
        need = set(s for s in self.config.ckpt_steps if s <= self.config.total_steps)
        need.add(self.config.total_steps)
        if not need <= set(have):
            return False
        try:
            for s in need:
                verify_checkpoint(have[s].path, deep=True)
        except CorruptCheckpointError as e:
            warnings.warn(f"run {self.hash} is not complete: {e}", stacklevel=3)
            return False
        return True

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

    def memo_path(self, key: str) -> Path:
        """Where `memo` keeps the evaluation named `key`."""
        return self.path / "evals" / f"{key}.json"

    def memo(self, key: str, fn, steps=()):
        """Cached evaluation: evals/<key>.json, computed with fn() when absent or stale.

        `steps`: the checkpoints fn() reads. Their weights' sha256 are stored with the value
        and checked (after verifying the files) on every read, so a changed checkpoint is
        re-evaluated, never reused. An entry written before hashes were stored is checked
        against the verified checkpoint and stamped with its hash."""
        p = self.memo_path(key)
        shas = {str(s): weights_sha256(self.checkpoint(s).path) for s in steps}
        if p.exists():
            try:
                cached = json.loads(p.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                cached = None
            if isinstance(cached, dict):
                stored = cached.pop(MEMO_SHA_KEY, None)
                if stored == shas:
                    return cached
                if stored is None and steps:  # legacy entry: its checkpoints verified above
                    atomic_write_json(p, {**cached, MEMO_SHA_KEY: shas})
                    return cached
        value = fn()
        atomic_write_json(p, {**value, MEMO_SHA_KEY: shas} if steps and isinstance(value, dict) else value)
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
            raise RunNotFoundError(f"no run {run_hash} in {self.root}")
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
                               f"train it first (nblib.training.runner.get_or_run_many orders dependencies)")

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
