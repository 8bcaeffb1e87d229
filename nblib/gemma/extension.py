"""Extending Model B's context s-fold with YaRN (Gemma blog, "Extending Model B's context").

    ft = finetune_run(store, budget, runs["B"])          # trains what the store lacks
    models = extension_models(runs["B"], ft)            # plain RoPE, zero-shot YaRN, fine-tuned
    cont = continued_run(store, budget, runs["B"])      # the fine-tune's control: plain RoPE at L
    pi = with_scaling(models["plain RoPE"], linear_scaling(budget), layers="global")  # Gemma 3's way
    docs = long_test_docs(budget)                       # held-out pages of >= s*L tokens
    nll = page_nll(models["zero-shot YaRN"], docs)      # (n_docs, s*L) per-token loss, one pass
    nll = page_nlls(models, docs)                       # the same for every model {name: model}

- YaRN itself is `nblib.models.layers.yarn_inv_freq` (Peng et al., 2023), applied to every
  layer as the blog does, with the attention temperature 0.1 ln s + 1 folded into cos/sin.
  The other zero-shot way the blog names is Gemma 3's: linear position interpolation (every
  band's frequency divided by s) on the global layers only (`linear_scaling`,
  `with_scaling(..., layers="global")`).
- The fine-tune continues Model B's run from its final checkpoint with the optimizer state
  restored ("weights+optimizer"), at the LR its schedule ended on, no new warmup, on
  documents of at least s*L tokens read from their start (`DocStartStream`), keeping the
  tokens per step, with a snapshot every k steps.
- The fine-tune's control (`continued_config`): Model B continued the same way (weights and
  optimizer state, the LR its schedule ended on, the same steps and tokens per step) with
  plain RoPE on sequences of L tokens, each the start of a training document: what more
  training alone gives, told apart from the extension.
- Beyond the blog: `whole_vs_window` scores the last tokens of each page with the whole
  page before them and with only the last L tokens; `passkey_*` hides a number at a depth
  of the page and asks for it back (the YaRN paper's passkey retrieval).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from nblib.budgets import Budget
from nblib.data import corpus_identity, get_corpus, get_tokenizer
from nblib.gemma.pair import eval_windows
from nblib.metrics.probes import token_nll
from nblib.models import build_model
from nblib.stats import paired_bootstrap
from nblib.store.runstore import Run, RunConfig, RunStore
from nblib.training.runner import get_or_run
from nblib.training.threads import KERNEL_THREADS

MODELS = ("plain RoPE", "zero-shot YaRN", "YaRN fine-tuned")
LINEAR_GLOBAL = "zero-shot linear PI, global layers"  # Gemma 3's way (the blog's "Which layers to stretch")
CONTINUED = "plain continued"  # the fine-tune's control: Model B continued at L without YaRN
CONTROL_PREFIX = "all-global control: "  # chapter 9's all-global Model B, read on the same pages


def yarn_scaling(budget: Budget) -> dict:
    """The rope_scaling of Model B extended s-fold from its training context L."""
    p = budget.pair
    return {"type": "yarn", "factor": float(p.yarn_factor), "original_max_seq_len": p.seq_len}


def linear_scaling(budget: Budget) -> dict:
    """Linear position interpolation s-fold (Chen et al., 2023): Gemma 3 stretches its global
    layers this way (the Gemma blog, "Which layers to stretch")."""
    return {"type": "linear", "factor": float(budget.pair.yarn_factor)}


def finetune_config(budget: Budget, parent: Run) -> RunConfig:
    """The YaRN fine-tune of Model B (Gemma blog, "Fine-tuning setup"): the parent's final
    weights and optimizer state, the LR its schedule ended on, no warmup, documents of at
    least s*L tokens one per sequence, the same tokens per step, snapshots every k steps."""
    p, pc = budget.pair, parent.config
    T = p.seq_len * p.yarn_factor
    per_step = pc.tokens_per_step
    if per_step % T:
        raise ValueError(f"tokens per step {per_step} is not a multiple of the extended length {T}")
    batch = per_step // T
    end_lr = pc.schedule["lr"] * pc.schedule.get("final_lr_frac", 0.1)
    data = {"corpus": p.corpus, "corpus_id": corpus_identity(p.corpus), "tokenizer": p.tokenizer, "split": "train",
            "stream": "doc_starts", "seq_len": T}
    return RunConfig(model={**pc.model, "rope_scaling": yarn_scaling(budget), "max_seq_len": T}, data=data,
                     schedule={"kind": "constant", "lr": end_lr, "warmup_steps": 0},
                     n_tokens=p.finetune_steps * per_step, batch_size=batch, seed=pc.seed, budget=budget.name,
                     optimizer=dict(pc.optimizer),
                     init={"run": parent.hash, "step": pc.total_steps, "mode": "weights+optimizer"},
                     label=f"Model B, YaRN x{p.yarn_factor} fine-tune", meta={"pair": "B", "stage": "yarn"},
                     ckpt_every_tokens=p.finetune_snapshot_every * per_step, keep_optimizer="last", log_every=2,
                     threads=KERNEL_THREADS)  # trains alone in chapter 9's kernel


def finetune_run(store: RunStore, budget: Budget, parent: Run) -> Run:
    """The YaRN fine-tune of `parent` (Model B), trained now where the store lacks it."""
    return get_or_run(store, finetune_config(budget, parent))


def continued_config(budget: Budget, parent: Run) -> RunConfig:
    """The YaRN fine-tune's control: `parent` (Model B) continued exactly as the fine-tune
    continues it (final weights and optimizer state, the LR its schedule ended on, no warmup,
    the same steps and tokens per step, its optimizer settings) but with plain RoPE on
    sequences of L tokens, each the start of a training document of at least L + 1 tokens
    (the fine-tune reads the starts of documents of at least sL + 1). Scored against the
    fine-tune inside L and past it, it tells the extension's gain from more training."""
    p, ft = budget.pair, finetune_config(budget, parent)
    per_step = ft.tokens_per_step
    if per_step % p.seq_len:
        raise ValueError(f"tokens per step {per_step} is not a multiple of L = {p.seq_len}")
    return RunConfig(model=dict(parent.config.model), data={**ft.data, "seq_len": p.seq_len}, schedule=ft.schedule,
                     n_tokens=ft.n_tokens, batch_size=per_step // p.seq_len, seed=ft.seed, budget=budget.name,
                     optimizer=dict(ft.optimizer), init=dict(ft.init),
                     label=f"Model B, plain RoPE continued at L (control of the YaRN x{p.yarn_factor} fine-tune)",
                     meta={"pair": "B", "stage": "continued"}, keep_optimizer="last", log_every=ft.log_every,
                     threads=ft.threads)


def continued_run(store: RunStore, budget: Budget, parent: Run) -> Run:
    """`continued_config`'s run, trained now where the store lacks it."""
    return get_or_run(store, continued_config(budget, parent))


def with_scaling(model, scaling: dict, layers: str = "all"):
    """A copy of a Gemma3 model with its RoPE stretched by `scaling` (YaRN or linear, see
    `nblib.models.layers.check_rope_scaling`) on `layers` ("all", or "global": the global
    layers only, the local ones keep plain RoPE) and the same weights: a zero-shot extension."""
    cfg = {k: getattr(model.config, k) for k in model.config.__dataclass_fields__}
    out = build_model("gemma3", {**cfg, "rope_scaling": scaling, "rope_scaling_layers": layers})
    out.load_state_dict(model.state_dict())
    return out.eval()


def with_yarn(model, scaling: dict):
    """A copy of a Gemma3 model with YaRN RoPE (`scaling`) on every layer and the same
    weights: zero-shot YaRN, as the blog applies it."""
    return with_scaling(model, scaling, layers="all")


def extension_models(parent: Run, finetuned: Run, step: int | str = "final") -> dict:
    """{"plain RoPE": Model B, "zero-shot YaRN": B with YaRN, "YaRN fine-tuned": the fine-tune at `step`}."""
    b = parent.load_model()
    return {"plain RoPE": b, "zero-shot YaRN": with_yarn(b, finetuned.config.model["rope_scaling"]),
            "YaRN fine-tuned": finetuned.load_model(step)}


def long_test_docs(budget: Budget) -> torch.Tensor:
    """(n, s*L + 1) held-out pages of at least s*L + 1 tokens, each from its start (the blog:
    "each read from its start in one pass")."""
    p = budget.pair
    return eval_windows(budget, length=p.seq_len * p.yarn_factor, n=p.n_long_docs)


@torch.no_grad()
def page_nll(model, docs: torch.Tensor, batch: int = 8) -> np.ndarray:
    """(n, T) next-token loss of every page in one causal pass: entry t is the loss of token
    t + 1 given tokens 0..t, so one pass at s*L answers every shorter length too."""
    return np.concatenate([token_nll(model, docs[i:i + batch]).numpy() for i in range(0, len(docs), batch)])


def page_nlls(models: dict, docs: torch.Tensor) -> dict[str, np.ndarray]:
    """{name: `page_nll` of that model on `docs`} for every model {name: model}, in order (the
    blog's "Perplexity by length and loss by position": every model reads the same pages)."""
    return {name: page_nll(m, docs) for name, m in models.items()}


def page_nll_cached(run: Run, step, model, docs: torch.Tensor, key: str) -> np.ndarray:
    """`page_nll`, cached in `run`'s folder for checkpoint `step` (re-computed if it changes)."""
    v = run.memo(f"page_nll_{key}_{docs.shape[0]}x{docs.shape[1]}_step{step}",
                 lambda: {"nll": page_nll(model, docs).tolist()}, steps=[step])
    return np.asarray(v["nll"])


def finetune_snapshots(finetuned: Run, docs: torch.Tensor, L: int, zero_shot: np.ndarray,
                       key: str = "long_docs") -> pd.DataFrame:
    """Every kept snapshot of the YaRN fine-tune scored on `docs` (Gemma blog, "Extending Model
    B's context": the first 25 steps give 77% of the gain): one row per step, the perplexity
    of the whole page and of its first `L` tokens; step 0 is zero-shot YaRN (`zero_shot`, its
    (n, T) losses on the same pages). Each snapshot's losses are cached in the run folder
    (`page_nll_cached` under `key`)."""
    rows = []
    for c in finetuned.checkpoints():
        v = page_nll_cached(finetuned, c.step, finetuned.load_model(c.step), docs, key)
        rows.append({"step": c.step, "whole page": np.exp(v.mean()), "first L": np.exp(v[:, :L].mean())})
    return pd.DataFrame([{"step": 0, "whole page": np.exp(zero_shot.mean()),
                          "first L": np.exp(zero_shot[:, :L].mean())}, *rows])


def ppl_by_length(nll: dict, lengths) -> pd.DataFrame:
    """Perplexity of the first L' tokens of the pages, exp(mean loss over them), for every
    model {name: (n, T) losses} and L' in `lengths` (longer than a model's T: NaN)."""
    rows = {name: {L: float(np.exp(v[:, :L].mean())) if L <= v.shape[1] else np.nan for L in lengths}
            for name, v in nll.items()}
    return pd.DataFrame(rows).rename_axis("first L' tokens")


def loss_by_position(nll: dict, edges) -> pd.DataFrame:
    """Mean loss in position buckets [a, b) of `edges` for every model (NaN past its length)."""
    cols = {}
    for name, v in nll.items():
        cols[name] = {f"{a}-{b}": float(v[:, a:b].mean()) if b <= v.shape[1] else np.nan
                      for a, b in zip(edges[:-1], edges[1:])}
    return pd.DataFrame(cols).rename_axis("positions")


@torch.no_grad()
def whole_vs_window(model, docs: torch.Tensor, window: int, last: int, batch: int = 64) -> pd.DataFrame:
    """Beyond the blog, check (a): the last `last` tokens of each page scored twice, with the
    whole page before them and with only the `window` tokens just before each. Rows: one
    per page, columns whole, window, gain = window - whole (nats/token; > 0: the model uses
    context more than `window` tokens back)."""
    n, T1 = docs.shape
    T = T1 - 1
    if not (1 <= last <= T - window):
        raise ValueError(f"last={last} with window={window} on pages of {T} tokens; allowed: 1..{T - window}")
    whole = page_nll(model, docs)[:, T - last:]  # losses of tokens T-last+1 .. T
    targets = np.arange(T - last + 1, T + 1)  # token index predicted
    short = np.zeros((n, last))
    for i in range(n):
        ctx = torch.stack([docs[i, t - window:t + 1] for t in targets])  # window tokens, then the target
        for j in range(0, last, batch):
            short[i, j:j + batch] = token_nll(model, ctx[j:j + batch])[:, -1].numpy()
    return pd.DataFrame({"whole": whole.mean(1), "window": short.mean(1), "gain": short.mean(1) - whole.mean(1)})


def whole_vs_window_table(models: dict, docs: torch.Tensor, window: int, last: int) -> pd.DataFrame:
    """Beyond the blog, check (a), for every model {name: model}: the mean loss of the last
    `last` tokens of each page with the whole page before them and with only `window` tokens
    (`whole_vs_window`), and the gain (window - whole) with a paired bootstrap 95% interval
    over pages. Rows: models; columns "loss, whole page", "loss, last {window} only", gain,
    95% lo, 95% hi."""
    wv = {name: whole_vs_window(m, docs, window=window, last=last) for name, m in models.items()}
    return pd.DataFrame({name: {"loss, whole page": t.whole.mean(), f"loss, last {window} only": t.window.mean(),
                                **dict(zip(["gain", "95% lo", "95% hi"],
                                           [paired_bootstrap(t.window, t.whole)[k] for k in ("diff", "lo", "hi")]))}
                         for name, t in wv.items()}).T


# ---------------------------------------------------------------------------------------
# Passkey retrieval (YaRN paper; Mohtashami & Jaggi, 2023), in the corpus's own language
# ---------------------------------------------------------------------------------------
PASSKEY_QUERIES = {"assert": '\nassert PASSKEY == "', "repeat": '\nPASSKEY = "'}


def passkey_prompts(budget: Budget, length: int, depths, n_per_depth: int, seed: int = 0,
                    query: str = "assert") -> list[dict]:
    """Prompts of exactly `length` tokens: held-out text as the haystack, a line
    `PASSKEY = "<5 digits>"` inserted at a relative depth, and a question at the end, which
    the model must complete with the digits: `assert PASSKEY == "` (the task), or "repeat",
    the needle's own prefix `PASSKEY = "` again (a pure copy: an induction head that matches
    the prefix and copies what followed it answers it). The haystack is the corpus's own kind
    of text (Python at toy), so only the needle is new. Each dict: ids (length,), answer
    (str), depth (float), needle_pos (token index). The same seed gives the same haystacks
    and keys for both queries."""
    if query not in PASSKEY_QUERIES:
        raise ValueError(f"query={query!r} is not allowed; allowed: {', '.join(PASSKEY_QUERIES)}")
    p = budget.pair
    tok = get_tokenizer(p.tokenizer)
    texts = [d.text for d in get_corpus(p.corpus).split("eval")]
    rng = np.random.default_rng([seed, length])
    query = tok.encode(PASSKEY_QUERIES[query]).tolist()
    out = []
    for depth in depths:
        for k in range(n_per_depth):
            key = f"{rng.integers(10000, 100000)}"
            needle = tok.encode(f'\nPASSKEY = "{key}"  # remember this\n').tolist()
            hay_len = length - len(needle) - len(query)
            hay = []
            for t in rng.permutation(len(texts)):  # concatenate held-out files until long enough
                hay += tok.encode(texts[t]).tolist() + [tok.eos_id]
                if len(hay) >= hay_len:
                    break
            hay = hay[:hay_len]
            at = int(round(depth * hay_len))
            ids = hay[:at] + needle + hay[at:] + query
            out.append({"ids": np.asarray(ids, dtype=np.int64), "answer": key, "depth": float(depth),
                        "needle_pos": at})
    return out


@torch.no_grad()
def passkey_accuracy(model, prompts: list[dict], tokenizer, batch: int = 8) -> pd.DataFrame:
    """Greedy-decode enough tokens for the 5 digits after each prompt (through the KV cache)
    and score exact retrieval: the continuation starts with the passkey. Rows per prompt:
    depth, needle_pos, correct."""
    rows = []
    n_new = max(len(tokenizer.encode(p["answer"])) for p in prompts) + 2
    for i in range(0, len(prompts), batch):
        chunk = prompts[i:i + batch]
        idx = torch.from_numpy(np.stack([p["ids"] for p in chunk]))
        out = model.generate(idx, n_new, temperature=0.0)[:, idx.size(1):]
        for p, o in zip(chunk, out):
            rows.append({"depth": p["depth"], "needle_pos": p["needle_pos"],
                         "correct": tokenizer.decode(o).startswith(p["answer"])})
    return pd.DataFrame(rows)


PASSKEY_VARIANTS = (("assert", ""), ("repeat", ", repeated prefix"))  # (query, suffix of the row's model name)


def passkey_table(budget: Budget, extended: dict, short: dict, depths, n_per_depth: int, tokenizer,
                  seed: int = 0) -> pd.DataFrame:
    """Beyond the blog, check (b): passkey accuracy by depth. The models of `extended` {name:
    model} read prompts of s*L - 8 tokens, those of `short` prompts of L - 8 (the reference
    that fits the training context), first with the task's query, then with the needle's
    own prefix repeated (rows "<name>, repeated prefix": the same haystacks and keys, a pure
    copy). Rows (model, length) in that order; one column per depth and "all depths" (the
    share of prompts answered exactly)."""
    p = budget.pair
    L, sL = p.seq_len, p.yarn_factor * p.seq_len
    acc = []
    for query, suffix in PASSKEY_VARIANTS:
        long_prompts = passkey_prompts(budget, sL - 8, depths, n_per_depth, seed=seed, query=query)
        short_prompts = passkey_prompts(budget, L - 8, depths, n_per_depth, seed=seed, query=query)
        for name, m in extended.items():
            acc.append(passkey_accuracy(m, long_prompts, tokenizer).assign(model=f"{name}{suffix}", length=sL - 8))
        for name, m in short.items():
            acc.append(passkey_accuracy(m, short_prompts, tokenizer).assign(model=f"{name}{suffix}", length=L - 8))
    acc = pd.concat(acc, ignore_index=True)
    table = acc.pivot_table(index=["model", "length"], columns="depth", values="correct", aggfunc="mean", sort=False)
    table["all depths"] = acc.groupby(["model", "length"], sort=False).correct.mean()
    return table


COMPARISONS = (  # (text, model a, model b, span of the page) for ppl(a) - ppl(b); spans: SPANS
    ("plain RoPE - zero-shot YaRN, whole page", "plain RoPE", "zero-shot YaRN", "sL"),
    ("zero-shot YaRN - fine-tuned, whole page", "zero-shot YaRN", "YaRN fine-tuned", "sL"),
    ("zero-shot YaRN - plain RoPE, first L (the short-context cost)", "zero-shot YaRN", "plain RoPE", "L"),
    ("fine-tuned - plain RoPE, first L", "YaRN fine-tuned", "plain RoPE", "L"),
)
# The other zero-shot way (Gemma 3's: linear interpolation on the global layers only)
ZERO_SHOT_COMPARISONS = (
    ("plain RoPE - zero-shot linear PI (global layers), whole page", "plain RoPE", LINEAR_GLOBAL, "sL"),
    ("zero-shot linear PI (global layers) - zero-shot YaRN, whole page", LINEAR_GLOBAL, "zero-shot YaRN", "sL"),
    ("zero-shot linear PI (global layers) - plain RoPE, first L (the short-context cost)", LINEAR_GLOBAL,
     "plain RoPE", "L"),
)
# Chapter 9's all-global control read on the same pages: does zero-shot YaRN help a model whose
# every layer meets the new distances?
CONTROL_COMPARISONS = (
    ("all-global control: plain RoPE - zero-shot YaRN, whole page", CONTROL_PREFIX + "plain RoPE",
     CONTROL_PREFIX + "zero-shot YaRN", "sL"),
    ("all-global control: zero-shot YaRN - plain RoPE, first L (the short-context cost)",
     CONTROL_PREFIX + "zero-shot YaRN", CONTROL_PREFIX + "plain RoPE", "L"),
)
# The fine-tune against its control (Model B continued at L with plain RoPE, the same steps and
# tokens) and against zero-shot YaRN, inside L and past it: the extension's gain told apart
# from more training
FINETUNE_COMPARISONS = (
    (f"{CONTINUED} - fine-tuned, whole page", CONTINUED, "YaRN fine-tuned", "sL"),
    (f"{CONTINUED} - fine-tuned, first L/4", CONTINUED, "YaRN fine-tuned", "L/4"),
    (f"{CONTINUED} - fine-tuned, first L", CONTINUED, "YaRN fine-tuned", "L"),
    (f"{CONTINUED} - fine-tuned, past L", CONTINUED, "YaRN fine-tuned", "past L"),
    ("zero-shot YaRN - fine-tuned, first L/4", "zero-shot YaRN", "YaRN fine-tuned", "L/4"),
    ("zero-shot YaRN - fine-tuned, first L", "zero-shot YaRN", "YaRN fine-tuned", "L"),
    ("zero-shot YaRN - fine-tuned, past L", "zero-shot YaRN", "YaRN fine-tuned", "past L"),
    (f"{CONTINUED} - plain RoPE, first L (more training alone)", CONTINUED, "plain RoPE", "L"),
)
SPANS = ("sL", "L", "L/4", "past L")  # the whole page, its first L or L/4 tokens, its tokens past L


def _span(span: str, L: int, sL: int) -> tuple[int, int]:
    """Token range [a, b) of a page of sL tokens that `span` names."""
    spans = {"sL": (0, sL), "L": (0, L), "L/4": (0, L // 4), "past L": (L, sL)}
    if span not in spans:
        raise ValueError(f"span {span!r} is not allowed; allowed: {', '.join(SPANS)}")
    return spans[span]


def extension_intervals(nll: dict, L: int, n_boot: int = 2000, comparisons=COMPARISONS) -> pd.DataFrame:
    """The perplexity differences the chapter states, each with a paired bootstrap 95%
    interval over pages (the blog's intervals: 14.6 [14.1, 15.1] and 2.2 [2.1, 2.3]). Each
    of `comparisons` is (text, model a, model b, span): ppl(a) - ppl(b) over the span's tokens
    of every page (`SPANS`; the models are keys of `nll` {name: (n, T) losses}). Columns
    difference, positions ("a-b", tokens a to b - 1), tokens, ppl a, ppl b, a - b, 95% lo, 95% hi."""
    sL = min(v.shape[1] for v in nll.values())
    missing = sorted({m for _, a, b, _ in comparisons for m in (a, b)} - set(nll))
    if missing:
        raise ValueError(f"comparisons name models {missing} that nll lacks; it has {sorted(nll)}")
    rows = []
    for text, a, b, span in comparisons:
        lo, hi = _span(span, L, sL)
        r = paired_bootstrap(nll[a][:, lo:hi].mean(1), nll[b][:, lo:hi].mean(1), n_boot=n_boot, transform=np.exp)
        rows.append({"difference": text, "positions": f"{lo}-{hi}", "tokens": hi - lo,
                     "ppl a": float(np.exp(nll[a][:, lo:hi].mean())), "ppl b": float(np.exp(nll[b][:, lo:hi].mean())),
                     "a - b": r["diff"], "95% lo": r["lo"], "95% hi": r["hi"]})
    return pd.DataFrame(rows)


def zero_shot_table(nll: dict, L: int) -> pd.DataFrame:
    """Perplexity of every model {name: (n, T) losses} on the first L tokens of the pages, on
    the whole page (sL tokens) and past L, and the whole page over the first L (the rise past
    L; the blog's plain RoPE: 37.7 / 20.6). Rows: model."""
    sL = min(v.shape[1] for v in nll.values())
    rows = {}
    for name, v in nll.items():
        first, whole, past = (float(np.exp(v[:, a:b].mean())) for a, b in ((0, L), (0, sL), (L, sL)))
        rows[name] = {"ppl, first L": first, "ppl, whole page": whole, "ppl, past L": past,
                      "whole page / first L": whole / first}
    return pd.DataFrame(rows).T.rename_axis("model")


def long_docs_at(budget: Budget, length: int) -> torch.Tensor:
    """Held-out pages of at least `length` + 1 tokens from their start: the budget's
    n_long_docs of them, or every such page when fewer exist."""
    p = budget.pair
    tok = get_tokenizer(p.tokenizer)
    have = sum(len(tok.encode(d.text)) > length for d in get_corpus(p.corpus).split("eval"))
    if have < 8:
        raise ValueError(f"only {have} held-out documents have {length + 1} tokens; at least 8 are needed")
    return eval_windows(budget, length=length, n=min(p.n_long_docs, have))


def breakdown_models(parent: Run, finetuned: Run, factors) -> dict:
    """{"plain RoPE", "zero-shot YaRN x{f}" for f in factors, "YaRN fine-tuned"}: `parent`
    (a Model B run) without and with YaRN of each factor, and its YaRN fine-tune."""
    b = parent.load_model()
    L = parent.config.model["max_seq_len"]
    out = {"plain RoPE": b}
    for f in factors:
        out[f"zero-shot YaRN x{f}"] = with_yarn(b, {"type": "yarn", "factor": float(f), "original_max_seq_len": L})
    out["YaRN fine-tuned"] = finetuned.load_model()
    return out


def breakdown_nlls(families: dict, docs: torch.Tensor, factors) -> dict[str, np.ndarray]:
    """Per-token losses on `docs` of every model of every family {family: (parent run, its
    YaRN fine-tune)}: plain RoPE, zero-shot YaRN at each of `factors`, and the fine-tune
    (`breakdown_models`), keyed "<family>: <model>" (Gemma blog, "Position at longer
    contexts", read for Model B and its all-global control)."""
    out = {}
    for fam, (parent, finetuned) in families.items():
        for name, m in breakdown_models(parent, finetuned, factors).items():
            out[f"{fam}: {name}"] = page_nll(m, docs)
    return out


def breakdown_table(nll: dict, L: int, multiples=(1, 4, 8)) -> pd.DataFrame:
    """Page perplexity at k*L for every model {name: (n, T) losses} and k in `multiples`, with
    the rise past L as the ratio ppl(kL) / ppl(L) (Gemma blog: plain RoPE 20.6 at L, 37.7 at
    4L). Rows: model; a length a model's pages do not reach is NaN."""
    rows = {}
    for name, v in nll.items():
        row = {f"ppl at {k}L": float(np.exp(v[:, :k * L].mean())) if k * L <= v.shape[1] else np.nan
               for k in multiples}
        for k in multiples[1:]:
            row[f"ppl {k}L / ppl L"] = row[f"ppl at {k}L"] / row[f"ppl at {multiples[0]}L"]
        rows[name] = row
    return pd.DataFrame(rows).T.rename_axis("model")


def breakdown_intervals(nll: dict, L: int, k: int, plain: str, zero_shot: str, tuned: str | None = None,
                        n_boot: int = 2000) -> pd.DataFrame:
    """The blog's ordering at k*L as paired bootstrap intervals over pages (log-perplexity,
    i.e. mean loss per token, so the rise and its recovery add up):
    - the rise: plain RoPE's page loss at kL minus its loss on the first L tokens;
    - what zero-shot YaRN recovers of it (plain - YaRN at kL), and that share of the rise;
    - what the fine-tune adds (YaRN - fine-tuned at kL), when `tuned` is given."""
    n = k * L
    page = {m: nll[m][:, :n].mean(1) for m in (plain, zero_shot, tuned) if m}
    rise = paired_bootstrap(page[plain], nll[plain][:, :L].mean(1), n_boot=n_boot)
    rec = paired_bootstrap(page[plain], page[zero_shot], n_boot=n_boot)
    rows = [{"quantity": f"rise past L: {plain} at {k}L - at L", **rise},
            {"quantity": f"recovered by {zero_shot} at {k}L", **rec}]
    if tuned:
        rows.append({"quantity": f"{tuned} beyond {zero_shot} at {k}L",
                     **paired_bootstrap(page[zero_shot], page[tuned], n_boot=n_boot)})
    out = pd.DataFrame(rows).set_index("quantity").rename(columns={"diff": "nats/token", "lo": "95% lo",
                                                                    "hi": "95% hi"})
    out["share of the rise"] = out["nats/token"] / rise["diff"] if rise["diff"] > 0 else np.nan
    return out
