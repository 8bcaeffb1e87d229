"""Measure design levers of the toy Models A and B (chapter 6) before adopting them.

Each probe trains one model of the toy pair (`nblib.budgets.ModelPairSpec`) through the
real run store and trainer in a scratch store (--run-root), with one lever changed: the
number of steps, the learning rate, or a share of synthetic repeated segments in the
stream, or Model B's RoPE base. It then measures the held-out loss (the first L + 1 tokens
of held-out files) and the random-segment copy gain at distances 8, L/4 and L/2 - 8; for
Model B also the loss past L of plain RoPE and of zero-shot YaRN on held-out pages of s*L
tokens (chapter 9). Results are appended as
JSON lines to benchmarks/results/pair_probe.jsonl, which chapter 6 shows.

    python benchmarks/pair_probe.py --name A_1200steps --model A --steps 1200
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from nblib.budgets import get_budget
from nblib.data import get_tokenizer
from nblib.gemma.extension import long_test_docs, page_nll, with_yarn, yarn_scaling
from nblib.gemma.pair import eval_windows, heldout_loss, pair_configs
from nblib.metrics.probes import copy_gain
from nblib.store.atomic import append_jsonl
from nblib.store.runstore import RunConfig, RunStore
from nblib.training.runner import get_or_run

OUT = Path(__file__).resolve().parent / "results" / "pair_probe.jsonl"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--name", required=True)
    p.add_argument("--model", choices=("A", "B"), required=True)
    p.add_argument("--steps", type=int, default=0, help="training steps (default: the toy pair's)")
    p.add_argument("--lr", type=float, default=0.0, help="peak LR (default: the toy pair's)")
    p.add_argument("--copy", type=float, default=0.0, help="share of synthetic repeated-segment sequences")
    p.add_argument("--rope-base", type=float, default=0.0, help="Model B's RoPE base, local and global (default 1e4)")
    p.add_argument("--run-root", default="/tmp/pair_probe_runs")
    a = p.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    budget = get_budget("toy")
    L = budget.pair.seq_len
    base = pair_configs(budget)[a.model].to_dict()
    steps = a.steps or base["n_tokens"] // (base["batch_size"] * L)
    if a.rope_base:
        if a.model != "B":
            raise SystemExit("--rope-base applies to Model B only")
        base["model"] = {**base["model"], "rope_local_base": a.rope_base, "rope_global_base": a.rope_base}
    data = {**base["data"], **({"copy_fraction": a.copy, "copy_len": [16, L // 2]} if a.copy else {})}
    cfg = RunConfig.from_dict({**base, "data": data, "n_tokens": steps * base["batch_size"] * L,
                               "schedule": {**base["schedule"], **({"lr": a.lr} if a.lr else {})},
                               "label": f"probe {a.name}", "ckpt_every_tokens": None})
    t0 = time.time()
    run = get_or_run(RunStore(a.run_root), cfg)
    wall = time.time() - t0
    model = run.load_model()
    tok = get_tokenizer(budget.pair.tokenizer)
    rec = {"name": a.name, "model": a.model, "steps": steps, "lr": cfg.schedule["lr"], "copy_fraction": a.copy,
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
    append_jsonl(OUT, rec)
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
