"""RULER on models that copy: where chapter 5's "RULER above 0 after extension" would be reached
(chapter 5, "Which models answer?"; was benchmarks/toy_ruler_copy_probe.py).

The toy book's LCCP models do not copy (chapter 2's copy ladder), and RULER at their LCCP
context is 0 on every single-needle subtask. This probe scores the same RULER suite (LCCP
paper §5.1: the toy's prompts, seeds and greedy decoding, `nblib.lccp.downstream.ruler_suite`)
on the LCCP rung of the `lccp_copy` probe: a d64 model that copies at its 128-token short
context, continued at 1,024 tokens with ABF, at each of its kept LCCP checkpoints and before
LCCP (its parent with the new RoPE base). Lengths: the toy's LCCP RULER length (256) and
4x it (1,024, the toy's extension length), which is inside this rung's training context.
With --pair it scores the toy book's Part 2 models instead (chapter 6's Models A and B and
chapter 9's all-global control, which copy a random segment from L/2 back with gains of
1.4-3.2 nats): each at its training context (prompts of L - 32 = 224 tokens), and Model B and the
all-global control after their YaRN x4 fine-tune at 4L - 32 = 992, the Gemma blog's analogue of a 4x extension.
With --format code it scores RULER's three single-needle subtasks written as code instead
(`nblib.evals.code_niah`: the needle an assignment line, the answer prefix its left side), the
form a model trained only on Python source can answer by copying.
One JSON line per (model, checkpoint, format) goes to data/probes/toy_ruler_copy_probe.jsonl.

    python -m nblib.probes ruler_copy --run-root /path/to/probe/store --samples 10
    python -m nblib.probes ruler_copy --pair --samples 10   # the book's run store
    python -m nblib.probes ruler_copy --pair --format code --samples 20
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from nblib.budgets import get_budget
from nblib.data import get_tokenizer
from nblib.evals import code_niah
from nblib.gemma import extension, pair
from nblib.lccp import downstream
from nblib.probes import results
from nblib.store.runstore import RunStore

RECORDS = ("toy_ruler_copy_probe.jsonl",)
SINGLE = {"ruler": ("niah_single_1", "niah_single_2", "niah_single_3"), "code": code_niah.TASKS}
SUITES = {"ruler": downstream.ruler_suite, "code": downstream.code_needle_suite}


def lccp_rung(name: str) -> dict:
    """The last record of `toy_lccp_copy_probe.jsonl` called `name` (its run hashes)."""
    path = results.record_path("toy_lccp_copy_probe.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("name") == name]
    if not rows:
        raise SystemExit(f"error: no record named {name!r} in toy_lccp_copy_probe.jsonl")
    return rows[-1]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes ruler_copy", description=__doc__.splitlines()[0])
    p.add_argument("--run-root", help="the probes' scratch run store (default with --pair: the book's)")
    p.add_argument("--pair", action="store_true", help="score the toy book's Part 2 models")
    p.add_argument("--ladder", action="store_true",
                   help="score Part 2's training-length ladder (Models A and B and the all-global control at every "
                        "fraction of their tokens) at the pair's context")
    p.add_argument("--rung", default="lccp-d64L4", help="a record name of toy_lccp_copy_probe.jsonl")
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 1024])
    p.add_argument("--samples", type=int, default=10, help="prompts per subtask")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--format", choices=sorted(SUITES), default="ruler",
                   help="RULER's English prompts, or its single-needle subtasks written as code (nblib.evals.code_niah)")
    p.add_argument("--out", default=RECORDS[0], help="record file (a name in data/probes, or a path)")
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parser().parse_args(argv)
    a.argv = argv
    torch.set_num_threads(a.threads)
    b = get_budget("toy")
    tok = get_tokenizer(b.tokenizer)
    if a.pair:
        return _score_all(_pair_models(b, RunStore(a.run_root)), b, tok, a, name="toy pair")
    if a.ladder:
        return _score_all(_ladder_models(b, RunStore(a.run_root)), b, tok, a, name="toy pair ladder")
    if not a.run_root:
        raise SystemExit("error: --run-root is required without --pair or --ladder")
    store = RunStore(a.run_root)
    rec = lccp_rung(a.rung)
    lccp = next((r for r in (store.by_hash(h.name) for h in Path(a.run_root).iterdir() if (h / "config.json").exists())
                 if r.config.init and r.config.init.get("run") == rec["parent_run"]), None)
    if lccp is None:
        raise SystemExit(f"error: the LCCP run of {a.rung!r} (parent {rec['parent_run']}) is not in {a.run_root}")
    parent = store.by_hash(rec["parent_run"])
    models = [("before LCCP (ABF only)", 0, lambda: _with_base(parent.load_model(lccp.config.init["step"]),
                                                               lccp.config.init["rope_base"]))]
    models += [(f"after {c.tokens:,} LCCP tokens", c.tokens, lambda c=c: lccp.load_model(c.step))
               for c in lccp.checkpoints()]
    d, train_len = lccp.config.model["d_model"], lccp.config.seq_len
    return _score_all([(label, tokens, load, a.lengths, d, train_len) for label, tokens, load in models], b, tok, a,
                      name=a.rung)


def _pair_models(b, store) -> list:
    """(label, tokens, loader, lengths, width, training context) of the toy book's Part 2 models."""
    cfgs = pair.pair_configs(b)
    runs = {k: store.run(c) for k, c in cfgs.items()}
    runs["B-global"] = store.run(pair.all_global_config(b))
    missing = [k for k, r in runs.items() if not r.is_complete()]
    if missing:
        raise SystemExit(f"error: Part 2 runs {missing} are not in {store.root}: run the toy book's chapters 6 and 9")
    # prompts leave room for the answer inside the context (Model A's position table ends at L)
    L, T = b.pair.seq_len - b.ruler_max_new, b.pair.seq_len * b.pair.yarn_factor - b.ruler_max_new
    out = [(pair.MODELS[k][1] if k in pair.MODELS else pair.CONTROL_LABEL, r.config.realized_tokens,
            r.load_model, (L,), r.config.model["d_model"], L) for k, r in runs.items()]
    for k in ("B", "B-global"):
        ft = store.run(extension.finetune_config(b, runs[k]))
        if ft.is_complete():
            out.append((f"{out[list(runs).index(k)][0]}, YaRN x{b.pair.yarn_factor} fine-tuned", ft.config.realized_tokens,
                        ft.load_model, (L, T), ft.config.model["d_model"], T))
    return out


def _ladder_models(b, store) -> list:
    """(label, tokens, loader, lengths, width, training context) of chapter 6's and chapter 9's
    training-length ladders: each Part 2 model and each of its shorter-budget branches."""
    L = b.pair.seq_len - b.ruler_max_new
    cfgs = {**{(k, 1.0): c for k, c in pair.pair_configs(b).items()},
            ("B-global", float(b.pair.control_fraction)): pair.all_global_config(b),
            **pair.ladder_configs(b, models=("A", "B", "B-global"))}
    runs = {k: store.run(c) for k, c in sorted(cfgs.items())}
    missing = [k for k, r in runs.items() if not r.is_complete()]
    if missing:
        raise SystemExit(f"error: Part 2 runs {missing} are not in {store.root}: run the toy book's chapters 6 and 9")
    return [(r.config.label, r.config.realized_tokens, r.load_model, (L,), r.config.model["d_model"], L)
            for r in runs.values()]


def _score_all(models, b, tok, a, name: str) -> int:
    suites: dict = {}
    for label, tokens, load, lengths, d, train_len in models:
        model = load()
        t0 = time.time()
        for n in lengths:
            if n not in suites:
                suites[n] = SUITES[a.format](b, seed=0, length=n, n=a.samples)
        scores = {n: downstream.ruler_scores(model, tok, suites[n], b.ruler_max_new) for n in lengths}
        single = SINGLE[a.format]
        row = {"name": name, "format": a.format, "model": label, "tokens": tokens, "samples": a.samples, "d": d, "train_len": train_len,
               "ruler": {str(n): {t: (None if v != v else round(v, 1)) for t, v in sc.items()} for n, sc in scores.items()},
               "single_needle_mean": {str(n): round(sum(sc[t] for t in single if sc[t] == sc[t]) /
                                                    max(1, sum(sc[t] == sc[t] for t in single)), 1)
                                      for n, sc in scores.items()},
               "seconds": round(time.time() - t0, 1)}
        results.append_record(a.out, row, module=__spec__.name, argv=a.argv)
        print(json.dumps({k: row[k] for k in ("model", "single_needle_mean", "seconds")}), flush=True)
    return 0


def _with_base(model, base: float):
    model.set_rope_base(base)
    return model


if __name__ == "__main__":
    raise SystemExit(main())
