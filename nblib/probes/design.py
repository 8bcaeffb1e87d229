"""Measure toy-budget design levers before adopting them (chapter 2, "The toy budget: how it
was chosen"; was benchmarks/toy_design_probe.py).

Each probe trains one short-context model and one LCCP continuation through the real run
store and trainer (scratch store: --run-root): the grid's WSD short stage and its Constant
LCCP with ABF (LCCP paper §3.1, App. A.3; `nblib.probes.configs`) on the probed shape, with a
share of synthetic repeated segments as the lever the grid does not have. It then measures on
held-out stdlib files: loss by position bucket, the random-segment copy gain at several
distances, and the wall time. Results are appended as JSON lines to
data/probes/toy_design_probe.jsonl.

    python -m nblib.probes design --name bpe_copy25 --tokenizer bpe:stdlib-1024 \\
        --copy 0.25 --d 48 --layers 2 --heads 4 --kv 2 --short-steps 1500 --long-steps 500
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from nblib.budgets import llama_shape
from nblib.data import build_test_set, get_corpus, get_tokenizer
from nblib.metrics.probes import copy_gain, position_loss
from nblib.probes import configs, results
from nblib.store.runstore import RunConfig, RunStore
from nblib.training.runner import get_or_run

RECORDS = ("toy_design_probe.jsonl",)


def probe_configs(a, tok) -> tuple[RunConfig, RunConfig]:
    """(short stage, LCCP) of one probe: WSD at `a.lr` on `a.short_len` tokens, then Constant
    LCCP at a tenth of it on `a.long_len` tokens with the RoPE base raised 1e4 -> 5e5."""
    model = llama_shape(vocab=tok.vocab_size, d=a.d, layers=a.layers, heads=a.heads, kv=a.kv, ff=a.ff, max_len=4096,
                        tie=a.tie)
    b = configs.probe_budget(model=model, lr=a.lr, batch_short=a.batch_short, warmup_steps=40,
                             short_seq_len=a.short_len, tokenizer=a.tokenizer, batch_long=a.batch_long,
                             long_seq_len=a.long_len, lccp_rope_base=5e5)
    extra = {**({"copy_vocab": a.copy_vocab} if a.copy_vocab else {}),
             **({"copy_len": list(a.copy_len)} if a.copy_len else {})}
    short = configs.with_data(configs.wsd_short(b, a.short_steps * a.batch_short * a.short_len, 0,
                                                label=f"{a.name} short"),
                              copy_fraction=a.copy, **extra)
    cl = a.copy if a.copy_long is None else a.copy_long
    long = configs.with_data(configs.constant_lccp(b, short, a.long_steps * a.batch_long * a.long_len,
                                                   label=f"{a.name} long"),
                             copy_fraction=cl, **extra)
    return short, long


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes design", description=__doc__.splitlines()[0])
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
    p.add_argument("--out", default=RECORDS[0], help="record file (a name in data/probes, or a path)")
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parser().parse_args(argv)
    torch.set_num_threads(2)
    tok = get_tokenizer(a.tokenizer)
    store = RunStore(a.run_root)
    short, long = probe_configs(a, tok)
    t0 = time.time()
    sr = get_or_run(store, short, progress=True)
    t_short = time.time() - t0
    t0 = time.time()
    lr_ = get_or_run(store, long, progress=True)
    t_long = time.time() - t0
    texts = build_test_set(get_corpus("python-stdlib"), tok, a.long_len, 130).texts
    L = a.long_len
    edges = (0, 16, 32, 64, L // 2, L)
    args = {k: v for k, v in vars(a).items() if k != "out"}  # the record's arguments, as the first records wrote them
    out = {"name": a.name, "args": args, "n_params": sr.load_model().n_params(non_embedding=True),
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
    results.append_record(a.out, out, module=__spec__.name, argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
