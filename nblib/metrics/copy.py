"""A copy-augmented LongPPL reference for byte-level toy budgets: a cache language model.

The paper's reference is Llama-3.1-8B, far stronger than every evaluated model, and much
of what it gains from distant context is copying (names defined earlier, repeated
phrases). A reference we can train on two CPU cores in minutes does not learn to copy
(Chapter 2 shows its loss stops falling after ~32 bytes of context), so its key tokens
would be a handful. At toy budgets we therefore mix it with the simplest cache model:

    p(x_t) = a_L * [x_t = c_t] + (1 - a_L) * p_LM(x_t)

where c_t is the token that followed the most recent earlier occurrence of the longest
suffix of the context (length L >= min_match, up to max_match) and a_L is that guess's
measured precision at match length L on training documents (`calibrate`). With no match,
p = p_LM. Under the local chunk of the LongPPL protocol the cache sees only the chunk, so
Δ = ℓ_chunk - ℓ_full is large exactly where a distant copy predicts the token.
(Kuhn & De Mori 1990, Grave et al. 2017 for cache language models.)
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import torch


def copy_predictions(ids: np.ndarray, min_match: int, max_match: int) -> tuple[np.ndarray, np.ndarray]:
    """For every t: the copy guess c_t for ids[t] from ids[:t] and its match length L (0: none).

    c_t = ids[j] where ids[j-L:j] == ids[t-L:t], j < t the most recent such end, L the
    longest such length in [min_match, max_match].
    """
    ids = np.asarray(ids)
    T = len(ids)
    pred = np.full(T, -1, np.int64)
    length = np.zeros(T, np.int64)
    last_end = [dict() for _ in range(max_match + 1)]  # L -> {L-gram bytes: most recent end index}
    for t in range(1, T):
        for L in range(min(max_match, t), min_match - 1, -1):
            j = last_end[L].get(ids[t - L:t].tobytes())
            if j is not None:
                pred[t], length[t] = ids[j], L
                break
        for L in range(min_match, min(max_match, t) + 1):  # n-grams ending at t become visible
            last_end[L][ids[t - L:t].tobytes()] = t
    return pred, length


def calibrate(sequences, min_match: int = 4, max_match: int = 32) -> dict[int, float]:
    """Precision a_L of the copy guess at each match length L on training sequences
    (Laplace-smoothed: (hits + 1) / (guesses + 2))."""
    hits = np.zeros(max_match + 1)
    n = np.zeros(max_match + 1)
    for seq in sequences:
        seq = np.asarray(seq, np.int64)
        pred, length = copy_predictions(seq, min_match, max_match)
        m = length > 0
        np.add.at(n, length[m], 1)
        np.add.at(hits, length[m], (pred[m] == seq[m]).astype(float))
    return {L: float((hits[L] + 1) / (n[L] + 2)) for L in range(min_match, max_match + 1)}


class CopyAugmentedScorer:
    """A scorer (nblib.metrics.scoring protocol) mixing a base scorer with the cache model."""

    def __init__(self, base, precision: dict, min_match: int = 4, max_match: int = 32):
        if not precision or min(precision) != min_match or max(precision) != max_match:
            raise ValueError(f"precision must cover match lengths {min_match}..{max_match}, got {sorted(precision)}")
        self.base, self.min_match, self.max_match = base, min_match, max_match
        self.precision = {int(k): float(v) for k, v in precision.items()}
        blob = json.dumps([min_match, max_match, sorted(self.precision.items())]).encode()
        self.identity = f"copy-{hashlib.sha256(blob).hexdigest()[:12]}+{base.identity}"

    def encode_with_offsets(self, text):
        return self.base.encode_with_offsets(text)

    def nll(self, ids, positions):
        """(B, K) NLL under the mixture; the base supplies -log p_LM at the same positions."""
        base = self.base.nll(ids, positions)  # (B, K) float32, NaN at padding
        a = np.zeros(self.max_match + 1)
        for L, v in self.precision.items():
            a[L] = v
        out = base.clone()
        ids_np, pos_np = ids.cpu().numpy(), torch.as_tensor(positions).cpu().numpy()
        for b in range(ids_np.shape[0]):
            valid = pos_np[b] >= 1
            if not valid.any():
                continue
            T = int(pos_np[b][valid].max()) + 1  # right padding never precedes a scored position
            pred, length = copy_predictions(ids_np[b, :T], self.min_match, self.max_match)
            t = pos_np[b][valid]
            p_lm = np.exp(-base[b, valid].numpy().astype(np.float64))
            aL = a[length[t]]  # 0 where there is no match
            p = aL * (pred[t] == ids_np[b, t]) + (1 - aL) * p_lm
            out[b, torch.from_numpy(np.flatnonzero(valid))] = torch.from_numpy(-np.log(p)).float()
        return out
