"""A batched ensemble trainer: K same-shape runs trained together in one process.

The LCCP grid is many small runs of one shape: the Dl branches of one short-stage
checkpoint, the seeds of a Constant trajectory (LCCP paper §3.1, §4.1). K such runs share
one process and one set of operations, which removes per-call overhead: above all that of
Muon's Newton-Schulz iteration on small matrices (7x faster batched, K = 4, toy S1 shapes,
one thread), while the forward and backward cost about the same batched or not (their
work is the matmuls and the vocabulary softmax). benchmarks/bench_ensemble.py measures
the end-to-end gain per toy scale.

- weights are stacked, [K, ...] per parameter; the forward and backward are the model's own,
  run under `torch.vmap` through `torch.func.functional_call` (any nblib model family);
- each member keeps its own optimizer state, split exactly as `make_optimizers` splits it:
  Muon for hidden matrices, batched over members (one Newton-Schulz on [K, m, n] with batched
  matmuls), AdamW for the rest (each member's own torch AdamW, stepping that member's slice);
- each member draws its own batches (`stream_for(data, seed)`), follows its own LR schedule
  per step, clips its own gradient norm, and writes its own metrics.jsonl, train.log,
  checkpoints and manifest through the solo trainer's functions, so sha256 records,
  manifests and `Run.is_complete()` mean exactly what they mean for a solo run.

The member's parameters are views into the stacked tensors, so the solo trainer's
state-dict and optimizer-state functions read and write them in place.

Clock and exact resume. Members advance one step per tick; a member's step at tick t is
its base step + t (base: the parent's step for an init mode 'continue' branch, else 0), so
WSD decays branched at different steps still run side by side. A member reaching its last
step is finalised and leaves; the others go on. Whenever any member reaches one of its
checkpoint steps, every member still training is checkpointed at that tick: the member's
own steps as the solo trainer writes them, the others as *resume points* (flagged in
state.json, kept for the last two such ticks, deleted when the member finishes). A restart
resumes every member at the latest tick at which all of them have a valid checkpoint, so
the ensemble is rebuilt with the same members at the same steps: a killed ensemble ends
bit-identical to an uninterrupted one, whatever the thread count. A member that was
trained further alone is taken back to that common tick (and its later checkpoints are
rewritten as the ensemble passes them).

Numerics. The members' gradients are a solo run's: the loss is the model's cross-entropy,
computed outside vmap so that each member's mean and its gradient are reduced as the
solo loss reduces them, attention runs per member (torch has no batching rule for CPU
flash attention, so vmap loops over it), and AdamW and gradient clipping are the solo
calls on each member's slice. At one thread the batched matmuls (the vmapped
linear layers, Newton-Schulz) equal the unbatched ones bit for bit on the machine this was
written on, so a Llama member's checkpoints are byte-identical to its solo run's (GPT-2's
LayerNorm and Gemma 3's QK-norm weight gradients are summed over positions in another
order under vmap, 1e-10 apart, so those families agree with solo runs to rounding). With more
threads MKL parallelises a batched matmul over its batch (each matrix on one thread) but
splits a single matmul across threads, so an ensemble at two threads still reproduces the
one-thread solo run, while the solo trainer itself drifts with the thread count (measured:
up to 1.7e-3 relative loss within 100 steps at d_model 128, LR 2e-2). A member left alone
in the ensemble (K = 1) gets the multi-threaded kernels again.

Scope: CPU, one process (no torchrun), no bf16 autocast.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import time
import warnings

import torch
import torch.nn.functional as F
from torch.func import functional_call
from torch.optim._muon import _adjust_lr
from tqdm import tqdm

from nblib.data import get_tokenizer
from nblib.models import FAMILIES
from nblib.store.atomic import append_jsonl
from nblib.store.checkpoint import (CheckpointInfo, CorruptCheckpointError, clean_checkpoint_temporaries,
                                    drop_optimizer_state, list_checkpoints, load_training_state, quarantine,
                                    save_checkpoint, step_dirname, verify_checkpoint)
from nblib.store.runstore import Run, RunConfig, RunStore, check_buildable
from nblib.training.schedules import schedule_of
from nblib.training.train import (KEEP_RESUMABLE, NonFiniteLossError, _apply_init, _apply_init_rope, _ckpt_steps,
                                  _finish, _logger, build_model_from_config, dist_info, make_optimizers, stream_for)

RESUME_POINT = "ensemble_resume_point"  # state.json "extra" flag of a checkpoint only the ensemble needs


# ---------------------------------------------------------------------------------------
# which runs can share an ensemble
# ---------------------------------------------------------------------------------------
# make_optimizers' and the trainer's defaults for keys an optimizer config leaves out
OPTIMIZER_DEFAULTS = {"weight_decay": 0.1, "clip": 1.0, "betas": [0.9, 0.95], "muon_adjust_lr": "match_rms_adamw"}


def _model_fields(model: dict) -> dict:
    """A model config with every field its family's config class fills in by default."""
    fields = dict(model)
    family = fields.pop("family", None)
    try:
        return {"family": family, **dataclasses.asdict(FAMILIES[family][0](**fields))}
    except (KeyError, TypeError, ValueError):  # not buildable: compared as written (check_buildable says why)
        return dict(model)


def _shape_of(c: RunConfig) -> dict:
    """What every member must share, defaults filled in: whatever fixes the shapes of the
    stacked tensors, the forward pass (RoPE base, document isolation) and the optimizer."""
    model = _model_fields(c.model)
    rope = (c.init or {}).get("rope_base") or model.get("rope_base", model.get("rope_global_base"))
    return {"model": model, "data.seq_len": c.seq_len,
            "data.doc_isolation": bool(c.data.get("doc_isolation", False)), "batch_size": c.batch_size,
            "micro_batch_size": c.micro_batch_size or c.batch_size, "optimizer": {**OPTIMIZER_DEFAULTS, **c.optimizer},
            "schedule.kind": c.schedule["kind"], "init.rope_base": rope}


def _first_difference(name: str, a, b) -> str | None:
    """'field: a != b' for the first differing (nested) field, or None when equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            d = _first_difference(f"{name}.{k}", a.get(k), b.get(k))
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        a, b = list(a), list(b)
    return None if a == b else f"{name}: {a!r} != {b!r}"


def can_ensemble(configs) -> tuple[bool, str]:
    """(True, "") when these run configs can train as one ensemble, else (False, why).

    Members must share the model config, seq_len (and document isolation), batch size
    (and micro-batch), optimizer config, schedule kind and RoPE base. They may differ in
    seed (init and data order), data source, init (parent run and step, or none), n_tokens
    (total steps) and LR values (each member follows its own schedule). `why` names the
    first differing field and the two values.
    """
    configs = list(configs)
    if not configs:
        return False, "no run configs to ensemble"
    ref = _shape_of(configs[0])
    seen = {}
    for i, c in enumerate(configs):
        if c.precision is not None:  # the ensemble trains in fp32 only: a bf16 hash must hold bf16 weights
            return False, (f"member {i} asks for precision {c.precision!r}; the ensemble trainer trains in fp32 "
                           "only (train it with the solo trainer)")
        if c.hash in seen:
            return False, f"member {i} is the same run as member {seen[c.hash]} (hash {c.hash})"
        seen[c.hash] = i
        shape = _shape_of(c)
        for key in ref:
            diff = _first_difference(key, shape[key], ref[key])
            if diff:
                return False, (f"member {i} differs from member 0 in {diff}; ensemble members must share the "
                               f"model config, seq_len, batch size, optimizer config, schedule kind and RoPE base")
    return True, ""


# ---------------------------------------------------------------------------------------
# batched Muon
# ---------------------------------------------------------------------------------------
def newton_schulz_batched(G: torch.Tensor, coefficients, steps: int, eps: float) -> torch.Tensor:
    """nblib.training.optim.newton_schulz on a stack of matrices [K, m, n], in fp32: the same
    quintic iteration (torch.optim.Muon's, Jordan et al.), each matrix normalised by its own
    Frobenius norm, with batched matmuls (one baddbmm per term instead of K addmm)."""
    if G.dim() != 3:
        raise ValueError(f"expected a stack of matrices [K, m, n], got shape {tuple(G.shape)}")
    a, b, c = coefficients
    X = G.to(torch.float32)
    tall = G.size(1) > G.size(2)
    if tall:
        X = X.mT
    X = X / X.norm(dim=(1, 2), keepdim=True).clamp(min=eps)  # spectral norm <= 1, per member
    for _ in range(steps):
        A = X @ X.mT
        X = torch.baddbmm(X, torch.baddbmm(A, A, A, beta=b, alpha=c), X, beta=a)
    return X.mT if tall else X


# ---------------------------------------------------------------------------------------
# one member
# ---------------------------------------------------------------------------------------
class _Member:
    """One run of the ensemble: its config, log, stream, schedule, model and optimizers."""

    def __init__(self, run: Run):
        self.run, self.cfg = run, run.config
        self.log = _logger(run)
        self.sched = schedule_of(self.cfg)
        self.total = self.cfg.total_steps
        self.own = _ckpt_steps(self.cfg)  # what the solo trainer would write
        init = self.cfg.init or {}
        self.base = int(init["step"]) if init.get("mode") == "continue" else 0
        self.model = self.opts = self.rng = None
        self.named: dict = {}
        self.params: list = []
        self.step = self.first = 0
        self.failed: str | None = None

    def report(self, msg: str) -> None:
        """A problem with this run's checkpoints: to its train.log and to stderr, like the solo trainer."""
        self.log.warning(msg)
        warnings.warn(msg, stacklevel=3)

    def resumable(self) -> dict[int, CheckpointInfo]:
        """Checkpoints holding optimizer state within this run's steps, by tick (sizes checked)."""
        out = {}
        for ck in list_checkpoints(self.run.path, report=self.report):
            if ck.has_optimizer and self.base < ck.step <= self.total:
                out[ck.step - self.base] = ck
        return out

    def setup(self, ck: CheckpointInfo | None) -> None:
        """Build the model and optimizers at checkpoint `ck`, or at the run's start: the solo
        trainer's sequence (seed, build, load or init, optimizers, their state)."""
        cfg = self.cfg
        torch.manual_seed(cfg.seed)
        model = build_model_from_config(cfg.model)
        start, ostate, rng = 0, None, None
        if ck is not None:
            weights, ostates, state = load_training_state(ck)
            _apply_init_rope(model, cfg)
            model.load_state_dict(weights)
            ostate, rng, start = ostates["all"], state["rng_torch_cpu"], ck.step
            self.log.info(f"resuming from {ck.path.name} (step {start})")
        elif cfg.init is not None:
            start, ostate, rng = _apply_init(self.run, model, self.log)
        opts = make_optimizers(model, cfg.optimizer, self.sched(min(start, self.total - 1)))
        if ostate is not None:
            # imported on first use, as in train.py (about 1 s of every importing process's start)
            from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

            set_optimizer_state_dict(model, list(opts.values()), ostate)
        # The RNG state a solo run would checkpoint (training itself draws no random numbers).
        self.rng = rng if rng is not None else torch.get_rng_state()
        self.model, self.opts, self.step, self.first = model, opts, start, start
        self.named = dict(model.named_parameters())
        self.params = list(model.parameters())

    def save(self, step: int, resume_point: bool) -> None:
        """Checkpoint `step` with the solo trainer's functions. An own step keeps the solo
        trainer's optimizer-state policy, counted over own steps only (resume points never
        push an own checkpoint's optimizer state out)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict

        cfg = self.cfg
        torch.set_rng_state(self.rng)
        opt = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state = get_model_state_dict(self.model, options=opt)
        ostate = get_optimizer_state_dict(self.model, list(self.opts.values()), options=opt)
        save_checkpoint(self.run.path, step, step * cfg.tokens_per_step, state, {"all": ostate},
                        extra={RESUME_POINT: True} if resume_point else None)
        if resume_point:
            self.log.info(f"checkpoint step {step} (ensemble resume point; removed when the run finishes)")
            return
        self.log.info(f"checkpoint step {step}")
        if cfg.keep_optimizer == "last":
            own = [ck for ck in list_checkpoints(self.run.path, report=self.log.warning)
                   if ck.has_optimizer and not is_resume_point(ck)]
            for ck in own[:-KEEP_RESUMABLE]:
                drop_optimizer_state(ck)

    def prune_resume_points(self, keep_ticks=()) -> None:
        """Delete this run's resume points at ticks not in keep_ticks. Renamed to a
        checkpoint-temporary name first, so a kill mid-delete leaves only what the next
        start's clean_checkpoint_temporaries removes."""
        for ck in list_checkpoints(self.run.path, report=self.log.warning):
            if ck.step - self.base in keep_ticks or not is_resume_point(ck):
                continue
            tmp = ck.path.with_name(f".{step_dirname(ck.step)}.tmp-{os.getpid()}-{time.time_ns()}")
            os.rename(ck.path, tmp)
            shutil.rmtree(tmp, ignore_errors=True)


def is_resume_point(ck: CheckpointInfo) -> bool:
    """True for a checkpoint the ensemble wrote only to resume from (not one the run asks for)."""
    try:
        return bool(json.loads((ck.path / "state.json").read_text()).get("extra", {}).get(RESUME_POINT))
    except (OSError, ValueError, AttributeError):
        return False


# ---------------------------------------------------------------------------------------
# the ensemble
# ---------------------------------------------------------------------------------------
def train_ensemble(runs, progress: bool = True, wait: bool = True, timeout: float | None = None) -> list:
    """Train the runs `runs` (run-store Runs) together; return them in input order.

    Like `get_or_run` for each: finished runs are skipped, parents must be trained, and each
    unfinished run's lock is held for the whole ensemble (taken in hash order; waiting for
    another writer when wait=True, else RunLockedError). The rest train as one batched
    ensemble (module doc). A member whose loss becomes non-finite stops before that update,
    as a solo run would, and leaves the ensemble; the others finish, then NonFiniteLossError
    is raised naming every member that stopped.
    """
    runs = list(runs)
    ok, why = can_ensemble([r.config for r in runs])
    if not ok:
        raise ValueError(why)
    if dist_info()[1] > 1:
        raise RuntimeError("train_ensemble runs in one process; under torchrun use the solo trainer")
    todo = [r for r in runs if not r.is_complete()]
    for r in todo:
        check_buildable(r.config, get_tokenizer(r.config.data["tokenizer"]).vocab_size)
        RunStore(r.path.parent).check_parent(r.config)
    locks = []
    try:
        for r in sorted(todo, key=lambda r: r.hash):  # one global order: two ensembles never deadlock
            lock = RunStore(r.path.parent).lock(r)
            lock.acquire(blocking=wait, timeout=timeout)
            locks.append(lock)
        todo = [r for r in todo if not r.is_complete()]  # finished by a process we waited for
        for r in todo:
            RunStore(r.path.parent).write_config(r)
        if todo:
            _Ensemble([_Member(r) for r in todo], progress).train()
    finally:
        for lock in reversed(locks):
            lock.release()
    return runs


class _Ensemble:
    """The members still training, their stacked weights, gradients and Muon momenta."""

    def __init__(self, members: list, progress: bool):
        self.members, self.progress = members, progress
        cfg = members[0].cfg
        self.batch = cfg.batch_size
        self.micro = cfg.micro_batch_size or cfg.batch_size
        self.isolate = bool(cfg.data.get("doc_isolation", False))
        self.clip = float(cfg.optimizer.get("clip", 1.0))
        # The module functional_call runs: member 0's architecture (and RoPE base, which
        # can_ensemble made common), its own weights on the meta device (never used).
        skel = build_model_from_config(cfg.model)
        _apply_init_rope(skel, cfg)
        self.skel = skel.to("meta")
        self.active: list = []
        self.S: dict = {}
        self.mbuf: dict = {}

    # -- resume ------------------------------------------------------------------------------
    def _common_tick(self) -> tuple[int, dict, dict]:
        """(tick, {member: checkpoint}, {member: {tick: checkpoint}}): the latest tick at which
        every member has a verified resumable checkpoint (0: the runs' starts), and what each
        has. Corrupt checkpoints met on the way are reported and quarantined."""
        points = {id(m): m.resumable() for m in self.members}
        while True:
            shared = set.intersection(*(set(points[id(m)]) for m in self.members))
            if not shared:
                return 0, {}, points
            t = max(shared)
            good = True
            for m in self.members:
                ck = points[id(m)][t]
                try:
                    verify_checkpoint(ck.path, deep=True)
                except CorruptCheckpointError as e:
                    m.report(f"skipping corrupt checkpoint: {e}")
                    quarantine(ck.path)
                    del points[id(m)][t]
                    good = False
            if good:
                return t, {id(m): points[id(m)][t] for m in self.members}, points

    def _start(self) -> int:
        for m in self.members:
            for leftover in clean_checkpoint_temporaries(m.run.path):
                m.log.info(f"removed {leftover.name}, left by an interrupted checkpoint write")
        tick, cks, points = self._common_tick()
        for m in self.members:
            newer = sorted(t + m.base for t in points[id(m)] if t > tick)
            if newer:
                m.report(f"run {m.run.hash}: the ensemble resumes it at step {m.base + tick}, the latest step at which "
                         f"every member has a checkpoint, not from its newer checkpoint(s) {newer}")
            m.setup(cks.get(id(m)))
        for m in self.members:
            if m.step >= m.total:  # killed after its last checkpoint: only the manifest may be missing
                m.prune_resume_points()
                _finish(m.run, m.model, m.step, 0.0, m.log, skip_save=True)
        self.active = [m for m in self.members if m.step < m.total]
        self._stack()
        return tick

    # -- stacked state -----------------------------------------------------------------------
    def _stack(self, carry_grad: bool = False) -> None:
        """(Re)build the stacked weights (and momenta, and gradients when carry_grad) from the
        active members, and point each member's parameters and Muon state at its slice."""
        if not self.active:
            self.S, self.mbuf = {}, {}
            return
        first = self.active[0]
        names = list(first.named)
        self.buffers = dict(first.model.named_buffers())  # shared constants (none in nblib's families today)
        muon = first.opts.get("muon")
        muon_ids = {id(p) for g in (muon.param_groups if muon else []) for p in g["params"]}
        self.muon_names = [n for n, p in first.named.items() if id(p) in muon_ids]
        self.blocks = {n: getattr(first.named[n], "muon_row_blocks", 1) for n in self.muon_names}
        with torch.no_grad():
            S = {}
            for n in names:
                S[n] = torch.stack([m.named[n].detach() for m in self.active]).requires_grad_()
                if carry_grad:
                    S[n].grad = torch.stack([m.named[n].grad for m in self.active])
            mbuf = {}
            for n in self.muon_names:
                bufs = [m.opts["muon"].state[m.named[n]].get("momentum_buffer") for m in self.active]
                mbuf[n] = torch.stack([b if b is not None else torch.zeros_like(m.named[n])
                                       for b, m in zip(bufs, self.active)])
            for k, m in enumerate(self.active):
                for n in names:
                    m.named[n].data = S[n][k]
                    m.named[n].grad = S[n].grad[k] if carry_grad else None
                for n in self.muon_names:
                    m.opts["muon"].state[m.named[n]]["momentum_buffer"] = mbuf[n][k]
        self.S, self.mbuf = S, mbuf

    def _forward(self, x, doc):
        """Logits [K, b, T, V]: every member's model on its own batch, one vmapped call."""
        skel, buffers = self.skel, self.buffers
        with warnings.catch_warnings():
            # vmap loops over CPU flash attention (no batching rule): expected, see the module doc
            warnings.filterwarnings("ignore", message=".*not yet implemented the batching rule", category=UserWarning)
            if doc is None:
                return torch.vmap(lambda p, xi: functional_call(skel, (p, buffers), (xi,))[0])(self.S, x)
            return torch.vmap(lambda p, xi, di: functional_call(skel, (p, buffers), (xi,), {"doc_ids": di})[0])(
                self.S, x, doc)

    # -- one step ----------------------------------------------------------------------------
    def _step(self) -> list:
        """One update of every active member; returns the members stopped by a non-finite loss."""
        act = self.active
        for m in act:
            m.lr = m.sched(m.step)
            for o in m.opts.values():
                for g in o.param_groups:
                    g["lr"] = m.lr
        batches = [m.stream.batch(m.step, self.batch) for m in act]
        x, y, doc = (torch.stack([b[i] for b in batches]) for i in range(3))
        K, losses = len(act), [0.0] * len(act)
        for i in range(0, self.batch, self.micro):
            sl = slice(i, i + self.micro)
            logits = self._forward(x[:, sl], doc[:, sl] if self.isolate else None)
            # The model's loss (DecoderLM.forward: cross-entropy, mean over targets != -100) for
            # every member in one log_softmax. Each member's mean is its sum over its count, so its
            # gradient is the solo one (-scale/count); the logged value is nll_loss's own mean.
            # (Per-member cross_entropy calls would stack K logit gradients in the backward.)
            logp = F.log_softmax(logits.float().flatten(0, 2), dim=-1)
            target = y[:, sl].flatten()
            per_token = F.nll_loss(logp, target, reduction="none", ignore_index=-100).view(K, -1)
            counts = (target != -100).view(K, -1).sum(1).tolist()
            scale = x[0, sl].shape[0] / self.batch  # the solo trainer's micro-batch weight
            total = sum(per_token[k].sum() / counts[k] * scale for k in range(K))
            total.backward()
            with torch.no_grad():
                for k, lp in enumerate(logp.detach().view(K, -1, logp.size(-1)).unbind(0)):
                    loss = F.nll_loss(lp, target.view(K, -1)[k], ignore_index=-100) * scale
                    losses[k] += loss.float().item()
        for k, m in enumerate(act):
            m.loss = losses[k]
            for n, p in m.named.items():
                p.grad = self.S[n].grad[k]
        bad = [m for m in act if not math.isfinite(m.loss)]
        if bad:  # stop them before the update, as the solo trainer does, and train on without them
            for m in bad:
                self._fail(m)
            self.active = act = [m for m in act if m not in bad]
            self._stack(carry_grad=True)
            if not act:
                return bad
        for m in act:  # the solo trainer's clipping, on the member's own gradient slices
            m.gnorm = float(torch.nn.utils.clip_grad_norm_(m.params, self.clip))
        self._muon_step()
        for m in act:
            m.opts["adamw"].step()
        for n in self.S:
            self.S[n].grad = None
        for m in act:
            for p in m.params:
                p.grad = None
            m.step += 1
        return bad

    @torch.no_grad()
    def _muon_step(self) -> None:
        """nblib.training.optim.Muon.step for every member at once: momentum and Nesterov
        elementwise on the stack, Newton-Schulz batched, each member's own LR and decay."""
        if not self.muon_names:
            return
        act = self.active
        group = act[0].opts["muon"].param_groups[0]
        mom, nesterov, fn = group["momentum"], group["nesterov"], group["adjust_lr_fn"]
        ns = (group["ns_coefficients"], group["ns_steps"], group["eps"])
        lrs = [m.opts["muon"].param_groups[0]["lr"] for m in act]
        wds = [m.opts["muon"].param_groups[0]["weight_decay"] for m in act]
        same = len(set(zip(lrs, wds))) == 1
        decay = None if same else torch.tensor([1 - lr * wd for lr, wd in zip(lrs, wds)]).view(-1, 1, 1)
        for n in self.muon_names:
            p, buf = self.S[n], self.mbuf[n]
            grad = p.grad
            buf.lerp_(grad, 1 - mom)
            update = grad.lerp(buf, mom) if nesterov else buf
            blocks = self.blocks[n]
            if blocks > 1:  # GPT-2's fused c_attn: W_q, W_k, W_v orthogonalised apart (optim.py)
                update = torch.cat([newton_schulz_batched(u, *ns) for u in update.chunk(blocks, 1)], 1)
                shape = (p.shape[1] // blocks, *p.shape[2:])
            else:
                update = newton_schulz_batched(update, *ns)
                shape = tuple(p.shape[1:])
            update = update.to(p.dtype)
            if same:
                p.mul_(1 - lrs[0] * wds[0])
                p.add_(update, alpha=-_adjust_lr(lrs[0], fn, shape))
            else:  # per member: add_ with alpha fuses the multiply, which a broadcast tensor would not
                p.mul_(decay)
                for k in range(len(act)):
                    p[k].add_(update[k], alpha=-_adjust_lr(lrs[k], fn, shape))

    def _fail(self, m) -> None:
        cfg = m.cfg
        last = [c.step for c in list_checkpoints(m.run.path, report=m.log.warning)]
        msg = (f"non-finite loss ({m.loss}) at step {m.step} (token {m.step * cfg.tokens_per_step}) of run "
               f"{m.run.hash} [{cfg.label}]; stopped before the update. Last good checkpoint: "
               f"{'step ' + str(last[-1]) if last else 'none'} in {m.run.path / 'ckpt'}. "
               f"Lower the learning rate (now {m.lr:.3g}) or check the data.")
        m.log.error(msg)
        m.failed = msg

    # -- the loop ----------------------------------------------------------------------------
    def train(self) -> None:
        try:
            self._train()
        except OSError as e:
            for m in self.active:
                m.log.error(f"stopped by a file system error: {e}")
            raise

    def _train(self) -> None:
        tick = self._start()
        for m in self.members:
            m.stream = stream_for(m.cfg.data, m.cfg.seed)
        # Ticks at which some member reaches a checkpoint step: every member still training
        # is checkpointed there, so a restart finds all of them at one tick.
        union = sorted({s - m.base for m in self.active for s in m.own if s > m.step})
        common = [tick] if tick > 0 else []  # ticks at which every active member has a checkpoint
        failed = []
        t0 = time.time()
        remaining = max((m.total - m.step for m in self.active), default=0)
        bar = tqdm(total=remaining, desc=f"ensemble of {len(self.active)}", unit="step", disable=not self.progress,
                   leave=False)
        for m in self.active:
            m.log.info(f"training steps {m.step}->{m.total} ({m.cfg.tokens_per_step} tokens/step) in an ensemble of "
                       f"{len(self.active)} (tick {tick})")
        while self.active:
            failed += self._step()
            tick += 1
            bar.update(1)
            for m in self.active:
                done, cfg = m.step, m.cfg
                if done % cfg.log_every == 0 or done == m.total or done == m.first + 1:
                    append_jsonl(m.run.path / "metrics.jsonl", {
                        "kind": "train", "step": done, "tokens": done * cfg.tokens_per_step, "loss": m.loss,
                        "lr": m.lr, "grad_norm": m.gnorm, "elapsed_s": round(time.time() - t0, 3)})
            if union and tick == union[0]:
                union.pop(0)
                for m in self.active:
                    m.save(m.step, resume_point=m.step not in m.own)
                common = (common + [tick])[-KEEP_RESUMABLE:]
                finished = [m for m in self.active if m.step >= m.total]
                for m in self.active:
                    m.prune_resume_points(() if m in finished else common)
                for m in finished:
                    _finish(m.run, m.model, m.total, time.time() - t0, m.log)
                if finished:
                    self.active = [m for m in self.active if m not in finished]
                    self._stack()
            if self.active:
                bar.set_postfix(loss=f"{self.active[0].loss:.3f}", members=len(self.active))
        bar.close()
        if failed:
            raise NonFiniteLossError("\n".join(m.failed for m in failed))
