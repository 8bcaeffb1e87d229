"""The LCCP experiments of seed 000, as data: reference model, test set, annotations,
LongPPL/ShortPPL of runs and of merged checkpoints, and the tables the chapters plot.

Every evaluation is cached next to the run it evaluates (`<run>/evals/*.json`), keyed by
the annotation it used, so a chapter re-executed over a finished store trains nothing and
evaluates nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from nblib import grid
from nblib.budgets import Budget, get_budget
from nblib.metrics.probes import copy_gain, position_loss  # noqa: F401  (chapter 3 uses both)
from nblib.runstore import Run, RunStore


# ---------------------------------------------------------------------------------------
# reference model, test set, annotation (§3.1, App. A.1)
# ---------------------------------------------------------------------------------------
def reference_model(budget: Budget, store: RunStore):
    """(model, tokenizer) of the LongPPL reference: trained here at toy/smoke budgets,
    a local Hugging Face model at `full` (the paper uses Llama-3.1-8B)."""
    from nblib.data import get_tokenizer

    ref = budget.reference
    if ref["kind"] == "hf":
        path = Path(ref["path"])
        if not path.exists():
            raise FileNotFoundError(f"reference model {path} not found: the full budget needs a local Hugging Face "
                                    f"causal LM (the paper uses Llama-3.1-8B); set budget.reference['path']")
        return str(path), None
    run = store.get_or_run(grid.reference_config(budget), progress=True)
    return run.load_model(), get_tokenizer(budget.tokenizer)


def test_set(budget: Budget):
    """The LongPPL test set of a budget: eval-split documents of >= the long context, truncated."""
    from nblib.data import build_test_set, get_corpus, get_tokenizer

    spec = budget.longppl
    return build_test_set(get_corpus(budget.corpus), get_tokenizer(budget.tokenizer), target_len=spec.min_doc_len,
                          n_docs=spec.n_docs, max_len=spec.max_doc_len)


def reference_scorer(budget: Budget, store: RunStore):
    """The reference as a scorer; at toy budgets mixed with a calibrated cache model
    (nblib.metrics.copy explains why), the calibration cached in the store."""
    from nblib.metrics import as_scorer
    from nblib.metrics.copy import CopyAugmentedScorer, calibrate

    model, tok = reference_model(budget, store)
    scorer = as_scorer(model, tok)
    copy = budget.reference.get("copy")
    if not copy:
        return scorer
    path = store.root / "annotations" / f"{budget.name}-copy-precision-{reference_key(budget)}.json"

    def compute():
        from nblib.train import stream_for

        x, y, _ = stream_for(grid.data_config(budget, "long"), 2**31 - 1).batch(0, copy["calibration_sequences"])
        seqs = torch.cat([x, y[:, -1:]], 1).numpy()
        return calibrate(seqs, copy["min_match"], copy["max_match"])

    if path.exists():
        precision = json.loads(path.read_text())
    else:
        precision = compute()
        from nblib.atomic import atomic_write_json

        atomic_write_json(path, precision)
    return CopyAugmentedScorer(scorer, {int(k): v for k, v in precision.items()}, copy["min_match"],
                               copy["max_match"])


def reference_key(budget: Budget) -> str:
    """Short hash naming the reference (its run config, or its path) and its cache model."""
    ref = budget.reference
    ident = grid.reference_config(budget).hash if ref["kind"] == "nblib" else str(ref["path"])
    return hashlib.sha256(json.dumps([ident, ref.get("copy")], sort_keys=True).encode()).hexdigest()[:10]


def annotation_path(budget: Budget, store: RunStore) -> Path:
    """One annotation per (budget test set, reference): a new reference annotates anew."""
    return store.root / "annotations" / f"{budget.name}-longppl-{reference_key(budget)}.json"


@dataclass
class Evaluator:
    """LongPPL/ShortPPL of runs and merged checkpoints on one annotated test set."""

    budget: Budget
    store: RunStore
    texts: list
    annotation: object
    key: str  # short hash naming the annotation in eval cache keys

    @classmethod
    def build(cls, budget: Budget | str, store: RunStore) -> "Evaluator":
        from nblib.metrics import load_or_annotate

        budget = get_budget(budget) if isinstance(budget, str) else budget
        ts = test_set(budget)
        ann = load_or_annotate(annotation_path(budget, store), reference_scorer(budget, store), None, ts.texts,
                               budget.longppl)
        key = hashlib.sha256(json.dumps([ann.texts_hash, ann.reference_id]).encode()).hexdigest()[:10]
        return cls(budget, store, list(ts.texts), ann, key)

    @property
    def tokenizer(self):
        from nblib.data import get_tokenizer

        return get_tokenizer(self.budget.tokenizer)

    def _evaluate(self, model) -> dict:
        from nblib.metrics import evaluate

        return evaluate(model, self.tokenizer, self.texts, self.annotation, max_len=self.budget.long_seq_len)

    def run(self, run: Run, step: int | str = "final") -> dict:
        """LongPPL/ShortPPL of one raw checkpoint (Constant-Raw, Linear-Decay endpoints)."""
        s = run.config.total_steps if step == "final" else int(step)
        return run.memo(f"ppl-{self.key}-raw-{s}", lambda: self._evaluate(run.load_model(s)))

    def merged(self, run: Run, steps: list[int], method: str = "lastM", **kw) -> dict:
        """LongPPL/ShortPPL of checkpoints `steps` of `run` merged with an App. B method."""
        from nblib.merge import merge

        steps = [int(s) for s in steps]
        tag = hashlib.sha256(json.dumps([method, sorted(kw.items()), steps]).encode()).hexdigest()[:12]

        def compute():
            paths = [run.checkpoint(s).weights for s in steps]
            state = merge(method, paths, iterations=steps, **kw)
            return self._evaluate(run.load_model(state_dict=state))

        return run.memo(f"ppl-{self.key}-{method}-{tag}", compute)


# ---------------------------------------------------------------------------------------
# parallel evaluation: jobs run in worker processes and land in the run folders' caches
# ---------------------------------------------------------------------------------------
_WORKER_EVAL: dict = {}


def _eval_job(root: str, budget: str, job: tuple):
    import torch

    torch.set_num_threads(1)
    key = (root, budget)
    if key not in _WORKER_EVAL:
        _WORKER_EVAL[key] = Evaluator.build(budget, RunStore(root))
    ev = _WORKER_EVAL[key]
    run_hash, kind, steps, method, kw = job
    run = ev.store.by_hash(run_hash)
    return ev.run(run, steps) if kind == "raw" else ev.merged(run, steps, method, **kw)


def evaluate_many(ev: Evaluator, jobs: list[tuple], workers: int | None = None, desc: str = "evals") -> list[dict]:
    """Evaluate jobs (run_hash, "raw"|"merged", step or steps, method, kwargs) in parallel."""
    from tqdm import tqdm

    from nblib.parallel import default_workers

    workers = workers or default_workers()
    if workers == 1 or len(jobs) < 8:
        return [_eval_job(str(ev.store.root), ev.budget.name, j) for j in tqdm(jobs, desc=desc)]
    import multiprocessing as mp

    _WORKER_EVAL[(str(ev.store.root), ev.budget.name)] = ev
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        futs = [pool.submit(_eval_job, str(ev.store.root), ev.budget.name, j) for j in jobs]
        return [f.result() for f in tqdm(futs, desc=desc)]


# ---------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------
def _row(budget: Budget, scale: str, short_run: Run, long_run: Run, ds_mult, dl_mult, tokens_dl, res, **extra):
    return {"scale": scale, "N": budget.n_params(scale), "Ds": short_run.config.realized_tokens, "Dl": tokens_dl,
            "ds_mult": ds_mult, "dl_mult": dl_mult, "longppl": res["long_ppl"], "shortppl": res["short_ppl"],
            "run": long_run.hash, **extra}


def linear_decay_table(ev: Evaluator, scales=("S1", "S2", "S3", "S4", "S5"), workers=None) -> pd.DataFrame:
    """One row per Linear-Decay configuration (§3.1): N, realized Ds and Dl, LongPPL, ShortPPL.

    Trains whatever the store lacks (parents first, in parallel), then evaluates.
    """
    b, store = ev.budget, ev.store
    configs = grid.linear_decay_grid(b, scales)
    store.get_or_run_many(configs, workers=workers, desc="Linear-Decay grid")
    keys = []
    for scale in scales:
        pairs = b.s5_configs if scale == "S5" else [(ds, dl) for ds in b.ds_multiples for dl in b.dl_multiples]
        short = grid.short_stage(b, scale)
        for ds, dl in pairs:
            keys.append((scale, ds, dl, store.run(short.wsd[ds]), store.run(grid.lccp_linear_decay(b, scale, ds, dl))))
    results = evaluate_many(ev, [(r.hash, "raw", "final", None, {}) for *_, r in keys], workers, "LongPPL (LD)")
    rows = [_row(b, s, sr, lr, ds, dl, lr.config.realized_tokens, res) for (s, ds, dl, sr, lr), res in zip(keys, results)]
    return pd.DataFrame(rows)


def constant_configs(b: Budget, scales=("S1", "S2", "S3", "S4"), trajectory_scale: str | None = "S5"):
    """Constant-LR trajectories (§4.1-4.2, Table 7): every Ds x seed at S1-S4 to the largest Dl,
    and one long trajectory at `trajectory_scale` from the largest Ds."""
    cfgs = []
    for scale in scales:
        for ds in b.ds_multiples:
            for seed in range(b.n_constant_seeds):
                cfgs.append(grid.lccp_constant(b, scale, ds, b.dl_multiples[-1], seed))
    if trajectory_scale:
        cfgs.append(trajectory_config(b, trajectory_scale))
    return cfgs


def trajectory_config(b: Budget, scale: str):
    """The long Constant trajectory (§4.2: S5, Ds = 450N, to Dl = 120N, checkpoints every 1N)."""
    return grid.lccp_constant(b, scale, b.ds_multiples[-1], b.s5_trajectory, 0, ckpt_every=b.s5_ckpt_every)


def step_at(run: Run, dl_mult: float) -> int:
    """The checkpoint step at Dl = dl_mult * N on a Constant trajectory (grid.checkpoint_step)."""
    return grid.checkpoint_step(run.config, dl_mult)


def last4_steps(run: Run, dl_mult: float, spacing_mult: float, m: int = 4) -> list[int]:
    """Checkpoint steps {T-3s, T-2s, T-s, T} of Last4 with spacing s (App. B.1)."""
    return [step_at(run, dl_mult - k * spacing_mult) for k in range(m - 1, -1, -1)]


def constant_table(ev: Evaluator, scales=("S1", "S2", "S3", "S4"), workers=None) -> pd.DataFrame:
    """Constant-Raw and Constant-Last4 LongPPL/ShortPPL at every Dl grid point (Fig. 4b, 5)."""
    b, store = ev.budget, ev.store
    cfgs = constant_configs(b, scales, None)
    store.get_or_run_many(cfgs, workers=workers, desc="Constant trajectories")
    jobs, meta = [], []
    for cfg in cfgs:
        run = store.run(cfg)
        scale, ds = cfg.meta["scale"], cfg.meta["ds_mult"]
        short = store.run(grid.short_stage(b, scale).wsd[ds])
        for dl in b.dl_multiples:
            jobs.append((run.hash, "raw", step_at(run, dl), None, {}))
            jobs.append((run.hash, "merged", last4_steps(run, dl, b.constant_ckpt_every), "lastM", {"m": 4}))
            meta.append((scale, ds, dl, cfg.seed, short, run))
    res = evaluate_many(ev, jobs, workers, "LongPPL (Constant)")
    rows = []
    for i, (scale, ds, dl, seed, short, run) in enumerate(meta):
        tokens = step_at(run, dl) * run.config.tokens_per_step
        for rule, r in (("raw", res[2 * i]), ("last4", res[2 * i + 1])):
            rows.append(_row(b, scale, short, run, ds, dl, tokens, r, seed=seed, rule=rule))
    return pd.DataFrame(rows)


def seed_mean(df: pd.DataFrame) -> pd.DataFrame:
    """Mean LongPPL/ShortPPL over the independent runs of each configuration (§4.2)."""
    keys = ["scale", "N", "Ds", "Dl", "ds_mult", "dl_mult", "rule"]
    return df.groupby(keys, as_index=False)[["longppl", "shortppl"]].mean()


# ---------------------------------------------------------------------------------------
# setup tables (Chapter 2): Table 1, Tables 5-7, Table 9, and a key-token view
# ---------------------------------------------------------------------------------------
def model_table(b: Budget) -> pd.DataFrame:
    """Table 1 at a budget: architecture, non-embedding N, and the paper's N."""
    from nblib.budgets import SCALES

    rows = []
    for s in SCALES:
        m = b.scale(s).model
        rows.append({"scale": s, "d_model": m["d_model"], "layers": m["n_layers"], "heads": m["n_heads"],
                     "kv heads": m["n_kv_heads"], "d_ff": m["d_ff"], "N (non-emb.)": b.n_params(s),
                     "paper N": b.scale(s).paper_n_params})
    return pd.DataFrame(rows)


def budget_table(b: Budget) -> pd.DataFrame:
    """Tables 5-7 at a budget: realized Ds, Dl (rounded to whole steps), LRs and batch sizes."""
    from nblib.budgets import SCALES

    rows = []
    for s in SCALES:
        spec = b.scale(s)
        short = short_stage_cached(b.name, s)
        lds = [grid.lccp_linear_decay(b, s, b.ds_multiples[-1], dl).realized_tokens for dl in b.dl_multiples]
        rows.append({
            "scale": s, "N": b.n_params(s), "4K-analogue LR": spec.lr, "LCCP LR (start)": spec.lr / 10,
            "GBS short (seqs)": spec.batch_short, "GBS LCCP (seqs)": spec.batch_long, "warmup steps": spec.warmup_steps,
            "realized Ds (tokens)": ", ".join(f"{short.wsd[m].realized_tokens:,}" for m in b.ds_multiples),
            "realized Dl (tokens)": ", ".join(f"{t:,}" for t in lds),
        })
    return pd.DataFrame(rows)


@lru_cache(maxsize=None)
def short_stage_cached(budget: str, scale: str):
    return grid.short_stage(get_budget(budget), scale)


def mixture_table(b: Budget, seq_len: int | None = None) -> pd.DataFrame:
    """Table 9: configured bucket shares of the paper's 32K mixture next to the shares of the
    mixture this budget trains with, on its corpus, and how often each bucket is repeated."""
    from nblib.data import LengthMixture
    from nblib.train import stream_for

    seq_len = seq_len or b.long_seq_len
    stream = stream_for(grid.data_config(b, "long"), 0)
    stats = pd.DataFrame(stream.bucket_stats())
    stats.insert(1, "paper 32K mix", [w for w in LengthMixture.lccp_32k().weights])
    return stats.rename(columns={"configured": f"{b.lccp_mixture} mix"})


def highlight_html(text: str, long_iv, short_iv, max_chars: int = 4000) -> str:
    """HTML of a test document with long key tokens in red and short key tokens in blue."""
    import html

    mark = np.zeros(len(text), np.int8)
    for s, e in short_iv:
        mark[s:e] = 1
    for s, e in long_iv:
        mark[s:e] = 2
    out, i = [], 0
    text, mark = text[:max_chars], mark[:max_chars]
    style = {0: None, 1: "background:#dbe9ff", 2: "background:#ffc9c9;font-weight:bold"}
    while i < len(text):
        j = i
        while j < len(text) and mark[j] == mark[i]:
            j += 1
        chunk = html.escape(text[i:j])
        out.append(f'<span style="{style[mark[i]]}">{chunk}</span>' if style[mark[i]] else chunk)
        i = j
    return ('<pre style="white-space:pre-wrap;font-size:0.8em;max-height:28em;overflow:auto">' + "".join(out)
            + "</pre>")


# ---------------------------------------------------------------------------------------
# Constant trajectories (Chapter 4): observation rules, trajectory points, spacing ablation
# ---------------------------------------------------------------------------------------
OBSERVATION_RULES = {  # name -> (method, kwargs, how many of the newest pool checkpoints it uses)
    "Last4": ("lastM", {"m": 4}, 4), "Last8": ("lastM", {"m": 8}, 8), "Last12": ("lastM", {"m": 12}, 12),
    "Last25": ("lastM", {"m": 25}, 25), "1-Sqrt": ("one_sqrt", {}, None),
    "EMA 0.1": ("ema", {"beta": 0.1}, None), "EMA 0.5": ("ema", {"beta": 0.5}, None),
    "EMA 0.9": ("ema", {"beta": 0.9}, None), "DARE 0.1": ("dare", {"rho": 0.1, "seed": 42}, None),
    "DARE 0.5": ("dare", {"rho": 0.5, "seed": 42}, None), "TIES 0.1": ("ties", {"rho": 0.1}, None),
    "TIES 0.5": ("ties", {"rho": 0.5}, None),
}


def observation_rules(ev: Evaluator, run: Run, dl_mult: float, pool_spacing: float, pool_size: int = 25,
                      workers=None) -> pd.DataFrame:
    """Fig. 4a: every App. B rule on a pool of `pool_size` checkpoints spaced `pool_spacing`*N,
    ending at Dl = dl_mult*N (paper: 25 checkpoints every 2N up to 50N at S4), plus Raw."""
    pool = [step_at(run, dl_mult - k * pool_spacing) for k in range(pool_size - 1, -1, -1)]
    names, jobs = ["Raw"], [(run.hash, "raw", pool[-1], None, {})]
    for name, (method, kw, m) in OBSERVATION_RULES.items():
        steps = pool[-m:] if m else pool
        kw = dict(kw)
        if method == "lastM":
            kw["m"] = len(steps)
        if method == "ema":
            kw["delta"] = pool[1] - pool[0]  # one nominal checkpoint interval, in iterations (Eq. 7)
        names.append(name)
        jobs.append((run.hash, "merged", steps, method, kw))
    res = evaluate_many(ev, jobs, workers, "observation rules")
    return pd.DataFrame([{"rule": n, "longppl": r["long_ppl"], "shortppl": r["short_ppl"]} for n, r in zip(names, res)])


def trajectory_points(ev: Evaluator, run: Run, dl_points, spacing: float, workers=None) -> pd.DataFrame:
    """Raw and Last4 (spacing*N apart) LongPPL/ShortPPL at each Dl in dl_points (§4.2)."""
    jobs, meta = [], []
    for dl in dl_points:
        jobs.append((run.hash, "raw", step_at(run, dl), None, {}))
        jobs.append((run.hash, "merged", last4_steps(run, dl, spacing), "lastM", {"m": 4}))
        meta.append(dl)
    res = evaluate_many(ev, jobs, workers, "trajectory points")
    rows = []
    for i, dl in enumerate(meta):
        tokens = step_at(run, dl) * run.config.tokens_per_step
        for rule, r in (("raw", res[2 * i]), ("last4", res[2 * i + 1])):
            rows.append({"dl_mult": dl, "Dl": tokens, "rule": rule, "longppl": r["long_ppl"], "shortppl": r["short_ppl"]})
    return pd.DataFrame(rows)


def spacing_ablation(ev: Evaluator, run: Run, targets, spacings, workers=None) -> pd.DataFrame:
    """App. B.1: Last4(s) over {T-3s, T-2s, T-s, T} for each target T and spacing s, and Raw at T."""
    jobs, meta = [], []
    for t in targets:
        jobs.append((run.hash, "raw", step_at(run, t), None, {}))
        meta.append((t, "Raw"))
        for s in spacings:
            jobs.append((run.hash, "merged", last4_steps(run, t, s), "lastM", {"m": 4}))
            meta.append((t, f"Last4({s:g}N)"))
    res = evaluate_many(ev, jobs, workers, "spacing ablation")
    return pd.DataFrame([{"target_mult": t, "protocol": p, "longppl": r["long_ppl"], "shortppl": r["short_ppl"]}
                         for (t, p), r in zip(meta, res)])


def trajectory_compute(b: Budget, scale: str, peak_flops: float = 989e12, mfu: float = 0.4) -> dict:
    """Training compute of the long Constant trajectory at `scale` (its 4K stage excluded):
    FLOPs from the model's analytic count at the LCCP context, and GPU-hours at a given
    peak (default: H100 bf16 dense, 989 TFLOP/s) and MFU."""
    import torch

    from nblib.models import build_model

    with torch.device("meta"):
        model = build_model("llama", dict(b.scale(scale).model))
    tokens = b.n_tokens(scale, b.s5_trajectory)
    flops = tokens * model.flops_per_token(b.long_seq_len, training=True)
    gpu_hours = flops / (peak_flops * mfu) / 3600
    ckpt_bytes = 4 * model.n_params(non_embedding=False)
    return {"tokens": tokens, "flops": flops, "gpu_hours": gpu_hours, "hours_on_16_gpus": gpu_hours / 16,
            "checkpoints": int(round(b.s5_trajectory / b.s5_ckpt_every)), "checkpoint_gb": ckpt_bytes / 1e9}
