"""Downstream validation along the S5 Constant trajectory (LCCP paper §5, App. D.2-D.3).

    suite = ruler_suite(budget)                          # {task: samples | reason it does not fit}
    scores = ruler_along_trajectory(budget, run, suite)  # Raw and Last4 at Fig. 8a's Dl/N points
    heads = retrieval_along_trajectory(budget, run, suite)

Every model's RULER predictions are cached in the run folder, keyed by the checkpoint(s)
and the suite, so re-running the chapter evaluates nothing new.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd

from nblib.budgets import Budget
from nblib.data import get_corpus, get_tokenizer
from nblib.evals import ruler as R
from nblib.lccp import experiments
from nblib.lccp.merge import merge
from nblib.metrics.attention_maps import retrieval_head_scores
from nblib.store.runstore import Run

PAPER_POINTS = (10, 20, 40, 60, 80, 100, 120)  # Dl/N of the checkpoints the paper extends (§5.2, Fig. 8a)


def trajectory_points(budget: Budget) -> list[float]:
    """Fig. 8a's Dl/N points scaled like every other multiple at this budget."""
    return [round(p * budget.multiple_scale, 6) for p in PAPER_POINTS]


def ruler_suite(budget: Budget, seed: int = 0) -> dict:
    """{task: list of RULER samples, or the reason it does not fit} at the budget's RULER length
    (the LCCP context unless the budget says otherwise), haystacks from the held-out corpus."""
    tok = get_tokenizer(budget.tokenizer)
    length = budget.ruler_len or budget.long_seq_len
    hay = [d.text for d in get_corpus(budget.corpus).split("eval")]
    out = {}
    for task in R.TASKS:
        try:
            out[task] = R.make_task(task, tok, length, budget.ruler_samples, seed=seed, haystack=hay)
        except ValueError as e:
            out[task] = str(e)
    return out


def _suite_key(suite: dict, max_new) -> str:
    blob = json.dumps({t: [s.text for s in v] if isinstance(v, list) else v for t, v in suite.items()} | {"_": max_new})
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def ruler_scores(model, tokenizer, suite: dict, max_new: int | None) -> dict:
    """{task: RULER score (x100)} of one model; NaN for a task that does not fit."""
    return {t: R.score_task(v, R.predict(model, tokenizer, v, max_new)) if isinstance(v, list) else float("nan")
            for t, v in suite.items()}


def ruler_along_trajectory(budget: Budget, run: Run, suite: dict, points=None) -> pd.DataFrame:
    """RULER of the Raw checkpoint and of Last4 at every point of the trajectory (Fig. 7, Fig. 12):
    long form, columns dl, protocol (Raw | Last4), task, score."""
    tok = get_tokenizer(budget.tokenizer)
    key = _suite_key(suite, budget.ruler_max_new)
    rows = []
    for dl in points or trajectory_points(budget):
        raw = experiments.step_at(run, dl)
        last4 = experiments.last4_steps(run, dl, budget.s5_ckpt_every)
        for protocol, steps in (("Raw", [raw]), ("Last4", last4)):
            def compute(steps=steps):
                if len(steps) == 1:
                    model = run.load_model(steps[0])
                else:
                    model = run.load_model(state_dict=merge("lastM", [run.checkpoint(s).weights for s in steps],
                                                            iterations=steps))
                return ruler_scores(model, tok, suite, budget.ruler_max_new)
            tag = "-".join(map(str, steps))
            res = run.memo(f"ruler-{key}-{protocol}-{tag}", compute, steps=steps)
            rows += [{"dl": dl, "protocol": protocol, "task": t, "score": res[t]} for t in suite]
    return pd.DataFrame(rows)


def retrieval_along_trajectory(budget: Budget, run: Run, suite: dict, task: str = "niah_single_2",
                               threshold: float = 0.1, points=None) -> pd.DataFrame:
    """Fig. 18 (App. D.3): retrieval-head scores of every head of the Raw checkpoints on the
    single-needle samples of `task`; columns dl, layer, head, score, tracked (the heads above
    `threshold` at the first point, followed along the trajectory)."""
    samples = suite[task]
    if not isinstance(samples, list):
        raise ValueError(f"{task} does not fit this budget's RULER length: {samples}")
    tok = get_tokenizer(budget.tokenizer)
    key = _suite_key({task: samples}, None)
    frames = []
    for dl in points or trajectory_points(budget):
        step = experiments.step_at(run, dl)
        res = run.memo(f"retrieval-{key}-{step}", lambda step=step: retrieval_head_scores(
            run.load_model(step), tok, samples).to_dict(orient="list"), steps=[step])
        frames.append(pd.DataFrame(res).assign(dl=dl))
    df = pd.concat(frames, ignore_index=True)
    first = df[df.dl == df.dl.min()]
    tracked = set(map(tuple, first.loc[first.score > threshold, ["layer", "head"]].to_numpy().tolist()))
    df["tracked"] = [(la, h) in tracked for la, h in zip(df["layer"], df["head"])]
    return df


def retrieval_summary(heads: pd.DataFrame, threshold: float = 0.1) -> pd.DataFrame:
    """Fig. 18's three series per Dl/N point: heads above `threshold`, the mean score of the
    heads tracked from the first point (NaN when none was above it), and the best head."""
    by = heads.groupby("dl").score
    return pd.DataFrame({"heads above threshold": by.apply(lambda s: int((s > threshold).sum())),
                         "tracked heads' mean": heads[heads.tracked].groupby("dl").score.mean(),
                         "best head": by.max()})


def table14(longppl: pd.DataFrame, ruler: pd.DataFrame) -> pd.DataFrame:
    """Table 14 (App. D.2): Last4 - Raw at every stage this book runs, per Dl/N point: LCCP
    LongPPL (lower is better) and mean RULER at the LCCP context (higher is better). The
    stages the book does not run yet (RULER after 4x extension, SFT) are NaN."""
    lp = longppl.pivot_table(index="dl_mult", columns="rule", values="longppl")  # experiments.trajectory_points
    ru = ruler.groupby(["dl", "protocol"]).score.mean().unstack()
    out = pd.DataFrame({"LCCP LongPPL": (lp["last4"] - lp["raw"]).to_numpy(),
                        "RULER at the LCCP context": (ru["Last4"] - ru["Raw"]).reindex(lp.index).to_numpy()},
                       index=pd.Index(lp.index, name="Dl/N"))
    out["RULER after 4x extension"] = np.nan
    out["SFT average"] = np.nan
    return out
