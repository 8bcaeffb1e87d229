"""Do one scale's Linear-Decay runs give the same LongPPL under another CPU kernel set?
(chapter 2, "How much the numbers move"; a partial check before the full AVX2 repeat of
chapters 2-4 that `python -m nblib.lccp.kernel_spread` compares).

Run it under the other kernels, e.g. on an AVX-512 machine:

    ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 python benchmarks/cpu_kernel_probe.py --scale S1

It retrains the scale's short stage and its Ds x Dl Linear-Decay grid (the grid's own configs,
so the same run hashes) into a scratch store, with the book's LongPPL reference and annotation
copied in, so only the trained grid models differ. Each run's LongPPL and ShortPPL are compared
with chapter 3's committed table (figures/03_scaling_law/runs_linear_decay.csv); one JSON line
per scale goes to benchmarks/results/cpu_kernel_probe.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import pandas as pd

from nblib.budgets import get_budget
from nblib.lccp import grid
from nblib.lccp.evaluation import Evaluator
from nblib.store.atomic import append_jsonl
from nblib.store.provenance import REPO_ROOT
from nblib.store.runstore import RunStore
from nblib.training.runner import get_or_run_many

OUT = Path(__file__).resolve().parent / "results" / "cpu_kernel_probe.jsonl"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", default="S1")
    p.add_argument("--book-store", default=str(REPO_ROOT / "runs"), help="the store holding the book's reference")
    p.add_argument("--run-root", default="/tmp/cpu_kernel_runs", help="the scratch store")
    p.add_argument("--table", default=str(REPO_ROOT / "figures" / "03_scaling_law" / "runs_linear_decay.csv"))
    p.add_argument("--out", default=str(OUT))
    a = p.parse_args(argv)
    b = get_budget("toy")
    book, scratch = Path(a.book_store), Path(a.run_root)
    scratch.mkdir(parents=True, exist_ok=True)
    for name in (grid.reference_config(b).hash, "annotations"):  # the same reference and key tokens
        if not (scratch / name).exists():
            if not (book / name).exists():
                raise SystemExit(f"{book / name} is missing: run chapter 2 of the toy book first")
            shutil.copytree(book / name, scratch / name)
    store = RunStore(scratch)
    lds = [grid.lccp_linear_decay(b, a.scale, ds, dl) for ds in b.ds_multiples for dl in b.dl_multiples]
    get_or_run_many(store, grid.short_stage(b, a.scale).all() + lds, progress=False)
    ev = Evaluator.build(b, store)
    ref = pd.read_csv(a.table).set_index("run")
    rows = []
    for c in lds:
        r, base = ev.run(store.run(c)), ref.loc[c.hash]
        rows.append({"run": c.hash, "ds_mult": c.meta["ds_mult"], "dl_mult": c.meta["dl_mult"],
                     "longppl_table": base.longppl, "longppl_here": r["long_ppl"],
                     "shortppl_table": base.shortppl, "shortppl_here": r["short_ppl"]})
    d = pd.DataFrame(rows)
    rel = {m: (d[f"{m}_here"] / d[f"{m}_table"] - 1).abs().max() for m in ("longppl", "shortppl")}
    out = {"scale": a.scale, "kernels": {k: os.environ.get(k, "") for k in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")},
           "max_rel_longppl": rel["longppl"], "max_rel_shortppl": rel["shortppl"], "runs": rows}
    print(d.round(4).to_string())
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}))
    append_jsonl(a.out, out)


if __name__ == "__main__":
    main()
