"""Does copying learned at the short context carry to twice that distance after LCCP?
(chapter 2, "Toward copying models": the LCCP rung of the copy ladder; was
benchmarks/toy_lccp_copy_probe.py).

The rebuilt toy needs every Linear-Decay endpoint at the largest Ds and Dl to copy from at
least twice the short context back. This probe takes one short-stage run of the `lr_batch`
probe (the same scratch store, --run-root), continues it the way the grid's LCCP does
(LCCP paper §3.1, App. A.3: RoPE base raised 1e4 -> 5e5 by ABF, sequences of 8x the short
context from the length mixture, LR a tenth of the short stage's; `configs.constant_lccp`),
and measures the random-segment copy gain (nblib.metrics.probes.copy_gain) at distances of
1/4, 1, 2 and 4 short contexts, before LCCP (the new base applied to the old weights) and at
fixed token counts of it. One JSON line per run goes to data/probes/toy_lccp_copy_probe.jsonl.

    python -m nblib.probes lccp_copy --parent-d 64 --parent-heads 4 --parent-kv 2 \\
        --parent-tokens 12000000 --dl 250000 500000 1000000
"""

from __future__ import annotations

import argparse
import json
import time

from nblib.budgets import LLAMA_VARIANTS
from nblib.data import get_tokenizer
from nblib.metrics.probes import copy_gain
from nblib.probes import configs, results
from nblib.probes.lr_batch import probe_config
from nblib.store.runstore import RunConfig, RunStore
from nblib.training.runner import get_or_run

RECORDS = ("toy_lccp_copy_probe.jsonl",)


def gains(model, tok, short: int) -> dict:
    """Copy gain at 1/4, 1, 2 and 4 short contexts back (16 sequences each)."""
    return {str(s): round(copy_gain(model, tok.vocab_size, tok.eos_id, s, 2, n_seqs=16)["gain"], 3)
            for s in (short // 4, short, 2 * short, 4 * short)}


def parent_config(a, tok) -> RunConfig:
    """The `lr_batch` probe's run that this LCCP continues (its arguments are the --parent-* ones)."""
    shape = argparse.Namespace(d=a.parent_d, layers=a.parent_layers, heads=a.parent_heads, kv=a.parent_kv,
                               ff=a.parent_ff, seq_len=a.seq_len, tokens=a.parent_tokens, at=a.parent_at,
                               warmup=a.parent_warmup, seed=a.parent_seed, tokenizer=a.tokenizer, copy_fraction=0.0,
                               variant=a.parent_variant)
    return probe_config(shape, a.parent_batch, a.parent_lr, tok)


def lccp_config(a, parent: RunConfig) -> RunConfig:
    """Constant LCCP from `parent` at 8x its context, checkpointed at the token counts of --dl."""
    long_len = 8 * a.seq_len
    shape = {k: v for k, v in parent.model.items() if k != "family"}
    b = configs.probe_budget(model=shape, lr=a.parent_lr, batch_short=a.parent_batch, warmup_steps=a.parent_warmup,
                             short_seq_len=a.seq_len, tokenizer=a.tokenizer, batch_long=a.batch, long_seq_len=long_len,
                             lccp_rope_base=a.rope_base)
    tps = a.batch * long_len
    steps = sorted({max(1, round(t / tps)) for t in a.dl})
    return configs.constant_lccp(b, parent, steps[-1] * tps, ckpt_steps=tuple(steps[:-1]), keep_optimizer="last",
                                 label=f"lccp copy probe d{a.parent_d}L{a.parent_layers}"
                                       + (f" {a.parent_variant}" if a.parent_variant != "plain" else ""))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes lccp_copy", description=__doc__.splitlines()[0])
    p.add_argument("--parent-d", type=int, default=64)
    p.add_argument("--parent-layers", type=int, default=4)
    p.add_argument("--parent-heads", type=int, default=4)
    p.add_argument("--parent-kv", type=int, default=2)
    p.add_argument("--parent-batch", type=int, default=16)
    p.add_argument("--parent-lr", type=float, default=5e-3)
    p.add_argument("--parent-tokens", type=int, default=12_000_000)
    p.add_argument("--parent-ff", type=int, default=0, help="the parent's SwiGLU width (0: its default)")
    p.add_argument("--parent-seed", type=int, default=0)
    p.add_argument("--parent-warmup", type=int, default=40)
    p.add_argument("--parent-variant", default="plain", choices=sorted(LLAMA_VARIANTS),
                   help="the parent's Llama variant (nblib.budgets.LLAMA_VARIANTS)")
    p.add_argument("--parent-at", type=float, nargs="+",
                   default=[0.0625, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0],
                   help="the parent probe's --at (its checkpoint steps are part of its config)")
    p.add_argument("--seq-len", type=int, default=128, help="the short context")
    p.add_argument("--dl", type=int, nargs="+", default=[250_000, 500_000, 1_000_000], help="LCCP tokens to measure at")
    p.add_argument("--batch", type=int, default=2, help="LCCP sequences of 8 x seq-len per step")
    p.add_argument("--rope-base", type=float, default=5e5)
    p.add_argument("--tokenizer", default="bpe:stdlib-1024")
    p.add_argument("--name", default="")
    results.add_probe_args(p, RECORDS, run_root="/tmp/lr_batch_runs", threads=1)
    return p


def main(argv=None) -> int:
    argv, a = results.parse_probe_args(parser(), argv)
    tok = get_tokenizer(a.tokenizer)
    store = RunStore(a.run_root)
    parent_cfg = parent_config(a, tok)
    parent = store.run(parent_cfg)
    if not parent.is_complete():
        raise SystemExit(f"error: parent run {parent_cfg.hash} ({parent_cfg.label}) is not in {a.run_root}: "
                         "train it with `python -m nblib.probes lr_batch` first")
    cfg = lccp_config(a, parent_cfg)
    tps = cfg.tokens_per_step
    before = parent.load_model()
    before.set_rope_base(a.rope_base)  # ABF on the old weights: the zero-shot starting point
    points = [{"step": 0, "tokens": 0, "copy_gain": gains(before, tok, a.seq_len)}]
    t0 = time.time()
    run = get_or_run(store, cfg, progress=False)
    wall = time.time() - t0
    for s in sorted(set(cfg.ckpt_steps) | {cfg.total_steps}):
        m = run.load_model("final" if s == cfg.total_steps else s)
        points.append({"step": s, "tokens": s * tps, "copy_gain": gains(m, tok, a.seq_len)})
    out = {"name": a.name, "parent": parent_cfg.label, "parent_run": parent_cfg.hash, "d": a.parent_d,
           "layers": a.parent_layers, "heads": a.parent_heads, "variant": a.parent_variant,
           "parent_seed": a.parent_seed, "short_seq_len": a.seq_len, "long_seq_len": cfg.seq_len, "batch": a.batch,
           "lr": cfg.schedule["lr"], "rope_base": a.rope_base, "n_params": before.n_params(non_embedding=True),
           "wall_s": round(wall, 1), "run": cfg.hash, "points": points}
    print(json.dumps(out), flush=True)
    results.append_record(a.out, out, module=__spec__.name, argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
