"""What the heads of Models A and B attend to, measured model by model (chapter 10; Gemma blog,
"Visualizing attention" to "Where the two models disagree").

    conts = greedy_continuations(models, tok, prompt, n_new)        # {key: decoded continuation}
    maps = layer_maps(models, tok, texts, L)                         # {key: (labels, {layer: (T, T)})}
    measures = head_measure_table(models, windows, tok.eos_id, names)
    wins = heldout_windows(budget, n)                                 # unfiltered: the blog's distance
    dist = model_distances(models, wins, tok.eos_id)
    table = distance_table(dist, names)                              # A, B and A / B with intervals
    tests = induction_tests(models, V, eos, n_block, distances, n_seqs, seed)
    scores, induction = induction_tables(tests, names)
    ablation = ablation_table(models, tests, distances, natural, V, eos, n_block, n_seqs, seed, names)

The per-head measures themselves are `nblib.metrics.attention_maps`; this module runs them
over the pair (and over the pair's shorter training budgets) and gathers the chapter's tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from nblib.data import make_stream
from nblib.gemma.pair import heldout_loss
from nblib.metrics import attention_maps as M

DISTANCE_MEASURES = {  # window_distances' keys -> the measure's name in attention_distance.csv
    "all": "mean distance, all windows",  # the blog's reading
    "sinks excluded": "mean distance, sinks excluded",  # position 0 and separators dropped, the rest renormalised
}


def _with_eos(tokenizer, text: str, renderable=None) -> tuple[torch.Tensor, list[str]]:
    """(1, 1 + n) ids of `text` after the end-of-document token that starts every training
    document, and the n tokens' labels (`attention_maps.token_labels`)."""
    ids, labels = M.token_labels(tokenizer, text, renderable=renderable)
    return torch.cat([torch.tensor([[tokenizer.eos_id]]), ids], 1), labels


def greedy_continuations(models: dict, tokenizer, text: str, n_new: int,
                         max_tokens: int | None = None) -> dict[str, str]:
    """{key: the `n_new` tokens each model {key: model} continues `text` with, greedily,
    decoded}; the prompt is the end-of-document token and `text`, cut to its first
    `max_tokens` tokens (Gemma blog, "Visualizing attention": "Learning is Fun 🤗, Keep
    exploring 🔭", continued by both models)."""
    start = _with_eos(tokenizer, text)[0][:, :max_tokens]
    return {k: tokenizer.decode(m.generate(start, n_new, temperature=0.0)[0, start.size(1):])
            for k, m in models.items()}


def layer_maps(models: dict, tokenizer, texts: dict, max_tokens: int, renderable=None) -> dict:
    """{key: (labels, {layer: (T, T) attention averaged over the layer's heads})}: each model
    {key: model} reads its own text {key: str} after the end-of-document token, cut to
    `max_tokens` tokens; labels name the T tokens ("⟨eos⟩" first; `renderable` as in
    `attention_maps.token_labels`). Rows are queries, columns keys (Gemma blog,
    "Visualizing attention": a copy shows as a stripe parallel to the diagonal)."""
    out = {}
    for k, m in models.items():
        x, labels = _with_eos(tokenizer, texts[k], renderable)
        x = x[:, :max_tokens]
        probs = M.attention_probs(m, x)
        out[k] = (["⟨eos⟩", *labels][: x.size(1)], {layer: p[0].mean(0) for layer, p in probs.items()})
    return out


def head_measure_table(models: dict, windows: torch.Tensor, sep_id: int, names: dict) -> pd.DataFrame:
    """`attention_maps.head_measures` of every model {key: model} on the same windows, with a
    column model = names[key] (Gemma blog, "Attention distance and attention sinks")."""
    return pd.concat([M.head_measures(m, windows, sep_id).assign(model=names[k]) for k, m in models.items()])


def heldout_windows(budget, n: int, length: int | None = None, seed: int = 0) -> torch.Tensor:
    """(n, length) windows of held-out files packed one after another with an end-of-document
    separator between them, as pre-training saw text (default length L), spread evenly over
    the split and NOT chosen for holding a separator: the blog's attention distance reads
    "32 held-out 1024-token windows" as they come. (`attention_maps.packed_eval_windows` keeps
    only windows with a separator in their first half, which the separator share needs.)"""
    p = budget.pair
    T = p.seq_len if length is None else int(length)
    data = {"corpus": p.corpus, "tokenizer": p.tokenizer, "split": "eval", "stream": "packed", "seq_len": T}
    stream = make_stream(data, seed)
    x, _, _ = stream.batch(0, stream.n_windows)
    if len(x) < n:
        raise ValueError(f"only {len(x)} held-out windows of {T} tokens; asked for n={n}")
    return x[torch.linspace(0, len(x) - 1, n).round().long()]


@torch.no_grad()
def window_distances(model, windows: torch.Tensor, sep_id: int, batch: int = 8) -> dict[str, np.ndarray]:
    """Attention distance (Gemma blog: sum_k p[q, k] (q - k), over the queries in the second
    half of each window) of every head in every window: {"all": (n, layers, heads), "sinks
    excluded": (n, layers, heads)}. "sinks excluded" drops the attention on position 0 and on
    separator tokens and renormalises the rest before weighting distances (a query with all
    its attention on sinks is left out; a head with no query left in a window is NaN). Kept
    per window so the windows can be resampled."""
    T = windows.size(1)
    q0 = T // 2
    dist = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).clamp(min=0).double()
    out = {"all": [], "sinks excluded": []}
    for i in range(0, len(windows), batch):
        x = windows[i:i + batch]
        probs = M.attention_probs(model, x)
        keep = (x != sep_id).double()  # (B, T): keys that are not separators
        keep[:, 0] = 0.0  # nor the first position
        per_layer_all, per_layer_ex = [], []
        for layer in sorted(probs):
            p = probs[layer].double()[:, :, q0:, :]  # (B, H, Tq, T)
            d = dist[q0:]
            per_layer_all.append((p * d).sum(-1).mean(-1))  # (B, H)
            pk = p * keep[:, None, None, :]
            mass = pk.sum(-1)  # (B, H, Tq)
            dq = torch.where(mass > 0, (pk * d).sum(-1) / mass.clamp(min=1e-300), torch.nan)
            per_layer_ex.append(dq.nanmean(-1))  # (B, H)
        out["all"].append(torch.stack(per_layer_all, 1))  # (B, layers, H)
        out["sinks excluded"].append(torch.stack(per_layer_ex, 1))
    return {k: torch.cat(v).numpy() for k, v in out.items()}


def model_distances(models: dict, windows: torch.Tensor, sep_id: int) -> dict[str, dict[str, np.ndarray]]:
    """{key: `window_distances`} of every model {key: model} on the same windows."""
    return {k: window_distances(m, windows, sep_id) for k, m in models.items()}


def distance_table(distances: dict, names: dict, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Attention distance of Models A and B, the mean over heads (every head weighs alike,
    as the blog's 132 and 81 tokens do) and windows, with a bootstrap interval that resamples
    windows, and the ratio A / B with its interval (the same resampled windows for both:
    they read the same windows). `distances` {key: `window_distances`}, keys "A" and "B".
    Rows (model, measure) for every measure of `DISTANCE_MEASURES`, the headline measure
    first; columns model, measure, mean, 95% lo, 95% hi, windows."""
    tail = (1 - level) / 2 * 100
    rows = []
    for key, measure in DISTANCE_MEASURES.items():
        per_window = {k: np.nanmean(distances[k][key].reshape(len(distances[k][key]), -1), axis=1) for k in ("A", "B")}
        n = len(per_window["A"])
        if len(per_window["B"]) != n:
            raise ValueError(f"Models A and B read {n} and {len(per_window['B'])} windows; the ratio needs the same ones")
        idx = np.random.default_rng(seed).integers(0, n, (n_boot, n))
        boot = {k: np.nanmean(v[idx], axis=1) for k, v in per_window.items()}
        for k in ("A", "B"):
            lo, hi = np.percentile(boot[k], [tail, 100 - tail])
            rows.append({"model": names[k], "measure": measure, "mean": float(np.nanmean(per_window[k])),
                         "95% lo": float(lo), "95% hi": float(hi), "windows": n})
        lo, hi = np.percentile(boot["A"] / boot["B"], [tail, 100 - tail])
        rows.append({"model": "ratio A / B", "measure": measure,
                     "mean": float(np.nanmean(per_window["A"]) / np.nanmean(per_window["B"])),
                     "95% lo": float(lo), "95% hi": float(hi), "windows": n})
    return pd.DataFrame(rows)


def sinks_by_length(ladder: dict, windows: torch.Tensor, sep_id: int, n_params: int, names: dict) -> pd.DataFrame:
    """The blog's sink numbers (`attention_maps.sink_summary`) of both models at every
    training length of `ladder` {fraction: {key: Run}} (chapter 6's ladder), shortest first:
    one row per (length, model), with the tokens per parameter of `n_params` (Model A's
    count, as the blog's 79)."""
    return pd.DataFrame([{"tokens per parameter": rs["A"].config.realized_tokens / n_params, "model": names[k],
                          **M.sink_summary(M.head_measures(r.load_model(), windows, sep_id))}
                         for f, rs in sorted(ladder.items()) for k, r in rs.items()])


def induction_tests(models: dict, vocab_size: int, eos_id: int, n_block: int, distances, n_seqs: int,
                    seed: int = 0) -> dict:
    """{(key, distance): `attention_maps.induction_test`} for every model {key: model} and every
    distance of the repeat (Gemma blog, "Induction heads and the local window": a random
    block repeated 256 or 768 tokens back at L = 1024)."""
    return {(k, d): M.induction_test(m, vocab_size, eos_id, n_block, d, n_seqs, seed)
            for k, m in models.items() for d in distances}


def induction_tables(tests: dict, names: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """From `induction_tests`: every head's scores (columns layer, head, score, previous_token,
    model, distance), and one row per (model, distance) with the best head, its score, the
    heads scoring above 0.3 and the loss on the block's first copy and on its repeat."""
    scores = pd.concat([t["scores"].assign(model=names[k], distance=d) for (k, d), t in tests.items()])
    best = {key: t["scores"].loc[t["scores"].score.idxmax()] for key, t in tests.items()}
    induction = pd.DataFrame([{"model": names[k], "distance": d, "best head": "layer {}, head {}".format(
        int(best[(k, d)]["layer"]), int(best[(k, d)]["head"])), "best score": t["scores"].score.max(),
        "heads > 0.3": int((t["scores"].score > 0.3).sum()), "loss, first copy": t["first"],
        "loss, repeat": t["repeat"]} for (k, d), t in tests.items()])
    return scores, induction


def ablation_heads(scores: pd.DataFrame) -> dict[str, pd.DataFrame | None]:
    """The head sets switched off, from one model's induction scores: "none"; its induction
    heads (score above 0.3, or its best head if none is); as many heads with the highest
    previous-token score among the rest (the first half of an induction circuit, Olsson et
    al., 2022); and as a control as many of the remaining heads lowest on both scores."""
    s_in = scores.sort_values("score", ascending=False)
    top = s_in[s_in.score > 0.3]
    top = top if len(top) else s_in.head(1)
    rest = s_in.drop(top.index)
    prev = rest.sort_values("previous_token", ascending=False).head(len(top))
    low = rest.drop(prev.index).assign(both=lambda d: d.score + d.previous_token).sort_values("both").head(len(top))
    return {"none": None, "induction heads": top, "previous-token heads": prev, "lowest on both (control)": low}


def ablation_table(models: dict, tests: dict, distances, natural: torch.Tensor, vocab_size: int, eos_id: int,
                   n_block: int, n_seqs: int, seed: int, names: dict) -> pd.DataFrame:
    """Beyond the blog: switching heads off. For every model {key: model} and every head set
    of `ablation_heads` (picked on `tests` with the repeat at distances[0], inside Model B's
    window), those heads are zeroed before the output projection (`attention_maps.head_ablation`)
    and the repeat's loss is measured again at every distance, on fresh blocks (seed + 1),
    with the held-out loss on natural text (`natural` windows) beside it."""
    rows = []
    for k, m in models.items():
        for label, heads in ablation_heads(tests[(k, distances[0])]["scores"]).items():
            spec_heads = {} if heads is None else heads.groupby("layer")["head"].apply(list).to_dict()
            with M.head_ablation(m, spec_heads):
                rows.append({"model": names[k], "ablated": label, "heads": ", ".join(
                    f"L{la}h{h}" for la, hs in spec_heads.items() for h in hs) or "-",
                    **{f"repeat loss @{d}": M.copy_loss(m, vocab_size, eos_id, n_block, d, n_seqs, seed + 1)
                       for d in distances},
                    "held-out loss": float(heldout_loss(m, natural).mean())})
    return pd.DataFrame(rows)
