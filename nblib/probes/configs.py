"""Run configs of the probes, built by the grid (nblib.lccp.grid) on a probe budget.

A probe trains one shape that is not one of the budget's scales. It puts that shape and its
optimisation into one scale's slot (`Budget.with_scale`) and its contexts, tokenizer, LCCP RoPE
base and LR fraction into the budget, then asks the grid for the run, so a probe's run is the
grid's run of that budget (LCCP paper §3.1, App. A.3: the WSD short stage, its stable trunk,
ABF and constant-LR LCCP). What the grid does not vary (a share of synthetic repeats, the
token count, a parent outside the grid) is laid over the grid's config.
"""

from __future__ import annotations

import dataclasses

from nblib.budgets import Budget, get_grid
from nblib.lccp import grid
from nblib.store.runstore import RunConfig

SCALE = "S1"  # the slot a probe's shape takes in its budget


def probe_budget(*, model: dict, lr: float, batch_short: int, warmup_steps: int, short_seq_len: int, tokenizer: str,
                 batch_long: int = 1, long_seq_len: int | None = None, lccp_rope_base: float | None = None,
                 lccp_lr_frac: float = 0.1, base: str = "F") -> Budget:
    """Budget `base` (`budgets.get_grid`: default grid F, on which these probes' records were taken) with the probe's shape (`model`, LlamaConfig fields) and optimisation in
    `SCALE`'s slot, its contexts and tokenizer, LCCP's RoPE base (default: the budget's ABF
    target) and LCCP's LR as `lccp_lr_frac` of `lr` (the paper's tenth by default, App. A.3)."""
    b = get_grid(base)
    bases = (b.rope_bases[0], lccp_rope_base or b.rope_bases[1], *b.rope_bases[2:])
    b = dataclasses.replace(b, tokenizer=tokenizer, short_seq_len=short_seq_len,
                            long_seq_len=long_seq_len or b.long_seq_len, rope_bases=bases, lccp_lr_frac=lccp_lr_frac)
    return b.with_scale(SCALE, model=model, lr=lr, batch_short=batch_short, batch_long=batch_long,
                        warmup_steps=warmup_steps)


def with_data(config: RunConfig, **fields) -> RunConfig:
    """`config` with fields laid over its data stream (a probe's lever the grid does not vary:
    `copy_fraction`, `copy_len`, `copy_vocab`)."""
    return dataclasses.replace(config, data={**config.data, **fields})


def constant_short(b: Budget, n_tokens: int, seed: int = 0, **overrides) -> RunConfig:
    """The grid's short-stage trunk of `SCALE` (warmup, then the stable LR held constant;
    `grid.short_stage`) run for `n_tokens`; `overrides` set its other RunConfig fields."""
    trunk = grid.short_stage(b, SCALE, seed).trunk
    return dataclasses.replace(trunk, n_tokens=n_tokens, **{"meta": {}, "ckpt_steps": (), "keep_optimizer": "last",
                                                             **overrides})


def wsd_short(b: Budget, n_tokens: int, seed: int = 0, **overrides) -> RunConfig:
    """The grid's standalone WSD short-stage run of `SCALE` (`grid.wsd_config`: 8:1 warmup and
    stable to decay, the decay to a tenth) on `n_tokens`; `overrides` set its other fields."""
    wsd = grid.wsd_config(b, SCALE, b.ds_multiples[0], seed)
    return dataclasses.replace(wsd, n_tokens=n_tokens, **{"meta": {}, **overrides})


def constant_lccp(b: Budget, parent: RunConfig, n_tokens: int, **overrides) -> RunConfig:
    """The grid's Constant LCCP run of `SCALE` (`grid.lccp_constant`: ABF to the budget's LCCP
    RoPE base, LR `Budget.lccp_lr`, the long stream at batch_long) continued from `parent`'s
    last step rather than the grid's short stage, for `n_tokens`; `overrides` set its other
    fields (no checkpoints every N unless they say so)."""
    c = grid.lccp_constant(b, SCALE, b.ds_multiples[0], b.dl_multiples[0])
    return dataclasses.replace(c, init={**c.init, "run": parent.hash, "step": parent.total_steps}, n_tokens=n_tokens,
                               **{"meta": {}, "ckpt_every_tokens": None, **overrides})
