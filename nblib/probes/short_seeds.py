"""Does every short-stage seed keep learning? The grid's short stage at several stable LRs and
seeds, scored on held-out text at the short context (chapter 11, "The N axis").

The LCCP paper's law (§3.2, Eq. 1) has LongPPL fall with N and with Ds. On the book's toy grid
the N-axis probe (`nblib.probes.n_axis`) found the short-stage seed, not N, deciding LongPPL
after LCCP: at S2 and S3 one short seed in three was 0.5-0.85 higher in ShortPPL after LCCP
(Dl 10) than the other two, barely moving from Ds 270 to 450, and 3.6-6.1 higher in LongPPL.
Either its short stage stalled on a plateau, or LCCP treats its checkpoint differently. The
short stage trains at a stable LR of 1e-2 (App. A.3: WSD, warmup, a constant LR, a decay over
the last 1/9 of the steps); at a smaller shape and batch every LR below 2e-2 trained lower, so
a plateau would point at the LR. This probe tells the two apart without the LongPPL reference
or any LCCP run: for each scale of `--scales`, stable LR of `--lrs` and seed of
`--seeds` it trains the grid's short stage (`grid.short_stage`: the stable trunk and a WSD decay
at each Ds of `--ds`, which may lie outside the budget's own Ds) with only that scale's LR
replaced, and scores on the LongPPL test documents (`evaluation.test_set`) cut into windows of
the short context:
- the held-out loss of each decayed run, and of the trunk at that run's decay start;
- the random-segment copy gain (nblib.metrics.probes.copy_gain) of each decayed run at a
  segment of a quarter and of half the short context.
With `--dls`, it also trains the grid's Linear-Decay LCCP (§3.1) for each Dl from each decayed
run (`grid.lccp_linear_decay`, LCCP data order seed 0) at the budget's own LCCP LR whatever the
short LR, and scores its held-out loss at the long context inside the short context's span and
beyond it (positions below and from the short context on): how far LCCP moves the seeds apart,
without the reference that LongPPL needs.

    python -m nblib.probes short_seeds --budget-file data/probes/grid_designs/Ve.toml \\
        --scales S2 S3 --lrs 1e-2 5e-3 --seeds 0 1 2 --ds 90 270
    python -m nblib.probes short_seeds --budget-file data/probes/grid_designs/Ve2.toml \\
        --scales S2 S3 --seeds 0 1 2 --ds 90 270 --dls 10 30

One JSON line per (scale, LR, seed, Ds[, Dl]) goes to data/probes/toy_short_seeds.jsonl (an LCCP
line's `precision` is its run's autocast precision, None for fp32); `short_seed_table` and
`short_seed_lccp_table` read them as chapter 11 shows them. It trains what the store lacks in one pool.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import torch

from nblib.budgets import Budget, BudgetError, get_budget
from nblib.budgets.budget_file import add_budget_args, budget_from_args, load_budget_file
from nblib.data import get_tokenizer
from nblib.lccp import grid
from nblib.lccp.evaluation import test_set
from nblib.metrics.probes import copy_gain, heldout_loss, position_loss
from nblib.probes import results
from nblib.probes.n_axis import latest_records
from nblib.store.provenance import REPO_ROOT
from nblib.store.runstore import RunStore
from nblib.training.runner import get_or_run_many

RECORDS = ("toy_short_seeds.jsonl",)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes short_seeds", description=__doc__.splitlines()[0])
    add_budget_args(p, default="toy", help="the budget whose short stage is probed")
    p.add_argument("--scales", nargs="+", default=["S2", "S3"], help="scales")
    p.add_argument("--lrs", type=float, nargs="+", default=[], help="stable LRs of the short stage (default: the budget's)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="short-stage seeds (0: the grid's)")
    p.add_argument("--ds", type=float, nargs="+", default=[], help="Ds multiples (default: the budget's)")
    p.add_argument("--dls", type=float, nargs="*", default=[], help="Linear-Decay LCCP budgets Dl (default: none)")
    p.add_argument("--run-root", default="runs", help="the run store (default: the book's)")
    p.add_argument("--out", default=RECORDS[0], help="record file (a name in data/probes, or a path)")
    return p


def with_short_lr(budget: Budget, scale: str, lr: float) -> Budget:
    """`budget` with `scale`'s stable short-stage LR replaced and LCCP's starting LR at `scale`
    kept (`lccp_lr_frac` scaled to match; App. A.3 starts LCCP at a tenth of the short LR). Use
    it for `scale`'s runs only: another scale's LCCP LR moves with the fraction."""
    frac = budget.lccp_lr_frac * budget.scale(scale).lr / lr
    return replace(budget, lccp_lr_frac=frac, scales={**budget.scales, scale: replace(budget.scale(scale), lr=lr)})


def _number(x: float):
    return int(x) if float(x).is_integer() else x


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    a = p.parse_args(argv)
    b, budget_name = budget_from_args(p, a)
    unknown = [s for s in a.scales if s not in b.scales]
    if unknown:
        p.exit(2, f"error: --scales {' '.join(unknown)} not allowed; allowed: {', '.join(b.scales)}\n")
    if any(not lr > 0 for lr in a.lrs):
        p.exit(2, f"error: --lrs {a.lrs} not allowed; allowed: LRs > 0\n")
    if any(s < 0 for s in a.seeds) or len(set(a.seeds)) != len(a.seeds):
        p.exit(2, f"error: --seeds {a.seeds} not allowed; allowed: distinct seeds >= 0\n")
    ds_list = tuple(sorted(_number(d) for d in (a.ds or b.ds_multiples)))
    if any(not d > 0 for d in ds_list) or len(set(ds_list)) != len(ds_list):
        p.exit(2, f"error: --ds {list(ds_list)} not allowed; allowed: distinct Ds multiples > 0\n")
    dls = tuple(_number(d) for d in a.dls)
    if any(not d > 0 for d in dls) or len(set(dls)) != len(dls):
        p.exit(2, f"error: --dls {list(dls)} not allowed; allowed: distinct Dl multiples > 0\n")
    plan, cfgs = [], []
    try:
        for scale in a.scales:
            for lr in a.lrs or [b.scale(scale).lr]:
                bb = with_short_lr(b, scale, lr)
                for seed in a.seeds:
                    st = grid.short_stage(bb, scale, seed, ds_multiples=ds_list)
                    lds = {(ds, dl): grid.lccp_linear_decay(bb, scale, ds, dl, short_seed=seed, ds_multiples=ds_list)
                           for ds in ds_list for dl in dls}
                    cfgs += st.all() + list(lds.values())
                    plan.append((scale, lr, seed, st, lds))
    except BudgetError as e:  # a Ds too small for its WSD decay, named by the grid
        p.exit(2, f"error: {e}\n")
    store = RunStore(a.run_root)
    t0 = time.time()
    get_or_run_many(store, list({c.hash: c for c in cfgs}.values()), desc="short seeds")
    texts, tok = list(test_set(b).texts), get_tokenizer(b.tokenizer)
    L = b.short_seq_len
    rows = []
    for scale, lr, seed, st, lds in plan:
        trunk = store.run(st.trunk)
        for ds, cfg in st.wsd.items():
            run = store.run(cfg)
            model = run.load_model()
            with torch.no_grad():
                gains = {q: copy_gain(model, tok.vocab_size, tok.eos_id, L // q)["gain"] for q in (4, 2)}
            start = (cfg.init or {}).get("step")
            short_row = {"budget": budget_name, "scale": scale, "n_params": b.n_params(scale), "lr": lr, "seed": seed,
                         "ds": ds, "unit": b.unit, "short_precision": b.short_precision(scale),
                         "heldout_loss": heldout_loss(model, texts, tok, L),
                         "stable_loss": heldout_loss(trunk.load_model(start), texts, tok, L) if start else None,
                         f"copy_gain_{L // 4}": gains[4], f"copy_gain_{L // 2}": gains[2],
                         "run": cfg.hash, "wall_s": round(time.time() - t0, 1)}
            rows.append(short_row)
            for (ds_, dl), ld in lds.items():
                if ds_ != ds:
                    continue
                near, far = position_loss(store.run(ld).load_model(), texts, tok, b.long_seq_len,
                                          edges=(0, L, b.long_seq_len))
                rows.append({**short_row, "dl": dl, "lccp_lr": ld.schedule["lr"], "precision": ld.precision,
                             f"long_loss_below_{L}": near, f"long_loss_from_{L}": far, "run": ld.hash,
                             "wall_s": round(time.time() - t0, 1)})
    results.append_records(a.out, rows, module=__spec__.name, argv=argv)
    print(short_seed_table(pd.DataFrame(rows)).to_string(index=False), flush=True)
    return 0


def short_seed_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per (budget, scale, LR, Ds) of the probe's records: the seeds, the mean, lowest and
    highest held-out loss of the decayed short stage over them, and the seed spread (highest
    minus lowest), in nats at the short context."""
    if "dl" in records:  # the LCCP rows repeat their short stage's scores
        records = records[records["dl"].isna()]
    g = records.groupby(["budget", "scale", "lr", "ds"], sort=False)["heldout_loss"]
    out = g.agg(seeds="count", mean="mean", lowest="min", highest="max").reset_index()
    return out.assign(spread=out["highest"] - out["lowest"])


def short_seed_lccp_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per (budget, scale, short LR, LCCP LR, Ds, Dl) of the probe's LCCP records (`--dls`): the
    seeds, and over them the mean and the spread (highest minus lowest) of the held-out loss at
    the long context below the short context's length and from it on, beside the spread of the
    same seeds' short stages (nats). Empty without LCCP records."""
    if "dl" not in records or records["dl"].isna().all():
        return pd.DataFrame()
    lccp = records[records["dl"].notna()]
    near, far = (next(c for c in lccp if c.startswith(k)) for k in ("long_loss_below_", "long_loss_from_"))
    g = lccp.groupby(["budget", "scale", "lr", "lccp_lr", "ds", "dl"], sort=False)
    out = g.agg(seeds=("seed", "count"), short_spread=("heldout_loss", lambda x: x.max() - x.min()),
                within_mean=(near, "mean"), within_spread=(near, lambda x: x.max() - x.min()),
                beyond_mean=(far, "mean"), beyond_spread=(far, lambda x: x.max() - x.min())).reset_index()
    return out.rename(columns={"within_mean": f"{near} mean", "within_spread": f"{near} spread",
                               "beyond_mean": f"{far} mean", "beyond_spread": f"{far} spread"})


def lccp_seed_spread(n_axis_records: pd.DataFrame) -> pd.DataFrame:
    """The same seeds after LCCP: per (budget, scale, Ds, Dl) of the N-axis probe's records
    (`nblib.probes.n_axis`), the number of short seeds and the spread (highest minus lowest) of
    log LongPPL over them, with the short stage's stable LR of that budget (a budget's name or a
    budget file's path, as the records give it), so that `short_seed_findings` can set it beside
    this probe's spread at the same LR. A record written twice counts once."""
    recs = latest_records(n_axis_records)
    logs = recs.assign(log_longppl=np.log(recs["longppl"]))
    g = logs.groupby(["budget", "scale", "ds", "dl"], sort=False)["log_longppl"]
    out = g.agg(seeds="count", spread=lambda x: x.max() - x.min()).reset_index()
    budgets = {n: load_budget_file(REPO_ROOT / n) if str(n).endswith(".toml") else get_budget(n)
               for n in out["budget"].unique()}  # records name budget files relative to the repository
    return out.assign(lr=[budgets[n].scale(s).lr for n, s in zip(out["budget"], out["scale"])])


if __name__ == "__main__":
    raise SystemExit(main())
