"""Shared pieces of the three decoder families (llama.py, gpt2.py, gemma3.py).

Read top to bottom:
  1. RMSNorm (plain, or Gemma's (1 + w) form).
  2. RoPE: frequencies, ABF base change, YaRN, rotate-half application.
  3. Document-relative positions for packed sequences ("span-based" attention).
  4. Attention through torch SDPA: causal, sliding window (a blocked band when T > 2W, so
     cost and memory grow linearly in T), document isolation, grouped-query heads.
  5. The KV cache: preallocated per-layer tensors (B, n_kv, L, hd); a windowed layer keeps
     a ring buffer of its last W-1 positions.
  6. DecoderLM: what every model shares (loss, prefill/decode, generate, parameter,
     FLOP and KV-cache counts).
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
    """RoPE frequencies theta_j = base^(-2j/hd), j = 0..hd/2-1 (seed 001 "RoPE as 32 clocks").

    Band j rotates the pair of dims (j, j + hd/2) by p * theta_j at position p.
    """
    if head_dim <= 0 or head_dim % 2:
        raise ValueError(f"head_dim must be a positive even int, got {head_dim}")
    if not base > 1:
        raise ValueError(f"RoPE base must be > 1, got {base}")
    j = torch.arange(head_dim // 2, dtype=torch.float64, device="cpu")
    return (float(base) ** (-2.0 * j / head_dim)).float()


def yarn_inv_freq(head_dim, base, orig_len, scale, beta_fast=32, beta_slow=1):
    """YaRN frequencies and attention factor (Peng et al., 2023, "YaRN", Eqs. 17-21; seed 001 "Extending
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
    """Validate a config's rope_scaling: None or {"type": "yarn", "factor": s,
    "original_max_seq_len": L} (optional "beta_fast", "beta_slow")."""
    if rope_scaling is None:
        return
    if not isinstance(rope_scaling, dict) or rope_scaling.get("type") != "yarn":
        raise ValueError(f"rope_scaling must be None or a dict with type 'yarn', got {rope_scaling!r}")
    allowed = {"type", "factor", "original_max_seq_len", "beta_fast", "beta_slow"}
    extra = set(rope_scaling) - allowed
    missing = {"factor", "original_max_seq_len"} - set(rope_scaling)
    if extra or missing:
        raise ValueError(f"rope_scaling keys: unknown {sorted(extra)}, missing {sorted(missing)}; "
                         f"allowed {sorted(allowed)}")
    yarn_inv_freq(2, 1e4, rope_scaling["original_max_seq_len"], rope_scaling["factor"],
                  rope_scaling.get("beta_fast", 32), rope_scaling.get("beta_slow", 1))


class Rotary(nn.Module):
    """cos/sin tables for RoPE at given positions, optionally YaRN-scaled.

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
        """ABF (Xiong et al. 2024; seed 000 App. A.3): new base, weights unchanged."""
        rs = self.rope_scaling
        if rs is None:
            inv, self.mscale = rope_inv_freq(self.head_dim, base), 1.0
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
    """Span-based attention for packed sequences (seed 000 App. A.3): a document starts
    wherever doc_ids changes along T. Returns (pos, seg), both (B, T) int64: the position
    inside the document and a segment index used for the isolation mask."""
    B, T = doc_ids.shape
    start = torch.ones_like(doc_ids, dtype=torch.bool)
    start[:, 1:] = doc_ids[:, 1:] != doc_ids[:, :-1]
    t = torch.arange(T, device=doc_ids.device).expand(B, T)
    first = torch.where(start, t, torch.zeros_like(t)).cummax(dim=1).values
    return t - first, start.long().cumsum(dim=1)


# --------------------------------------------------------------------------------------
# 4. Attention


def mean_keys(seq_len, window=None):
    """Average keys per query k_bar (seed 001 App. "Attention and FlashAttention"):
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
    """Causal attention through torch SDPA (seed 001 App. "Attention and FlashAttention").

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
# 5. KV cache


def kv_positions_kept(seq_len, window=None):
    """T_l in seed 001's KV formula: a global layer keeps every position, a windowed one
    at most W - 1 past positions (the current token's k/v joins them during its step)."""
    return seq_len if window is None else min(seq_len, window - 1)


class KVCache:
    """Preallocated KV cache (seed 001 "What a KV cache stores").

    k[l], v[l]: (B, n_kv, T_l, hd). Global layers write position p at slot p; windowed
    layers use a ring buffer of W - 1 slots (position p at slot p mod (W - 1)).
    pos: number of positions already stored (the next token's position).
    """

    def __init__(self, batch_size, max_len, n_kv_heads, head_dim, windows, dtype, device):
        if batch_size < 1 or max_len < 1:
            raise ValueError(f"batch_size and max_len must be >= 1, got {batch_size}, {max_len}")
        self.max_len, self.windows, self.pos = max_len, list(windows), 0
        shapes = [(batch_size, n_kv_heads, kv_positions_kept(max_len, w), head_dim) for w in windows]
        self.k = [torch.zeros(s, dtype=dtype, device=device) for s in shapes]
        self.v = [torch.zeros(s, dtype=dtype, device=device) for s in shapes]

    def nbytes(self):
        """Bytes held by the allocated cache tensors."""
        return sum(t.numel() * t.element_size() for t in self.k + self.v)


def _cached_attend(q, k, v, cache, layer):
    """Attend n new queries to cached + new keys, then store the new k/v (prefill or decode)."""
    ck, cv, W = cache.k[layer], cache.v[layer], cache.windows[layer]
    p, n = cache.pos, q.size(2)
    if W is None:
        ck[:, :, p:p + n], cv[:, :, p:p + n] = k, v
        return attend(q, ck[:, :, :p + n], cv[:, :, :p + n], q_offset=p)
    S = ck.size(2)  # ring slots
    m = min(p, S)  # past positions still in the ring: p - m .. p - 1
    if m and n == 1:  # a single query sees the whole ring, in any order
        k_all, v_all = torch.cat((ck[:, :, :m], k), 2), torch.cat((cv[:, :, :m], v), 2)
    elif m:  # chronological order for the mask
        slots = torch.arange(p - m, p, device=k.device) % S
        k_all = torch.cat((ck.index_select(2, slots), k), 2)
        v_all = torch.cat((cv.index_select(2, slots), v), 2)
    else:
        k_all, v_all = k, v
    y = attend(q, k_all, v_all, window=W, q_offset=m)
    c = min(n, S)  # newest positions to keep
    if c:
        slots = torch.arange(p + n - c, p + n, device=k.device) % S
        ck.index_copy_(2, slots, k[:, :, n - c:])
        cv.index_copy_(2, slots, v[:, :, n - c:])
    return y


def attention(q, k, v, window=None, seg=None, cache=None, layer=0):
    """One layer's attention: training/eval path (`attend`) or KV-cache path."""
    if cache is None:
        return attend(q, k, v, window=window, seg=seg)
    return _cached_attend(q, k, v, cache, layer)


# --------------------------------------------------------------------------------------
# 6. What every decoder LM shares


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


def sample_next(logits, temperature=1.0, top_k=None, generator=None):
    """Next token (B, 1) from last-position logits (B, V): greedy when temperature == 0 or
    top_k == 1, else top-k sampling at the given temperature."""
    if temperature == 0 or top_k == 1:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)


def check_config_ints(cfg, names, minimum=1):
    """Raise ValueError naming any field of cfg in names that is not an int >= minimum."""
    for name in names:
        val = getattr(cfg, name)
        if isinstance(val, bool) or not isinstance(val, int) or val < minimum:
            raise ValueError(f"{type(cfg).__name__}.{name} must be an int >= {minimum}, got {val!r}")


class DecoderLM(nn.Module):
    """Base of the three model families. A subclass sets `config`, `blocks`,
    `layer_windows` (per layer: None = global, W = sliding window), `n_heads`,
    `n_kv_heads`, `head_dim`, `d_model`, `vocab_size`, `max_positions` (None unless
    positions are a learned table) and implements `_hidden(idx, pos, seg, cache)`,
    `logits_from_hidden(h)` and `_embedding_params()`."""

    # ---- forward passes

    def _check_idx(self, idx, start=0):
        if not (torch.is_tensor(idx) and idx.dim() == 2 and not idx.is_floating_point()):
            raise ValueError(f"idx must be a (B, T) integer tensor, got {getattr(idx, 'shape', idx)!r}")
        if self.max_positions is not None and start + idx.size(1) > self.max_positions:
            raise ValueError(f"positions up to {start + idx.size(1)} exceed the learned position "
                             f"table ({self.max_positions})")

    def hidden_states(self, idx, doc_ids=None):
        """Final-normed hidden states (B, T, d). doc_ids (B, T): isolate packed documents."""
        self._check_idx(idx)
        if doc_ids is None:
            return self._hidden(idx, torch.arange(idx.size(1), device=idx.device), None, None)
        if not (torch.is_tensor(doc_ids) and doc_ids.shape == idx.shape and not doc_ids.is_floating_point()):
            raise ValueError(f"doc_ids must be an integer tensor of shape {tuple(idx.shape)}, "
                             f"got {getattr(doc_ids, 'shape', doc_ids)!r}")
        pos, seg = doc_positions(doc_ids)
        return self._hidden(idx, pos, seg, None)

    def forward(self, idx, targets=None, doc_ids=None):
        """Returns (logits (B, T, V), loss): loss is the mean next-token cross-entropy over
        targets != -100, or None when targets is None (nanoGPT convention)."""
        logits = self.logits_from_hidden(self.hidden_states(idx, doc_ids))
        if targets is None:
            return logits, None
        if targets.shape != idx.shape:
            raise ValueError(f"targets shape {tuple(targets.shape)} must equal idx shape {tuple(idx.shape)}")
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-100)
        return logits, loss

    # ---- KV-cache inference

    def init_kv_cache(self, batch_size, max_len, dtype=None, device=None):
        """Preallocated cache for up to max_len positions (seed 001 "What a KV cache stores")."""
        p = next(self.parameters())
        return KVCache(batch_size, max_len, self.n_kv_heads, self.head_dim, self.layer_windows,
                       dtype or p.dtype, device or p.device)

    @torch.no_grad()
    def prefill(self, idx, cache):
        """Run idx (B, n) through the model from position cache.pos on, storing its k/v.
        Returns logits (B, n, V). Works on an empty or partly filled cache."""
        self._check_idx(idx, cache.pos)
        n = idx.size(1)
        if cache.pos + n > cache.max_len:
            raise ValueError(f"cache holds {cache.max_len} positions; {cache.pos} used, {n} more requested")
        pos = torch.arange(cache.pos, cache.pos + n, device=idx.device)
        h = self._hidden(idx, pos, None, cache)
        cache.pos += n
        return self.logits_from_hidden(h)

    def decode_step(self, idx_last, cache):
        """One generation step: idx_last (B, 1) -> logits (B, 1, V)."""
        if idx_last.dim() != 2 or idx_last.size(1) != 1:
            raise ValueError(f"idx_last must have shape (B, 1), got {tuple(idx_last.shape)}")
        return self.prefill(idx_last, cache)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, use_cache=True, generator=None):
        """Append max_new_tokens tokens to idx (B, T); greedy if temperature == 0 or top_k == 1.
        use_cache=False recomputes the whole sequence every step (the slow reference)."""
        self._check_idx(idx, max_new_tokens)
        if temperature < 0 or (top_k is not None and top_k < 1):
            raise ValueError(f"need temperature >= 0 and top_k >= 1 or None, got {temperature}, {top_k}")
        if use_cache:
            cache = self.init_kv_cache(idx.size(0), idx.size(1) + max_new_tokens)
            logits = self.prefill(idx, cache)[:, -1]
        for step in range(max_new_tokens):
            if not use_cache:
                logits = self(idx)[0][:, -1]
            nxt = sample_next(logits, temperature, top_k, generator)
            idx = torch.cat((idx, nxt), dim=1)
            if use_cache and step < max_new_tokens - 1:
                logits = self.decode_step(nxt, cache)[:, -1]
        return idx

    # ---- counts

    def n_params(self, non_embedding=True):
        """Unique parameters (tied weights once). non_embedding=True drops token (and learned
        position) embeddings and an untied output head: the paper's N (seed 000 §3.1)."""
        total = sum(p.numel() for p in self.parameters())
        if non_embedding:
            emb = {id(p): p for p in self._embedding_params()}
            total -= sum(p.numel() for p in emb.values())
        return total

    def kv_cache_bytes(self, seq_len, batch_size=1, bytes_per_el=4):
        """Closed form 2 * n_kv * h * b * sum_l T_l per sequence, times batch_size (seed 001)."""
        kept = sum(kv_positions_kept(seq_len, w) for w in self.layer_windows)
        return 2 * self.n_kv_heads * self.head_dim * bytes_per_el * batch_size * kept

    def flops_per_token(self, seq_len, training=True):
        """Analytic FLOPs per token at context seq_len (seed 001 "FLOPs at long contexts" and
        App.): 2 * weights of every linear layer (LM head included; norms, biases, softmax
        not counted) + per layer 4 * d_attn * k_bar (scores and values), k_bar from
        `mean_keys`. training=True: 3x forward (backward = 2x forward)."""
        linear = sum(m.weight.numel() for m in self.blocks.modules() if isinstance(m, nn.Linear))
        linear += self.vocab_size * self.d_model
        d_attn = self.n_heads * self.head_dim
        attn = sum(4 * d_attn * mean_keys(seq_len, w) for w in self.layer_windows)
        return (2 * linear + attn) * (3 if training else 1)
