"""Muon as the trainer uses it: torch.optim.Muon's update, with two changes.

1. On CPU the Newton-Schulz iteration runs in fp32. torch.optim.Muon casts to bf16, which
   is the right call on GPUs but 1.5-4.6x slower than fp32 on CPUs without bf16 matrix
   units (measured here on 16x48 to 160x64 matrices), and the toy grid's step time is
   dominated by it. On CUDA the bf16 iteration of torch is used unchanged.
2. Under FSDP2 (`fully_shard`) a parameter is a DTensor shard, and orthogonalising a shard
   is not orthogonalising the matrix: each update is gathered to the full matrix for the
   Newton-Schulz step and scattered back.

3. A fused projection (GPT-2's c_attn stacks W_q, W_k, W_v) is orthogonalised block by
   block: a parameter with the attribute `muon_row_blocks = n` is split into n equal row
   blocks, each given its own Newton-Schulz step and LR adjustment, as if the model stored
   them apart (modded-nanogpt keeps q, k, v as separate matrices for this reason). Without
   it, Muon would equalise the singular values of the stacked 3d x d matrix instead of each
   projection's. (Under FSDP2 the attribute does not survive sharding: the whole matrix.)

Momentum (Nesterov), the learning-rate adjustment (torch's `_adjust_lr`, e.g.
"match_rms_adamw") and decoupled weight decay are torch's. tests/test_train.py checks
against torch.optim.Muon with the NS dtype matched.
"""

from __future__ import annotations

import torch
from torch.optim._muon import _adjust_lr, _zeropower_via_newtonschulz


def newton_schulz(G: torch.Tensor, coefficients, steps: int, eps: float, dtype=torch.float32) -> torch.Tensor:
    """The quintic Newton-Schulz iteration of torch.optim.Muon (Jordan et al.), in `dtype`."""
    if dtype == torch.bfloat16:
        return _zeropower_via_newtonschulz(G, coefficients, steps, eps)
    a, b, c = coefficients
    X = G.to(dtype)
    tall = G.size(0) > G.size(1)
    if tall:
        X = X.T
    X = X / X.norm().clamp(min=eps)  # spectral norm <= 1
    for _ in range(steps):
        A = X @ X.T
        X = torch.addmm(X, torch.addmm(A, A, A, beta=b, alpha=c), X, beta=a)
    return X.T if tall else X


class Muon(torch.optim.Muon):
    """torch.optim.Muon with fp32 Newton-Schulz on CPU and whole-matrix NS under FSDP2."""

    @torch.no_grad()
    def step(self, closure=None):
        from torch.distributed.tensor import DTensor, distribute_tensor  # FSDP2 only: not loaded otherwise

        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, wd, mom = group["lr"], group["weight_decay"], group["momentum"]
            ns = (group["ns_coefficients"], group["ns_steps"], group["eps"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p.grad, memory_format=torch.preserve_format)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - mom)  # momentum is elementwise: fine on shards
                update = p.grad.lerp(buf, mom) if group["nesterov"] else buf
                dtype = torch.bfloat16 if update.device.type == "cuda" else torch.float32
                blocks = getattr(p, "muon_row_blocks", 1)
                if isinstance(update, DTensor):
                    full = newton_schulz(update.full_tensor(), *ns, dtype=dtype)
                    update = distribute_tensor(full, update.device_mesh, update.placements)
                    shape = p.shape
                elif blocks > 1:
                    update = torch.cat([newton_schulz(u, *ns, dtype=dtype) for u in update.chunk(blocks, 0)])
                    shape = (p.shape[0] // blocks, *p.shape[1:])
                else:
                    update = newton_schulz(update, *ns, dtype=dtype)
                    shape = p.shape
                p.mul_(1 - lr * wd)
                p.add_(update.to(p.dtype), alpha=-_adjust_lr(lr, group["adjust_lr_fn"], shape))
        return loss
