"""Measure design levers of the toy Models A and B before adopting them (chapter 6, "How the
toy pair's training length was chosen"; was benchmarks/pair_probe.py).

Each probe trains one model of the toy pair (`nblib.budgets.ModelPairSpec`; the Gemma blog's
"The two models") through the real run store and trainer in a scratch store (--run-root): the
pair's own run config (`nblib.gemma.pair.pair_configs`) with one lever changed: the number of
steps, the learning rate, a share of synthetic repeated segments in the stream, or Model B's
RoPE base. It then measures the held-out loss (the first L + 1 tokens of held-out files) and
the random-segment copy gain at distances 8, L/4 and L/2 - 8; for Model B also the loss past L
of plain RoPE and of zero-shot YaRN on held-out pages of s*L tokens (chapter 9; the blog's
"Extending Model B's context"). Results are appended as JSON lines to
data/probes/pair_probe.jsonl, which chapter 6 shows.

    python -m nblib.probes pair --name A_1200steps --model A --steps 1200
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import numpy as np
import torch

from nblib.budgets import get_budget
from nblib.data import get_tokenizer
from nblib.gemma.extension import long_test_docs, page_nll, with_yarn, yarn_scaling
from nblib.gemma.pair import eval_windows, heldout_loss, pair_configs
from nblib.metrics.probes import copy_gain
from nblib.probes import results
from nblib.store.runstore import RunConfig, RunStore
from nblib.training.runner import get_or_run

RECORDS = ("pair_probe.jsonl",)


def probe_config(a, budget) -> RunConfig:
    """The toy pair's run of `a.model` with the probe's levers laid over it (no checkpoints
    every k tokens: only the final model is measured)."""
    L = budget.pair.seq_len
    base = pair_configs(budget)[a.model]
    steps = a.steps or base.n_tokens // (base.batch_size * L)
    model = base.model
    if a.rope_base:
        if a.model != "B":
            raise SystemExit("error: --rope-base applies to Model B only")
        model = {**model, "rope_local_base": a.rope_base, "rope_global_base": a.rope_base}
    data = {**base.data, **({"copy_fraction": a.copy, "copy_len": [16, L // 2]} if a.copy else {})}
    return dataclasses.replace(base, model=model, data=data, n_tokens=steps * base.batch_size * L,
                               schedule={**base.schedule, **({"lr": a.lr} if a.lr else {})},
                               label=f"probe {a.name}", ckpt_every_tokens=None)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes pair", description=__doc__.splitlines()[0])
    p.add_argument("--name", required=True)
    p.add_argument("--model", choices=("A", "B"), required=True)
    p.add_argument("--steps", type=int, default=0, help="training steps (default: the toy pair's)")
    p.add_argument("--lr", type=float, default=0.0, help="peak LR (default: the toy pair's)")
    p.add_argument("--copy", type=float, default=0.0, help="share of synthetic repeated-segment sequences")
    p.add_argument("--rope-base", type=float, default=0.0, help="Model B's RoPE base, local and global (default 1e4)")
    p.add_argument("--run-root", default="/tmp/pair_probe_runs")
    p.add_argument("--out", default=RECORDS[0], help="record file (a name in data/probes, or a path)")
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parser().parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    budget = get_budget("toy")
    L = budget.pair.seq_len
    cfg = probe_config(a, budget)
    t0 = time.time()
    run = get_or_run(RunStore(a.run_root), cfg)
    wall = time.time() - t0
    model = run.load_model()
    tok = get_tokenizer(budget.pair.tokenizer)
    rec = {"name": a.name, "model": a.model, "steps": cfg.total_steps, "lr": cfg.schedule["lr"], "copy_fraction": a.copy,
           "held-out loss": float(np.mean(heldout_loss(model, eval_windows(budget)))), "wall_s": round(wall, 1),
           **{f"copy gain @{d}": copy_gain(model, tok.vocab_size, tok.eos_id, d)["gain"] for d in (8, L // 4, L // 2 - 8)}}
    if a.model == "B":  # past the training context: plain RoPE against zero-shot YaRN (chapter 9)
        docs = long_test_docs(budget)
        s = budget.pair.yarn_factor
        for name, m in (("plain", model), ("zero-shot YaRN", with_yarn(model, yarn_scaling(budget)))):
            nll = page_nll(m, docs)
            rec[f"{name}: loss {L // 2}-{L}"] = float(nll[:, L // 2:L].mean())
            rec[f"{name}: loss {2 * L}-{s * L}"] = float(nll[:, 2 * L:].mean())
            rec[f"{name}: ppl at {s * L}"] = float(np.exp(nll.mean()))
    results.append_record(a.out, rec, module=__spec__.name, argv=argv)
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
