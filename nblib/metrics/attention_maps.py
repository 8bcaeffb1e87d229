"""What the heads of Models A and B attend to (Gemma blog, "Visualizing attention" to "Where
the two models disagree").

- `attention_probs`: every head's attention probabilities, recomputed from the queries and
  keys the model itself produces (forward hooks), with the model's causal and window masks.
  The training path runs fused SDPA and never forms these probabilities; the tests check
  that probabilities @ values equal the model's own attention output.
- `head_ablation`: zero chosen heads' outputs (before the output projection), the causal
  check the blog names but did not run.
- Per-head measures (the blog's formulas): `attention_distance` (sum_k p_{q,k} (q - k)),
  `first_position_share` (p_{q,0}), `separator_share` (attention on EOS tokens, averaged
  over windows that contain one), `induction_scores` (attention on the token after the
  earlier twin, averaged over the repeat), and `kl_divergence` (token-level KL(A||B)).
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from nblib.data import get_tokenizer, make_stream
from nblib.models.layers import apply_rope, window_mask


def _is_gemma(model) -> bool:
    return hasattr(model.blocks[0].attn, "q_norm")


def _is_llama(model) -> bool:
    return hasattr(model, "rotary") and hasattr(model.blocks[0].attn, "q_proj")


@torch.no_grad()
def queries_keys_values(model, idx: torch.Tensor, layers=None) -> dict[int, tuple]:
    """{layer: (q, k, v)} as the model's attention sees them, RoPE applied: q (B, Hq, T, h),
    k and v (B, Hkv, T, h), for GPT2, Gemma3 and Llama models. Captured with forward hooks
    on one forward pass of idx (B, T)."""
    layers = range(len(model.blocks)) if layers is None else list(layers)
    got, hooks = {}, []
    for layer in layers:
        attn = model.blocks[layer].attn
        if _is_llama(model):  # the layer's own qkv on its inputs (x, rope, seg): RoPE and any key smearing as in the forward
            hooks.append(attn.register_forward_hook(lambda m, i, o, l=layer: got.__setitem__((l, "qkv"), m.qkv(*i[:3]))))
        elif _is_gemma(model):
            hooks += [attn.q_norm.register_forward_hook(lambda m, i, o, l=layer: got.__setitem__((l, "q"), o)),
                      attn.k_norm.register_forward_hook(lambda m, i, o, l=layer: got.__setitem__((l, "k"), o)),
                      attn.v_proj.register_forward_hook(lambda m, i, o, l=layer: got.__setitem__((l, "v"), o))]
        else:
            hooks.append(attn.c_attn.register_forward_hook(lambda m, i, o, l=layer: got.__setitem__((l, "qkv"), o)))
    try:
        model.eval()(idx)
    finally:
        for h in hooks:
            h.remove()
    B, T = idx.shape
    hd = model.head_dim
    out = {}
    for layer in layers:
        if _is_llama(model):
            q, k, v = got[(layer, "qkv")]
        elif _is_gemma(model):
            q, k = got[(layer, "q")].transpose(1, 2), got[(layer, "k")].transpose(1, 2)
            v = got[(layer, "v")].view(B, T, model.n_kv_heads, hd).transpose(1, 2)
            rot = model.rotary_global if model.layer_windows[layer] is None else model.rotary_local
            cos, sin = rot(torch.arange(T, device=idx.device), q.dtype)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        else:
            q, k, v = (t.view(B, T, model.n_heads, hd).transpose(1, 2) for t in got[(layer, "qkv")].split(model.d_model, 2))
        out[layer] = (q, k, v)
    return out


@torch.no_grad()
def attention_probs(model, idx: torch.Tensor, layers=None) -> dict[int, torch.Tensor]:
    """{layer: (B, Hq, T, T)} attention probabilities p[b, h, query, key] of every head: the
    softmax of q k / sqrt(h) over the keys each query sees (causal, and within W in a local
    layer). Rows sum to 1; entries above the diagonal or outside the window are 0."""
    T = idx.size(1)
    out = {}
    for layer, (q, k, _) in queries_keys_values(model, idx, layers).items():
        k = k.repeat_interleave(q.size(1) // k.size(1), dim=1)  # GQA: each kv head serves Hq/Hkv queries
        scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(q.size(-1))
        mask = window_mask(T, T, model.layer_windows[layer], 0, idx.device)
        out[layer] = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return out


def _output_projection(model, layer: int):
    attn = model.blocks[layer].attn
    return attn.c_proj if hasattr(attn, "c_proj") else attn.o_proj


@contextmanager
def head_ablation(model, heads: dict):
    """Within the block, the heads {layer: [head, ...]} output zeros: their slice of the
    attention output is zeroed before the output projection, so nothing of theirs reaches
    the residual stream. The hooks are removed on exit, also after an error."""
    hooks = []
    hd = model.head_dim
    for layer, hs in heads.items():
        bad = [h for h in hs if not 0 <= h < model.n_heads]
        if bad or not 0 <= layer < len(model.blocks):
            raise ValueError(f"heads {heads!r}: layer {layer} / heads {bad} out of range; allowed: layers "
                             f"0..{len(model.blocks) - 1}, heads 0..{model.n_heads - 1}")
        keep = torch.ones(model.n_heads * hd)
        for h in hs:
            keep[h * hd:(h + 1) * hd] = 0

        def zero(module, args, keep=keep):
            return (args[0] * keep.to(args[0].device, args[0].dtype),)

        hooks.append(_output_projection(model, layer).register_forward_pre_hook(zero))
    try:
        yield model
    finally:
        for h in hooks:
            h.remove()


# ---------------------------------------------------------------------------------------
# Per-head measures
# ---------------------------------------------------------------------------------------
def attention_distance(p: torch.Tensor, q_from: int = 0) -> torch.Tensor:
    """(H,) mean over queries q >= q_from (and over the batch) of sum_k p[q, k] (q - k): how far
    back each head looks, weighting every earlier token by its attention (the blog's
    attention distance, after the Vision Transformer paper)."""
    T = p.size(-1)
    dist = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).clamp(min=0).to(p.dtype)
    return (p * dist).sum(-1)[..., q_from:, ].mean(dim=(0, 2))


def first_position_share(p: torch.Tensor, q_from: int = 0) -> torch.Tensor:
    """(H,) mean over queries q >= q_from of p[q, 0]: attention parked on the first position."""
    return p[..., q_from:, 0].mean(dim=(0, 2))


def separator_share(p: torch.Tensor, idx: torch.Tensor, sep_id: int, q_from: int = 0) -> torch.Tensor:
    """(H,) attention on separator tokens (x_k == sep_id, k <= q), averaged over the queries
    q >= q_from of the windows that contain a separator among keys < T (NaN if none does)."""
    is_sep = (idx == sep_id).to(p.dtype)  # (B, T)
    has = is_sep.sum(1) > 0
    if not has.any():
        return torch.full((p.size(1),), float("nan"))
    share = (p * is_sep[:, None, None, :]).sum(-1)[..., q_from:]  # (B, H, Tq)
    return share[has].mean(dim=(0, 2))


def induction_scores(p: torch.Tensor, start: int, distance: int, n: int) -> torch.Tensor:
    """(H,) the blog's induction score: with a block of n tokens at `start` repeated `distance`
    tokens later, the mean over the n - 1 tokens t = start + distance .. start + distance + n - 2
    of the repeat (and over the batch) of p[t, t - distance + 1], the attention on the token
    right after the earlier twin."""
    t = torch.arange(start + distance, start + distance + n - 1)
    return p[:, :, t, t - distance + 1].mean(dim=(0, 2))


def previous_token_scores(p: torch.Tensor, q_from: int = 1) -> torch.Tensor:
    """(H,) mean over queries q >= q_from of p[q, q - 1]: the attention a head puts on the
    token just before the query, the first half of an induction circuit (Olsson et al., 2022)."""
    q = torch.arange(max(1, q_from), p.size(-1))
    return p[:, :, q, q - 1].mean(dim=(0, 2))


def repeated_block_sequences(vocab_size: int, eos_id: int, n: int, distance: int, n_seqs: int,
                             seed: int = 0) -> tuple[torch.Tensor, int]:
    """(n_seqs, distance + n) random-token sequences in which a block of n tokens at position
    `start` = 0 recurs `distance` tokens later, with random filler between (the blog's
    induction test: nothing but the earlier copy predicts the repeat). Returns (idx, start)."""
    if not (n >= 2 and distance >= n):
        raise ValueError(f"n={n}, distance={distance}; allowed: n >= 2 and distance >= n")
    g = np.random.default_rng([seed, n, distance])
    x = g.integers(0, vocab_size - 1, (n_seqs, distance + n))
    x = x + (x >= eos_id)  # never the separator
    x[:, distance:distance + n] = x[:, :n]
    return torch.from_numpy(x.astype(np.int64)), 0


@torch.no_grad()
def kl_divergence(logits_a: torch.Tensor, logits_b: torch.Tensor) -> torch.Tensor:
    """KL(A || B) = sum_v p_A(v) (ln p_A(v) - ln p_B(v)) at every position (..., V) -> (...)."""
    la, lb = F.log_softmax(logits_a.double(), -1), F.log_softmax(logits_b.double(), -1)
    return (la.exp() * (la - lb)).sum(-1)


# ---------------------------------------------------------------------------------------
# Inputs and tables for chapter 10
# ---------------------------------------------------------------------------------------
def token_labels(tokenizer, text: str, renderable=None) -> tuple[torch.Tensor, list[str]]:
    """Token ids of `text` and a legible label per token: its characters, with a line break
    shown as ↵, and the tokens that split one multi-byte character (an emoji is 4 UTF-8
    bytes) labelled by that character and their part, e.g. 🤗¹ 🤗² 🤗³. A character for
    which `renderable(ch)` is False (a glyph the plotting font lacks) is written as its code
    point, e.g. U+1F917¹."""
    ids, spans = tokenizer.encode_with_offsets(text)
    labels, parts = [], {}
    for a, b in spans.tolist():
        parts[(a, b)] = parts.get((a, b), 0) + 1
    seen: dict = {}
    sup = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
    for a, b in spans.tolist():
        piece = text[a:b].replace("\n", "↵")
        if renderable is not None:
            piece = "".join(c if renderable(c) else f"U+{ord(c):04X}" for c in piece)
        if parts[(a, b)] > 1:
            seen[(a, b)] = seen.get((a, b), 0) + 1
            piece = f"{piece}{str(seen[(a, b)]).translate(sup)}"
        labels.append(piece)
    return torch.from_numpy(np.asarray(ids, dtype=np.int64))[None], labels


def heads_table(values: dict, name: str) -> pd.DataFrame:
    """{layer: (H,) tensor} -> long table (layer, head, name)."""
    rows = [(layer, h, float(v)) for layer, t in values.items() for h, v in enumerate(t.tolist())]
    return pd.DataFrame(rows, columns=["layer", "head", name])


def packed_eval_windows(budget, n: int, length: int | None = None, seed: int = 0) -> torch.Tensor:
    """(n, length) windows of the held-out split, files packed one after another with an EOS
    separator between them as pre-training saw text (default length L). Every window holds
    a separator in its first half, so the separator share has something to measure in the
    queries of the second half (the blog's pages are short enough that most windows do)."""
    p = budget.pair
    T = p.seq_len if length is None else int(length)
    data = {"corpus": p.corpus, "tokenizer": p.tokenizer, "split": "eval", "stream": "packed", "seq_len": T}
    stream = make_stream(data, seed)
    x, _, _ = stream.batch(0, stream.n_windows)
    sep = get_tokenizer(p.tokenizer).eos_id
    keep = torch.nonzero((x[:, : T // 2] == sep).any(1)).ravel()
    if len(keep) < n:
        raise ValueError(f"only {len(keep)} held-out windows of {T} tokens have a separator in their first half; "
                         f"asked for n={n}")
    return x[keep[torch.linspace(0, len(keep) - 1, n).round().long()]]


@torch.no_grad()
def head_measures(model, windows: torch.Tensor, sep_id: int, batch: int = 8) -> pd.DataFrame:
    """Per head: attention distance and first-position share over the queries in the second
    half of each window (so every head could look back at least half a window), and the
    separator share over the windows that contain a separator (the blog's three panels).
    Columns layer, head, distance, first_position, separator."""
    T = windows.size(1)
    sums = {}
    for i in range(0, len(windows), batch):
        x = windows[i:i + batch]
        has = bool((x == sep_id).any())
        for layer, p in attention_probs(model, x).items():
            d, f = attention_distance(p, T // 2) * len(x), first_position_share(p, T // 2) * len(x)
            s_ = separator_share(p, x, sep_id, T // 2) * int((x == sep_id).any(1).sum()) if has else 0 * d
            acc = sums.setdefault(layer, [0, 0, 0, 0])
            acc[0], acc[1], acc[2] = acc[0] + d, acc[1] + f, acc[2] + s_
            acc[3] += int((x == sep_id).any(1).sum())
    n = len(windows)
    tables = [heads_table({k: v[0] / n for k, v in sums.items()}, "distance"),
              heads_table({k: v[1] / n for k, v in sums.items()}, "first_position"),
              heads_table({k: v[2] / v[3] if v[3] else v[2] * float("nan") for k, v in sums.items()}, "separator")]
    return tables[0].merge(tables[1]).merge(tables[2])


def sink_summary(measures: pd.DataFrame) -> dict:
    """The blog's sink numbers from `head_measures`' table: the largest layer-mean share on the
    first position and on separators ("up to 13% of a layer"), and the layers holding them."""
    by_layer = measures.groupby("layer")[["first_position", "separator"]].mean()
    return {"first position, max layer": float(by_layer["first_position"].max()),
            "layer (first position)": int(by_layer["first_position"].idxmax()),
            "separator, max layer": float(by_layer["separator"].max()),
            "layer (separator)": int(by_layer["separator"].idxmax())}


@torch.no_grad()
def induction_test(model, vocab_size: int, eos_id: int, n: int, distance: int, n_seqs: int, seed: int = 0) -> dict:
    """The blog's induction test at one distance: per-head induction scores, and the mean loss
    on the first copy of the block and on its repeat (tokens 2..n of each, as in
    `nblib.metrics.probes.copy_gain`). Returns {"scores": DataFrame(layer, head, score,
    previous_token), "first": float, "repeat": float}."""
    x, start = repeated_block_sequences(vocab_size, eos_id, n, distance, n_seqs, seed)
    probs = attention_probs(model, x)
    scores = heads_table({layer: induction_scores(p, start, distance, n) for layer, p in probs.items()}, "score")
    prev = heads_table({layer: previous_token_scores(p) for layer, p in probs.items()}, "previous_token")
    logits, _ = model.eval()(x[:, :-1])
    nll = F.cross_entropy(logits.float().transpose(1, 2), x[:, 1:], reduction="none")  # index t-1 predicts t
    return {"scores": scores.merge(prev), "first": float(nll[:, start:start + n - 1].mean()),
            "repeat": float(nll[:, start + distance:start + distance + n - 1].mean())}


@torch.no_grad()
def copy_loss(model, vocab_size: int, eos_id: int, n: int, distance: int, n_seqs: int, seed: int = 0) -> float:
    """Mean loss on the repeat of a random block seen `distance` tokens earlier (tokens 2..n)."""
    x, start = repeated_block_sequences(vocab_size, eos_id, n, distance, n_seqs, seed)
    logits, _ = model.eval()(x[:, :-1])
    nll = F.cross_entropy(logits.float().transpose(1, 2), x[:, 1:], reduction="none")
    return float(nll[:, start + distance:start + distance + n - 1].mean())


@torch.no_grad()
def disagreements(model_a, model_b, windows: torch.Tensor, tokenizer, top: int = 8, context_chars: int = 60,
                  batch: int = 8) -> tuple[np.ndarray, pd.DataFrame, dict]:
    """Token-level KL(A || B) on every next-token prediction of `windows`, the `top` strongest
    disagreements in context (end of context, true next token, each model's top guess with
    its probability), and summary numbers (mean, median, share above 1 and 3 nats, each
    model's mean loss, and which model has the lower loss in the tail)."""
    kls, la, lb, rows = [], [], [], []
    for i in range(0, len(windows), batch):
        x = windows[i:i + batch]
        a, _ = model_a.eval()(x[:, :-1])
        b, _ = model_b.eval()(x[:, :-1])
        kls.append(kl_divergence(a, b))
        la.append(F.cross_entropy(a.float().transpose(1, 2), x[:, 1:], reduction="none"))
        lb.append(F.cross_entropy(b.float().transpose(1, 2), x[:, 1:], reduction="none"))
    kl, la, lb = torch.cat(kls), torch.cat(la), torch.cat(lb)
    flat = kl.flatten()
    order = torch.argsort(flat, descending=True)
    tail = order[: max(1, len(flat) // 20)]  # the strongest 5%
    T = kl.size(1)
    for k in order[:top].tolist():
        w, t = divmod(k, T)
        x = windows[w]
        a, _ = model_a(x[None, : t + 1])
        b, _ = model_b(x[None, : t + 1])
        pa, pb = torch.softmax(a[0, -1].float(), -1), torch.softmax(b[0, -1].float(), -1)
        ga, gb = int(pa.argmax()), int(pb.argmax())
        rows.append({"context (end)": "…" + tokenizer.decode(x[: t + 1])[-context_chars:].replace("\n", "↵"),
                     "true next": tokenizer.decode(x[t + 1: t + 2]).replace("\n", "↵"),
                     "A's guess": f"{tokenizer.decode([ga])!r} {pa[ga]:.0%}",
                     "B's guess": f"{tokenizer.decode([gb])!r} {pb[gb]:.0%}", "KL(A||B)": float(flat[k])})
    summary = {"tokens": int(flat.numel()), "mean": float(flat.mean()), "median": float(flat.median()),
               "share > 1 nat": float((flat > 1).double().mean()), "share > 3 nats": float((flat > 3).double().mean()),
               "loss A": float(la.mean()), "loss B": float(lb.mean()),
               "tail size": int(len(tail)), "B lower loss in the tail": float((lb.flatten()[tail] < la.flatten()[tail])
                                                                              .double().mean())}
    return flat.numpy(), pd.DataFrame(rows), summary


# ---------------------------------------------------------------------------------------
# Retrieval heads (Wu et al., 2024; the LCCP paper App. D.3, Fig. 18)
# ---------------------------------------------------------------------------------------
def retrieval_hits(p: torch.Tensor, ids: torch.Tensor, queries, targets, span: tuple[int, int]) -> torch.Tensor:
    """(H,) per head, how many answer tokens it retrieves: at each query position q (the
    position that produces answer token targets[i]), a hit is when the head's most-attended
    key lies in the needle's token span [a, b) and holds that very token. p (H, T, T) one
    sequence's attention of one layer; ids (T,) its tokens."""
    a, b = span
    top = p[:, list(queries)].argmax(-1)  # (H, n)
    tgt = torch.as_tensor(list(targets))
    return ((top >= a) & (top < b) & (ids[top] == tgt[None])).sum(1)


def needle_value_tokens(tokenizer, sample) -> tuple[np.ndarray, list[int], list[int]]:
    """The token ids of `sample.text`, the positions of the tokens inside its first needle, and
    the positions of the needle tokens that hold the value: every piece that overlaps the
    value's characters, the leading-space piece included (a BPE writes " 434" as " 4" + "34";
    dropping " 4" would leave "34", which is not the value the model has to produce)."""
    a, b = sample.needles[0]
    ids, offsets = tokenizer.encode_with_offsets(sample.text)
    needle_tok = [i for i, (x, y) in enumerate(offsets.tolist()) if x >= a and y <= b]
    value_at = sample.prompt.index(sample.answers[0], a)
    value_end = value_at + len(sample.answers[0])
    value_tok = [i for i in needle_tok if offsets[i][1] > value_at and offsets[i][0] < value_end]
    return ids, needle_tok, value_tok


@torch.no_grad()
def retrieval_head_scores(model, tokenizer, samples) -> pd.DataFrame:
    """Retrieval score of every head on single-needle RULER samples, teacher-forced: the
    needle's own value tokens follow the prompt and answer prefix, and a head scores the
    share of them it copies from the needle (`retrieval_hits`), averaged over samples.
    Columns layer, head, score."""
    total, n_tok = {}, 0
    for s in samples:
        ids, needle_tok, value_tok = needle_value_tokens(tokenizer, s)
        seq = torch.as_tensor(np.concatenate([ids, ids[value_tok]]), dtype=torch.long)
        start = len(ids)
        queries = [start - 1 + i for i in range(len(value_tok))]
        targets = seq[start:start + len(value_tok)]
        span = (needle_tok[0], needle_tok[-1] + 1)
        for layer, p in attention_probs(model, seq[None]).items():
            total[layer] = total.get(layer, 0) + retrieval_hits(p[0], seq, queries, targets, span)
        n_tok += len(value_tok)
    return heads_table({k: v.double() / n_tok for k, v in total.items()}, "score")
