"""The Gemma blog's Models A and B as run-store runs (Gemma blog, "The two models").

    runs = train_pair(store, budget)          # trains what the store lacks, both in parallel
    models = pair_models(runs)                # {"A": GPT2, "B": Gemma3}, final weights
    windows = eval_windows(budget)            # held-out (n, L + 1) token windows

Model A is GPT-2 (learned positions, MHA, LayerNorm, GELU); Model B is Gemma 3-style (RoPE,
GQA 4:1, QK-norm, sandwich RMSNorm, GeGLU, a window of L/2 in 3 layers of 4). Both train on
the same token stream with the same optimizer, schedule and token budget
(`nblib.budgets.ModelPairSpec`), so chapters 6-10 compare architectures, not data. Chapters
7-10 read the runs chapter 6 trained and never retrain them.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import torch

from nblib.budgets import Budget
from nblib.data import corpus_identity, get_corpus, get_tokenizer
from nblib.metrics.probes import token_nll
from nblib.store.runstore import Run, RunConfig, RunStore
from nblib.training.runner import get_or_run_many

MODELS = {"A": ("gpt2", "Model A (GPT-2)"), "B": ("gemma3", "Model B (Gemma 3-style)")}


COMPONENTS = ("token embedding", "position embedding", "attention", "MLP", "norms")


def parameter_breakdown(model) -> dict[str, int]:
    """Parameters of a GPT2 or Gemma3 model by component (Gemma blog Part 1, "Counting
    parameters"): token embedding (tied with the output head, counted once), learned position
    embedding, attention projections, MLP, and norm gains (QK-norm included)."""
    out = dict.fromkeys(COMPONENTS, 0)
    for name, p in model.named_parameters():
        if name.startswith(("wte.", "embed.")):
            key = "token embedding"
        elif name.startswith("wpe."):
            key = "position embedding"
        elif "norm" in name or ".ln_" in name or name.startswith("ln_"):
            key = "norms"
        elif ".attn." in name:
            key = "attention"
        elif ".mlp." in name:
            key = "MLP"
        else:
            raise ValueError(f"parameter {name!r} fits no component of {COMPONENTS}")
        out[key] += p.numel()
    return out


def parameter_table(models: dict) -> pd.DataFrame:
    """One column per model ({name: model}), one row per component, then the embedding
    (token + position) and non-embedding subtotals and the total."""
    t = pd.DataFrame({k: parameter_breakdown(m) for k, m in models.items()})
    emb = t.loc[["token embedding", "position embedding"]].sum()
    t.loc["embedding"] = emb
    t.loc["non-embedding"] = t.loc[list(COMPONENTS)].sum() - emb
    t.loc["total"] = t.loc[list(COMPONENTS)].sum()
    return t.astype(int)


def pair_configs(budget: Budget, seed: int = 0) -> dict[str, RunConfig]:
    """{"A": RunConfig, "B": RunConfig}: the same data, schedule and tokens for both models."""
    p = budget.pair
    data = {"corpus": p.corpus, "corpus_id": corpus_identity(p.corpus), "tokenizer": p.tokenizer,
            "split": "train", "stream": "packed", "seq_len": p.seq_len}
    schedule = {"kind": "wsd", "lr": p.lr, "warmup_steps": p.warmup_steps, "decay_frac": p.decay_frac,
                "final_lr_frac": 0.1}
    every = p.n_tokens // p.n_checkpoints
    out = {}
    for key, (family, label) in MODELS.items():
        shape = p.model_a if key == "A" else p.model_b
        out[key] = RunConfig(model={"family": family, **shape}, data=data, schedule=schedule, n_tokens=p.n_tokens,
                             batch_size=p.batch_size, seed=seed, budget=budget.name, label=label,
                             meta={"pair": key}, ckpt_every_tokens=every, keep_optimizer="last")
    return out


def all_global_config(budget: Budget, seed: int = 0) -> RunConfig:
    """Model B with every layer global (`global_every=1`, so no sliding window anywhere) and
    everything else as Model B's run: the control that asks whether plain RoPE breaks past
    L once every layer sees every distance (Gemma blog, "Position at longer contexts")."""
    b = pair_configs(budget, seed)["B"]
    return RunConfig(model={**b.model, "global_every": 1}, data=b.data, schedule=b.schedule, n_tokens=b.n_tokens,
                     batch_size=b.batch_size, seed=seed, budget=budget.name, label="Model B, every layer global",
                     meta={"pair": "B-global"}, ckpt_every_tokens=b.ckpt_every_tokens, keep_optimizer="last")


def train_pair(store: RunStore, budget: Budget, seed: int = 0, workers: int | None = None) -> dict[str, Run]:
    """Models A and B, trained now where the store lacks them (one process per model)."""
    cfgs = pair_configs(budget, seed)
    runs = get_or_run_many(store, list(cfgs.values()), workers=workers, desc="models A and B")
    return dict(zip(cfgs, runs))


def pair_models(runs: dict[str, Run], step: int | str = "final") -> dict[str, torch.nn.Module]:
    """{key: model in eval mode} at checkpoint `step` of each run."""
    return {k: r.load_model(step) for k, r in runs.items()}


def eval_windows(budget: Budget, length: int | None = None, n: int | None = None) -> torch.Tensor:
    """(n, length + 1) held-out windows: the first length + 1 tokens of eval-split documents
    that have that many, spread evenly over the split (default: L + 1 tokens, the budget's
    n_eval_windows). Each window starts at its document's start, as the blog's page-level
    evaluation does."""
    p = budget.pair
    length = p.seq_len if length is None else int(length)
    n = p.n_eval_windows if n is None else int(n)
    tok = get_tokenizer(p.tokenizer)
    seqs = [ids[: length + 1] for ids in (tok.encode(d.text) for d in get_corpus(p.corpus).split("eval"))
            if len(ids) > length]
    if len(seqs) < n:
        raise ValueError(f"only {len(seqs)} held-out documents have {length + 1} tokens; asked for n={n}")
    pick = np.linspace(0, len(seqs) - 1, n).round().astype(int)
    return torch.from_numpy(np.stack([seqs[i] for i in pick]).astype(np.int64))


def heldout_loss(model, windows: torch.Tensor, batch: int = 16) -> np.ndarray:
    """Mean next-token NLL (nats) of each window: one value per window, for paired comparisons."""
    return np.concatenate([token_nll(model, windows[i:i + batch]).mean(1).numpy()
                           for i in range(0, len(windows), batch)])


def checkpoint_losses(run: Run, windows: torch.Tensor) -> pd.DataFrame:
    """Held-out loss at every kept checkpoint of `run` (cached in the run folder per checkpoint)."""
    key = f"heldout_{windows.shape[0]}x{windows.shape[1]}_{_digest(windows)}"
    rows = []
    for c in run.checkpoints():
        v = run.memo(f"{key}_step{c.step}", lambda c=c: {"loss": heldout_loss(run.load_model(c.step), windows).tolist()},
                     steps=[c.step])
        rows.append({"step": c.step, "tokens": c.tokens, "loss": float(np.mean(v["loss"]))})
    return pd.DataFrame(rows)


def loss_curves(runs: dict[str, Run], windows: torch.Tensor) -> pd.DataFrame:
    """Training loss (every logged step) and held-out loss (every checkpoint) of each model:
    columns model, kind ("train" | "held-out"), step, tokens, loss."""
    out = []
    for key, run in runs.items():
        m = run.metrics()
        train = m[m["kind"] == "train"][["step", "tokens", "loss"]].assign(kind="train")
        held = checkpoint_losses(run, windows).assign(kind="held-out")
        out.append(pd.concat([train, held]).assign(model=MODELS[key][1]))
    return pd.concat(out, ignore_index=True)[["model", "kind", "step", "tokens", "loss"]]


def training_speed(runs: dict[str, Run]) -> pd.DataFrame:
    """Tokens per second of each run over its logged training (wall time in metrics.jsonl;
    across a resume, only the intervals within one process count)."""
    rows = []
    for key, run in runs.items():
        m = run.metrics()
        m = m[m["kind"] == "train"]
        dt, dn = m["elapsed_s"].diff(), m["tokens"].diff()
        ok = dt > 0  # a resumed run restarts its clock: skip the record where it restarted
        rate = dn[ok].sum() / dt[ok].sum()
        rows.append({"model": MODELS[key][1], "tokens": int(m["tokens"].iloc[-1]), "tokens/s": float(rate)})
    return pd.DataFrame(rows)


def _digest(x: torch.Tensor) -> str:
    return hashlib.sha256(x.numpy().tobytes()).hexdigest()[:12]


SAMPLERS = {"greedy": dict(temperature=0.0), "top-k 20, T=0.8": dict(temperature=0.8, top_k=20),
            "nucleus p=0.9, T=0.8": dict(temperature=0.8, top_p=0.9)}


@torch.no_grad()
def generation_table(models: dict, tokenizer, prompt: torch.Tensor, n_new: int, seed: int = 0) -> pd.DataFrame:
    """Continue one prompt (1, T) with each model {key: model} and each sampler (`SAMPLERS`),
    through the KV cache, seeded; every row is also decoded without the cache (the whole
    sequence recomputed every step) from the same seed, and `same_without_cache` says whether
    the tokens agree. Columns: model, sampler, same_without_cache, continuation."""
    rows = []
    for key, model in models.items():
        for name, kw in SAMPLERS.items():
            out = [model.generate(prompt, n_new, use_cache=c, generator=torch.Generator().manual_seed(seed), **kw)
                   for c in (True, False)]
            rows.append({"model": MODELS[key][1], "sampler": name, "same_without_cache": bool(torch.equal(*out)),
                         "continuation": tokenizer.decode(out[0][0, prompt.size(1):])})
    return pd.DataFrame(rows)
