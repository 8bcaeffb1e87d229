"""After LCCP: the 4x context extension (LCCP paper §5.2, App. A.3, Fig. 8a, Fig. 13) and
long-context SFT (§5.3, App. C.3, Fig. 8b, Fig. 14, Fig. 15) of the S5 Constant trajectory's
points, each from the Raw checkpoint and from Last4, and their evaluations.

    starts = start_points(budget, run, points)                 # (Dl/N, Raw|Last4) -> init
    ext = get_or_run_many(store, [extension_config(budget, scale, run.config, s) for s in starts])
    ruler_ext = ruler_after(budget, dict(zip(keys, ext)), suite) # RULER at the extended length
    sft = ... sft_config(...) for every start and data seed      # nblib.lccp.sft
    scores = benchmarks_after(budget, sft_runs, benchmark_suite(budget))

One fixed recipe for every starting point, as the paper applies "the same 128K
context-extension procedure" and "the same 2.10B-token SFT recipe" to each checkpoint:
- extension: ABF from the LCCP RoPE base to the next (5e5 -> 5e6 at full), the budget's
  extension mixture with documents isolated (App. A.3: span-based attention), LR from the
  LCCP constant rate linearly down to a hundredth of it (§5.2), and 2.10B tokens at S5
  (2.56N) scaled like every other token multiple of the budget;
- SFT: nblib.lccp.sft (answer-only loss, packed with per-example attention, linear decay,
  three data seeds; Fig. 15's doubled budget with one seed).
Every evaluation is cached in the evaluated run's folder (Run.memo), keyed by its inputs.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd

from nblib.budgets import PAPER_N, Budget
from nblib.data import get_tokenizer
from nblib.evals import long_benchmarks as LB
from nblib.evals import ruler as R
from nblib.lccp import downstream, experiments, grid
from nblib.lccp.sft import PAPER_SFT_SEEDS, build_sft_mixture, default_sft_tokens, sft_config
from nblib.store.runstore import Run, RunConfig, RunStore
from nblib.training.runner import MemoJob, memo_many

PAPER_EXT_TOKENS = 2.10e9  # §5.2: the 128K extension stage at S5
PROTOCOLS = ("Raw", "Last4")


def post_training_points(budget: Budget, points) -> list:
    """The trajectory points that go on to the extension and SFT: all of them (the paper), or
    `budget.post_training_points` evenly spaced ones, the first and last always among them."""
    points = list(points)
    k = budget.post_training_points
    if k is None or k >= len(points):
        return points
    if k < 2:
        raise ValueError(f"post_training_points={k!r} is not allowed; allowed: None or an int >= 2")
    return [points[i] for i in sorted(set(np.linspace(0, len(points) - 1, k).round().astype(int)))]


def extended_ruler_suite(budget: Budget, seed: int = 0) -> dict:
    """RULER at the extended length (`extended_ruler_len`), `post_training_samples` per subtask
    (the paper: 100 at 128K against 500 at 32K)."""
    return downstream.ruler_suite(budget, seed=seed, length=extended_ruler_len(budget), n=budget.post_training_samples)


def extended_code_needle_suite(budget: Budget, seed: int = 0) -> dict:
    """RULER's single-needle subtasks written as code (`downstream.code_needle_suite`) at the
    extended length, `post_training_samples` per subtask: §5.2's needle test in the form a
    model trained only on source code can answer by copying."""
    return downstream.code_needle_suite(budget, seed=seed, length=extended_ruler_len(budget),
                                        n=budget.post_training_samples)


def start_points(budget: Budget, run: Run, points) -> list[dict]:
    """The starting checkpoints of §5.2-5.3: for every Dl/N point, the Raw checkpoint and
    Last4 (the uniform average of four checkpoints `last4_gap` apart, App. B.1)."""
    out = []
    for dl in points:
        raw = experiments.step_at(run, dl)
        last4 = experiments.last4_steps(run, dl, budget.s5_last4_gap)
        out.append({"dl": dl, "protocol": "Raw", "step": raw, "average_steps": None})
        out.append({"dl": dl, "protocol": "Last4", "step": last4[-1], "average_steps": last4})
    return out


def extension_tokens(budget: Budget, scale: str) -> int:
    """§5.2's 2.10B extension tokens at S5 (2.56N), scaled by the budget's `multiple_scale`,
    and at least 8 optimizer steps so the recipe is a training stage at every budget."""
    per_step = _ext_batch(budget, scale) * budget.ext_seq_len
    tokens = budget.n_tokens(scale, PAPER_EXT_TOKENS / PAPER_N["S5"] * budget.multiple_scale)
    return max(tokens, 8 * per_step)


def _ext_batch(budget: Budget, scale: str) -> int:
    # tokens per step kept from LCCP where the batch allows: sequences 4x as long, a quarter as many
    return max(1, budget.scale(scale).batch_long * budget.long_seq_len // budget.ext_seq_len)


def extension_config(budget: Budget, scale: str, parent: RunConfig, start: dict) -> RunConfig:
    """The fixed context-extension recipe (§5.2, App. A.3) from one starting point."""
    lr0 = budget.lccp_lr(scale)  # the LCCP constant rate (App. A.3: lr_4K / 10)
    init = {"run": parent.hash, "step": int(start["step"]), "mode": "weights", "rope_base": budget.rope_bases[2]}
    if start["average_steps"]:
        init["average_steps"] = [int(s) for s in start["average_steps"]]
    return RunConfig(
        model=dict(parent.model), data=grid.data_config(budget, "ext"),
        schedule={"kind": "linear_decay", "lr": lr0, "final_lr_frac": 0.01},
        n_tokens=extension_tokens(budget, scale), batch_size=_ext_batch(budget, scale), seed=0, budget=budget.name,
        init=init, precision=budget.run_precision, label=f"{scale} ext x{budget.ext_seq_len // budget.long_seq_len} <- Dl={start['dl']}{budget.unit} {start['protocol']}",
        meta={"scale": scale, "stage": "extension", "dl_mult": start["dl"], "protocol": start["protocol"]})


def sft_start_configs(budget: Budget, scale: str, parent: RunConfig, starts: list[dict], seeds=PAPER_SFT_SEEDS,
                      budget_factor: float = 1.0) -> list[tuple[dict, int, RunConfig]]:
    """(start, data seed, SFT config) for every starting point and seed: the same recipe
    everywhere (§5.3); `budget_factor` 2 with one seed is Fig. 15's doubled-budget check."""
    mixture = build_sft_mixture(budget)
    n = int(round(default_sft_tokens(budget, scale) * budget_factor))
    return [(s, seed, sft_config(budget, scale, parent, s["step"], seed, n, mixture, s["average_steps"]))
            for s in starts for seed in seeds]


def _key(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def extended_ruler_len(budget: Budget) -> int:
    """RULER's prompt length after the extension: the LCCP-stage RULER length times the
    extension factor (§5.2: RULER-32K before, RULER-128K after)."""
    return (budget.ruler_len or budget.long_seq_len) * budget.ext_seq_len // budget.long_seq_len


def benchmark_suite(budget: Budget, length: int | None = None, seed: int = 0) -> dict:
    """The offline LongBench / GraphWalks / LongReason / BABILong tasks (nblib.evals.long_benchmarks)
    at `length` tokens (default: the LCCP-stage RULER length, which is the SFT context unless
    the budget sets `ruler_len`), `post_training_samples` each (default `ruler_samples`);
    {task: samples | why it does not fit}."""
    return downstream.task_suite(budget, LB.make_task, LB.TASKS, length or budget.ruler_len or budget.long_seq_len,
                                 seed, budget.post_training_samples)


def _final_task_scores(run: Run, scorer, suite: dict, tokenizer: str, max_new: int | None) -> dict:
    """`scorer(samples, greedy predictions)` of the run's final model on every task that fits."""
    model, tok = run.load_model(), get_tokenizer(tokenizer)
    return {t: scorer(v, R.predict(model, tok, v, max_new)) if isinstance(v, list) else float("nan")
            for t, v in suite.items()}


def _final_needle_scores(run: Run, suite: dict, tokenizer: str, max_new: int | None) -> dict:
    """`downstream.needle_scores` of the run's final model."""
    return downstream.needle_scores(run.load_model(), get_tokenizer(tokenizer), suite, max_new)


def _scores(budget: Budget, runs: list, suite: dict, tag: str, fn, *args, desc: str) -> list[dict]:
    """Each final model's scores on a suite, `fn(run, *args, suite, tokenizer, max_new)`,
    cached in its run folder under `tag` and the suite's key, and computed in parallel worker
    processes (`runner.memo_many`, its progress bar named `desc`)."""
    key = _key({t: [s.text for s in v] if isinstance(v, list) else v for t, v in suite.items()}
               | {"_max_new": budget.ruler_max_new})
    if not runs:
        return []
    jobs = [MemoJob(r.hash, f"{tag}-{key}", (r.config.total_steps,), fn,
                    (*args, suite, budget.tokenizer, budget.ruler_max_new)) for r in runs]
    return memo_many(RunStore(runs[0].path.parent), jobs, desc=desc)


def ruler_after(budget: Budget, runs: dict, suite: dict) -> pd.DataFrame:
    """RULER of each extended model (Fig. 8a, Fig. 13): runs {(dl, protocol): Run};
    long form, columns dl, protocol, task, score."""
    rows = []
    for (dl, protocol), res in zip(runs, _scores(budget, list(runs.values()), suite, "ruler-final",
                                                 _final_task_scores, R.score_task, desc="RULER after the extension")):
        rows += [{"dl": dl, "protocol": protocol, "task": t, "score": res[t]} for t in suite]
    return pd.DataFrame(rows)


def needles_after(budget: Budget, runs: dict, suite: dict) -> pd.DataFrame:
    """The code-form single needles of each extended model (Fig. 13's needle test, in the
    measures of `downstream.needles_along_trajectory`): runs {(dl, protocol): Run}; columns
    dl, protocol, task and `downstream.NEEDLE_COLUMNS`."""
    rows = []
    for (dl, protocol), res in zip(runs, _scores(budget, list(runs.values()), suite, "needles-final",
                                                 _final_needle_scores, desc="code needles after the extension")):
        rows += downstream.needle_rows(res, dl=dl, protocol=protocol)
    return pd.DataFrame(rows)


def benchmarks_after(budget: Budget, runs: dict, suite: dict, desc: str = "benchmarks after SFT") -> pd.DataFrame:
    """Each SFT model's score on every offline benchmark task (Fig. 14): runs
    {(dl, protocol, seed): Run}; long form, columns dl, protocol, seed, benchmark, task, score.
    `desc` names the progress bar (one per call, so two calls in a cell show two names)."""
    bench_of = {t: b for b, ts in LB.BENCHMARKS.items() for t in ts}
    rows = []
    for (dl, protocol, seed), res in zip(runs, _scores(budget, list(runs.values()), suite, "benchmarks-final",
                                                       _final_task_scores, LB.score_task, desc=desc)):
        rows += [{"dl": dl, "protocol": protocol, "seed": seed, "benchmark": bench_of[t], "task": t,
                  "score": res[t]} for t in suite]
    return pd.DataFrame(rows)


def model_averages(scores: pd.DataFrame) -> pd.DataFrame:
    """Per SFT model (Dl/N, protocol, seed): each benchmark's mean over its tasks and their
    equal-weight average (§5.3, Fig. 8b; `long_benchmarks.benchmark_average`). Where a
    budget's context fits only some benchmarks, the average is over those, and the column
    "benchmarks" says how many of the four it covers."""
    rows = []
    for (dl, protocol, seed), g in scores.dropna(subset=["score"]).groupby(["dl", "protocol", "seed"]):
        per_bench = g.groupby("benchmark")["score"].mean()
        rows.append({"dl": dl, "protocol": protocol, "seed": seed, **per_bench.to_dict(),
                     "average": float(per_bench.mean()), "benchmarks": len(per_bench)})
    return pd.DataFrame(rows).set_index(["dl", "protocol", "seed"]) if rows else pd.DataFrame()


def sft_average(scores: pd.DataFrame) -> pd.DataFrame:
    """Fig. 8b: per (Dl/N, protocol), the benchmark average's mean, min and max over the data
    seeds (the paper's shaded min-max range)."""
    per_model = model_averages(scores)
    if per_model.empty:
        return pd.DataFrame(columns=["mean", "min", "max"])
    return per_model.groupby(["dl", "protocol"])["average"].agg(["mean", "min", "max"])
