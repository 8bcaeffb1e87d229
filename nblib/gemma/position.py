"""How Models A and B represent position (Gemma blog, "How each model represents position"
and the appendix "How the band measures are computed").

RoPE as clocks (Model B):
- `rope_bands`: each band's speed theta_j = base^(-2(j-1)/h), wavelength 2 pi / theta_j,
  turns within the training context, and its YaRN group (fast: >= beta turns, slow: < alpha
  turns, middle between; the blog's 6 / 12 / 14 for h = 64, base 1e4, L = 1024).
- `band_weights`: from the weights alone, each head's q.k weight per band,
  w_j = ||W_q^(j)|| ||W_k^(j)|| (Frobenius norms of the two projection rows feeding band j),
  its share s_j = w_j / sum_l w_l, and the slow-band weight sum_{j slow} s_j.
- `band_scores`: on real text, the per-band share of a head's mean pre-softmax score at
  each distance, S_j(Delta) = mean_n Re[z_q(n + Delta) conj(z_k(n)) e^{i Delta theta_j}] / sqrt(h);
  the bands sum exactly to the mean score S(Delta) (`mean_score_by_distance` computes it
  directly from the rotated queries and keys; `band_sum_errors` checks chosen heads).

Model A's learned position table:
- `position_similarity` (cosine similarity of rows), `similarity_by_distance` (s-bar(Delta)
  with the middle 80% of pairs), `distance_r2` (how much of the matrix distance alone
  explains, off the diagonal by default), `position_pcs` (principal components of the rows), and `rope_similarity`, the
  equal-weight RoPE curve (1/J) sum_j cos(Delta theta_j) they are compared with.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from nblib.models.layers import apply_rope

GROUPS = ("fast", "middle", "slow")


# ---------------------------------------------------------------------------------------
# RoPE as clocks
# ---------------------------------------------------------------------------------------
def rope_thetas(head_dim: int, base: float) -> np.ndarray:
    """theta_j = base^(-2(j-1)/h) radians per position for bands j = 1..h/2 (RoFormer; the
    blog's "RoPE as 32 clocks"); the same numbers as the model's own `rope_inv_freq`."""
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim={head_dim!r} is not allowed; allowed: an even int >= 2")
    if not base > 1:
        raise ValueError(f"base={base!r} is not allowed; allowed: a number > 1")
    return base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)


def rope_bands(head_dim: int, base: float, context: int, alpha: float = 1.0, beta: float = 32.0) -> pd.DataFrame:
    """One row per band: theta, wavelength (positions per turn), turns within `context`, and
    its group by the YaRN paper's rule (Peng et al., 2023): fast when it turns at least beta
    times within the context, slow when it does not complete alpha turns, middle otherwise."""
    if not 0 < alpha < beta:
        raise ValueError(f"alpha={alpha!r}, beta={beta!r}; allowed: 0 < alpha < beta")
    theta = rope_thetas(head_dim, base)
    turns = context * theta / (2 * np.pi)
    group = np.where(turns >= beta, "fast", np.where(turns < alpha, "slow", "middle"))
    return pd.DataFrame({"band": np.arange(1, len(theta) + 1), "theta": theta, "wavelength": 2 * np.pi / theta,
                         "turns": turns, "group": group})


def band_groups(bands: pd.DataFrame) -> dict[str, np.ndarray]:
    """{group: 0-based band indices} of a `rope_bands` table."""
    return {g: np.flatnonzero(bands["group"].to_numpy() == g) for g in GROUPS}


def _unit_gain(norm) -> torch.Tensor:
    """The per-dimension gain of a unit-offset RMSNorm: 1 + w."""
    return 1.0 + norm.weight.detach().double()


@torch.no_grad()
def band_weights(model, bands: pd.DataFrame) -> pd.DataFrame:
    """Each head's share of q.k weight per band, from the weights (the blog's appendix).

    The pre-attention RMSNorm's gain is folded into the projections' columns and the
    QK-norm gains into their rows; the QK-norm's division by the head's RMS scales every
    band of a head alike, so it leaves the shares unchanged. Rows: layer, head, band, group,
    share; a head's shares sum to 1 (NaN for a head whose q.k weight is zero)."""
    h = model.head_dim
    half = h // 2
    if len(bands) != half:
        raise ValueError(f"bands has {len(bands)} rows; the model's heads have {half} bands")
    group = bands["group"].to_numpy()
    rows = []
    per_kv = model.n_heads // model.n_kv_heads
    for layer, block in enumerate(model.blocks):
        attn, pre = block.attn, _unit_gain(block.pre_attn_norm)
        wq = attn.q_proj.weight.detach().double() * pre  # (nh*h, d)
        wk = attn.k_proj.weight.detach().double() * pre  # (nkv*h, d)
        wq = wq.view(model.n_heads, h, -1) * _unit_gain(attn.q_norm)[None, :, None]
        wk = wk.view(model.n_kv_heads, h, -1) * _unit_gain(attn.k_norm)[None, :, None]
        # band j uses dims j and j + h/2 (rotate-half RoPE): Frobenius norm of those two rows
        nq = (wq[:, :half] ** 2 + wq[:, half:] ** 2).sum(-1).sqrt()  # (nh, h/2)
        nk = (wk[:, :half] ** 2 + wk[:, half:] ** 2).sum(-1).sqrt()  # (nkv, h/2)
        w = nq * nk[torch.arange(model.n_heads) // per_kv]
        share = (w / w.sum(-1, keepdim=True)).numpy()
        for head in range(model.n_heads):
            for j in range(half):
                rows.append((layer, head, j + 1, group[j], share[head, j]))
    return pd.DataFrame(rows, columns=["layer", "head", "band", "group", "share"])


def slow_band_weight(weights: pd.DataFrame) -> pd.DataFrame:
    """Per head: the slow-band weight, the sum of its slow bands' shares (columns layer,
    head, slow_weight). An even spread over J bands gives n_slow / J."""
    slow = weights[weights["group"] == "slow"].groupby(["layer", "head"])["share"].sum(min_count=1)
    return slow.rename("slow_weight").reset_index()


@torch.no_grad()
def qk_pre_rope(model, windows: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries and keys of one layer of Model B on `windows` (B, T), after QK-norm and before
    RoPE's rotation: q (B, n_heads, T, h), k (B, n_kv_heads, T, h). Read with forward hooks on
    the layer's q_norm and k_norm, so they are exactly what the model computes."""
    attn = model.blocks[layer].attn
    got = {}
    hooks = [attn.q_norm.register_forward_hook(lambda m, i, o: got.__setitem__("q", o)),
             attn.k_norm.register_forward_hook(lambda m, i, o: got.__setitem__("k", o))]
    try:
        model.eval()(windows)
    finally:
        for hk in hooks:
            hk.remove()
    return got["q"].transpose(1, 2), got["k"].transpose(1, 2)


def _complex_bands(x: torch.Tensor) -> torch.Tensor:
    """(..., h) real -> (..., h/2) complex: band j is dims j + i (j + h/2)."""
    half = x.size(-1) // 2
    return torch.complex(x[..., :half].double(), x[..., half:].double())


def band_scores(q: torch.Tensor, k: torch.Tensor, thetas, max_delta: int | None = None) -> np.ndarray:
    """S_j(Delta) for one head (the blog's appendix): q, k (B, T, h) before rotation; returns
    (h/2, D) with D = max_delta (default T), averaged over the T - Delta pairs of a window and
    then over the B windows. The cross-sums sum_n z_q(n + Delta) conj(z_k(n)) come from one
    FFT per window (a cross-correlation), exact to floating point."""
    if q.shape != k.shape or q.dim() != 3:
        raise ValueError(f"q and k must both be (B, T, h), got {tuple(q.shape)} and {tuple(k.shape)}")
    B, T, h = q.shape
    D = T if max_delta is None else int(max_delta)
    if not 1 <= D <= T:
        raise ValueError(f"max_delta={max_delta!r} is not allowed; allowed: 1..{T}")
    zq, zk = _complex_bands(q), _complex_bands(k)  # (B, T, J)
    n = 2 * T
    cross = torch.fft.ifft(torch.fft.fft(zq, n=n, dim=1) * torch.fft.fft(zk, n=n, dim=1).conj(), dim=1)[:, :D]
    delta = torch.arange(D, dtype=torch.float64)
    th = torch.tensor(np.array(thetas, dtype=np.float64))
    rot = torch.exp(1j * delta[:, None] * th[None, :])  # (D, J)
    s = (cross * rot).real / (T - delta)[:, None] / math.sqrt(h)  # (B, D, J)
    return s.mean(0).T.numpy()


def mean_score_by_distance(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                           max_delta: int | None = None) -> np.ndarray:
    """The head's mean pre-softmax score q_rot(m).k_rot(n)/sqrt(h) over all pairs m - n = Delta,
    computed directly from the rotated vectors (the model's own `apply_rope`): (D,)."""
    B, T, h = q.shape
    D = T if max_delta is None else int(max_delta)
    qr = apply_rope(q.double(), cos.double(), sin.double())
    kr = apply_rope(k.double(), cos.double(), sin.double())
    scores = qr @ kr.transpose(1, 2) / math.sqrt(h)  # (B, T, T): [m, n]
    return np.array([torch.diagonal(scores, offset=-d, dim1=1, dim2=2).mean(1).mean(0).item() for d in range(D)])


def head_band_scores(model, windows: torch.Tensor, layer: int, head: int, bands: pd.DataFrame) -> pd.DataFrame:
    """S_j(Delta) of one head of Model B on `windows`, long form (delta, band, group, score),
    up to the layer's window (local layers) or the window length (global ones)."""
    q, k = qk_pre_rope(model, windows, layer)
    kv = head // (model.n_heads // model.n_kv_heads)
    window = model.layer_windows[layer]
    D = windows.size(1) if window is None else min(window, windows.size(1))
    s = band_scores(q[:, head], k[:, kv], bands["theta"].to_numpy(), max_delta=D)
    out = pd.DataFrame(s.T, columns=bands["band"].to_numpy())
    out.index.name = "delta"
    long = out.reset_index().melt(id_vars="delta", var_name="band", value_name="score")
    return long.merge(bands[["band", "group"]], on="band")


def picked_band_scores(model, windows: torch.Tensor, picks: dict, bands: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """{name: `head_band_scores` of that head} for the heads `picks` {name: row with layer and
    head} of Model B on `windows` (the blog's "What each band adds on real text")."""
    return {k: head_band_scores(model, windows, int(r["layer"]), int(r["head"]), bands) for k, r in picks.items()}


def band_sum_errors(model, windows: torch.Tensor, picks: dict, decomp: dict) -> dict[str, float]:
    """{name: max over Delta of |sum_j S_j(Delta) - S(Delta)|} for each picked head: its band
    decomposition (`picked_band_scores`) against the mean score computed directly from the
    rotated queries and keys (`mean_score_by_distance`, the model's own RoPE); the blog's
    appendix says the bands add up to the score exactly, so this is floating-point error."""
    T = windows.size(1)
    check = {}
    for k, r in picks.items():
        layer, head = int(r["layer"]), int(r["head"])
        q, kk = qk_pre_rope(model, windows, layer)
        rot = model.rotary_global if model.layer_windows[layer] is None else model.rotary_local
        direct = mean_score_by_distance(q[:, head], kk[:, head // (model.n_heads // model.n_kv_heads)],
                                        *rot(torch.arange(T)))
        total = decomp[k].groupby("delta").score.sum().to_numpy()
        check[k] = float(np.abs(total - direct[: len(total)]).max())
    return check


# ---------------------------------------------------------------------------------------
# Model A's learned position table
# ---------------------------------------------------------------------------------------
def position_similarity(table) -> np.ndarray:
    """sim(m, n) = p_m . p_n / (|p_m| |p_n|) for the rows p of a learned position table (L, d)."""
    p = torch.as_tensor(table).detach().double()
    p = p / p.norm(dim=1, keepdim=True)
    return (p @ p.T).numpy()


def random_table_similarity(table, seed: int = 0) -> np.ndarray:
    """`position_similarity` of a standard normal table of `table`'s shape, drawn right after
    `torch.manual_seed(seed)`: the control for the learned table (a random 1024 x 768 table's
    rows are nearly orthogonal, so distance explains none of it)."""
    torch.manual_seed(seed)
    return position_similarity(torch.randn_like(torch.as_tensor(table)))


def similarity_by_distance(sim: np.ndarray, lo: float = 10.0, hi: float = 90.0) -> pd.DataFrame:
    """s-bar(Delta), the mean of sim(m, n) over pairs |m - n| = Delta, with the lo-th and hi-th
    percentiles of those pairs (the blog's shaded middle 80%)."""
    L = sim.shape[0]
    rows = []
    for d in range(L):
        v = np.diagonal(sim, offset=d)
        rows.append((d, v.mean(), np.percentile(v, lo), np.percentile(v, hi)))
    return pd.DataFrame(rows, columns=["delta", "mean", f"p{lo:g}", f"p{hi:g}"])


def distance_r2(sim: np.ndarray, include_diagonal: bool = False) -> float:
    """R^2 = 1 - sum (sim - s-bar(|m-n|))^2 / sum (sim - mean sim)^2: the share of the similarity
    matrix's variation that distance alone explains (the blog: 0.71 for Model A).

    By default over pairs m != n. The diagonal is 1 by construction, so counting it rewards
    any table: a random 1024 x 768 table scores about 0.43 with it and about 0 without."""
    L = sim.shape[0]
    sbar = similarity_by_distance(sim)["mean"].to_numpy()
    idx = np.abs(np.arange(L)[:, None] - np.arange(L)[None, :])
    keep = np.ones_like(sim, dtype=bool) if include_diagonal else idx > 0
    v, fit = sim[keep], sbar[idx][keep]
    return float(1 - ((v - fit) ** 2).sum() / ((v - v.mean()) ** 2).sum())


def position_pcs(table, k: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """The rows' projections on their top-k principal components (L, k), and the share of
    variance each explains (k,). Rows are centred on the mean position vector."""
    p = torch.as_tensor(table).detach().double().numpy()
    p = p - p.mean(0)
    u, s, _ = np.linalg.svd(p, full_matrices=False)
    return u[:, :k] * s[:k], (s[:k] ** 2) / (s ** 2).sum()


def rope_similarity(head_dim: int, base: float, deltas) -> np.ndarray:
    """sim_RoPE(Delta) = (1/J) sum_j cos(Delta theta_j): the similarity of one vector rotated to
    two positions Delta apart, every band weighted equally (the blog's right panel)."""
    theta = rope_thetas(head_dim, base)
    return np.cos(np.asarray(deltas, dtype=np.float64)[:, None] * theta[None, :]).mean(1)


def position_summary(sim: np.ndarray, rope_curve, control_sim: np.ndarray, at: int = 10) -> pd.DataFrame:
    """The learned table's headline numbers next to a random table of the same shape and to
    RoPE's equal-weight curve: R^2 of distance (off the diagonal, and with it), the mean
    similarity at distance `at` and at the last distance, and the first distance where the
    mean similarity turns negative (None if it never does)."""
    def row(s):
        by = similarity_by_distance(s)["mean"].to_numpy()
        neg = np.flatnonzero(by < 0)
        return {"R2 (m != n)": distance_r2(s), "R2 (with diagonal)": distance_r2(s, include_diagonal=True),
                f"similarity at {at}": by[at], "similarity at the last distance": by[-1],
                "first distance with similarity < 0": int(neg[0]) if neg.size else None}
    rope = np.asarray(rope_curve)
    neg = np.flatnonzero(rope < 0)
    return pd.DataFrame({
        "Model A (learned)": row(sim),
        "random table (control)": row(control_sim),
        "RoPE, equal band weights": {"R2 (m != n)": 1.0, "R2 (with diagonal)": 1.0, f"similarity at {at}": rope[at],
                                     "similarity at the last distance": rope[-1],
                                     "first distance with similarity < 0": int(neg[0]) if neg.size else None},
    }).T
