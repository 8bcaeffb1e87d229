"""Do one scale's Linear-Decay runs give the same LongPPL under another CPU kernel set?
(was benchmarks/cpu_kernel_probe.py: a one-scale check made before the book's grid was repeated
with every kernel capped at AVX2 in fp32, design-ladder row Vb2, chapters 3-4; a run-by-run
comparison of such a repeat is `python -m nblib.lccp.kernel_spread`'s job).

Run it under the other kernels, e.g. on an AVX-512 machine:

    ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 python -m nblib.probes cpu_kernel --scale S1

It retrains the scale's short stage and its Ds x Dl Linear-Decay grid (LCCP paper §3.1: the
grid's own configs, so the same run hashes) into a scratch store, with the book's LongPPL
reference and annotation copied in, so only the trained grid models differ. Each run's LongPPL
and ShortPPL (App. A.1) are compared with chapter 3's committed table
(figures/03_scaling_law/runs_linear_decay.csv); one JSON line per scale goes to
data/probes/cpu_kernel_probe.jsonl, with the kernel settings in its record and its manifest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import pandas as pd

from nblib.budgets import get_budget
from nblib.lccp import grid
from nblib.lccp.evaluation import Evaluator
from nblib.probes import results
from nblib.store.provenance import REPO_ROOT
from nblib.store.runstore import RunStore
from nblib.training.runner import get_or_run_many

RECORDS = ("cpu_kernel_probe.jsonl",)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.probes cpu_kernel", description=__doc__.splitlines()[0])
    p.add_argument("--scale", default="S1")
    p.add_argument("--book-store", default=str(REPO_ROOT / "runs"), help="the store holding the book's reference")
    p.add_argument("--run-root", default="/tmp/cpu_kernel_runs", help="the scratch store")
    p.add_argument("--table", default=str(REPO_ROOT / "figures" / "03_scaling_law" / "runs_linear_decay.csv"))
    p.add_argument("--out", default=RECORDS[0], help="record file (a name in data/probes, or a path)")
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parser().parse_args(argv)
    b = get_budget("toy")
    book, scratch = Path(a.book_store), Path(a.run_root)
    scratch.mkdir(parents=True, exist_ok=True)
    for name in (grid.reference_config(b).hash, "annotations"):  # the same reference and key tokens
        if not (scratch / name).exists():
            if not (book / name).exists():
                raise SystemExit(f"error: {book / name} is missing: run chapter 2 of the toy book first")
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
    results.append_record(a.out, out, module=__spec__.name, argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
