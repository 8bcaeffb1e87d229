"""Loss against step at several batch sizes and LRs per toy shape (chapter 2, "Toward copying
models"; was benchmarks/toy_lr_batch_probe.py).

The rebuilt toy's short stage must keep learning through its stable phase and learn to copy
inside its context (LCCP paper §3.1 and App. A.3 train the short stage WSD at a stable LR).
This probe trains one short-stage run per (shape, batch, LR): the grid's stable trunk
(`nblib.probes.configs.constant_short`: warmup, then a constant LR) of the probed shape,
through the real run store and trainer (a scratch store: --run-root), keeps checkpoints at
fixed token counts, and measures at each of them:
- held-out loss: mean NLL over the first `seq_len` tokens of held-out stdlib files;
- the random-segment copy gain (nblib.metrics.probes.copy_gain) at segments of seq_len/4
  and seq_len/2 tokens, i.e. copying from that far back inside the context.
Equal tokens for every batch size, as in the critical-batch-size literature (McCandlish et
al. 2018): a batch below the critical one reaches a loss in fewer tokens, one above it in
fewer steps. One JSON line per run goes to data/probes/toy_lr_batch_probe.jsonl (or --out).

    python -m nblib.probes lr_batch --d 48 --layers 4 --heads 4 --kv 2 \\
        --batches 8 32 --lrs 3e-3 1e-2 --tokens 4000000 --seq-len 128

--variant picks a named architecture variant of the Llama (nblib.budgets.LLAMA_VARIANTS:
"plain", the paper's model and the default, or "smeared"). Chapter 2's smeared-key ablation
is, per width and seed (one thread each, one run at a time), records in toy_smear_ablation.jsonl:

    python -m nblib.probes lr_batch --d 32 --layers 2 --heads 2 --kv 1 --batches 32 --lrs 1e-2 \\
        --tokens 2000000 --at 0.25 0.5 0.75 1 --variant smeared --seed 0 --name ablation-d32 \\
        --out toy_smear_ablation.jsonl

and chapter 2's grid shapes (the 2-layer smeared-key model at each toy width, heads of 32)
went to toy_grid_shapes.jsonl the same way (`--out toy_grid_shapes.jsonl`).
"""

from __future__ import annotations

import argparse
import json
import time

from nblib.budgets import LLAMA_VARIANTS, llama_shape
from nblib.data import build_test_set, get_corpus, get_tokenizer
from nblib.metrics.probes import copy_gain, position_loss
from nblib.probes import configs, results
from nblib.store.runstore import RunConfig, RunStore
from nblib.training.runner import get_or_run

RECORDS = ("toy_lr_batch_probe.jsonl", "toy_smear_ablation.jsonl", "toy_grid_shapes.jsonl")


def probe_config(a, batch: int, lr: float, tok) -> RunConfig:
    """One constant-LR short-stage run of the probed shape (Muon + AdamW, as the grid trains):
    the grid's stable trunk on a probe budget, checkpointed at the fractions `a.at` of `a.tokens`."""
    model = llama_shape(vocab=tok.vocab_size, d=a.d, layers=a.layers, heads=a.heads, kv=a.kv, ff=a.ff, max_len=4096,
                        tie=True, variant=a.variant)
    b = configs.probe_budget(model=model, lr=lr, batch_short=batch, warmup_steps=a.warmup, short_seq_len=a.seq_len,
                             tokenizer=a.tokenizer)
    steps = [max(1, int(round(f * a.tokens / (batch * a.seq_len)))) for f in a.at]
    label = (f"lr-batch probe d{a.d}L{a.layers} b{batch} lr{lr:g}"
             + (f" copy{a.copy_fraction:g}" if a.copy_fraction else "") + (f" {a.variant}" if a.variant != "plain" else ""))
    cfg = configs.constant_short(b, a.tokens, a.seed, ckpt_steps=tuple(steps), label=label)
    # the copy-rich lever: synthetic repeated segments mixed in (CopyMixStream)
    return configs.with_data(cfg, copy_fraction=a.copy_fraction) if a.copy_fraction else cfg


def measure(run, step: int, last: int, texts, tok, seq_len: int) -> dict:
    """Held-out loss and the copy gain at seq_len/4 and seq_len/2 of one checkpoint."""
    m = run.load_model("final" if step == last else step)
    loss = position_loss(m, texts, tok, seq_len, (0, seq_len))[0]
    gains = {str(s): round(copy_gain(m, tok.vocab_size, tok.eos_id, s, 2)["gain"], 3)
             for s in (seq_len // 4, seq_len // 2)}
    return {"step": int(step), "heldout_loss": round(loss, 4), "copy_gain": gains}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes lr_batch", description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=48)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv", type=int, default=2)
    p.add_argument("--ff", type=int, default=0)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batches", type=int, nargs="+", default=[8, 32])
    p.add_argument("--lrs", type=float, nargs="+", default=[3e-3, 1e-2])
    p.add_argument("--tokens", type=int, default=4_000_000)
    p.add_argument("--at", type=float, nargs="+", default=[0.125, 0.25, 0.5, 0.75, 1.0],
                   help="fractions of --tokens at which to measure")
    p.add_argument("--warmup", type=int, default=40)
    p.add_argument("--copy-fraction", type=float, default=0.0,
                   help="share of training sequences replaced by a repeated random segment")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tokenizer", default="bpe:stdlib-1024")
    p.add_argument("--name", default="")
    p.add_argument("--variant", default="plain", choices=sorted(LLAMA_VARIANTS),
                   help="architecture variant of the Llama (nblib.budgets.LLAMA_VARIANTS)")
    results.add_probe_args(p, RECORDS, run_root="/tmp/lr_batch_runs", threads=1)
    return p


def main(argv=None) -> int:
    argv, a = results.parse_probe_args(parser(), argv)
    tok = get_tokenizer(a.tokenizer)
    texts = build_test_set(get_corpus("python-stdlib"), tok, a.seq_len, 64).texts
    store = RunStore(a.run_root)
    for batch in a.batches:
        for lr in a.lrs:
            cfg = probe_config(a, batch, lr, tok)
            t0 = time.time()
            run = get_or_run(store, cfg, progress=False)
            wall = time.time() - t0
            steps = sorted(set(cfg.ckpt_steps) | {cfg.total_steps})
            out = {"name": a.name, "variant": a.variant, "seed": a.seed, "d": a.d, "layers": a.layers, "heads": a.heads,
                   "kv": a.kv, "seq_len": a.seq_len, "batch": batch, "lr": lr, "copy_fraction": a.copy_fraction,
                   "tokens": cfg.realized_tokens, "steps": cfg.total_steps,
                   "n_params": run.load_model().n_params(non_embedding=True), "wall_s": round(wall, 1),
                   "threads": a.threads, "run": cfg.hash,
                   "points": [measure(run, s, cfg.total_steps, texts, tok, a.seq_len) for s in steps]}
            print(json.dumps(out), flush=True)
            results.append_record(a.out, out, module=__spec__.name, argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
