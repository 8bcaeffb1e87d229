"""The trainer: one loop for every budget, single process or under torchrun (DDP / FSDP2).

LCCP paper, App. A.3: Muon for 2-D hidden matrices and AdamW for the rest, weight decay 0.1,
gradient clipping at 1.0, bf16 autocast on GPU; WSD / Linear-Decay / Constant schedules
(nblib.training.schedules). Checkpoints every k*N tokens as safetensors (nblib.store.checkpoint).

Exact resume: the batch at step s is a pure function of (seed, s) and the LR a pure function
of s, and a checkpoint holds weights, optimizer and RNG state; so a run killed at any
moment and restarted from its last checkpoint ends bit-identical to an uninterrupted run.
On CPU a run trains at the thread count its config names (nblib.training.threads), so who
starts it (a worker, a kernel, a probe) does not change its weights.

CLI: `python -m nblib.training.train CONFIG.json [--run-root DIR]` runs or resumes a run-store run,
alone or under `torchrun`; it holds the run's lock (on rank 0) while it trains. From Python,
`nblib.training.runner.get_or_run` does the same.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
import warnings
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn as nn
from tqdm import tqdm

from nblib.cli import run_cli
from nblib.data import get_tokenizer, make_stream
from nblib.cli import UserError
from nblib.models import build_model
from nblib.models.llama import expand_kv_heads
from nblib.store.atomic import append_jsonl, atomic_write_json, open_no_follow
from nblib.store.checkpoint import (CKPT_DIR, CheckpointInfo, CorruptCheckpointError, clean_checkpoint_temporaries,
                                    drop_optimizer_state, list_checkpoints, load_training_state, load_weights, quarantine,
                                    save_checkpoint, verify_checkpoint)
from nblib.store.provenance import code_version
from nblib.store.runstore import RunConfig, RunStore, check_buildable
from nblib.training.optim import Muon
from nblib.training.threads import DEFAULT_THREADS, fixed_threads
from nblib.training.schedules import schedule_of


KEEP_RESUMABLE = 2  # checkpoints that keep optimizer state with keep_optimizer="last"


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or inf; the run stopped before the bad update."""


# ---------------------------------------------------------------------------------------
# model, optimizer, data
# ---------------------------------------------------------------------------------------
class OutOfMemory(UserError):
    """The device ran out of memory at the configured micro-batch (a setting, not a bug)."""


def out_of_memory_message(run, cfg, micro: int, device: str, world: int) -> str:
    """One line: the batch that was tried, on which device, and the settings that fix it.
    Checkpoints are written only after an optimizer step, so the run resumes cleanly."""
    smaller = [d for d in range(micro - 1, 0, -1) if cfg.batch_size % d == 0 and d <= micro // 2] or [1]
    return (f"out of memory on {device} training run {run.hash} [{cfg.label}] with micro-batches of {micro} x "
            f"{cfg.seq_len} tokens (batch {cfg.batch_size} over {world} process(es)): set micro_batch_size "
            f"to {smaller[0]} in {run.path / 'config.json'} (gradient accumulation: the same result, it is not "
            f"part of the run's identity) or train on more GPUs (torchrun ... --strategy fsdp); the run resumes "
            f"from its last complete checkpoint")


BF16_EMULATED = ("runs train under bf16 autocast on a CPU without native bf16 matmuls (AVX512-BF16 / AMX): it is "
                 "emulated and slower than fp32. Set the budget's long_precision to 'fp32' for this machine")
_bf16_warning = {"said": False}  # once a process: a warning inside a progress bar splits it in two


def warn_if_bf16_emulated(configs) -> None:
    """Warn, once a process, when a config of `configs` trains on CPU under bf16 autocast that
    this CPU emulates. The run DAG says it before its progress bar starts; its spawned workers,
    told it was said (`bf16_warning_said`), stay quiet."""
    if not _bf16_warning["said"] and any(c.precision == "bf16" for c in configs) and not cpu_has_native_bf16():
        _bf16_warning["said"] = True
        warnings.warn(BF16_EMULATED, stacklevel=3)


def bf16_warning_said() -> None:
    """Mark the emulated-bf16 warning as said in this process (a worker whose parent said it)."""
    _bf16_warning["said"] = True


def autocast_of(cfg: RunConfig, device: str):
    """The precision a run's forward pass trains at: bf16 autocast on GPU (App. A.3); on CPU,
    bf16 autocast when the config asks for it (`RunConfig.precision`), else fp32. Weights,
    gradients and optimizer state stay fp32 either way."""
    if device.startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    if cfg.precision == "bf16":
        warn_if_bf16_emulated([cfg])
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return nullcontext()


def cpu_has_native_bf16() -> bool:
    """Whether oneDNN runs bf16 matmuls natively on this CPU (AVX512-BF16 or AMX)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def build_model_from_config(model_cfg: dict) -> nn.Module:
    """The untrained model of a run config's `model` dict ({"family": ..., **fields})."""
    cfg = dict(model_cfg)
    return build_model(cfg.pop("family"), cfg)


def split_params(model: nn.Module) -> tuple[list, list, list]:
    """(muon, adamw_decay, adamw_no_decay) parameter lists.

    Muon takes the 2-D weights of hidden Linear layers; embeddings and the output head
    (a Linear producing vocabulary logits) go to AdamW, as do 1-D norms and biases
    (torch.optim.Muon rejects parameters with ndim != 2).
    """
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    muon, seen = [], set()
    for mod in model.modules():
        if isinstance(mod, nn.Linear) and mod.out_features != vocab and mod.weight.ndim == 2:
            if id(mod.weight) not in seen and mod.weight.requires_grad:
                muon.append(mod.weight)
                seen.add(id(mod.weight))
    decay, no_decay = [], []
    for p in model.parameters():
        if id(p) in seen or not p.requires_grad:
            continue
        seen.add(id(p))
        (decay if p.ndim >= 2 else no_decay).append(p)
    return muon, decay, no_decay


def make_optimizers(model: nn.Module, opt_cfg: dict, lr: float) -> dict:
    """{"muon": Muon, "adamw": AdamW} with the paper's weight decay 0.1 (App. A.3).

    Muon is nblib.training.optim.Muon: torch.optim.Muon's update with fp32 Newton-Schulz on CPU and
    whole-matrix orthogonalisation under FSDP2 (see that module for why).
    """
    if opt_cfg.get("name") != "muon+adamw":
        raise ValueError(f"optimizer.name={opt_cfg.get('name')!r}; allowed: muon+adamw")
    muon_p, decay, no_decay = split_params(model)
    wd = float(opt_cfg.get("weight_decay", 0.1))
    opts = {}
    if muon_p:
        opts["muon"] = Muon(muon_p, lr=lr, weight_decay=wd, adjust_lr_fn=opt_cfg.get("muon_adjust_lr", "match_rms_adamw"))
    groups = [g for g in ({"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0})
              if g["params"]]
    opts["adamw"] = torch.optim.AdamW(groups, lr=lr, betas=tuple(opt_cfg.get("betas", (0.9, 0.95))), eps=1e-8,
                                      foreach=True)
    return opts


_STREAM_CACHE: dict = {}


def stream_for(data_cfg: dict, seed: int):
    """The deterministic batch stream of a run's data config (cached per process)."""
    key = json.dumps(data_cfg, sort_keys=True) + f"|{seed}"
    if key not in _STREAM_CACHE:
        _STREAM_CACHE[key] = make_stream(data_cfg, seed)
    return _STREAM_CACHE[key]


# ---------------------------------------------------------------------------------------
# distributed
# ---------------------------------------------------------------------------------------
def dist_info() -> tuple[int, int]:
    """(rank, world_size); (0, 1) outside torchrun."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def init_distributed() -> tuple[int, int]:
    """Initialise torch.distributed from torchrun's env (gloo on CPU, nccl on GPU)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.distributed.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        torch.distributed.init_process_group(backend)
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return dist_info()


def wrap_distributed(model: nn.Module, strategy: str) -> nn.Module:
    """DDP or FSDP2 (`fully_shard` per block, then the root) when running under torchrun."""
    rank, world = dist_info()
    if world == 1:
        return model
    if strategy == "ddp":  # distributed wrappers: imported only under torchrun
        from torch.nn.parallel import DistributedDataParallel as DDP

        dev = [torch.cuda.current_device()] if torch.cuda.is_available() else None
        return DDP(model, device_ids=dev)
    if strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for block in getattr(model, "blocks", []):
            fully_shard(block)
        fully_shard(model)
        return model
    raise ValueError(f"distributed strategy {strategy!r}; allowed: ddp, fsdp")


def unwrap(model: nn.Module) -> nn.Module:
    return model.module if hasattr(model, "module") else model


# ---------------------------------------------------------------------------------------
# the loop
# ---------------------------------------------------------------------------------------
def _logger(run) -> logging.Logger:
    """A logger writing to <run>/train.log (its handler is replaced on every call)."""
    log = logging.getLogger(f"nblib.run.{run.hash}")
    for h in list(log.handlers):
        log.removeHandler(h)
        h.close()
    run.path.mkdir(parents=True, exist_ok=True)
    h = logging.StreamHandler(open_no_follow(run.path / "train.log", "a"))  # never through a planted link
    h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(h)
    log.setLevel(logging.INFO)
    log.propagate = False
    return log


def _ckpt_steps(config) -> set[int]:
    steps = set(config.ckpt_steps)
    if config.ckpt_every_tokens:
        every = max(1, int(round(config.ckpt_every_tokens / config.tokens_per_step)))
        steps |= set(range(every, config.total_steps + 1, every))
    steps.add(config.total_steps)
    return {s for s in steps if s <= config.total_steps}


def _latest_resumable(run, log, before: int | None = None) -> CheckpointInfo | None:
    """Newest checkpoint with optimizer state that verifies (and, given `before`, lies before
    that step). Corrupt ones are reported (in train.log and on stderr), skipped, and
    quarantined; never taken as the latest. Falling back past a corrupt checkpoint, or to
    step 0, is said loudly."""
    def report(msg):
        log.warning(msg)
        warnings.warn(msg, stacklevel=3)

    valid = list_checkpoints(run.path, report=report)
    chosen, quarantined_now = None, []
    for ck in reversed(valid):
        if not ck.has_optimizer or (before is not None and ck.step >= before):
            continue
        try:
            verify_checkpoint(ck.path, deep=True)
        except CorruptCheckpointError as e:
            report(f"skipping corrupt checkpoint: {e}")
            quarantine(ck.path)
            quarantined_now.append(ck.path.name)
            continue
        chosen = ck
        break
    root = run.path / "ckpt"
    on_disk = sorted(root.glob("step_*")) if root.exists() else []
    ok = {c.path for c in valid}
    newer_bad = sorted(quarantined_now + [p.name for p in on_disk if p not in ok])
    if chosen is not None:
        newer_bad = [n for n in newer_bad if n > chosen.path.name]
    quarantined = sorted(p.name for p in root.glob(".step_*.corrupt-*")) if root.exists() else []
    if chosen is not None and newer_bad:
        report(f"run {run.hash}: resuming from step {chosen.step}, not from the newer unusable checkpoint(s) "
               f"{newer_bad}")
    if chosen is None and (newer_bad or quarantined):
        report(f"run {run.hash}: no resumable checkpoint is left ({len(newer_bad) + len(quarantined)} corrupt or "
               f"without optimizer state in {root}); training restarts from the start of the run")
    return chosen


def train(run, progress: bool = True, strategy: str = "ddp", device: str | None = None) -> None:
    """Train (or resume, or extend) `run` up to its config's step target. See module doc.

    The caller holds the run's lock (nblib.training.runner.get_or_run, or this module's CLI). A file
    system error (a full disk, a read-only folder) is written to train.log before it is
    raised; the last checkpoint stays, and the next start resumes from it."""
    log = _logger(run)
    try:
        with fixed_threads(run.config.threads or DEFAULT_THREADS):  # part of the run: nblib.training.threads
            _train(run, log, progress, strategy, device)
    except OSError as e:
        log.error(f"stopped by a file system error: {e}")
        raise


def _train(run, log, progress: bool, strategy: str, device: str | None) -> None:
    cfg = run.config
    rank, world = dist_info()
    if rank == 0:
        for leftover in clean_checkpoint_temporaries(run.path):
            log.info(f"removed {leftover.name}, left by an interrupted checkpoint write")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if cfg.batch_size % world:
        raise ValueError(f"batch_size {cfg.batch_size} is not divisible by the world size {world}")
    local_bs = cfg.batch_size // world
    micro = cfg.micro_batch_size or local_bs
    if local_bs % micro:
        raise ValueError(f"micro_batch_size {micro} must divide the per-rank batch {local_bs}")

    torch.manual_seed(cfg.seed)
    model = build_model_from_config(cfg.model)
    sched = schedule_of(cfg)
    start_step, ostate, rng = 0, None, None
    # A finished run whose config now asks for an earlier checkpoint it never kept (a new
    # branch point) is retrained from before that step: batches and LR depend only on the
    # step, so the steps it repeats give the same weights again.
    have = {c.step for c in list_checkpoints(run.path)}
    missing = sorted(s for s in cfg.ckpt_steps if s <= cfg.total_steps and s not in have)
    before = missing[0] if missing and have and max(have) > missing[0] else None
    resume = _latest_resumable(run, log, before=before)
    if before is not None:
        log.info(f"the config asks for checkpoint(s) {missing} that the run never kept: retraining from "
                 f"step {resume.step if resume else 0}")
    if resume is not None:
        weights, ostates, state = load_training_state(resume)
        _apply_init_rope(model, cfg)
        model.load_state_dict(weights)
        ostate, rng, start_step = ostates["all"], state["rng_torch_cpu"], resume.step
        log.info(f"resuming from {resume.path.name} (step {start_step})")
    elif cfg.init is not None:
        start_step, ostate, rng = _apply_init(run, model, log)
    if start_step >= cfg.total_steps:
        _finish(run, model, start_step, 0.0, log, skip_save=True)
        return

    model.to(device)
    train_model = wrap_distributed(model, strategy)  # FSDP2 shards `model` in place
    opts = make_optimizers(model, cfg.optimizer, sched(start_step))  # after sharding: DTensor params
    if ostate is not None:
        # torch.distributed.checkpoint is imported where a run saves or restores state: at module
        # level it (and sympy, through torch.fx) adds about 1 s to every process that imports nblib
        from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

        set_optimizer_state_dict(model, list(opts.values()), ostate)
    if rng is not None:
        torch.set_rng_state(rng)
    stream = stream_for(cfg.data, cfg.seed)
    isolate = bool(cfg.data.get("doc_isolation", False))
    ckpt_at = _ckpt_steps(cfg)
    clip = float(cfg.optimizer.get("clip", 1.0))
    amp = autocast_of(cfg, device)
    t0 = time.time()
    bar = tqdm(total=cfg.total_steps, initial=start_step, desc=cfg.label or run.hash, unit="step",
               disable=not progress or rank != 0, leave=False)
    log.info(f"training steps {start_step}->{cfg.total_steps} ({cfg.tokens_per_step} tokens/step, world {world})")
    for step in range(start_step, cfg.total_steps):
        lr = sched(step)
        for o in opts.values():
            for g in o.param_groups:
                g["lr"] = lr
        x, y, doc = stream.batch(step, cfg.batch_size)
        sl = slice(rank * local_bs, (rank + 1) * local_bs)
        x, y, doc = x[sl].to(device), y[sl].to(device), doc[sl].to(device)
        loss_sum = 0.0
        try:
            for i in range(0, local_bs, micro):
                with amp:
                    _, loss = train_model(x[i:i + micro], targets=y[i:i + micro],
                                          doc_ids=doc[i:i + micro] if isolate else None)
                loss = loss * (x[i:i + micro].shape[0] / local_bs)
                loss.backward()
                loss_sum += loss.detach().float().item()
        except torch.OutOfMemoryError as e:
            bar.close()
            raise OutOfMemory(out_of_memory_message(run, cfg, micro, device, world)) from e
        if world > 1:  # report the global mean (gradients are already averaged by DDP/FSDP)
            t = torch.tensor([loss_sum], device=device)
            torch.distributed.all_reduce(t)
            loss_sum = t.item() / world
        if not math.isfinite(loss_sum):
            last = [c.step for c in list_checkpoints(run.path, report=log.warning)]
            msg = (f"non-finite loss ({loss_sum}) at step {step} (token {step * cfg.tokens_per_step}) of run "
                   f"{run.hash} [{cfg.label}]; stopped before the update. Last good checkpoint: "
                   f"{'step ' + str(last[-1]) if last else 'none'} in {run.path / 'ckpt'}. "
                   f"Lower the learning rate (now {lr:.3g}) or check the data.")
            log.error(msg)
            bar.close()
            raise NonFiniteLossError(msg)
        gnorm = torch.nn.utils.clip_grad_norm_(train_model.parameters(), clip)
        for o in opts.values():
            o.step()
        for o in opts.values():
            o.zero_grad(set_to_none=True)
        done = step + 1
        bar.update(1)
        if rank == 0 and (done % cfg.log_every == 0 or done == cfg.total_steps or done == start_step + 1):
            append_jsonl(run.path / "metrics.jsonl", {
                "kind": "train", "step": done, "tokens": done * cfg.tokens_per_step, "loss": loss_sum,
                "lr": lr, "grad_norm": float(gnorm), "elapsed_s": round(time.time() - t0, 3)})
            bar.set_postfix(loss=f"{loss_sum:.3f}")
        if done in ckpt_at:
            _save(run, model, opts, done, cfg, log)
    bar.close()
    _finish(run, model, cfg.total_steps, time.time() - t0, log)


def average_weights(states: list[dict]) -> dict:
    """Uniform average of state dicts (Last-M merging, LCCP paper App. B.1, with M = len(states)),
    accumulated in fp64 and cast back to each tensor's dtype. The merge library
    (`nblib.lccp.merge.last_m_merge`) computes the same from files; tests/test_post_training.py
    checks that the two agree."""
    keys = states[0].keys()
    if any(s.keys() != keys for s in states):
        raise ValueError("checkpoints to average do not share the same tensors")
    return {k: (sum(s[k].double() for s in states) / len(states)).to(states[0][k].dtype) for k in keys}


def _apply_init_rope(model, cfg) -> None:
    base = (cfg.init or {}).get("rope_base")
    if base:
        model.set_rope_base(float(base))  # ABF: a new RoPE base for the longer stage


def _kv_for(weights: dict, parent, cfg, log) -> dict:
    """The parent's weights with its KV heads copied out to this run's (`expand_kv_heads`) when
    this run has more of them; otherwise unchanged."""
    frm, to = parent.config.model.get("n_kv_heads"), cfg.model.get("n_kv_heads")
    if frm is None or to is None or frm == to:
        return weights
    head_dim = cfg.model.get("head_size") or cfg.model["d_model"] // cfg.model["n_heads"]
    log.info(f"KV heads expanded from {frm} to {to} per layer (each copied for the query heads that shared it)")
    return expand_kv_heads(weights, frm, to, head_dim)


def _apply_init(run, model, log) -> tuple[int, dict | None, torch.Tensor | None]:
    """Start from a parent run: its weights (a new stage) or its full state (a branch).

    Returns (start step, optimizer state or None, RNG state or None).
    """
    cfg = run.config
    parent = RunStore(run.path.parent).by_hash(cfg.init["run"])
    ck = parent.checkpoint(int(cfg.init["step"]))
    if cfg.init["mode"] == "weights":
        _apply_init_rope(model, cfg)
        avg = cfg.init.get("average_steps")
        if avg:  # a merged start (LCCP paper §5.2-5.3: Constant-Last4 checkpoints extended or fine-tuned)
            model.load_state_dict(_kv_for(average_weights([load_weights(parent.checkpoint(int(s))) for s in avg]),
                                          parent, cfg, log))
            log.info(f"initialised weights from the uniform average of run {parent.hash} steps {list(avg)}")
            return 0, None, None
        model.load_state_dict(_kv_for(load_weights(ck), parent, cfg, log))
        log.info(f"initialised weights from run {parent.hash} step {ck.step}")
        return 0, None, None
    if cfg.init["mode"] == "weights+optimizer":
        # A new stage that keeps the optimizer's running state (Gemma blog, YaRN fine-tune:
        # "the optimizer's state restored, so AdamW's running averages carry over"): new
        # data and schedule, step count from 0, no new warmup unless the schedule asks.
        _apply_init_rope(model, cfg)
        weights, ostates, _ = load_training_state(ck)
        model.load_state_dict(weights)
        log.info(f"initialised weights and optimizer state from run {parent.hash} step {ck.step}")
        return 0, ostates["all"], None
    # "continue": same data stream, same optimizer trajectory, global step carried over.
    if parent.config.data != cfg.data or parent.config.batch_size != cfg.batch_size or parent.config.seed != cfg.seed:
        raise ValueError(f"init mode 'continue' needs the parent's data, batch_size and seed; run {run.hash} "
                         f"differs from its parent {parent.hash}")
    weights, ostates, state = load_training_state(ck)
    model.load_state_dict(weights)
    log.info(f"continuing from run {parent.hash} step {ck.step}")
    return ck.step, ostates["all"], state["rng_torch_cpu"]


def _save(run, model, opts, step, cfg, log) -> None:
    """Checkpoint on rank 0; gathering the full weights and optimizer state is collective."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict

    rank, _ = dist_info()
    opt = StateDictOptions(full_state_dict=True, cpu_offload=True)
    state = get_model_state_dict(model, options=opt)
    ostate = get_optimizer_state_dict(model, list(opts.values()), options=opt)
    if rank != 0:
        return
    save_checkpoint(run.path, step, step * cfg.tokens_per_step, state, {"all": ostate})
    log.info(f"checkpoint step {step}")
    if cfg.keep_optimizer == "last":  # the newest two keep their optimizer state: one corrupt file never means step 0
        # only the folders still holding an optimizer file are listed and verified: a few per save,
        # not every checkpoint of the run (quadratic over a trajectory of hundreds)
        holding = [p for p in sorted((run.path / CKPT_DIR).glob("step_*")) if (p / "optim.safetensors").exists()]
        resumable = [ck for ck in list_checkpoints(run.path, report=log.warning, only=holding) if ck.has_optimizer]
        for ck in resumable[:-KEEP_RESUMABLE]:
            drop_optimizer_state(ck)


def _finish(run, model, steps, wall, log, skip_save=False) -> None:
    rank, _ = dist_info()
    if rank != 0:
        return
    cfg = run.config
    m = unwrap(model)
    old = run.manifest or {}
    manifest = {
        "status": "complete", "hash": run.hash, "label": cfg.label, "steps": steps,
        "tokens_per_step": cfg.tokens_per_step, "realized_tokens": steps * cfg.tokens_per_step,
        "requested_tokens": cfg.n_tokens, "n_params_non_embedding": m.n_params(non_embedding=True),
        "n_params": m.n_params(non_embedding=False), "code": code_version(), "torch": torch.__version__,
        "wall_time_s": round(old.get("wall_time_s", 0.0) + wall, 3) if not skip_save else old.get("wall_time_s", 0.0),
        "budget": cfg.budget, "threads": torch.get_num_threads(),
    }
    atomic_write_json(run.path / "manifest.json", manifest)
    log.info(f"complete: {steps} steps, {manifest['realized_tokens']} tokens")


def main(argv=None) -> int:
    """CLI: run or resume the run described by CONFIG.json in the run store."""
    ap = argparse.ArgumentParser(prog="python -m nblib.training.train", description=__doc__.splitlines()[0],
                                 epilog="Errors print one line and exit 2; --debug adds the traceback.")
    ap.add_argument("config", help="RunConfig as JSON (e.g. a run folder's config.json)")
    ap.add_argument("--run-root", default=None, help="run store folder (default: $NBLIB_RUN_ROOT or ./runs)")
    ap.add_argument("--strategy", default="ddp", choices=["ddp", "fsdp"], help="under torchrun")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--no-wait", action="store_true", help="fail at once if another process writes this run")
    ap.add_argument("--lock-timeout", type=float, default=None, help="seconds to wait for another writer")
    args = ap.parse_args(argv)
    try:
        raw = json.loads(Path(args.config).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read run config {args.config}: {e}") from None
    cfg = RunConfig.from_dict(raw)  # ConfigError names the bad field
    check_buildable(cfg, get_tokenizer(cfg.data["tokenizer"]).vocab_size)
    if args.lock_timeout is not None and not args.lock_timeout >= 0:
        raise ValueError(f"--lock-timeout={args.lock_timeout} is not allowed; allowed: seconds >= 0")
    store = RunStore(args.run_root)
    store.check_parent(cfg)  # before any folder of this run exists
    init_distributed()
    rank, world = dist_info()
    run = store.run(cfg)
    _CLI_RUN[0] = run
    lock = store.lock(run) if rank == 0 else None
    try:
        if lock is not None:  # rank 0 holds the run for every rank, so no other trainer writes it
            lock.acquire(blocking=not args.no_wait, timeout=args.lock_timeout)
            store.write_config(run)
        if world > 1:
            torch.distributed.barrier()
        if not run.is_complete():
            train(run, progress=not args.no_progress, strategy=args.strategy)
        if world > 1:
            torch.distributed.barrier()
    finally:
        if lock is not None:
            lock.release()
        if world > 1:
            torch.distributed.destroy_process_group()
    if rank == 0:
        print(json.dumps({"run": run.hash, "path": str(run.path), **(run.manifest or {})}, indent=2))
    return 0


_CLI_RUN: list = [None]  # the run the CLI works on, so an error can also go to its train.log


def _log_cli_error(msg: str) -> None:
    run = _CLI_RUN[0]
    if run is not None and run.path.is_dir():
        try:
            with open_no_follow(run.path / "train.log", "a") as f:
                f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} ERROR {msg}\n")
        except OSError:
            pass  # the error being reported may be that this very disk is full


if __name__ == "__main__":
    sys.exit(run_cli(main, on_error=_log_cli_error))
