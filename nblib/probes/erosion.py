"""What erodes along a Constant LCCP trajectory (chapter 2, "What erodes"; LCCP paper §4.1-4.2).

The paper's constant-LR LCCP keeps improving LongPPL to 120N (§4.2, Fig. 6). On the toy, at
the paper's LCCP LR (a tenth of the short stage's, App. A.3), LongPPL bottoms out after some
tens of N(S1) and rises again while ShortPPL keeps falling. This probe follows one Constant
trajectory (the grid's `lccp_constant` config at `--lr-frac` of the short LR, with
`--batch-long` sequences per step and `--kv-heads` KV heads at the probed scale, in both stages;
`--aligned`: LCCP sequences are whole segments of long documents, Budget.lccp_aligned)
and, at each checkpoint, measures what the rise could be made of:

- attention mass by distance: for every (layer, head), the share of attention that queries
  in the second half of held-out LCCP windows put 0-15, 16-127, 128-511 and 512+ tokens back;
- the smear gates s = sigmoid(a) of every layer's KV heads (how much each key is its own
  token rather than the previous one; the toy's smeared keys);
- the random-segment copy gain at 128, 256 and 512 tokens back;
- LongPPL and ShortPPL on the evaluation set (file beginnings, App. A.1) and on middles of
  long held-out files (what LCCP trains on), each annotated by the book's reference.

One JSON line per (trajectory, checkpoint) goes to data/probes/toy_erosion_probe.jsonl. It
trains what the store lacks (the reference first, as chapter 2 does).

    python -m nblib.probes erosion --scale S4 --kv-heads 1 3 --points 0 10 30 60 120
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np
import torch

from nblib.budgets import Budget
from nblib.budgets.budget_file import add_budget_args, budget_from_args
from nblib.data import get_corpus, get_tokenizer, make_stream
from nblib.data.corpus import split_documents
from nblib.lccp import grid
from nblib.lccp.evaluation import Evaluator, reference_key, reference_scorer
from nblib.metrics.attention_maps import attention_probs
from nblib.metrics.longppl import evaluate, load_or_annotate
from nblib.metrics.probes import copy_gain
from nblib.probes import results
from nblib.store.runstore import RunStore
from nblib.training.runner import get_or_run, get_or_run_many

RECORDS = ("toy_erosion_probe.jsonl",)
DISTANCE_BINS = (0, 16, 128, 512)  # lower edges, tokens back: local, near, 2x-4x the short context, beyond
COPY_DISTANCES = (128, 256, 512)


def probe_budget(b: Budget, scale: str, lr_frac: float, batch_long: int, n_kv_heads: int | None = None) -> Budget:
    """The budget whose `lccp_constant` config is the probed trajectory: LCCP at `lr_frac` of the
    short LR, `batch_long` sequences per LCCP step and `n_kv_heads` KV heads at `scale` (both
    stages: the short stage is the variant's own; None keeps the budget's)."""
    heads = b.scale(scale).model["n_heads"]
    if n_kv_heads is not None and (n_kv_heads < 1 or heads % n_kv_heads):
        raise ValueError(f"n_kv_heads={n_kv_heads} is not allowed at {scale}: a divisor of its {heads} query heads")
    if n_kv_heads is not None and n_kv_heads != b.scale(scale).model["n_kv_heads"]:
        b = b.with_model(scale, n_kv_heads=n_kv_heads)
    return dataclasses.replace(b.with_scale(scale, batch_long=batch_long), lccp_lr_frac=lr_frac)


def trajectory(b: Budget, scale: str, ds: float, until: float, short_from: Budget | None = None):
    """The grid's Constant trajectory at (scale, Ds) to Dl = until, checkpoints every budget
    spacing; from `short_from`'s short stage when given (its KV heads expanded to `b`'s at the
    start of LCCP, `nblib.models.llama.expand_kv_heads`), else from `b`'s own."""
    cfg = grid.lccp_constant(b, scale, ds, until, 0)
    if short_from is None:
        return cfg
    parent = grid.short_stage(short_from, scale).wsd[ds]
    return dataclasses.replace(cfg, init={**cfg.init, "run": parent.hash, "step": parent.total_steps},
                               meta={**cfg.meta, "kv_expanded_from": short_from.scale(scale).model["n_kv_heads"]})


def middle_texts(b: Budget, n: int, length: int, seed: int = 0, min_n: int = 16) -> list[str]:
    """Up to `n` held-out texts of `length` tokens cut from the middle of files at least twice
    that long (ValueError if fewer than `min_n` files are): the text LCCP trains on, where the
    evaluation set holds file beginnings (App. A.1)."""
    tok = get_tokenizer(b.tokenizer)
    docs = split_documents(list(get_corpus(b.corpus)), "eval", 0.1)
    out = []
    for d in docs:
        ids, off = tok.encode_with_offsets(d.text)
        if len(ids) >= 2 * length:
            a = len(ids) // 2 - length // 2
            out.append(d.text[int(off[a, 0]):int(off[a + length - 1, 1])])
    if len(out) < min_n:
        raise ValueError(f"only {len(out)} held-out files have >= {2 * length} tokens; at least min_n={min_n} needed")
    n = min(n, len(out))
    pick = np.random.default_rng([seed]).permutation(len(out))[:n]
    return [out[i] for i in sorted(pick)]


def attention_by_distance(model, windows: torch.Tensor, bins=DISTANCE_BINS) -> list[dict]:
    """Per (layer, head): the mean share of attention that queries in the second half of each
    window put on keys [lo, hi) tokens back, for consecutive `bins` edges (the last bin open)."""
    T = windows.size(1)
    dist = (torch.arange(T)[:, None] - torch.arange(T)[None, :])
    edges = [e for e in bins if e < T] + [T]  # no key is T or more tokens back
    rows = []
    for layer, p in attention_probs(model, windows).items():
        p = p[:, :, T // 2:, :]  # queries with the whole first half behind them
        d = dist[T // 2:]
        for h in range(p.size(1)):
            shares = {f"{lo}-{hi - 1}" if hi < T else f"{lo}+": float(((d >= lo) & (d < hi)).to(p.dtype)
                      .mul(p[:, h]).sum(-1).mean())
                      for lo, hi in zip(edges[:-1], edges[1:])}
            rows.append({"layer": layer, "head": h, **shares})
    return rows


def smear_gates(model) -> list[list[float]]:
    """sigmoid(a) of every layer's KV heads (1: the key is its own token; 0.5: half the previous one)."""
    return [torch.sigmoid(blk.attn.k_smear.detach()).tolist() for blk in model.blocks
            if getattr(blk.attn, "k_smear", None) is not None]


def checkpoint_record(model, ev: Evaluator, middles, middle_ann, windows, tok) -> dict:
    """Every measure of one checkpoint (the module docstring lists them)."""
    begin = ev._evaluate(model)
    mid = evaluate(model, tok, middles, middle_ann, max_len=ev.budget.long_seq_len)
    return {"longppl": begin["long_ppl"], "shortppl": begin["short_ppl"],
            "longppl_middle": mid["long_ppl"], "shortppl_middle": mid["short_ppl"],
            "copy_gain": {str(d): copy_gain(model, tok.vocab_size, tok.eos_id, d)["gain"] for d in COPY_DISTANCES},
            "smear": smear_gates(model), "attention": attention_by_distance(model, windows)}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes erosion", description=__doc__.splitlines()[0])
    add_budget_args(p, default="F", grids=True,
                    help="the grid probed (F: budgets.grid_f, the grid its records were taken on)")
    p.add_argument("--scale", default="S4")
    p.add_argument("--ds", type=float, default=270)
    p.add_argument("--lr-frac", type=float, default=0.1)
    p.add_argument("--batch-long", type=int, default=4)
    p.add_argument("--kv-heads", type=int, nargs="+", default=None,
                   help="KV heads at the probed scale, one trajectory each (default: 1 and one per query head)")
    p.add_argument("--points", type=float, nargs="+", default=[0, 10, 30, 60, 120], help="Dl in the budget's unit")
    p.add_argument("--expand-kv", action="store_true",
                   help="start every trajectory from the budget's own short stage, its KV heads copied out to "
                        "--kv-heads at the start of LCCP (instead of a short stage of that layout)")
    p.add_argument("--heads", type=int, default=0,
                   help="query heads at the probed scale (0: the budget's); the token unit keeps the budget's tokens")
    p.add_argument("--head-size", type=int, default=0, help="their width (0: the budget's, d / heads)")
    p.add_argument("--aligned", action="store_true",
                   help="LCCP on aligned windows (Budget.lccp_aligned: a long document's segments are sequences "
                        "of their own, App. A.4) instead of windows cut across pieces")
    p.add_argument("--n-windows", type=int, default=16)
    results.add_probe_args(p, RECORDS, run_root="runs", threads=2)
    return p


def main(argv=None) -> int:
    p = parser()
    argv, a = results.parse_probe_args(p, argv)
    base, name = budget_from_args(p, a)
    ds = int(a.ds) if float(a.ds).is_integer() else a.ds
    store = RunStore(a.run_root)
    ev = Evaluator.build(base, store)
    tok = ev.tokenizer
    L = base.long_seq_len
    middles = middle_texts(base, base.longppl.n_docs, L)
    ann_path = store.root / "annotations" / f"{base.name}-longppl-middles-{reference_key(base)}.json"
    middle_ann = load_or_annotate(ann_path, reference_scorer(base, store), None, middles, base.longppl)
    eval_data = {**grid.data_config(base, "long"), "split": "eval"}
    stream = make_stream(eval_data, 0)
    windows = stream.batch(0, a.n_windows)[0]
    shape = base  # the probed scale's head layout (--heads, --head-size), counted in the budget's token unit
    if a.heads or a.head_size:
        shape = base.with_model(a.scale, n_heads=a.heads or base.scale(a.scale).model["n_heads"],
                                **({"head_size": a.head_size} if a.head_size else {}))
        if base.token_unit:
            shape = dataclasses.replace(shape, token_unit_tokens=base.n_tokens(base.token_unit, 1))
    heads = shape.scale(a.scale).model["n_heads"]
    for kv in a.kv_heads or sorted({1, heads}):
        b = probe_budget(shape, a.scale, a.lr_frac, a.batch_long, kv)
        b = dataclasses.replace(b, lccp_aligned=True) if a.aligned else b
        expand = a.expand_kv and kv != shape.scale(a.scale).model["n_kv_heads"]
        cfg = trajectory(b, a.scale, ds, max(a.points), short_from=shape if expand else None)
        short = grid.short_stage(shape if expand else b, a.scale)
        t0 = time.time()
        get_or_run_many(store, [short.trunk, short.wsd[ds]], workers=1, progress=False)
        run = get_or_run(store, cfg, progress=True)
        wall = time.time() - t0
        spec = b.scale(a.scale)
        for dl in a.points:
            if dl == 0:
                model = store.run(short.wsd[ds]).load_model()
                model.set_rope_base(b.rope_bases[1])  # the short-stage weights with the LCCP base
                step = 0
            else:
                step = grid.checkpoint_step(cfg, dl)
                model = run.load_model(step)
            with torch.no_grad():
                rec = checkpoint_record(model, ev, middles, middle_ann, windows, tok)
            rec = {"budget": name, "scale": a.scale, "ds_mult": ds, "lr_frac": a.lr_frac,
                   "kv_expanded_from": shape.scale(a.scale).model["n_kv_heads"] if expand else None,
                   "batch_long": a.batch_long, **({"aligned": True} if a.aligned else {}), "n_heads": spec.model["n_heads"],
                   "n_kv_heads": spec.model["n_kv_heads"], "n_params": b.n_params(a.scale), "unit": b.unit,
                   **({"head_size": spec.model["head_size"]} if spec.model.get("head_size") else {}),
                   "run": cfg.hash, "dl": dl, "step": step, "train_wall_s": round(wall, 1), **rec}
            results.append_record(a.out, rec, module=__spec__.name, argv=argv)
            print(json.dumps({k: v for k, v in rec.items() if k != "attention"}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
