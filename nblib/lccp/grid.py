"""The paper's run grid as run-store configs (LCCP paper §3.1, §4.1-4.2, App. A.3).

Every function here only *describes* runs (RunConfig); `nblib.training.runner.get_or_run_many`
trains what the store does not have yet. Every function takes a resolved `Budget`: the
entry points (a chapter, the monitor CLI) resolve its name once with `get_budget`. Stages:
  short   4K-analogue pre-training, WSD (8:1 warmup+stable : decay), one shared stable run
          per scale with the five decays branched from it;
  long    32K-analogue LCCP from a short-stage endpoint, ABF RoPE base rope_bases[0] -> [1] (1e4 -> 5e5 at full),
          Linear-Decay from the 4K terminal LR (lr/10; Budget.lccp_lr) to a tenth of it, or Constant;
  ref     the LongPPL reference model (the paper uses Llama-3.1-8B; toy budgets train one).

`grid_runs` lists a budget's whole grid, stage by stage: `make plan`, the GPU check and
chapter 2 count runs, tokens and steps from it (`trained_tokens`), never by a formula of
their own.
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from dataclasses import dataclass

from nblib.budgets import SCALES, Budget, BudgetError
from nblib.data import CORPUS_PLACEHOLDER, corpus_identity
from nblib.store.runstore import RunConfig
from nblib.training.schedules import wsd_stable_steps
from nblib.training.threads import KERNEL_THREADS


@contextmanager
def placeholder_corpus(name: str = "placeholder: corpus not read"):
    """Within the block, configs name `name` as their corpus identity instead of reading the
    corpus for its content hash (`nblib.data.corpus_identity`, so Models A and B's configs too):
    for counting a budget whose corpus is not here yet (`make plan`, the GPU check's dry run).
    Their hashes are not the run store's; never train them."""
    token = CORPUS_PLACEHOLDER.set(name)
    try:
        yield
    finally:
        CORPUS_PLACEHOLDER.reset(token)


def data_config(budget: Budget, stage: str) -> dict:
    """Data stream of a stage: 'short' (packed), 'long' (LCCP mixture) or 'ext' (128K mixture)."""
    corpus_id = corpus_identity(budget.corpus)
    base = {"corpus": budget.corpus, "corpus_id": corpus_id, "tokenizer": budget.tokenizer, "split": "train"}
    if stage == "short":
        return {**base, "stream": "packed", "seq_len": budget.short_seq_len}
    if stage == "long":
        data = {**base, "stream": "long_mixture", "seq_len": budget.long_seq_len, "mixture": budget.lccp_mixture}
        return {**data, "aligned": True} if budget.lccp_aligned else data  # absent when False: hashes stay
    if stage == "ext":  # App. A.3: the 128K stage isolates packed documents (span-based attention)
        return {**base, "stream": "long_mixture", "seq_len": budget.ext_seq_len, "mixture": budget.ext_mixture,
                "doc_isolation": True}
    raise ValueError(f"stage {stage!r}; allowed: short, long, ext")


def model_config(budget: Budget, scale: str) -> dict:
    return {"family": "llama", **budget.scale(scale).model}


@dataclass
class ShortStage:
    """The stable trunk of one scale and its WSD runs keyed by Ds/N multiple."""

    trunk: RunConfig
    wsd: dict

    def all(self) -> list[RunConfig]:
        return [self.trunk, *self.wsd.values()]


def wsd_config(budget: Budget, scale: str, ds_mult: float, seed: int = 0, init: dict | None = None) -> RunConfig:
    """A standalone WSD short-context run with Ds = ds_mult * N (App. A.3, Table 5)."""
    spec = budget.scale(scale)
    return RunConfig(
        model=model_config(budget, scale), data=data_config(budget, "short"),
        schedule={"kind": "wsd", "lr": spec.lr, "warmup_steps": spec.warmup_steps, "decay_frac": 1 / 9,
                  "final_lr_frac": 0.1},
        n_tokens=budget.n_tokens(scale, ds_mult), batch_size=spec.batch_short, seed=seed, budget=budget.name,
        init=init, label=f"{scale} short Ds={ds_mult}{budget.unit}", meta={"scale": scale, "stage": "short", "ds_mult": ds_mult},
        precision=budget.short_precision(scale))


_SHORT_STAGES: dict = {}


def short_stage(budget: Budget, scale: str, seed: int = 0, ds_multiples=None) -> ShortStage:
    """One warmup+constant trunk and a WSD decay branched from it for every Ds budget.

    Equivalent to separate WSD runs with the same seed (tests/test_train.py checks it): the
    batch and LR at a step depend only on the step, and the branch restores the trunk's
    optimizer state at exactly that run's decay start. Memoized per (budget, scale, seed,
    Ds multiples): every LCCP config names its parent through it, so the grid builds each
    short stage once. The returned configs are shared; do not modify them.
    """
    ds_multiples = tuple(ds_multiples or budget.ds_multiples)
    key = (repr(budget), scale, seed, ds_multiples, CORPUS_PLACEHOLDER.get())
    if key not in _SHORT_STAGES:
        _SHORT_STAGES[key] = _build_short_stage(budget, scale, seed, ds_multiples)
    return _SHORT_STAGES[key]


def _build_short_stage(budget: Budget, scale: str, seed: int, ds_multiples: tuple) -> ShortStage:
    spec = budget.scale(scale)
    plain = {m: wsd_config(budget, scale, m, seed) for m in ds_multiples}
    stable = {m: wsd_stable_steps(c.total_steps, 1 / 9) for m, c in plain.items()}
    for m, c in plain.items():
        if stable[m] >= c.total_steps:  # a branch with nothing to train would leave no final checkpoint
            raise BudgetError(f"{scale}: Ds = {m:g}{budget.unit or 'N'} is {c.total_steps} short-stage step(s) at "
                              f"batch_short={spec.batch_short}, too few for its WSD decay (the last 1/9 of the "
                              "steps); allowed: Ds budgets whose decay trains at least one step (a smaller "
                              "batch_short or larger ds_multiples)")
    tps = spec.batch_short * budget.short_seq_len
    trunk = RunConfig(
        model=model_config(budget, scale), data=data_config(budget, "short"),
        schedule={"kind": "constant", "lr": spec.lr, "warmup_steps": spec.warmup_steps},
        n_tokens=max(max(stable.values()), 1) * tps, batch_size=spec.batch_short, seed=seed, budget=budget.name,
        # the decay starts, and the stable phase's midpoint (is the loss still falling? chapter 3)
        ckpt_steps=tuple(sorted({s for s in stable.values() if s > 0} | {max(stable.values()) // 2} - {0})),
        keep_optimizer="all", label=f"{scale} short stable",
        meta={"scale": scale, "stage": "short-trunk"}, precision=budget.short_precision(scale))
    wsd = {}
    for m, c in plain.items():
        if stable[m] == 0:  # too short to branch: train it standalone
            wsd[m] = c
            continue
        c.init = {"run": trunk.hash, "step": stable[m], "mode": "continue"}
        wsd[m] = c
    return ShortStage(trunk, wsd)


def _lccp(budget: Budget, scale: str, parent: RunConfig, schedule: dict, n_tokens: int, seed: int,
          label: str, meta: dict, **kw) -> RunConfig:
    spec = budget.scale(scale)
    return RunConfig(
        model=model_config(budget, scale), data=data_config(budget, "long"), schedule=schedule,
        n_tokens=n_tokens, batch_size=spec.batch_long, seed=seed, budget=budget.name,
        init={"run": parent.hash, "step": parent.total_steps, "mode": "weights", "rope_base": budget.rope_bases[1]},
        label=label, meta={"scale": scale, **meta}, precision=budget.run_precision, **kw)


def lccp_linear_decay(budget: Budget, scale: str, ds_mult: float, dl_mult: float, seed: int = 0,
                      short_seed: int = 0, ds_multiples=None) -> RunConfig:
    """Linear-Decay LCCP (§3.1): from lr_4K/10 down to a tenth of it over Dl, no warmup, from
    the short stage of seed `short_seed` (the grid's is 0; `seed` orders the LCCP data) whose
    trunk branches at `ds_multiples` (default the budget's; `short_stage`)."""
    parent = short_stage(budget, scale, short_seed, ds_multiples).wsd[ds_mult]
    lr0 = budget.lccp_lr(scale)
    return _lccp(budget, scale, parent, {"kind": "linear_decay", "lr": lr0, "final_lr_frac": 0.1},
                 budget.n_tokens(scale, dl_mult), seed, f"{scale} LD Ds={ds_mult}{budget.unit} Dl={dl_mult}{budget.unit}",
                 {"stage": "lccp-ld", "ds_mult": ds_mult, "dl_mult": dl_mult})


def lccp_constant(budget: Budget, scale: str, ds_mult: float, until_mult: float, seed: int = 0,
                  ckpt_every: float | None = None) -> RunConfig:
    """Constant-LR LCCP trajectory (§4.1, Table 7) with a checkpoint every `ckpt_every` * N tokens.

    The checkpoint interval is a whole number of steps k, and the trajectory length a whole
    number of intervals, so the checkpoint at Dl = j * ckpt_every * N is step j * k
    (`checkpoint_step`). Extensible: asking for a larger `until_mult` later resumes from the
    last raw checkpoint. `seed` changes the LCCP data order only; every seed starts from the
    same 4K checkpoint.
    """
    parent = short_stage(budget, scale).wsd[ds_mult]
    spec = budget.scale(scale)
    lr0 = budget.lccp_lr(scale)
    every = budget.constant_ckpt_every if ckpt_every is None else ckpt_every
    tps = spec.batch_long * budget.long_seq_len
    k = max(1, int(round(budget.n_tokens(scale, every) / tps)))
    n_intervals = int(round(until_mult / every))
    return _lccp(budget, scale, parent, {"kind": "constant", "lr": lr0}, n_intervals * k * tps, seed,
                 f"{scale} Const Ds={ds_mult}{budget.unit} seed={seed}",
                 {"stage": "lccp-const", "ds_mult": ds_mult, "ckpt_every_mult": every, "ckpt_every_steps": k},
                 ckpt_every_tokens=k * tps)


def checkpoint_step(config: RunConfig, dl_mult: float) -> int:
    """Step of a Constant trajectory's checkpoint at Dl = dl_mult * N (a multiple of the interval)."""
    every, k = config.meta["ckpt_every_mult"], config.meta["ckpt_every_steps"]
    j = dl_mult / every
    if abs(j - round(j)) > 1e-6 or round(j) < 1:
        raise ValueError(f"Dl = {dl_mult}N is not a positive multiple of the checkpoint spacing {every}N")
    return int(round(j)) * k


REFERENCE_THREADS = KERNEL_THREADS  # the reference trains alone in chapter 2's kernel


def reference_config(budget: Budget) -> RunConfig:
    """The toy LongPPL reference model: a larger model trained at the long context."""
    ref = budget.reference
    if ref["kind"] != "nblib":
        raise ValueError(f"budget {budget.name} uses an external reference model ({ref}); nothing to train")
    # The paper's reference is one fixed external model (Llama-3.1-8B, App. A.1): it does not
    # change with the LCCP window design under study, so it always reads unaligned windows
    unaligned = dataclasses.replace(budget, lccp_aligned=False)
    return RunConfig(
        model={"family": "llama", **ref["model"]}, data=data_config(unaligned, "long"),
        schedule={"kind": "wsd", "lr": ref["lr"], "warmup_steps": ref["warmup_steps"], "decay_frac": 1 / 9,
                  "final_lr_frac": 0.1},
        n_tokens=ref["n_tokens"], batch_size=ref["batch"], seed=0, budget=budget.name, label="LongPPL reference",
        meta={"stage": "reference"}, threads=REFERENCE_THREADS, precision=budget.run_precision)


def linear_decay_pairs(budget: Budget, scale: str) -> list[tuple]:
    """The (Ds, Dl) multiples of the Linear-Decay runs at `scale` (§3.1): every Ds x Dl at
    S1-S4, the diagonal/off-diagonal configurations `s5_configs` at S5."""
    if scale == "S5":
        return list(budget.s5_configs)
    return [(ds, dl) for ds in budget.ds_multiples for dl in budget.dl_multiples]


def linear_decay_grid(budget: Budget, scales=("S1", "S2", "S3", "S4")) -> list[RunConfig]:
    """Every run behind the Linear-Decay table: short stages, then the Ds x Dl LCCP grid
    for S1-S4 and the nine diagonal/off-diagonal configurations for S5 (§3.1)."""
    out = []
    for scale in scales:
        out += short_stage(budget, scale).all()
        out += [lccp_linear_decay(budget, scale, ds, dl) for ds, dl in linear_decay_pairs(budget, scale)]
    return out


# The scales whose stable trunks are trained with a second seed: the smallest, whose seeds
# differ most. Their end-of-stable-phase held-out losses define the seed spread (App. A.3's WSD
# stable phase: is the short stage still learning?). On grid Vb, S1's two seeds differed by
# 0.057 nats and S4's by 0.031; S4's second trunk cost 9 core-minutes of chapter 3 and did not set
# the spread, so the book trains S1's alone.
SPREAD_SCALES = ("S1",)


def trunk_configs(budget: Budget, scales=SCALES, spread_scales=SPREAD_SCALES) -> list[RunConfig]:
    """The stable trunks: seed 0 at every scale, seed 1 at `spread_scales`."""
    return [short_stage(budget, s, seed).trunk for s in scales
            for seed in ((0, 1) if s in spread_scales else (0,))]


def long_trajectory(budget: Budget, scale: str = "S5") -> RunConfig:
    """The long Constant trajectory (§4.2: S5 from the largest Ds to Dl = s5_trajectory,
    a checkpoint every s5_ckpt_every)."""
    return lccp_constant(budget, scale, budget.ds_multiples[-1], budget.s5_trajectory, 0,
                         ckpt_every=budget.s5_ckpt_every)


# ---------------------------------------------------------------------------------------
# the whole grid, for counting runs, tokens and steps
# ---------------------------------------------------------------------------------------
def trained_steps(config: RunConfig) -> int:
    """Optimizer steps a run trains itself: a "continue" run (a WSD decay branched from the
    stable trunk, App. A.3) resumes its parent's training state at init["step"] and trains
    only the steps after it; every other run trains all of its steps."""
    start = config.init["step"] if config.init and config.init["mode"] == "continue" else 0
    return config.total_steps - start


def trained_tokens(config: RunConfig) -> int:
    """Tokens a run trains itself (`trained_steps` x tokens per step)."""
    return trained_steps(config) * config.tokens_per_step


@dataclass(frozen=True)
class GridStage:
    """One stage of a budget's grid at one scale (scale None: the LongPPL reference): the
    chapter that trains it first, what it is (one line), and its run configs, parents first."""

    chapter: str
    stage: str  # "reference", "short", "linear-decay", "constant" or "trajectory"
    scale: str | None
    what: str
    configs: tuple

    @property
    def trained_tokens(self) -> int:
        """Tokens the stage's runs train themselves (a WSD branch's trunk steps counted once)."""
        return sum(trained_tokens(c) for c in self.configs)


def grid_runs(budget: Budget) -> list[GridStage]:
    """Every training run of chapters 2-4 at `budget`, stage by stage: the toy LongPPL
    reference (chapter 2, where the budget trains one); per scale, the short stage (trunk and
    WSD decays, App. A.3) and the Linear-Decay LCCP runs (chapter 3, §3.1); the Constant
    trajectories, `n_constant_seeds` per Ds to the largest Dl at S1-S4 and the long trajectory
    at S5 (chapter 4, §4.1-4.2). Each run appears once, in the first chapter that trains it."""
    out = []
    if budget.reference["kind"] == "nblib":
        out.append(GridStage("02_setup", "reference", None, "LongPPL reference", (reference_config(budget),)))
    for scale in SCALES:
        short = short_stage(budget, scale)
        out.append(GridStage("03_scaling_law", "short", scale,
                             f"{scale} short stage (trunk + {len(short.wsd)} decays)", tuple(short.all())))
        pairs = linear_decay_pairs(budget, scale)
        out.append(GridStage("03_scaling_law", "linear-decay", scale, f"{scale} Linear-Decay LCCP ({len(pairs)} runs)",
                             tuple(lccp_linear_decay(budget, scale, ds, dl) for ds, dl in pairs)))
        if scale == "S5":
            out.append(GridStage("04_constant_last4", "trajectory", scale,
                                 f"{scale} Constant trajectory to {budget.s5_trajectory:g}N",
                                 (long_trajectory(budget, scale),)))
        else:
            runs = tuple(lccp_constant(budget, scale, ds, budget.dl_multiples[-1], seed)
                         for ds in budget.ds_multiples for seed in range(budget.n_constant_seeds))
            out.append(GridStage("04_constant_last4", "constant", scale,
                                 f"{scale} Constant LCCP ({len(runs)} trajectories)", runs))
    return out


def nominal_short_stage_tokens(ds_tokens) -> float:
    """Tokens one scale's short stage trains for Ds budgets `ds_tokens` (in tokens), before
    `short_stage` rounds each run to whole steps: the shared stable trunk to 8/9 of the
    largest Ds (App. A.3's 8:1 split) plus a decay of Ds/9 for every Ds. For pricing a grid
    design that has no budget yet (chapter 2's copying designs)."""
    return max(ds_tokens) * 8 / 9 + sum(ds_tokens) / 9


def run_counts(budget: Budget) -> dict:
    """{stage: number of run configs} over `grid_runs` (reference, short, linear-decay,
    constant, trajectory): the counts the chapters' prose names, read from the grid itself."""
    with placeholder_corpus():  # counts do not depend on the corpus
        stages = grid_runs(budget)
    out: dict = {}
    for st in stages:
        out[st.stage] = out.get(st.stage, 0) + len(st.configs)
    return out
