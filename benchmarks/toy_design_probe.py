"""Measure toy-budget design levers before adopting them (chapter 2, "toy budget").

Each probe trains one short-context model and one LCCP continuation through the real run
store and trainer (scratch store: --run-root), then measures on held-out stdlib files:
loss by position bucket, the random-segment copy gain at several distances, and the wall
time. Results are appended as JSON lines to benchmarks/results/toy_design_probe.jsonl.

    python benchmarks/toy_design_probe.py --name bpe_copy25 --tokenizer bpe:stdlib-1024 \
        --copy 0.25 --d 48 --layers 2 --heads 4 --kv 2 --short-steps 1500 --long-steps 500
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from nblib.data import build_test_set, corpus_identity, get_corpus, get_tokenizer
from nblib.metrics.probes import copy_gain, position_loss
from nblib.store.atomic import append_jsonl
from nblib.store.runstore import RunConfig, RunStore
from nblib.training.runner import get_or_run

OUT = Path(__file__).resolve().parent / "results" / "toy_design_probe.jsonl"


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--tokenizer", default="bpe:stdlib-1024")
    p.add_argument("--copy", type=float, default=0.0, help="synthetic repeated-segment share, both stages")
    p.add_argument("--copy-long", type=float, default=None, help="share in LCCP (default: --copy)")
    p.add_argument("--d", type=int, default=48)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv", type=int, default=2)
    p.add_argument("--ff", type=int, default=0)
    p.add_argument("--short-len", type=int, default=32)
    p.add_argument("--long-len", type=int, default=256)
    p.add_argument("--short-steps", type=int, default=1500)
    p.add_argument("--long-steps", type=int, default=500)
    p.add_argument("--batch-short", type=int, default=16)
    p.add_argument("--batch-long", type=int, default=2)
    p.add_argument("--lr", type=float, default=2e-2)
    p.add_argument("--tie", action="store_true")
    p.add_argument("--copy-vocab", type=int, default=0)
    p.add_argument("--copy-len", type=int, nargs=2, default=None, help="segment length range [lo, hi]")
    p.add_argument("--run-root", default="/tmp/probe_runs")
    a = p.parse_args(argv)
    torch.set_num_threads(2)
    tok = get_tokenizer(a.tokenizer)
    ff = a.ff or int(8 * a.d / 3 // 8 * 8)
    model = {"family": "llama", "vocab_size": tok.vocab_size, "d_model": a.d, "n_layers": a.layers,
             "n_heads": a.heads, "n_kv_heads": a.kv, "d_ff": ff, "rope_base": 1e4, "max_seq_len": 4096,
             **({"tie_embeddings": True} if a.tie else {})}
    extra = {**({"copy_vocab": a.copy_vocab} if a.copy_vocab else {}),
             **({"copy_len": list(a.copy_len)} if a.copy_len else {})}
    base = {"corpus": "python-stdlib", "corpus_id": corpus_identity("python-stdlib"), "tokenizer": a.tokenizer,
            "split": "train"}
    store = RunStore(a.run_root)
    short = RunConfig(model=model, data={**base, "stream": "packed", "seq_len": a.short_len, "copy_fraction": a.copy,
                                          **extra},
                      schedule={"kind": "wsd", "lr": a.lr, "warmup_steps": 40, "decay_frac": 1 / 9, "final_lr_frac": 0.1},
                      n_tokens=a.short_steps * a.batch_short * a.short_len, batch_size=a.batch_short, seed=0,
                      budget="toy", label=f"{a.name} short")
    t0 = time.time()
    sr = get_or_run(store, short, progress=True)
    t_short = time.time() - t0
    cl = a.copy if a.copy_long is None else a.copy_long
    long = RunConfig(model=model, data={**base, "stream": "long_mixture", "seq_len": a.long_len, "mixture": "natural",
                                        "copy_fraction": cl, **extra},
                     schedule={"kind": "constant", "lr": a.lr / 10}, n_tokens=a.long_steps * a.batch_long * a.long_len,
                     batch_size=a.batch_long, seed=0, budget="toy",
                     init={"run": short.hash, "step": short.total_steps, "mode": "weights", "rope_base": 5e5},
                     label=f"{a.name} long")
    t0 = time.time()
    lr_ = get_or_run(store, long, progress=True)
    t_long = time.time() - t0
    texts = build_test_set(get_corpus("python-stdlib"), tok, a.long_len, 130).texts
    L = a.long_len
    edges = (0, 16, 32, 64, L // 2, L)
    out = {"name": a.name, "args": vars(a), "n_params": sr.load_model().n_params(non_embedding=True),
           "wall_short_s": round(t_short, 1), "wall_long_s": round(t_long, 1)}
    for tag, run, length in (("short", sr, min(a.short_len * 4, L)), ("long", lr_, L)):
        m = run.load_model()
        out[f"{tag}_pos_loss"] = [round(v, 3) for v in position_loss(m, texts, tok, length, edges)]
        out[f"{tag}_copy"] = {s: round(copy_gain(m, tok.vocab_size, tok.eos_id, s, 2)["gain"], 3)
                              for s in (16, 64, L // 2)}
        if a.copy_vocab:  # also on the sub-vocabulary the synthetic segments were drawn from
            out[f"{tag}_copy_subvocab"] = {s: round(copy_gain(m, a.copy_vocab + 1, a.copy_vocab, s, 2)["gain"], 3)
                                           for s in (16, 64, L // 2)}
    print(json.dumps(out))
    append_jsonl(OUT, out)


if __name__ == "__main__":
    main()
