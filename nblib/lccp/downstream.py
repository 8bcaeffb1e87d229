"""Downstream validation along the S5 Constant trajectory (LCCP paper §5, App. D.2-D.3).

    suite = ruler_suite(budget)                          # {task: samples | reason it does not fit}
    scores = ruler_along_trajectory(budget, run, suite)  # Raw and Last4 at Fig. 8a's Dl/N points
    heads = retrieval_along_trajectory(budget, run, suite)

Every model's RULER predictions are cached in the run folder, keyed by the checkpoint(s)
and the suite, so re-running the chapter evaluates nothing new.
"""

from __future__ import annotations

import functools
import hashlib
import json

import numpy as np
import pandas as pd

from nblib.budgets import PAPER_POST_TRAINING_POINTS, Budget
from nblib.data import get_corpus, get_tokenizer
from nblib.evals import code_niah as CN
from nblib.evals import ruler as R
from nblib.lccp import experiments, grid
from nblib.lccp.merge import merge
from nblib.metrics.attention_maps import retrieval_head_scores
from nblib.store.runstore import Run, RunStore
from nblib.training.runner import MemoJob, memo_many

PAPER_POINTS = PAPER_POST_TRAINING_POINTS  # Dl/N of the checkpoints the paper extends (§5.2, Fig. 8a)


def trajectory_points(budget: Budget) -> list[float]:
    """Fig. 8a's Dl/N points scaled like every other multiple at this budget, those the S5
    trajectory reaches, and the trajectory's end where it runs past them (toy: to 150)."""
    pts = [round(p * budget.multiple_scale, 6) for p in PAPER_POINTS]
    pts = [p for p in pts if p <= budget.s5_trajectory + 1e-9]
    end = round(float(budget.s5_trajectory), 6)
    return pts + [end] if not pts or end > pts[-1] + 1e-9 else pts


def task_suite(budget: Budget, make_task, tasks, length: int, seed: int = 0, n: int | None = None) -> dict:
    """{task: samples, or the reason it does not fit} of every task of a generator module
    (`make_task(task, tokenizer, length, n, seed=, haystack=)`: RULER, or the offline long-context
    benchmarks) at `length` tokens, `n` each (default `ruler_samples`), haystacks from the
    held-out corpus."""
    tok = get_tokenizer(budget.tokenizer)
    hay = [d.text for d in get_corpus(budget.corpus).split("eval")]
    out = {}
    for task in tasks:
        try:
            out[task] = make_task(task, tok, length, n or budget.ruler_samples, seed=seed, haystack=hay)
        except ValueError as e:
            out[task] = str(e)
    return out


def ruler_suite(budget: Budget, seed: int = 0, length: int | None = None, n: int | None = None) -> dict:
    """{task: list of RULER samples, or the reason it does not fit} at `length` tokens (default:
    the budget's RULER length, the LCCP context unless the budget says otherwise), `n` per
    subtask (default `ruler_samples`)."""
    return task_suite(budget, R.make_task, R.TASKS, length or budget.ruler_len or budget.long_seq_len, seed, n)


def code_needle_suite(budget: Budget, seed: int = 0, length: int | None = None, n: int | None = None) -> dict:
    """RULER's single-needle subtasks written as code (`nblib.evals.code_niah`), sized like
    `ruler_suite`, with the budget's `needle_value_form` (RULER's values, or short ones sized
    to a small tokenizer): the form of §5.1's needle test that a model trained only on source
    code can answer by copying."""
    make = functools.partial(CN.make_task, value_form=budget.needle_value_form)
    return task_suite(budget, make, CN.TASKS, length or budget.ruler_len or budget.long_seq_len, seed, n)


def code_needle_suites(budget: Budget, points, seed: int = 0) -> dict:
    """{Dl/N: code-needle suite} for the points of the trajectory: `ruler_samples` prompts per
    needle at each, and `needle_samples_last` at the last point, where chapter 5 scores its
    target (the same suite everywhere when that is unset)."""
    suite = code_needle_suite(budget, seed=seed)
    last = suite if budget.needle_samples_last in (None, budget.ruler_samples) else \
        code_needle_suite(budget, seed=seed, n=budget.needle_samples_last)
    return {p: (last if i == len(points) - 1 else suite) for i, p in enumerate(points)}


def _suite_key(suite: dict, max_new) -> str:
    blob = json.dumps({t: [s.text for s in v] if isinstance(v, list) else v for t, v in suite.items()} | {"_": max_new})
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def ruler_scores(model, tokenizer, suite: dict, max_new: int | None) -> dict:
    """{task: RULER score (x100)} of one model; NaN for a task that does not fit."""
    return {t: R.score_task(v, R.predict(model, tokenizer, v, max_new)) if isinstance(v, list) else float("nan")
            for t, v in suite.items()}


def checkpoint_scores(run: Run, steps: tuple, scores, suite: dict, tokenizer: str, max_new: int | None) -> dict:
    """`scores(model, tokenizer, suite, max_new)` of the Raw checkpoint (one step) or of
    Last4 (several steps: their uniform average, App. B.1)."""
    model = run.load_model(steps[0]) if len(steps) == 1 else run.load_model(
        state_dict=merge("lastM", [run.checkpoint(s).weights for s in steps], iterations=list(steps)))
    return scores(model, get_tokenizer(tokenizer), suite, max_new)


def _scores_along_trajectory(budget: Budget, run: Run, suites: dict, name: str, scores) -> list[tuple]:
    """[(dl, protocol, {task: result})] for the Raw checkpoint and Last4 (the uniform average
    of the four checkpoints, App. B.1) at every Dl/N point of `suites` ({dl: suite}):
    `scores(model, tokenizer, suite, max_new)`, cached in the run folder under `name`, the
    suite's key and the checkpoints, and computed in parallel worker processes
    (`runner.memo_many`)."""
    jobs, where = [], []
    for dl, suite in suites.items():
        key = _suite_key(suite, budget.ruler_max_new)
        raw = experiments.step_at(run, dl)
        last4 = experiments.last4_steps(run, dl, budget.s5_last4_gap)
        for protocol, steps in (("Raw", [raw]), ("Last4", last4)):
            tag = "-".join(map(str, steps))
            jobs.append(MemoJob(run.hash, f"{name}-{key}-{protocol}-{tag}", tuple(steps), checkpoint_scores,
                                (tuple(steps), scores, suite, budget.tokenizer, budget.ruler_max_new)))
            where.append((dl, protocol))
    values = memo_many(RunStore(run.path.parent), jobs, desc=f"{name} along the trajectory")
    return [(dl, protocol, v) for (dl, protocol), v in zip(where, values)]


def ruler_along_trajectory(budget: Budget, run: Run, suite: dict, points=None) -> pd.DataFrame:
    """RULER of the Raw checkpoint and of Last4 at every point of the trajectory (Fig. 7, Fig. 12):
    long form, columns dl, protocol (Raw | Last4), task, score."""
    suites = dict.fromkeys(points or trajectory_points(budget), suite)
    rows = []
    for dl, protocol, res in _scores_along_trajectory(budget, run, suites, "ruler", ruler_scores):
        rows += [{"dl": dl, "protocol": protocol, "task": t, "score": res[t]} for t in suite]
    return pd.DataFrame(rows)


NEEDLE_COLUMNS = ("score", "control_score", "piece_hit", "needle_gain", "first_hit", "whole_hit")


def needle_scores(model, tokenizer, suite: dict, max_new: int | None) -> dict:
    """{task: `code_niah.needle_measures` of one model} for every task of a code-needle suite
    that fits (NaN measures for one that does not)."""
    return {t: CN.needle_measures(model, tokenizer, v, max_new) if isinstance(v, list)
            else dict.fromkeys(NEEDLE_COLUMNS, float("nan")) for t, v in suite.items()}


def needle_rows(res: dict, **keys) -> list[dict]:
    """Long-form rows (keys..., task, and the NEEDLE_COLUMNS) of one model's `needle_scores`."""
    return [{**keys, "task": t, **{c: m[c] for c in NEEDLE_COLUMNS}} for t, m in res.items()]


def needles_along_trajectory(budget: Budget, run: Run, suite: dict, points=None) -> pd.DataFrame:
    """The code-form single needles at every point of the trajectory, Raw and Last4 (§5.1's
    trend, Fig. 7, in measures a small model can move): per task, RULER's score and its
    control's (the needle line removed), the per-piece hit rate and the needle gain
    (`code_niah.needle_measures`); columns dl, protocol, task, prompts and NEEDLE_COLUMNS.
    `suite` is one suite for every point, or {Dl/N: suite} (`code_needle_suites`)."""
    points = list(points or trajectory_points(budget))
    by_point = suite if all(p in suite for p in points) else dict.fromkeys(points, suite)
    prompts = {dl: max((len(v) for v in by_point[dl].values() if isinstance(v, list)), default=0) for dl in points}
    rows = []
    for dl, protocol, res in _scores_along_trajectory(budget, run, {dl: by_point[dl] for dl in points}, "needles",
                                                      needle_scores):
        rows += needle_rows(res, dl=dl, protocol=protocol, prompts=prompts[dl])
    return pd.DataFrame(rows)


def needle_trajectory(needles: pd.DataFrame) -> pd.DataFrame:
    """The mean over the code-form single needles at each (dl, protocol): columns dl,
    protocol, score, control_score, piece_hit, needle_gain (chapter 5's needle_trajectory.csv)."""
    cols = ["score", "control_score", "piece_hit", "needle_gain"]
    keys = [k for k in ("stage", "dl", "protocol", "prompts") if k in needles.columns]
    return needles.groupby(keys, sort=False)[cols].mean().reset_index()


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
        # "v2": scores over every piece of the value, its leading-space piece included
        res = run.memo(f"retrieval-v2-{key}-{step}", lambda step=step: retrieval_head_scores(
            run.load_model(step), tok, samples).to_dict(orient="list"), steps=[step])
        frames.append(pd.DataFrame(res).assign(dl=dl))
    # a memo read back from JSON lists its keys sorted: fix the column and row order so a
    # fresh and a cached run save the same table
    df = pd.concat(frames, ignore_index=True)[["dl", "layer", "head", "score"]]
    df = df.sort_values(["dl", "layer", "head"], kind="stable", ignore_index=True)
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


def _means(frame: pd.DataFrame, index: str, column: str, value: str, raw: str, last4: str) -> pd.DataFrame:
    """Per point (rows), the Raw and Last4 means of `value` (each point's mean over tasks/seeds)."""
    t = frame.dropna(subset=[value]).groupby([index, column])[value].mean().unstack()
    return t.reindex(columns=[raw, last4]).dropna().set_axis(["Raw", "Last4"], axis=1)


def table14_by_point(longppl: pd.DataFrame, ruler: pd.DataFrame, ruler_ext: pd.DataFrame | None = None,
                     sft: pd.DataFrame | None = None, sft_2x: pd.DataFrame | None = None) -> pd.DataFrame:
    """Table 14's deltas (Last4 - Raw) at every Dl/N starting point, one column per stage:
    LCCP LongPPL (lower is better), mean RULER at the LCCP context, mean RULER after the 4x
    extension, and the SFT benchmark average at both SFT budgets (higher is better; the seed
    mean). A stage that was not run is NaN. `sft`/`sft_2x`: post_training.model_averages
    frames reset to columns dl, protocol, seed, average."""
    lp = _means(longppl, "dl_mult", "rule", "longppl", "raw", "last4")
    cols = {"LCCP LongPPL": lp, "RULER at the LCCP context": _means(ruler, "dl", "protocol", "score", "Raw", "Last4")}
    for name, frame, value in (("RULER after 4x extension", ruler_ext, "score"), ("SFT average", sft, "average"),
                               ("SFT average, 2x budget", sft_2x, "average")):
        cols[name] = _means(frame, "dl", "protocol", value, "Raw", "Last4") if frame is not None and len(frame) else None
    out = pd.DataFrame(index=pd.Index(lp.index, name="Dl/N"))
    for name, t in cols.items():
        out[name] = (t["Last4"] - t["Raw"]).reindex(out.index) if t is not None else np.nan
    return out


def table14(longppl: pd.DataFrame, ruler: pd.DataFrame, ruler_ext: pd.DataFrame | None = None,
            sft: pd.DataFrame | None = None, sft_2x: pd.DataFrame | None = None) -> pd.DataFrame:
    """Table 14 (App. D.2) in the paper's form: one row per training stage and metric, the Raw
    and Last4 means over the points both were evaluated at, Delta = Last4 - Raw, and how many
    points went in (0: the stage was not run). Arguments as in `table14_by_point`."""
    specs = [("LCCP", "LongPPL (lower is better)", longppl, "dl_mult", "rule", "longppl", "raw", "last4"),
             ("LCCP", "RULER, LCCP context", ruler, "dl", "protocol", "score", "Raw", "Last4"),
             ("4x extension", "RULER, extended context", ruler_ext, "dl", "protocol", "score", "Raw", "Last4"),
             ("long-context SFT", "benchmark average", sft, "dl", "protocol", "average", "Raw", "Last4"),
             ("long-context SFT, 2x budget", "benchmark average", sft_2x, "dl", "protocol", "average", "Raw", "Last4")]
    rows = []
    for stage, metric, frame, index, column, value, raw, last4 in specs:
        t = _means(frame, index, column, value, raw, last4) if frame is not None and len(frame) else None
        if t is None or t.empty:
            rows.append({"stage": stage, "metric": metric, "Raw": np.nan, "Last4": np.nan, "Delta": np.nan, "points": 0})
            continue
        rows.append({"stage": stage, "metric": metric, "Raw": t["Raw"].mean(), "Last4": t["Last4"].mean(),
                     "Delta": t["Last4"].mean() - t["Raw"].mean(), "points": len(t)})
    return pd.DataFrame(rows).set_index(["stage", "metric"])


def needle_lever_records(records: pd.DataFrame, b: Budget, scale: str) -> pd.DataFrame:
    """The needle-lever records (`nblib.probes.code_needle_levers`) that belong to this
    budget's trajectory at `scale`: a record of depth L counts when its run is the trajectory
    this budget gives with `scale` at L layers (the book's own at its depth, the model lever's
    deeper variants otherwise). Records of older designs, whose runs no longer match, drop out."""
    if records.empty or "layers" not in records.columns:
        return records.iloc[0:0]
    runs = {L: grid.long_trajectory(b.with_model(scale, n_layers=int(L)), scale).hash
            for L in records["layers"].unique()}
    return records[records["run"] == records["layers"].map(runs)]


def needle_lever_table(records: pd.DataFrame) -> pd.DataFrame:
    """Chapter 5's ladder of code-needle levers (`nblib.probes.code_needle_levers`): one
    row per (model depth, haystack form, key form, length, Dl/N, protocol), the mean over the
    three single-needle subtasks of RULER's score (x100), of the teacher-forced needle gain
    (nats per value token, with the needle against without it), of the first-value-token hit
    rate and, where recorded, of the per-piece and whole-value hit rates (each value piece the
    argmax given the true pieces before it)."""
    keys = ["layers", "haystack_form", "key_form", "value_form", "length", "dl", "protocol"]
    # records written before the value lever hold RULER's values
    records = records.assign(value_form=records["value_form"].fillna("ruler") if "value_form" in records
                             else "ruler")
    missing = [k for k in keys + ["task", "score", "needle_gain", "first_token_hit"] if k not in records.columns]
    if missing:
        raise ValueError(f"needle-lever records lack columns {missing} (written by an older probe?)")
    t = records.drop_duplicates(keys + ["task"], keep="last").groupby(keys, sort=False)
    # the control and the per-piece measures came later: NaN for records written before them
    later = {c: (c, "mean") for c in ("control_score", "value_piece_hit", "whole_value_hit") if c in records.columns}
    out = t.agg(score=("score", "mean"), needle_gain=("needle_gain", "mean"),
                first_token_hit=("first_token_hit", "mean"), **later, tasks=("task", "nunique"))
    return out.rename(columns={"needle_gain": "needle gain (nats/token)", "first_token_hit": "first-token hit",
                               "value_piece_hit": "value-piece hit", "whole_value_hit": "whole-value hit",
                               "control_score": "control score"})


def needle_design_table(records: pd.DataFrame) -> pd.DataFrame:
    """The code-form needles on the S5 trajectories of chapter 2's ladder designs (records of
    `python -m nblib.probes.design_needles --budget-file data/probes/grid_designs/X.toml`): one row
    per (design, haystack, key and value form, Dl/N, protocol, prompts per needle), the mean over the three
    single needles of the score with its binomial standard error (each prompt of a single needle
    scores 0 or 100, so the mean over k needles of n prompts each has SE
    sqrt(sum p(1-p) / n) / k), the control's score, the per-piece hit rate and the needle gain,
    and the best retrieval head on niah_single_2's prompts (NaN for records made before the
    probe scored heads)."""
    if records.empty or "budget" not in records.columns:
        return pd.DataFrame()
    r = records[records["budget"].astype(str).str.endswith(".toml")]
    if r.empty:
        return pd.DataFrame()
    r = r.assign(design=r["budget"].map(lambda p: p.rsplit("/", 1)[-1].removesuffix(".toml")),
                 value_form=r["value_form"].fillna("ruler") if "value_form" in r else "ruler",
                 # records without a count took the probe's default of 20 prompts per needle
                 prompts=(r["n"].fillna(20) if "n" in r else pd.Series(20, index=r.index)).astype(int))
    # a re-measure with more prompts per needle is a row of its own beside the first
    keys = ["design", "haystack_form", "key_form", "value_form", "dl", "protocol", "prompts"]
    r = r.drop_duplicates(keys + ["task"], keep="last")
    t = r.groupby(keys, sort=True).agg(score=("score", "mean"), control_score=("control_score", "mean"),
                                       piece_hit=("value_piece_hit", "mean"), needle_gain=("needle_gain", "mean"),
                                       tasks=("task", "nunique"))
    p = r["score"].clip(0, 100) / 100
    var = (p * (1 - p) / r["prompts"]).groupby([r[k] for k in keys]).sum()
    t.insert(1, "score_se", 100 * var.reindex(t.index).pow(0.5) / t["tasks"])
    if "retrieval_best" in r:  # Fig. 18's task: the best retrieval head on niah_single_2's prompts
        fig18 = r[r["task"] == "niah_single_2_code"].set_index(keys)["retrieval_best"]
        t["best_retrieval_head"] = fig18.reindex(t.index)
    return t

