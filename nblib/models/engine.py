"""The KV cache and generation (Gemma blog "What a KV cache stores"), like nanochat's engine.py.

A `KVCache` holds preallocated per-layer tensors (B, n_kv, L, hd); a windowed layer keeps a
ring buffer of its last W-1 positions. `attention` is what every family's attention layer
calls: plain attention during training and scoring, cached attention during prefill and
decode. `prefill`, `decode_step` and `generate` drive any `DecoderLM` (base.py) through the
cache; `sample_next` picks the next token (greedy, or top-k at a temperature).
"""

import torch
import torch.nn.functional as F

from .layers import attend, smear_previous_key


def kv_positions_kept(seq_len, window=None):
    """T_l in the Gemma blog's KV formula: a global layer keeps every position, a windowed one
    at most W - 1 past positions (the current token's k/v joins them during its step)."""
    return seq_len if window is None else min(seq_len, window - 1)


def kv_cache_bytes(layer_windows, n_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_el=4):
    """The Gemma blog's KV-cache size, 2 * n_kv * h * b * sum_l T_l per sequence, times the
    batch: keys and values (2) of n_kv heads of size h, b bytes each, T_l positions kept by
    layer l (`kv_positions_kept`; layer_windows: None for a global layer, W for a local one)."""
    kept = sum(kv_positions_kept(seq_len, w) for w in layer_windows)
    return 2 * n_kv_heads * head_dim * bytes_per_el * batch_size * kept


class KVCache:
    """Preallocated KV cache (Gemma blog "What a KV cache stores").

    k[l], v[l]: (B, n_kv, T_l, hd). Global layers write position p at slot p; windowed
    layers use a ring buffer of W - 1 slots (position p at slot p mod (W - 1)).
    pos: number of positions already stored (the next token's position).
    last_k[l]: for a layer with smeared keys (`layers.smear_previous_key`), the raw key (before
    smearing and RoPE, (B, n_kv, 1, hd)) of the last stored position, which the next
    position's key is mixed with; None for other layers and before the first write. Not
    counted by `nbytes` (one position per layer; the Gemma blog's formula has no such term).
    """

    def __init__(self, batch_size, max_len, n_kv_heads, head_dim, windows, dtype, device):
        if batch_size < 1 or max_len < 1:
            raise ValueError(f"batch_size and max_len must be >= 1, got {batch_size}, {max_len}")
        self.max_len, self.windows, self.pos = max_len, list(windows), 0
        shapes = [(batch_size, n_kv_heads, kv_positions_kept(max_len, w), head_dim) for w in windows]
        self.k = [torch.zeros(s, dtype=dtype, device=device) for s in shapes]
        self.v = [torch.zeros(s, dtype=dtype, device=device) for s in shapes]
        self.last_k = [None] * len(self.windows)

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


def smeared_keys(k, logit, seg=None, cache=None, layer=0):
    """`layers.smear_previous_key` of one layer's raw keys k (B, n_kv, T, hd) in training, scoring or
    through the KV cache: with a cache, k's first key is mixed with the last raw key the cache
    stored for this layer (zero at position 0), and k's last raw key is stored for the next call,
    so prefill plus decode steps give the keys of one full forward."""
    if cache is None:
        return smear_previous_key(k, logit, None, seg)
    prev = cache.last_k[layer] if cache.pos else None
    cache.last_k[layer] = k[:, :, -1:].detach().to(cache.k[layer].dtype).clone()
    return smear_previous_key(k, logit, prev, seg)


def attention(q, k, v, window=None, seg=None, cache=None, layer=0):
    """One layer's attention: training/eval path (`attend`) or KV-cache path."""
    if cache is None:
        return attend(q, k, v, window=window, seg=seg)
    return _cached_attend(q, k, v, cache, layer)


def sample_next(logits, temperature=1.0, top_k=None, generator=None, top_p=None):
    """Next token (B, 1) from last-position logits (B, V): greedy when temperature == 0 or
    top_k == 1; else sampled at the given temperature from the top_k most likely tokens
    and/or the nucleus (Holtzman et al., 2020): the smallest set of most likely tokens whose
    probabilities sum to at least top_p. Seeded by `generator`."""
    if temperature == 0 or top_k == 1:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = F.softmax(sorted_logits, dim=-1)
        before = probs.cumsum(-1) - probs  # mass of the strictly more likely tokens
        drop_sorted = before >= top_p  # keeps the most likely token always
        logits = logits.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)


def check_sampling(temperature, top_k, top_p) -> None:
    """Raise ValueError naming a sampling parameter outside its allowed range."""
    if not (isinstance(temperature, (int, float)) and temperature >= 0):
        raise ValueError(f"temperature={temperature!r} is not allowed; allowed: a number >= 0 (0 = greedy)")
    if top_k is not None and not (isinstance(top_k, int) and top_k >= 1):
        raise ValueError(f"top_k={top_k!r} is not allowed; allowed: None or an int >= 1")
    if top_p is not None and not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
        raise ValueError(f"top_p={top_p!r} is not allowed; allowed: None or a number in (0, 1]")


def check_idx(model, idx, start=0):
    """Raise unless idx is a (B, T) integer tensor whose positions start..start+T fit the
    model (a learned position table has max_positions rows)."""
    if not (torch.is_tensor(idx) and idx.dim() == 2 and not idx.is_floating_point()):
        raise ValueError(f"idx must be a (B, T) integer tensor, got {getattr(idx, 'shape', idx)!r}")
    if model.max_positions is not None and start + idx.size(1) > model.max_positions:
        raise ValueError(f"positions up to {start + idx.size(1)} exceed the learned position "
                         f"table ({model.max_positions})")


def init_kv_cache(model, batch_size, max_len, dtype=None, device=None):
    """Preallocated cache for up to max_len positions of `model` (Gemma blog "What a KV cache stores")."""
    p = next(model.parameters())
    return KVCache(batch_size, max_len, model.n_kv_heads, model.head_dim, model.layer_windows,
                   dtype or p.dtype, device or p.device)


@torch.no_grad()
def prefill(model, idx, cache, last_only: bool = False):
    """Run idx (B, n) through the model from position cache.pos on, storing its k/v.
    Returns logits (B, n, V), or (B, 1, V) of the last position with last_only=True (what
    generation needs: the LM head then skips the n - 1 other rows, a large share of a
    long prompt's work at a 50K vocabulary). Works on an empty or partly filled cache."""
    check_idx(model, idx, cache.pos)
    n = idx.size(1)
    if cache.pos + n > cache.max_len:
        raise ValueError(f"cache holds {cache.max_len} positions; {cache.pos} used, {n} more requested")
    pos = torch.arange(cache.pos, cache.pos + n, device=idx.device)
    h = model._hidden(idx, pos, None, cache)
    cache.pos += n
    return model.logits_from_hidden(h[:, -1:] if last_only else h)


def decode_step(model, idx_last, cache):
    """One generation step: idx_last (B, 1) -> logits (B, 1, V)."""
    if idx_last.dim() != 2 or idx_last.size(1) != 1:
        raise ValueError(f"idx_last must have shape (B, 1), got {tuple(idx_last.shape)}")
    return prefill(model, idx_last, cache)


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, use_cache=True, generator=None, top_p=None):
    """Append max_new_tokens tokens to idx (B, T); greedy if temperature == 0 or top_k == 1,
    else top-k and/or nucleus (top_p) sampling (`sample_next`), seeded by `generator`.
    use_cache=False recomputes the whole sequence every step (the slow reference)."""
    check_idx(model, idx, max_new_tokens)
    check_sampling(temperature, top_k, top_p)
    if use_cache:
        cache = init_kv_cache(model, idx.size(0), idx.size(1) + max_new_tokens)
        logits = prefill(model, idx, cache, last_only=True)[:, -1]
    for step in range(max_new_tokens):
        if not use_cache:
            logits = model(idx)[0][:, -1]
        nxt = sample_next(logits, temperature, top_k, generator, top_p)
        idx = torch.cat((idx, nxt), dim=1)
        if use_cache and step < max_new_tokens - 1:
            logits = decode_step(model, nxt, cache)[:, -1]
    return idx
