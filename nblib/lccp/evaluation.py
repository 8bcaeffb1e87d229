"""LongPPL and ShortPPL of runs and of merged checkpoints (LCCP paper §3.1, §4.1, App. A.1, B).

The pieces, in order: the reference model (trained here at toy and smoke, a local Hugging
Face model at `full`), the test set, the key-token annotation, and an `Evaluator` that
scores raw or merged checkpoints on that annotation. Every evaluation is cached next to the
run it evaluates (`<run>/evals/*.json`), keyed by the annotation it used, so a chapter
re-executed over a finished store evaluates nothing. `evaluate_many` spreads evaluations
over worker processes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from nblib.budgets import Budget
from nblib.data import build_test_set, get_corpus, get_tokenizer
from nblib.lccp import grid
from nblib.lccp.merge import merge
from nblib.metrics import as_scorer, evaluate, load_or_annotate
from nblib.metrics.copy import CopyAugmentedScorer, calibrate
from nblib.store.atomic import atomic_write_json
from nblib.store.runstore import Run, RunStore
from nblib.training.runner import MemoJob, default_workers, get_or_run, memo_many
from nblib.training.threads import fixed_threads
from nblib.training.train import stream_for


# ---------------------------------------------------------------------------------------
# reference model, test set, annotation (§3.1, App. A.1)
# ---------------------------------------------------------------------------------------
def reference_model(budget: Budget, store: RunStore):
    """(model, tokenizer) of the LongPPL reference: trained here at toy/smoke budgets,
    a local Hugging Face model at `full` (the paper uses Llama-3.1-8B)."""
    ref = budget.reference
    if ref["kind"] == "hf":
        path = Path(ref["path"])
        if not path.exists():
            raise FileNotFoundError(f"reference model {path} not found: the full budget needs a local Hugging Face "
                                    f"causal LM (the paper uses Llama-3.1-8B); set budget.reference['path']")
        return str(path), None
    run = get_or_run(store, grid.reference_config(budget), progress=True)
    return run.load_model(), get_tokenizer(budget.tokenizer)


def test_set(budget: Budget):
    """The LongPPL test set of a budget: eval-split documents of >= the long context, truncated."""
    spec = budget.longppl
    return build_test_set(get_corpus(budget.corpus), get_tokenizer(budget.tokenizer), target_len=spec.min_doc_len,
                          n_docs=spec.n_docs, max_len=spec.max_doc_len)


def reference_scorer(budget: Budget, store: RunStore):
    """The reference as a scorer; at toy budgets mixed with a calibrated cache model
    (nblib.metrics.copy explains why), the calibration cached in the store."""
    model, tok = reference_model(budget, store)
    scorer = as_scorer(model, tok)
    copy = budget.reference.get("copy")
    if not copy:
        return scorer
    path = store.root / "annotations" / f"{budget.name}-copy-precision-{reference_key(budget)}.json"
    if path.exists():
        precision = json.loads(path.read_text())
    else:
        x, y, _ = stream_for(grid.data_config(budget, "long"), 2**31 - 1).batch(0, copy["calibration_sequences"])
        seqs = torch.cat([x, y[:, -1:]], 1).numpy()
        precision = calibrate(seqs, copy["min_match"], copy["max_match"])
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
    def build(cls, budget: Budget, store: RunStore) -> "Evaluator":
        """Train (or load) the reference, build the test set and annotate it (all cached)."""
        ts = test_set(budget)
        with fixed_threads(grid.REFERENCE_THREADS):  # the reference scores at the threads it trained at
            ann = load_or_annotate(annotation_path(budget, store), reference_scorer(budget, store), None, ts.texts,
                                   budget.longppl)
        key = hashlib.sha256(json.dumps([ann.texts_hash, ann.reference_id]).encode()).hexdigest()[:10]
        return cls(budget, store, list(ts.texts), ann, key)

    @property
    def tokenizer(self):
        return get_tokenizer(self.budget.tokenizer)

    def _evaluate(self, model) -> dict:
        return evaluate(model, self.tokenizer, self.texts, self.annotation, max_len=self.budget.long_seq_len)

    def memo_key(self, kind: str, steps, method: str | None = None, kw: dict | None = None) -> tuple[str, list[int]]:
        """(cache key, checkpoint steps) of one evaluation: kind "raw" scores checkpoint `steps`
        (an int), kind "merged" the App. B `method` merge of `steps` (a list)."""
        if kind == "raw":
            return f"ppl-{self.key}-raw-{int(steps)}", [int(steps)]
        steps = [int(s) for s in steps]
        tag = hashlib.sha256(json.dumps([method, sorted((kw or {}).items()), steps]).encode()).hexdigest()[:12]
        return f"ppl-{self.key}-{method}-{tag}", steps

    def compute(self, run: Run, kind: str, steps, method: str | None = None, kw: dict | None = None) -> dict:
        """LongPPL/ShortPPL of one evaluation, computed (not cached: `run` and `merged` cache it)."""
        if kind == "raw":
            return self._evaluate(run.load_model(int(steps)))
        paths = [run.checkpoint(int(s)).weights for s in steps]
        state = merge(method, paths, iterations=[int(s) for s in steps], **(kw or {}))
        return self._evaluate(run.load_model(state_dict=state))

    def run(self, run: Run, step: int | str = "final") -> dict:
        """LongPPL/ShortPPL of one raw checkpoint (Constant-Raw, Linear-Decay endpoints)."""
        s = run.config.total_steps if step == "final" else int(step)
        key, steps = self.memo_key("raw", s)
        return run.memo(key, lambda: self.compute(run, "raw", s), steps=steps)

    def merged(self, run: Run, steps: list[int], method: str = "lastM", **kw) -> dict:
        """LongPPL/ShortPPL of checkpoints `steps` of `run` merged with an App. B method."""
        key, steps = self.memo_key("merged", steps, method, kw)
        return run.memo(key, lambda: self.compute(run, "merged", steps, method, kw), steps=steps)


# ---------------------------------------------------------------------------------------
# parallel evaluation: the store's memo_many computes what the run folders' caches lack in
# its pool of one-thread workers, each of which builds the Evaluator once
# ---------------------------------------------------------------------------------------
_WORKER_EVAL: dict = {}
PARALLEL_EVALS = 8  # the fewest missing evaluations worth a pool


def _evaluator(root: str, budget: Budget) -> Evaluator:
    key = (root, repr(budget))  # the budget itself, not its name: a budget file's may differ from the named one
    if key not in _WORKER_EVAL:
        _WORKER_EVAL[key] = Evaluator.build(budget, RunStore(root))
    return _WORKER_EVAL[key]


def _compute_job(run: Run, root: str, budget: Budget, kind: str, steps, method, kw):
    return _evaluator(root, budget).compute(run, kind, steps, method, kw)


def evaluate_many(ev: Evaluator, jobs: list[tuple], workers: int | None = None, desc: str = "evals") -> list[dict]:
    """Evaluate jobs (run_hash, "raw"|"merged", step or steps, method, kwargs), in order.

    Cached evaluations are read; only the others go to worker processes (memo_many), so a
    chapter re-executed over a finished store starts no pool."""
    root = str(ev.store.root)
    _WORKER_EVAL[(root, repr(ev.budget))] = ev
    memo_jobs, total_steps = [], {}
    for run_hash, kind, steps, method, kw in jobs:
        if kind == "raw" and steps == "final":
            if run_hash not in total_steps:
                total_steps[run_hash] = ev.store.by_hash(run_hash).config.total_steps
            steps = total_steps[run_hash]
        key, ckpts = ev.memo_key(kind, steps, method, kw)
        memo_jobs.append(MemoJob(run_hash, key, tuple(ckpts), _compute_job,
                                 (root, ev.budget, kind, steps, method, kw)))
    # fewer than PARALLEL_EVALS missing: scored in this process (a worker's start, importing torch
    # and building the Evaluator, costs more than a few evaluations at smoke)
    return memo_many(ev.store, memo_jobs, workers=workers or default_workers(), desc=desc, min_parallel=PARALLEL_EVALS)
