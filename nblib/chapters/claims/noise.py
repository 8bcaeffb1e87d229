"""The noise behind the scorecard's "within noise" verdicts and its "out of reach at toy" rule
(`scorecard`): whether an interval holds 0, Table 14's paired bootstrap over the cells each
later stage averages (LCCP paper §5.2-5.3), and the ladder trend rule."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nblib.budgets import targets as T
from nblib.stats import paired_bootstrap


def noise_verdict(lo: float, hi: float, better_when_positive: bool = True) -> str:
    """'better', 'worse' or 'within noise' for a difference's interval [lo, hi]: within noise
    when the interval holds 0."""
    if lo <= 0 <= hi:
        return "within noise"
    positive = lo > 0
    return "better" if positive == better_when_positive else "worse"


def out_of_reach(ladder: pd.DataFrame, target: float, higher: bool = True) -> dict:
    """The rule for **out of reach at toy**: a ladder of budgets (columns `budget`, `value`)
    measures the quantity; a line in log budget fitted through it reaches `target` only beyond
    the largest budget. Returns {"out_of_reach": bool, "budget": where the trend reaches the
    target (inf when it moves away or stays flat), "reason": words}. It holds only when the
    ladder has at least 3 budgets, the largest one still misses the target, and the trend
    moves towards it; a gap that does not close along the ladder stays "not"."""
    t = ladder.dropna(subset=["budget", "value"]).sort_values("budget")
    if len(t) < 3:
        return {"out_of_reach": False, "budget": float("nan"), "reason": f"{len(t)} budgets on the ladder, fewer than 3"}
    x, y = np.log(t.budget.to_numpy(float)), t.value.to_numpy(float)
    met = (y[-1] >= target) if higher else (y[-1] <= target)
    if met:
        return {"out_of_reach": False, "budget": float(t.budget.iloc[-1]), "reason": "the largest budget meets it"}
    slope, icpt = np.polyfit(x, y, 1)
    towards = slope > 0 if higher else slope < 0
    closer = abs(target - y[-1]) < abs(target - y[0])
    if not (towards and closer):
        return {"out_of_reach": False, "budget": float("inf"), "reason": "the gap does not close along the ladder"}
    at = float(np.exp((target - icpt) / slope))
    return {"out_of_reach": at > t.budget.iloc[-1], "budget": at,
            "reason": f"the ladder's trend reaches {target:g} at a budget of {at:.3g}"}



# Table 14's stages, the per-cell tables behind each, and the cells one difference is a mean of
TABLE14_CELLS = {"4x extension": ("ruler_after_extension", ["dl", "task"]),
                 "long-context SFT": ("sft_benchmarks", ["dl", "seed", "benchmark"]),
                 "long-context SFT, 2x budget": ("sft_benchmarks_2x", ["dl", "seed", "benchmark"])}


def table14_noise(f, n_boot: int = 2000) -> pd.DataFrame | None:
    """Last4 - Raw for each later stage of Table 14 with its sampling error: a paired
    bootstrap over the stage's cells (RULER: each task at each Dl point; the SFT benchmarks:
    each benchmark's task mean at each point and seed), the cells Table 14's number averages."""
    rows = []
    for stage, (name, keys) in TABLE14_CELLS.items():
        t = f.csv("05_downstream", name)
        if t is None:
            continue
        w = t.groupby([*keys, "protocol"]).score.mean().unstack("protocol").dropna(subset=["Raw", "Last4"])
        if len(w) < 2:
            continue
        b = paired_bootstrap(w.Last4.to_numpy(float), w.Raw.to_numpy(float), n_boot=n_boot, level=T.NOISE_LEVEL)
        rows.append({"stage": stage, "Last4 - Raw": b["diff"], "95% lo": b["lo"], "95% hi": b["hi"], "cells": b["n"],
                     "noise": noise_verdict(b["lo"], b["hi"])})
    return pd.DataFrame(rows) if rows else None
