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
from nblib.data import corpus_identity, get_corpus, get_tokenizer, make_stream
from nblib.metrics.probes import token_nll
from nblib.models import build_model
from nblib.store.runstore import Run, RunConfig, RunStore
from nblib.training.runner import get_or_run_many
from nblib.training.schedules import wsd_stable_steps

MODELS = {"A": ("gpt2", "Model A (GPT-2)"), "B": ("gemma3", "Model B (Gemma 3-style)")}
CONTROL_LABEL = "Model B, every layer global"  # chapter 9's all-global control


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


def shape_parameter_table(shapes: dict) -> pd.DataFrame:
    """`parameter_table` of models built from their shapes {name: (family, shape dict)} on
    the meta device, so even the blog's full-size models are counted without allocating
    (chapter 6's "Where the parameters are")."""
    with torch.device("meta"):
        models = {name: build_model(family, shape) for name, (family, shape) in shapes.items()}
    return parameter_table(models)


def untrained_model(budget: Budget, key: str = "B", seed: int = 0) -> torch.nn.Module:
    """Model `key` ("A" or "B") of the budget's pair at initialisation, in eval mode, built
    right after `torch.manual_seed(seed)`: the control that shows what random weights give
    (chapter 8's band weights of an untrained Model B)."""
    if key not in MODELS:
        raise ValueError(f"model {key!r} is not allowed; allowed: {sorted(MODELS)}")
    shape = budget.pair.model_a if key == "A" else budget.pair.model_b
    torch.manual_seed(seed)
    return build_model(MODELS[key][0], dict(shape)).eval()


def check_fractions(fractions) -> tuple[float, ...]:
    """Shorter training budgets as fractions of the pair's: distinct numbers in (0, 1), sorted."""
    fr = tuple(float(f) for f in fractions)
    if not fr or any(not 0 < f < 1 for f in fr) or len(set(fr)) != len(fr):
        raise ValueError(f"fractions={fractions!r} is not allowed; allowed: distinct numbers in (0, 1)")
    return tuple(sorted(fr))


def branch_steps(total_steps: int, schedule: dict, fraction: float, parent_steps: int | None = None) -> tuple[int, int]:
    """(total steps, decay start) of the WSD run with `fraction` of a WSD run's `total_steps`
    and the same `schedule`; its decay must start inside the stable phase of the run it
    branches from (`parent_steps` long, default `total_steps`), where the two runs are one
    (chapter 6's training-length ladder branches there)."""
    total = max(2, int(round(total_steps * fraction)))
    start = wsd_stable_steps(total, schedule["decay_frac"])
    parent = total_steps if parent_steps is None else parent_steps
    warmup, stable = schedule.get("warmup_steps", 0), wsd_stable_steps(parent, schedule["decay_frac"])
    if not (max(warmup, 1) <= start < stable):
        raise ValueError(f"fraction {fraction} puts the decay start at step {start}, outside steps {max(warmup, 1)}-"
                         f"{stable - 1} (after warmup, before the parent run's decay): choose a fraction between "
                         "those of the warmup and of the parent run")
    return total, start


def pair_configs(budget: Budget, seed: int = 0) -> dict[str, RunConfig]:
    """{"A": RunConfig, "B": RunConfig}: the same data, schedule and tokens for both models.
    Each keeps its optimizer state at the steps where the shorter budgets of
    `budget.pair.length_fractions` branch off (`nblib.gemma.training_length`)."""
    p = budget.pair
    data = {"corpus": p.corpus, "corpus_id": corpus_identity(p.corpus), "tokenizer": p.tokenizer,
            "split": "train", "stream": "packed", "seq_len": p.seq_len}
    schedule = {"kind": "wsd", "lr": p.lr, "warmup_steps": p.warmup_steps, "decay_frac": p.decay_frac,
                "final_lr_frac": 0.1}
    every = p.n_tokens // p.n_checkpoints
    total = max(1, int(round(p.n_tokens / (p.batch_size * p.seq_len))))
    branch_at = tuple(branch_steps(total, schedule, f)[1] for f in check_fractions(p.length_fractions))
    out = {}
    for key, (family, label) in MODELS.items():
        shape = p.model_a if key == "A" else p.model_b
        out[key] = RunConfig(model={"family": family, **shape}, data=data, schedule=schedule, n_tokens=p.n_tokens,
                             batch_size=p.batch_size, seed=seed, budget=budget.name, label=label,
                             meta={"pair": key}, ckpt_every_tokens=every, ckpt_steps=branch_at,
                             keep_optimizer="all")
    return out


def control_fractions(budget: Budget) -> tuple[float, ...]:
    """The shorter budgets of the all-global control's ladder: those of
    `budget.pair.length_fractions` below `budget.pair.control_fraction`."""
    cf = budget.pair.control_fraction
    if not 0 < cf <= 1:
        raise ValueError(f"control_fraction={cf!r} is not allowed; allowed: a number in (0, 1]")
    return tuple(f for f in check_fractions(budget.pair.length_fractions) if f < cf)


def all_global_config(budget: Budget, seed: int = 0) -> RunConfig:
    """Model B with every layer global (`global_every=1`, so no sliding window anywhere) and
    everything else as Model B's run: the control that asks whether plain RoPE breaks past
    L once every layer sees every distance (Gemma blog, "Position at longer contexts"). It
    trains on `budget.pair.control_fraction` of the pair's tokens, as a WSD run with Model
    B's schedule (so at 0.5 it is the all-global twin of Model B's 0.5 branch), and keeps
    optimizer state where its own shorter budgets branch off (`ladder_configs`)."""
    b = pair_configs(budget, seed)["B"]
    fractions, cf = control_fractions(budget), budget.pair.control_fraction
    total = b.total_steps if cf == 1 else branch_steps(b.total_steps, b.schedule, cf)[0]
    branch_at = tuple(branch_steps(b.total_steps, b.schedule, f, parent_steps=total)[1]
                      for f in fractions)
    return RunConfig(model={**b.model, "global_every": 1}, data=b.data, schedule=b.schedule,
                     n_tokens=total * b.tokens_per_step, batch_size=b.batch_size, seed=seed, budget=budget.name,
                     label=CONTROL_LABEL, meta={"pair": "B-global", "length_fraction": cf},
                     ckpt_every_tokens=b.ckpt_every_tokens, ckpt_steps=branch_at,
                     keep_optimizer="all" if branch_at else "last")


def ladder_configs(budget: Budget, seed: int = 0, fractions=None, models=("A", "B")) -> dict[tuple[str, float], RunConfig]:
    """{(model key, fraction): RunConfig}: each model of `models` ("A", "B", "B-global")
    trained on `fraction` of the pair's tokens, a WSD decay branched from that model's run at
    its decay start. The all-global control ("B-global") branches only below its own
    `control_fraction` (default: `control_fractions`)."""
    parents = {**pair_configs(budget, seed), "B-global": all_global_config(budget, seed)}
    labels = {**{k: label for k, (_, label) in MODELS.items()}, "B-global": CONTROL_LABEL}
    pair_steps = parents["B"].total_steps
    out = {}
    for key in models:
        if key not in parents:
            raise ValueError(f"model {key!r} is not allowed; allowed: {sorted(parents)}")
        parent = parents[key]
        default = control_fractions(budget) if key == "B-global" else budget.pair.length_fractions
        for f in check_fractions(default if fractions is None else fractions):
            total, start = branch_steps(pair_steps, parent.schedule, f, parent_steps=parent.total_steps)
            if start not in parent.ckpt_steps:
                raise ValueError(f"the {key} run keeps no checkpoint at step {start} for fraction {f}: "
                                 "its config keeps one at every fraction of its ladder")
            out[(key, f)] = RunConfig(
                model=parent.model, data=parent.data, schedule=parent.schedule,
                n_tokens=total * parent.tokens_per_step, batch_size=parent.batch_size, seed=seed,
                budget=budget.name, init={"run": parent.hash, "step": start, "mode": "continue"},
                label=f"{labels[key]}, {f:g} of the tokens", meta={"pair": key, "length_fraction": f})
    return out


def part2_configs(budget: Budget, seed: int = 0) -> list[RunConfig]:
    """Every pre-training run of Part 2: Models A and B, their shorter-budget branches (chapter
    6's training-length ladder) and the all-global Model B with its own shorter budgets
    (chapter 9's control)."""
    return [*pair_configs(budget, seed).values(), *ladder_configs(budget, seed).values(),
            all_global_config(budget, seed), *ladder_configs(budget, seed, models=("B-global",)).values()]


def train_pair(store: RunStore, budget: Budget, seed: int = 0, workers: int | None = None) -> dict[str, Run]:
    """Models A and B, trained now where the store lacks them, in one pass with every other
    Part 2 run (`part2_configs`), so the worker processes (one per core) stay busy."""
    cfgs = pair_configs(budget, seed)
    get_or_run_many(store, part2_configs(budget, seed), workers=workers, desc="Part 2 runs")
    return {k: store.run(c) for k, c in cfgs.items()}


def data_format(budget: Budget, seed: int = 0, n_steps: int = 50) -> pd.Series:
    """How the pair's training text is laid out, for comparison with the blog's (one
    <|endoftext|> token between pages, windows cut across page boundaries, attention free to
    cross them): the separator and where it sits, whether attention crosses documents, and,
    measured over the first `n_steps` batches, the share of training windows holding a
    separator and the separators per window; the median training document in tokens."""
    cfg = pair_configs(budget, seed)["A"]
    tok = get_tokenizer(cfg.data["tokenizer"])
    stream = make_stream(cfg.data, seed)
    x = torch.cat([stream.batch(s, cfg.batch_size)[0] for s in range(n_steps)])
    seps = (x == tok.eos_id).sum(1)
    lengths = stream.tokens.lengths
    return pd.Series({
        "separator": f"end-of-document token (id {tok.eos_id}) after every document",
        "windows cut across documents": cfg.data["stream"] == "packed",
        "attention crosses documents": not cfg.data.get("doc_isolation", False),
        "training context L": cfg.seq_len,
        "median document (tokens)": float(np.median(lengths[lengths > 0])),
        "windows with a separator": float((seps > 0).float().mean()),
        "separators per window": float(seps.float().mean()),
        "windows measured": int(x.size(0)),
    }, name=budget.name)


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


def heldout_losses(models: dict, windows: torch.Tensor) -> dict[str, np.ndarray]:
    """{key: `heldout_loss` per window} for every model {key: model}: the paired comparison of
    the final checkpoints (Gemma blog, "The two models": the tie)."""
    return {k: heldout_loss(m, windows) for k, m in models.items()}


def checkpoint_losses(run: Run, windows: torch.Tensor) -> pd.DataFrame:
    """Held-out loss at every kept checkpoint of `run` (cached in the run folder per checkpoint)."""
    key = f"heldout_{windows.shape[0]}x{windows.shape[1]}_{tensor_digest(windows)}"
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


def training_cost(runs: dict[str, Run]) -> pd.DataFrame:
    """What each run {label: Run} cost to train here: the steps and tokens it trained itself
    (a branch's start from its parent's checkpoint excluded), the wall time its processes
    logged (summed over resumes: each process restarts its clock), and tokens per second.
    Rows are indexed by label; a run trained elsewhere and copied in reports its own log."""
    rows = {}
    for label, run in runs.items():
        m = run.metrics()
        m = m[m["kind"] == "train"]
        start = run.config.init["step"] if run.config.init and run.config.init.get("mode") == "continue" else 0
        clock = m["elapsed_s"].to_numpy(float)
        restarts = np.r_[np.flatnonzero(np.diff(clock) <= 0), len(clock) - 1]  # last record of each process
        wall = float(clock[restarts].sum())
        steps = int(m["step"].iloc[-1]) - start
        rows[label] = {"steps trained": steps, "tokens trained": steps * run.config.tokens_per_step,
                       "wall (min)": wall / 60, "tokens/s": steps * run.config.tokens_per_step / wall}
    return pd.DataFrame(rows).T.rename_axis("run")


def tensor_digest(x: torch.Tensor) -> str:
    """12 hex digits of the sha256 of a tensor's bytes: names cached evaluations by their inputs."""
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
