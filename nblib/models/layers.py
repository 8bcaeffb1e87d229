"""The layers the three decoder families share (llama.py, gpt2.py, gemma3.py).

Read top to bottom:
  1. RMSNorm (plain, or Gemma's (1 + w) form).
  2. RoPE: frequencies, ABF base change, YaRN, rotate-half application.
  3. Document-relative positions for packed sequences ("span-based" attention), and smeared
     keys (each key mixed with the one before it, never across a document boundary).
  4. Attention through torch SDPA: causal, sliding window (a blocked band when T > 2W, so
     cost and memory grow linearly in T), document isolation, grouped-query heads.
  5. Initialisation and config checks.
The KV cache and generation live in engine.py, the shared model base class in base.py.
"""

import math
from functools import lru_cache

import torch
import torch.nn as nn
import torch.nn.functional as F

# --------------------------------------------------------------------------------------
# 1. Norms


class RMSNorm(nn.Module):
    """RMSNorm over the last dim, computed in fp32.

    unit_offset=False: y = x/rms(x) * w, w initialised at 1 (Llama).
    unit_offset=True:  y = x/rms(x) * (1 + w), w initialised at 0 (Gemma 3 technical report;
    the transformers `Gemma3RMSNorm`).
    """

    def __init__(self, dim, eps=1e-5, unit_offset=False):
        super().__init__()
        self.eps, self.unit_offset = eps, unit_offset
        self.weight = nn.Parameter(torch.zeros(dim) if unit_offset else torch.ones(dim))

    def forward(self, x):
        w = self.weight.float()
        return F.rms_norm(x.float(), (x.size(-1),), 1.0 + w if self.unit_offset else w, eps=self.eps).type_as(x)


# --------------------------------------------------------------------------------------
# 2. RoPE


def rope_inv_freq(head_dim, base):
    """RoPE frequencies theta_j = base^(-2j/hd), j = 0..hd/2-1 (Gemma blog "RoPE as 32 clocks").

    Band j rotates the pair of dims (j, j + hd/2) by p * theta_j at position p.
    """
    if head_dim <= 0 or head_dim % 2:
        raise ValueError(f"head_dim must be a positive even int, got {head_dim}")
    if not base > 1:
        raise ValueError(f"RoPE base must be > 1, got {base}")
    j = torch.arange(head_dim // 2, dtype=torch.float64, device="cpu")
    return (float(base) ** (-2.0 * j / head_dim)).float()


def yarn_inv_freq(head_dim, base, orig_len, scale, beta_fast=32, beta_slow=1):
    """YaRN frequencies and attention factor (Peng et al., 2023, "YaRN", Eqs. 17-21; the Gemma blog "Extending
    Model B's context ... with YaRN").

    corr(n) = d*ln(L/(2*pi*n)) / (2*ln b); low = max(floor(corr(beta_fast)), 0),
    high = min(ceil(corr(beta_slow)), d-1); ramp r_i = clamp((i-low)/(high-low), 0, 1);
    inv_freq_i = theta_i/s * r_i + theta_i * (1 - r_i): fast pairs kept, slow pairs / s.
    mscale = 0.1*ln(s) + 1 multiplies cos and sin (so logits scale by mscale^2).
    Known answer: d=64, b=1e4, L=1024, s=4 -> low=5, high=18, mscale=1.1386.
    Returns (inv_freq (hd/2,) fp32, mscale float).
    """
    if not scale >= 1:
        raise ValueError(f"YaRN scale factor must be >= 1, got {scale}")
    if not (isinstance(orig_len, int) and orig_len > 0):
        raise ValueError(f"YaRN original length must be a positive int, got {orig_len!r}")
    if not beta_fast > beta_slow > 0:
        raise ValueError(f"need beta_fast > beta_slow > 0, got {beta_fast}, {beta_slow}")
    theta = rope_inv_freq(head_dim, base)
    if scale == 1:
        return theta, 1.0

    def corr(n_rot):  # pair index whose wavelength fits n_rot turns into orig_len
        return head_dim * math.log(orig_len / (2 * math.pi * n_rot)) / (2 * math.log(base))

    low = max(math.floor(corr(beta_fast)), 0)
    high = min(math.ceil(corr(beta_slow)), head_dim - 1)
    if high == low:
        high += 0.001
    i = torch.arange(head_dim // 2, dtype=torch.float32, device="cpu")
    r = ((i - low) / (high - low)).clamp(0, 1)
    return theta / scale * r + theta * (1 - r), 0.1 * math.log(scale) + 1.0


def check_rope_scaling(rope_scaling):
    """Validate a config's rope_scaling: None, {"type": "yarn", "factor": s,
    "original_max_seq_len": L} (optional "beta_fast", "beta_slow"), or {"type": "linear",
    "factor": s} (position interpolation, Chen et al. 2023: every band's frequency divided by
    s, no attention temperature; Gemma 3 stretches its global layers this way)."""
    if rope_scaling is None:
        return
    kind = rope_scaling.get("type") if isinstance(rope_scaling, dict) else None
    if kind not in ("yarn", "linear"):
        raise ValueError(f"rope_scaling must be None or a dict with type 'yarn' or 'linear', got {rope_scaling!r}")
    allowed = {"type", "factor", "original_max_seq_len", "beta_fast", "beta_slow"} if kind == "yarn" else \
        {"type", "factor", "original_max_seq_len"}
    required = {"factor", "original_max_seq_len"} if kind == "yarn" else {"factor"}
    extra = set(rope_scaling) - allowed
    missing = required - set(rope_scaling)
    if extra or missing:
        raise ValueError(f"rope_scaling keys: unknown {sorted(extra)}, missing {sorted(missing)}; "
                         f"allowed {sorted(allowed)}")
    if kind == "linear":
        if not float(rope_scaling["factor"]) >= 1:
            raise ValueError(f"linear rope_scaling factor must be >= 1, got {rope_scaling['factor']!r}")
        return
    yarn_inv_freq(2, 1e4, rope_scaling["original_max_seq_len"], rope_scaling["factor"],
                  rope_scaling.get("beta_fast", 32), rope_scaling.get("beta_slow", 1))


class Rotary(nn.Module):
    """cos/sin tables for RoPE at given positions, optionally YaRN-scaled or linearly interpolated.

    The frequencies are a plain fp32 attribute, not a buffer: they are not saved in the
    state dict (ABF changes the base without touching weights) and `model.to(bf16)` does
    not round them.
    """

    def __init__(self, head_dim, base, rope_scaling=None):
        super().__init__()
        check_rope_scaling(rope_scaling)
        self.head_dim, self.rope_scaling = head_dim, rope_scaling
        self.set_base(base)

    def set_base(self, base):
        """ABF (Xiong et al. 2024; the LCCP paper App. A.3): new base, weights unchanged."""
        rs = self.rope_scaling
        if rs is None:
            inv, self.mscale = rope_inv_freq(self.head_dim, base), 1.0
        elif rs["type"] == "linear":  # position interpolation: position p reads as p / s in every band
            inv, self.mscale = rope_inv_freq(self.head_dim, base) / float(rs["factor"]), 1.0
        else:
            inv, self.mscale = yarn_inv_freq(self.head_dim, base, rs["original_max_seq_len"],
                                             rs["factor"], rs.get("beta_fast", 32), rs.get("beta_slow", 1))
        self.base, self.inv_freq = float(base), inv

    def forward(self, pos, dtype=torch.float32):
        """pos (T,) or (B, T) ints -> cos, sin of shape (T, hd) or (B, 1, T, hd)."""
        if self.inv_freq.device != pos.device:
            self.inv_freq = self.inv_freq.to(pos.device)
        ang = pos.float()[..., None] * self.inv_freq  # (..., T, hd/2)
        ang = torch.cat((ang, ang), dim=-1)
        cos, sin = ang.cos(), ang.sin()
        if self.mscale != 1.0:
            cos, sin = cos * self.mscale, sin * self.mscale
        if pos.dim() == 2:
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return cos.to(dtype), sin.to(dtype)


def apply_rope(x, cos, sin):
    """Rotate-half RoPE: x (B, H, T, hd); dims j and j + hd/2 form band j."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


# --------------------------------------------------------------------------------------
# 3. Packed documents


def doc_positions(doc_ids):
    """Span-based attention for packed sequences (LCCP paper App. A.3): a document starts
    wherever doc_ids changes along T. Returns (pos, seg), both (B, T) int64: the position
    inside the document and a segment index used for the isolation mask."""
    B, T = doc_ids.shape
    start = torch.ones_like(doc_ids, dtype=torch.bool)
    start[:, 1:] = doc_ids[:, 1:] != doc_ids[:, :-1]
    t = torch.arange(T, device=doc_ids.device).expand(B, T)
    first = torch.where(start, t, torch.zeros_like(t)).cummax(dim=1).values
    return t - first, start.long().cumsum(dim=1)


def smear_previous_key(k, logit, prev=None, seg=None):
    """Smeared keys (Olsson et al. 2022, "In-context Learning and Induction Heads", the
    smeared-key architecture): k'_t = s_h * k_t + (1 - s_h) * k_{t-1}, s_h = sigmoid(a_h).

    k (B, H, T, hd): raw keys (before RoPE); logit (H,): one a_h per KV head. prev
    (B, H, 1, hd): the raw key of the position before k's first one (a KV cache's last key),
    or None for zero (the first key of a sequence smears with k_{-1} = 0). seg (B, T): document
    index per position (`doc_positions`); the first key of a document smears with zero, never
    with the last key of the document before it. A head can then match "the token before this
    key" in one layer, so an induction head need not wait for a previous-token head below it.
    """
    if logit.dim() != 1 or logit.numel() != k.size(1):
        raise ValueError(f"smear logits must have shape ({k.size(1)},) (one per KV head), got {tuple(logit.shape)}")
    before = k[:, :, :-1]
    if seg is not None:  # position t starts a new document: its previous key is zero
        before = before * (seg[:, 1:] == seg[:, :-1])[:, None, :, None].to(k.dtype)
    first = torch.zeros_like(k[:, :, :1]) if prev is None else prev.to(k.dtype)
    s = torch.sigmoid(logit).to(k.dtype)[:, None, None]  # (H, 1, 1)
    return s * k + (1 - s) * torch.cat((first, before), dim=2)


# --------------------------------------------------------------------------------------
# 4. Attention


def mean_keys(seq_len, window=None):
    """Average keys per query k_bar (Gemma blog App. "Attention and FlashAttention"):
    causal (T+1)/2; window W < T: (W(W+1)/2 + (T-W)W)/T."""
    T = seq_len
    if window is None or T <= window:
        return (T + 1) / 2
    return (window * (window + 1) / 2 + (T - window) * window) / T


def window_mask(n_q, n_k, window, q_offset, device):
    """(n_q, n_k) bool: query i (at key index i + q_offset) sees key j iff
    j <= i + q_offset and, with a window W, j > i + q_offset - W (W keys incl. itself)."""
    i = torch.arange(n_q, device=device)[:, None] + q_offset
    j = torch.arange(n_k, device=device)[None, :]
    m = j <= i
    if window is not None:
        m = m & (j > i - window)
    return m


def band_mask(n_blocks, window, device):
    """(nb, 1, W, 2W) mask for _band_attend: block b's queries are positions bW + a, its keys
    positions (b-1)W + c, c < 2W; visible iff a < c <= a + W and the key exists (>= 0)."""
    W = window
    a = torch.arange(W, device=device)[:, None]
    c = torch.arange(2 * W, device=device)[None, :]
    kpos = torch.arange(n_blocks, device=device)[:, None] * W - W + c  # (nb, 2W)
    return ((c > a) & (c <= a + W))[None, None] & (kpos >= 0)[:, None, None, :]


@lru_cache(maxsize=64)
def _memo(fn, *args):
    with torch.inference_mode(False):  # memoised masks must stay usable outside inference mode
        return fn(*args)


def _mask(fn, n_elements, *args):
    """fn(*args), memoised when small (training steps reuse the same few masks)."""
    return _memo(fn, *args) if n_elements <= 1 << 22 else fn(*args)


def _band_attend(q, k, v, window, seg=None, q_offset=0):
    """Sliding-window attention in query blocks of W: block b attends only to keys in
    [bW - W, bW + W), so scores cost T*2W instead of T^2. Same result as the dense mask."""
    B, Hq, T, hd = q.shape
    Hkv, S, W = k.size(1), k.size(2), window
    if q_offset:  # dummy leading queries so that query t sits at key t
        q = F.pad(q, (0, 0, q_offset, 0))
    nb = -(-S // W)
    pad = nb * W - S
    q = F.pad(q, (0, 0, 0, pad))
    kp, vp = F.pad(k, (0, 0, W, pad)), F.pad(v, (0, 0, W, pad))  # (B, Hkv, (nb+1)W, hd)
    qb = q.view(B, Hq, nb, W, hd).transpose(1, 2)  # (B, nb, Hq, W, hd)
    kp, vp = kp.view(B, Hkv, nb + 1, W, hd), vp.view(B, Hkv, nb + 1, W, hd)
    kb = torch.cat((kp[:, :, :-1], kp[:, :, 1:]), dim=3).transpose(1, 2)  # (B, nb, Hkv, 2W, hd)
    vb = torch.cat((vp[:, :, :-1], vp[:, :, 1:]), dim=3).transpose(1, 2)
    mask = _mask(band_mask, nb * 2 * W * W, nb, W, q.device)  # (nb, 1, W, 2W)
    if seg is not None:  # padded queries and end keys get segment -1: they see only padding
        sq = F.pad(seg, (0, pad), value=-1).view(B, nb, W)
        sk = F.pad(seg, (W, pad), value=-1).view(B, nb + 1, W)
        sk = torch.cat((sk[:, :-1], sk[:, 1:]), dim=2)  # (B, nb, 2W)
        mask = mask & (sq[..., :, None] == sk[..., None, :])[:, :, None]  # (B, nb, 1, W, 2W)
    y = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, enable_gqa=Hq != Hkv)
    return y.transpose(1, 2).reshape(B, Hq, nb * W, hd)[:, :, q_offset:q_offset + T]


def attend(q, k, v, window=None, seg=None, q_offset=0):
    """Causal attention through torch SDPA (Gemma blog App. "Attention and FlashAttention").

    q (B, Hq, T, hd); k, v (B, Hkv, q_offset + T, hd) with Hq a multiple of Hkv (GQA);
    query t sits at key index q_offset + t. window W: key j visible iff i - W < j <= i.
    seg (B, T): document index per position; a query sees only keys of its own document
    (needs q_offset == 0). A windowed layer with more than 2W keys uses the blocked band,
    so it never computes scores outside its window. Returns (B, Hq, T, hd).
    """
    T, S = q.size(2), k.size(2)
    if S != q_offset + T:
        raise ValueError(f"keys ({S}) must equal q_offset ({q_offset}) + queries ({T})")
    if seg is not None and q_offset:
        raise ValueError("document isolation (seg) is only supported without cached keys")
    gqa = q.size(1) != k.size(1)
    if window is not None and S > 2 * window:
        return _band_attend(q, k, v, window, seg, q_offset)
    if seg is None and window is None and q_offset == 0:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    if seg is None and T == 1 and (window is None or S <= window):  # one query sees every key
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
    mask = _mask(window_mask, T * S, T, S, window, q_offset, q.device)  # (T, S)
    if seg is not None:
        mask = mask & (seg[:, None, :, None] == seg[:, None, None, :])  # (B, 1, T, T)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)


# --------------------------------------------------------------------------------------
# 5. Initialisation and config checks


def init_weights(model, n_layers, residual_names):
    """nanoGPT init: N(0, 0.02) for linears and embeddings, zero biases; residual output
    projections (names in residual_names) get std 0.02/sqrt(2*n_layers) (GPT-2 paper)."""
    for name, m in model.named_modules():
        if isinstance(m, nn.Linear):
            std = 0.02 / math.sqrt(2 * n_layers) if name.rsplit(".", 1)[-1] in residual_names else 0.02
            nn.init.normal_(m.weight, mean=0.0, std=std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)


def check_config_ints(cfg, names, minimum=1):
    """Raise ValueError naming any field of cfg in names that is not an int >= minimum."""
    for name in names:
        val = getattr(cfg, name)
        if isinstance(val, bool) or not isinstance(val, int) or val < minimum:
            raise ValueError(f"{type(cfg).__name__}.{name} must be an int >= {minimum}, got {val!r}")
