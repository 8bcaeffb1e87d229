"""The host's speed index: how fast this machine trains, in one number the README scales
chapter times by.

The index is the LongPPL reference's training step in fp32, at its own shape (the budget's
reference model, its batch, the long context) and at the threads it trains at, in optimizer
steps per second. Chapter 2 prints it. It is timed on random tokens apart from the
reference's own run, because that run may train under bf16 autocast (`Budget.long_precision`),
and the index must mean the same on a CPU that trains the book in fp32: the slowest host seen
read 2.2 steps/s in fp32, so a chapter time t on a host that reads r scales to t * r / 2.2.
"""

from __future__ import annotations

import time
from contextlib import nullcontext

import torch

from nblib.lccp import grid
from nblib.training.threads import fixed_threads
from nblib.training.train import build_model_from_config, make_optimizers


def training_step(model, optimizers: dict, x, y, forward=nullcontext) -> None:
    """One optimizer step as the trainer takes it, on a batch (x, y): the loss's backward pass,
    gradients clipped to norm 1, every optimizer stepped and zeroed. `forward` is the context
    of the forward pass only (e.g. `lambda: torch.autocast("cpu", dtype=torch.bfloat16)`)."""
    with forward():
        _, loss = model(x, targets=y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    for o in optimizers.values():
        o.step()
        o.zero_grad(set_to_none=True)


def reference_step_rate(budget, steps: int = 20, warmup: int = 3, seed: int = 0) -> float:
    """fp32 optimizer steps per second of the LongPPL reference's training step (model,
    batch, long context, Muon + AdamW, gradient clipping) at `grid.REFERENCE_THREADS`: the
    median of `steps` timed steps after `warmup` untimed ones."""
    if budget.reference.get("kind") != "nblib":
        raise ValueError(f"budget {budget.name} uses an external reference ({budget.reference.get('kind')!r}); "
                         "the speed index times the toy reference's training step (allowed: kind 'nblib')")
    if steps < 1 or warmup < 0:
        raise ValueError(f"steps={steps}, warmup={warmup}: allowed steps >= 1 and warmup >= 0")
    cfg = grid.reference_config(budget)
    g = torch.Generator().manual_seed(seed)
    vocab, T, bs = cfg.model["vocab_size"], budget.long_seq_len, cfg.batch_size
    x = torch.randint(0, vocab, (bs, T), generator=g)
    y = torch.randint(0, vocab, (bs, T), generator=g)
    with fixed_threads(grid.REFERENCE_THREADS):
        torch.manual_seed(seed)
        model = build_model_from_config(cfg.model)
        opts = make_optimizers(model, cfg.optimizer, 1e-3)

        for _ in range(warmup):
            training_step(model, opts, x, y)
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            training_step(model, opts, x, y)
            times.append(time.perf_counter() - t)
    times.sort()
    return 1.0 / times[len(times) // 2]
