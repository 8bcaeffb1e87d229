"""The scoring primitive shared by every scorer: NLL of chosen tokens from hidden states.

The NLL "of token t" is the loss of predicting ids[t] from ids[:t]: it comes from the output
at position t - 1 (LCCP paper §3.1, ℓ(x_t); the reference implementation's
`loss_overall[i - 1]`). The LM head runs only on the gathered rows, in chunks of at most
`head_chunk_bytes` of fp32 logits, so full-vocabulary logits of unscored positions are never
built. `scoring.NblibScorer` and `hf.HFScorer` both build on this module.
"""

from __future__ import annotations

import hashlib

import torch
import torch.nn.functional as F

HEAD_CHUNK_BYTES = 64 << 20  # fp32 logits held at once by the chunked LM head


def nll_from_hidden(hidden, ids, positions, head, head_chunk_bytes=HEAD_CHUNK_BYTES):
    """NLL of ids[b, positions[b, k]] given ids[b, :positions[b, k]] (LCCP paper §3.1 ℓ(x_t)).

    hidden (B, T, d): final-normed hidden states; ids (B, T); positions (B, K) int with
    -1 for padding (any other value must be in [1, T)); head: (N, d) -> (N, V) logits.
    The head runs on the gathered rows hidden[b, t - 1] only, in chunks. Returns (B, K)
    float32 on the CPU, NaN at padding.
    """
    B, T = ids.shape
    positions = torch.as_tensor(positions, dtype=torch.long, device=hidden.device)
    if positions.dim() != 2 or positions.size(0) != B:
        raise ValueError(f"positions must have shape (B={B}, K), got {tuple(positions.shape)}")
    bad = (positions != -1) & ((positions < 1) | (positions >= T))
    if bad.any():
        raise ValueError(f"positions must be -1 (padding) or in [1, {T}); got {positions[bad][:5].tolist()}")
    out = torch.full(positions.shape, float("nan"), dtype=torch.float32)
    bi, ki = (positions >= 1).nonzero(as_tuple=True)
    if bi.numel() == 0:
        return out
    t = positions[bi, ki]
    h = hidden[bi, t - 1]  # (N, d): the output at t - 1 predicts token t
    y = ids.to(hidden.device)[bi, t]  # (N,)
    vocab = head(h[:1]).size(-1)
    rows = max(1, head_chunk_bytes // (4 * vocab))
    vals = torch.empty(h.size(0), dtype=torch.float32, device=h.device)
    for i in range(0, h.size(0), rows):
        logits = head(h[i:i + rows]).float()  # (rows, V)
        vals[i:i + rows] = F.cross_entropy(logits, y[i:i + rows], reduction="none")
    out[bi.cpu(), ki.cpu()] = vals.cpu()
    return out


def check_ids(ids):
    """Raise ValueError unless ids is a (B, T) integer tensor."""
    if not (torch.is_tensor(ids) and ids.dim() == 2 and not ids.is_floating_point()):
        raise ValueError(f"ids must be a (B, T) integer tensor, got {getattr(ids, 'shape', ids)!r}")


def module_fingerprint(module, extra="") -> str:
    """Short hash of a torch module's identity: class, parameter names/shapes/dtypes and
    per-tensor float64 sum and sum of squares (8 significant digits), plus `extra`.

    Cheap even for an 8B model on a GPU (one reduction per tensor, no copy to the CPU),
    and any trained or re-initialised weights change it.
    """
    h = hashlib.sha256()
    h.update(type(module).__name__.encode())
    h.update(extra.encode())
    with torch.no_grad():
        for name, p in module.state_dict().items():
            x = p.detach().double()
            h.update(f"{name}|{tuple(p.shape)}|{p.dtype}|{x.sum().item():.8g}|{(x * x).sum().item():.8g}".encode())
    return h.hexdigest()[:16]
