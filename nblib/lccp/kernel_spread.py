"""How much do Part 1's numbers move with the CPU's kernels? (chapter 2, beside the seed spread)

The toy book trains on whatever CPU it finds, and PyTorch picks its vector kernels at run
time (AVX-512 where present, else AVX2). The same run (same config, same hash) trained under
another kernel set differs by floating-point rounding, which training amplifies. This module
compares two executions of chapters 3-4 run by run:

    # the second execution: its own store and output folder, AVX2 kernels
    ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 NBLIB_RUN_ROOT=_build/avx2/runs \\
        NBLIB_FIGURES_DIR=_build/avx2/figures python -m nblib.book run --budget toy \\
        --chapters 02_setup,03_scaling_law,04_constant_last4 --out _build/avx2 --no-build
    python -m nblib.lccp.kernel_spread figures _build/avx2/figures --out figures/02_setup/cpu_kernel_spread.csv

One row per run and metric in both tables (Linear-Decay endpoints of chapter 3, Constant
Raw and Last4 points of chapter 4): the two values and their relative difference.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from nblib.cli import run_cli
from nblib.store.atomic import atomic_write_text

TABLES = {  # table file under <figures>/ -> the columns that identify one measurement
    "03_scaling_law/runs_linear_decay.csv": ["run"],
    "04_constant_last4/runs_constant_last4.csv": ["scale", "Ds", "Dl"],
}
METRICS = ("longppl", "shortppl")


def kernel_spread(dir_a: Path, dir_b: Path, tables: dict = TABLES) -> pd.DataFrame:
    """Per measurement in both executions: table, keys, metric, value in a and b, and the
    relative difference (b - a) / a. ValueError when a table is missing or shares no runs."""
    rows = []
    for name, keys in tables.items():
        pa, pb = Path(dir_a) / name, Path(dir_b) / name
        for p in (pa, pb):
            if not p.is_file():
                raise ValueError(f"{p} does not exist: run chapters 3-4 into both figure folders first")
        a, b = pd.read_csv(pa), pd.read_csv(pb)
        keys = [k for k in keys if k in a.columns and k in b.columns]
        m = a.merge(b, on=keys, suffixes=("_a", "_b"))
        if m.empty:
            raise ValueError(f"{name}: no measurement is in both {dir_a} and {dir_b} (joined on {keys})")
        for metric in METRICS:
            if f"{metric}_a" not in m:
                continue
            part = m[keys].copy()
            if "scale_a" in m:  # scale is a column of both tables, not a join key
                part["scale"] = m["scale_a"]
            part["table"], part["metric"] = name.split("/")[0], metric
            part["a"], part["b"] = m[f"{metric}_a"], m[f"{metric}_b"]
            part["relative difference"] = (part["b"] - part["a"]) / part["a"]
            rows.append(part)
    return pd.concat(rows, ignore_index=True)


def summary(spread: pd.DataFrame, tolerance: float = 0.03) -> pd.DataFrame:
    """Per table and metric: measurements, median and largest |relative difference|, and how
    many exceed `tolerance`."""
    g = spread.assign(abs_rel=spread["relative difference"].abs()).groupby(["table", "metric"])["abs_rel"]
    return pd.DataFrame({"measurements": g.size(), "median |rel. diff.|": g.median(), "max |rel. diff.|": g.max(),
                         f"beyond {tolerance:.0%}": g.agg(lambda x: int((x > tolerance).sum()))})


def main(argv=None) -> int:
    """`python -m nblib.lccp.kernel_spread FIGURES_A FIGURES_B [--out CSV]`: print the summary, write the rows."""
    p = argparse.ArgumentParser(description="Compare two executions of chapters 3-4 run by run (CPU kernel spread).")
    p.add_argument("figures_a", type=Path, help="figures folder of the first execution (e.g. figures)")
    p.add_argument("figures_b", type=Path, help="figures folder of the second execution (e.g. _build/avx2/figures)")
    p.add_argument("--out", type=Path, help="CSV to write (e.g. figures/02_setup/cpu_kernel_spread.csv)")
    a = p.parse_args(argv)
    spread = kernel_spread(a.figures_a, a.figures_b)
    print(summary(spread).to_string())
    if a.out:
        atomic_write_text(a.out, spread.to_csv(index=False))
        print(f"wrote {a.out} ({len(spread)} rows)")
    return 0 if np.isfinite(spread["relative difference"]).all() else 1


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
