"""Probes of whether a model uses distant context at all.

- `position_loss`: mean next-token loss by position bucket on natural text. A model that
  uses distant context keeps improving at late positions; LongPPL (LCCP paper §3.1) exists to
  measure exactly that ability on the tokens that need it.
- `copy_gain`: the induction / in-context copying probe (Olsson et al., 2022): a random
  segment of tokens repeated; the loss on the later copies against the first copy. The first
  copy is unpredictable (about ln V nats); a model that looks back and copies predicts the
  later ones. Used for chapter 3's copying figure and RULER-style retrieval later.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F


@torch.no_grad()
def token_nll(model, x: torch.Tensor) -> torch.Tensor:
    """(B, T-1) next-token NLL of sequences x (B, T): entry t-1 is the loss of token t."""
    logits, _ = model.eval()(x[:, :-1])
    return F.cross_entropy(logits.float().transpose(1, 2), x[:, 1:], reduction="none")


def position_loss(model, texts, tokenizer, length: int, edges=(0, 16, 32, 64, 128, 256)) -> list[float]:
    """Mean NLL by position bucket [edges[i], edges[i+1]) over the first `length` tokens of
    each text that has that many (bucket index = position of the predicted token minus one)."""
    seqs = [np.asarray(tokenizer.encode(t))[:length] for t in texts]
    seqs = [s for s in seqs if len(s) == length]
    if not seqs:
        raise ValueError(f"no text has {length} tokens; position_loss needs texts of at least that length")
    nll = token_nll(model, torch.from_numpy(np.stack(seqs).astype(np.int64)))
    edges = [e for e in edges if e < length] + [length - 1]
    return [float(nll[:, a:b].mean()) for a, b in zip(edges[:-1], edges[1:])]


def heldout_loss(model, texts, tokenizer, seq_len: int, batch: int = 64) -> float:
    """Mean next-token NLL (nats) over held-out texts cut into consecutive windows of
    `seq_len` tokens (a text's remainder shorter than a window is dropped)."""
    wins = []
    for t in texts:
        ids = np.asarray(tokenizer.encode(t), dtype=np.int64)
        n = len(ids) // seq_len
        wins += list(ids[: n * seq_len].reshape(n, seq_len)) if n else []
    if not wins:
        raise ValueError(f"no text has {seq_len} tokens; heldout_loss needs texts of at least that length")
    x = torch.from_numpy(np.stack(wins))
    total = sum(float(token_nll(model, x[i:i + batch]).sum()) for i in range(0, len(x), batch))
    return total / (len(x) * (seq_len - 1))


def random_repeats(vocab_size: int, eos_id: int, seg_len: int, n_copies: int, n_seqs: int, seed: int = 0):
    """(n_seqs, seg_len * n_copies) LongTensor: per row one uniform random segment (EOS
    excluded) repeated n_copies times."""
    if seg_len < 1 or n_copies < 2 or n_seqs < 1:
        raise ValueError(f"seg_len={seg_len}, n_copies={n_copies}, n_seqs={n_seqs}; allowed: seg_len >= 1, "
                         f"n_copies >= 2, n_seqs >= 1")
    rng = np.random.default_rng([seed, seg_len, n_copies])
    seg = rng.integers(0, vocab_size - 1, (n_seqs, seg_len))
    seg = seg + (seg >= eos_id)
    return torch.from_numpy(np.tile(seg, (1, n_copies)).astype(np.int64))


def copy_gain(model, vocab_size: int, eos_id: int, seg_len: int, n_copies: int = 2, n_seqs: int = 32,
              seed: int = 0) -> dict:
    """Loss on the first copy of a random segment, on the last copy, and their difference
    (the copy gain, nats/token; > 0 means the model copies from seg_len tokens back).

    Both means skip the copy's first token (the first copy's has no prediction; the last
    copy's follows a token never seen before, so not even an induction head predicts it):
    they cover tokens 2..seg_len of each copy."""
    x = random_repeats(vocab_size, eos_id, seg_len, n_copies, n_seqs, seed)
    nll = token_nll(model, x)  # index t-1 predicts token t
    first = nll[:, : seg_len - 1].mean()
    last = nll[:, (n_copies - 1) * seg_len:].mean()
    return {"seg_len": seg_len, "first": float(first), "last": float(last), "gain": float(first - last),
            "curve": nll.mean(0).tolist()}


def position_loss_table(models: dict, texts, tokenizer, length: int, edges) -> pd.DataFrame:
    """`position_loss` of every model in {name: model}: one row per model, one column per
    position bucket, named "a-b" (b exclusive)."""
    cols_edges = [e for e in edges if e < length] + [length]
    names = [f"{a}-{b}" for a, b in zip(cols_edges[:-1], cols_edges[1:])]
    return pd.DataFrame({k: position_loss(m, texts, tokenizer, length, edges) for k, m in models.items()},
                        index=names).T


def context_use_table(models: dict, texts, tokenizer, length: int, local: int) -> pd.DataFrame:
    """Mean loss of each model on the first local chunk [0, local), the middle, and the last
    half of the context, and "last half - first chunk" (< 0: the model uses context beyond
    the local chunk)."""
    t = pd.DataFrame({k: position_loss(m, texts, tokenizer, length, (0, local, length // 2, length))
                      for k, m in models.items()}, index=["first chunk", "middle", "last half"]).T.rename_axis("model")
    t["last half - first chunk"] = t["last half"] - t["first chunk"]
    return t


def copy_gain_table(models: dict, vocab_size: int, eos_id: int, seg_lens) -> pd.DataFrame:
    """`copy_gain` of every model at every distance: one row per model, columns "gain @d"."""
    t = pd.DataFrame({k: {s: copy_gain(m, vocab_size, eos_id, s)["gain"] for s in seg_lens}
                      for k, m in models.items()}).T.rename_axis("model")
    t.columns = [f"gain @{s}" for s in seg_lens]
    return t


def copy_loss_curves(models: dict, vocab_size: int, eos_id: int, seg_len: int) -> dict:
    """{name: mean loss at each position of a seg_len-token random segment repeated once}
    (`copy_gain`'s "curve"): the drop after position seg_len - 1 is the copying."""
    return {k: copy_gain(m, vocab_size, eos_id, seg_len)["curve"] for k, m in models.items()}
