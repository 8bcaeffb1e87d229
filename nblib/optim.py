"""Muon under FSDP2: torch.optim.Muon, with the Newton-Schulz step on whole matrices.

torch.optim.Muon orthogonalises each parameter's update on its own. Under FSDP2
(`fully_shard`) a parameter is a DTensor shard, and orthogonalising a shard is not
orthogonalising the matrix. `ShardedMuon` keeps torch's momentum, learning-rate
adjustment and weight decay, but gathers each update to the full matrix for the
Newton-Schulz iteration and scatters the result back. It reuses torch's own
`_zeropower_via_newtonschulz` and `_adjust_lr`, so on unsharded parameters it is the
same computation as torch.optim.Muon (tests/test_train.py compares FSDP to a single process).
"""

from __future__ import annotations

import torch
from torch.optim._muon import _adjust_lr, _zeropower_via_newtonschulz


class ShardedMuon(torch.optim.Muon):
    """torch.optim.Muon whose orthogonalisation sees whole matrices under FSDP2 (see module doc)."""

    @torch.no_grad()
    def step(self, closure=None):
        from torch.distributed.tensor import DTensor, distribute_tensor

        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, wd, mom = group["lr"], group["weight_decay"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p.grad, memory_format=torch.preserve_format)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - mom)  # momentum is elementwise: fine on shards
                update = p.grad.lerp(buf, mom) if group["nesterov"] else buf
                ns = (group["ns_coefficients"], group["ns_steps"], group["eps"])
                if isinstance(update, DTensor):
                    full = _zeropower_via_newtonschulz(update.full_tensor(), *ns)
                    update = distribute_tensor(full, update.device_mesh, update.placements)
                else:
                    update = _zeropower_via_newtonschulz(update, *ns)
                p.mul_(1 - lr * wd)
                p.add_(update, alpha=-_adjust_lr(lr, group["adjust_lr_fn"], p.shape))
        return loss
