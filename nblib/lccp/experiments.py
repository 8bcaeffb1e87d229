"""The LCCP experiments of the scaling-law paper (LCCP paper) as tables: one function per
table or figure the chapters show, over an `Evaluator` (nblib.lccp.evaluation) and its run store.

Each function trains what the store lacks (parents first, in parallel, through
nblib.training.runner) and evaluates what the runs' caches lack, so a chapter re-executed over a
finished store trains and evaluates nothing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from nblib.budgets import FIG4A_POOL, SCALES, Budget
from nblib.data import LengthMixture
from nblib.lccp import grid
from nblib.lccp.evaluation import Evaluator, evaluate_many
from nblib.models import build_model
from nblib.stats import lins_ccc
from nblib.store.runstore import Run
from nblib.training.runner import get_or_run_many
from nblib.training.train import stream_for


def _row(budget: Budget, scale: str, short_run: Run, long_run: Run, ds_mult, dl_mult, tokens_dl, res, **extra):
    return {"scale": scale, "N": budget.n_params(scale), "Ds": short_run.config.realized_tokens, "Dl": tokens_dl,
            "ds_mult": ds_mult, "dl_mult": dl_mult, "longppl": res["long_ppl"], "shortppl": res["short_ppl"],
            "run": long_run.hash, **extra}


# ---------------------------------------------------------------------------------------
# Chapter 3: the Linear-Decay grid (§3.1)
# ---------------------------------------------------------------------------------------
def linear_decay_table(ev: Evaluator, scales=SCALES, workers=None) -> pd.DataFrame:
    """One row per Linear-Decay configuration (§3.1): N, realized Ds and Dl, LongPPL, ShortPPL.

    Trains whatever the store lacks (parents first, in parallel), then evaluates. The pool
    also trains the second seed of the stable trunks (`grid.trunk_configs`, for chapter 3's
    seed spread): trained beside the grid, no core idles while they finish alone.
    """
    b, store = ev.budget, ev.store
    get_or_run_many(store, grid.linear_decay_grid(b, scales) + grid.trunk_configs(b, scales), workers=workers,
                    desc="Linear-Decay grid")
    keys = []
    for scale in scales:
        pairs = b.s5_configs if scale == "S5" else [(ds, dl) for ds in b.ds_multiples for dl in b.dl_multiples]
        short = grid.short_stage(b, scale)
        for ds, dl in pairs:
            keys.append((scale, ds, dl, store.run(short.wsd[ds]), store.run(grid.lccp_linear_decay(b, scale, ds, dl))))
    results = evaluate_many(ev, [(r.hash, "raw", "final", None, {}) for *_, r in keys], workers, "LongPPL (LD)")
    rows = [_row(b, s, sr, lr, ds, dl, lr.config.realized_tokens, res) for (s, ds, dl, sr, lr), res in zip(keys, results)]
    return pd.DataFrame(rows)


def context_use_models(b: Budget, store) -> dict:
    """The models chapter 3 probes for context use: at each scale the Linear-Decay run with
    the largest Ds and Dl (at S5 the configuration with the largest Dl), and the toy
    LongPPL reference's neural part. {label: model in eval mode}."""
    models = {}
    for scale in SCALES:
        ds, dl = b.ds_multiples[-1], b.dl_multiples[-1]
        if scale == "S5":
            ds, dl = max(b.s5_configs, key=lambda c: (c[1], c[0]))
        models[f"{scale} (Ds={ds}{b.unit}, Dl={dl}{b.unit})"] = store.run(grid.lccp_linear_decay(b, scale, ds, dl)).load_model()
    if b.reference["kind"] == "nblib":
        models["LongPPL reference (neural part)"] = store.run(grid.reference_config(b)).load_model()
    return models


# ---------------------------------------------------------------------------------------
# Chapter 4: Constant trajectories (§4.1-4.2, Table 7)
# ---------------------------------------------------------------------------------------
def constant_configs(b: Budget, scales=("S1", "S2", "S3", "S4"), trajectory_scale: str | None = "S5"):
    """Constant-LR trajectories (§4.1-4.2, Table 7): every Ds x seed at S1-S4 to the largest Dl,
    and one long trajectory at `trajectory_scale` from the largest Ds."""
    cfgs = []
    for scale in scales:
        for ds in b.ds_multiples:
            for seed in range(b.n_constant_seeds):
                cfgs.append(grid.lccp_constant(b, scale, ds, b.dl_multiples[-1], seed))
    if trajectory_scale:
        cfgs.append(grid.long_trajectory(b, trajectory_scale))
    return cfgs


def trajectory_compute(b: Budget, scale: str, peak_flops: float = 989e12, mfu: float = 0.4) -> dict:
    """Training compute of the long Constant trajectory at `scale` (its 4K stage excluded):
    FLOPs from the model's analytic count at the LCCP context, and GPU-hours at a given
    peak (default: H100 bf16 dense, 989 TFLOP/s) and MFU."""
    with torch.device("meta"):
        model = build_model("llama", dict(b.scale(scale).model))
    tokens = b.n_tokens(scale, b.s5_trajectory)
    flops = tokens * model.flops_per_token(b.long_seq_len, training=True)
    gpu_hours = flops / (peak_flops * mfu) / 3600
    ckpt_bytes = 4 * model.n_params(non_embedding=False)
    return {"tokens": tokens, "flops": flops, "gpu_hours": gpu_hours, "hours_on_16_gpus": gpu_hours / 16,
            "checkpoints": int(round(b.s5_trajectory / b.s5_ckpt_every)), "checkpoint_gb": ckpt_bytes / 1e9}


def trajectory_lineage(b: Budget, scale: str) -> list:
    """The configs behind the long Constant trajectory, parents first: the stable trunk, the WSD
    run at the largest Ds it starts from, and the trajectory itself."""
    short = grid.short_stage(b, scale)
    return [short.trunk, short.wsd[b.ds_multiples[-1]], grid.long_trajectory(b, scale)]


def trajectory_run(ev: Evaluator, scale: str, workers=None) -> Run:
    """The long Constant trajectory at `scale`, trained (or extended) if the store lacks it,
    with its short-stage ancestors (`trajectory_lineage`) trained first where missing, so a
    chapter can ask for it on an empty store."""
    return get_or_run_many(ev.store, trajectory_lineage(ev.budget, scale), workers=workers,
                           desc=f"{scale} trajectory")[-1]


def train_constant_runs(ev: Evaluator, scales=("S1", "S2", "S3", "S4"), trajectory_scale: str = "S5",
                        workers=None) -> None:
    """Train whatever the store lacks of chapter 4's Constant runs (`constant_configs` at
    `scales`, and the long trajectory at `trajectory_scale` with its short-stage lineage) in one
    pool: the long trajectory, the longest chain, starts first and the other workers take the
    S1-S4 trajectories beside it, where two separate calls left a core idle while it trained
    alone. Every run still trains in a one-thread worker, so the weights are the same."""
    b = ev.budget
    get_or_run_many(ev.store, constant_configs(b, scales, None) + trajectory_lineage(b, trajectory_scale),
                    workers=workers, desc="Constant trajectories")


def step_at(run: Run, dl_mult: float) -> int:
    """The checkpoint step at Dl = dl_mult * N on a Constant trajectory (grid.checkpoint_step)."""
    return grid.checkpoint_step(run.config, dl_mult)


def last4_steps(run: Run, dl_mult: float, spacing_mult: float, m: int = 4) -> list[int]:
    """Checkpoint steps {T-3s, T-2s, T-s, T} of Last4 with spacing s (App. B.1)."""
    return [step_at(run, dl_mult - k * spacing_mult) for k in range(m - 1, -1, -1)]


def constant_table(ev: Evaluator, scales=("S1", "S2", "S3", "S4"), workers=None) -> pd.DataFrame:
    """Constant-Raw and Constant-Last4 LongPPL/ShortPPL at every Dl grid point (Fig. 4b, 5)."""
    b, store = ev.budget, ev.store
    cfgs = constant_configs(b, scales, None)
    get_or_run_many(store, cfgs, workers=workers, desc="Constant trajectories")
    jobs, meta = [], []
    for cfg in cfgs:
        run = store.run(cfg)
        scale, ds = cfg.meta["scale"], cfg.meta["ds_mult"]
        short = store.run(grid.short_stage(b, scale).wsd[ds])
        for dl in b.dl_multiples:
            jobs.append((run.hash, "raw", step_at(run, dl), None, {}))
            jobs.append((run.hash, "merged", last4_steps(run, dl, b.last4_gap(b.constant_ckpt_every)), "lastM", {"m": 4}))
            meta.append((scale, ds, dl, cfg.seed, short, run))
    res = evaluate_many(ev, jobs, workers, "LongPPL (Constant)")
    rows = []
    for i, (scale, ds, dl, seed, short, run) in enumerate(meta):
        tokens = step_at(run, dl) * run.config.tokens_per_step
        for rule, r in (("raw", res[2 * i]), ("last4", res[2 * i + 1])):
            rows.append(_row(b, scale, short, run, ds, dl, tokens, r, seed=seed, rule=rule))
    return pd.DataFrame(rows)


def seed_mean(df: pd.DataFrame) -> pd.DataFrame:
    """Mean LongPPL/ShortPPL over the independent runs of each configuration (§4.2)."""
    keys = ["scale", "N", "Ds", "Dl", "ds_mult", "dl_mult", "rule"]
    return df.groupby(keys, as_index=False)[["longppl", "shortppl"]].mean()


def protocols_at_scale(const: pd.DataFrame, ld: pd.DataFrame, scale: str = "S4") -> pd.DataFrame:
    """Fig. 4b's data: seed-mean Constant-Raw and Constant-Last4 at every (Ds, Dl) of `scale`,
    with the budget-matched Linear-Decay LongPPL/ShortPPL in columns *_ld."""
    cm = seed_mean(const)
    return cm[cm.scale == scale].merge(ld[ld.scale == scale][["ds_mult", "dl_mult", "longppl", "shortppl"]],
                                       on=["ds_mult", "dl_mult"], suffixes=("", "_ld"))


def protocol_agreement(paired: pd.DataFrame) -> pd.DataFrame:
    """Fig. 4b: Lin's CCC (App. B) of Constant-Raw and Constant-Last4 against Linear-Decay,
    and their mean gap, for ShortPPL and LongPPL (input: `protocols_at_scale`)."""
    rows = []
    for metric in ("shortppl", "longppl"):
        for rule in ("raw", "last4"):
            g = paired[paired.rule == rule]
            rows.append({"metric": metric, "rule": rule, "CCC": lins_ccc(g[f"{metric}_ld"], g[metric]),
                         "mean gap to LD": (g[metric] - g[f"{metric}_ld"]).mean()})
    return pd.DataFrame(rows)


def last4_vs_raw(const: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per trajectory point (scale, Ds, Dl, seed): whether Last4 <= Raw in LongPPL, and the
    relative gain (Raw - Last4) / Raw averaged by scale (rows) and Dl/N (columns)."""
    paired = const.pivot_table(index=["scale", "ds_mult", "dl_mult", "seed"], columns="rule", values="longppl")
    wins = (paired["last4"] <= paired["raw"]).rename("last4_le_raw").reset_index()
    gain = (paired["raw"] - paired["last4"]) / paired["raw"]
    return wins, gain.groupby(level=["scale", "dl_mult"]).mean().unstack()


def constant_last4_fit_table(ev: Evaluator, const: pd.DataFrame, traj: Run, scale: str,
                             fit_scales) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig. 5's data: seed-mean Constant-Last4 rows of `fit_scales` plus every Last4
    evaluation point of the long trajectory (`s5_eval_points`, Last4's checkpoints
    `last4_gap` apart). Returns (the joint table, the trajectory's Raw and Last4 points)."""
    b = ev.budget
    cm = seed_mean(const)
    cl4 = cm[cm.rule == "last4"]
    tp = trajectory_points(ev, traj, s5_eval_points(b), b.s5_last4_gap)
    ds = ev.store.run(grid.short_stage(b, scale).wsd[b.ds_multiples[-1]]).config.realized_tokens
    tl4 = tp[tp.rule == "last4"].assign(scale=scale, N=b.n_params(scale), Ds=ds)
    return pd.concat([cl4[cl4.scale.isin(fit_scales)], tl4], ignore_index=True), tp



PROTOCOL_NAMES = {"raw": "Raw", "last4": "Last4", "ld": "LD"}


def trajectory_protocol_table(tp: pd.DataFrame) -> pd.DataFrame:
    """The long trajectory's Raw and Last4 points (§4.2, Fig. 5 right, Fig. 6) as columns
    dl (in the budget's unit N(S1) or N), protocol (Raw | Last4), longppl, shortppl."""
    t = tp[tp.rule.isin(["raw", "last4"])]
    return (pd.DataFrame({"dl": t.dl_mult.astype(float), "protocol": t.rule.map(PROTOCOL_NAMES),
                          "longppl": t.longppl, "shortppl": t.shortppl})
            .sort_values(["protocol", "dl"]).reset_index(drop=True))


def protocols_table(const: pd.DataFrame, ld: pd.DataFrame, scales=("S1", "S2", "S3", "S4")) -> pd.DataFrame:
    """Every S1-S4 grid point under the three protocols of §4.1 (Constant-Raw, Constant-Last4,
    Linear-Decay): columns scale, Ds, Dl (the grid's multiples), seed (Linear-Decay: 0),
    protocol (Raw | Last4 | LD), longppl, shortppl. Each protocol has the same (scale, Ds, Dl)."""
    c = const[const.scale.isin(scales)]
    l_ = ld[ld.scale.isin(scales)]
    out = pd.concat([
        pd.DataFrame({"scale": c.scale, "Ds": c.ds_mult, "Dl": c.dl_mult, "seed": c.seed.astype(int),
                      "protocol": c.rule.map(PROTOCOL_NAMES), "longppl": c.longppl, "shortppl": c.shortppl}),
        pd.DataFrame({"scale": l_.scale, "Ds": l_.ds_mult, "Dl": l_.dl_mult, "seed": 0, "protocol": "LD",
                      "longppl": l_.longppl, "shortppl": l_.shortppl})], ignore_index=True)
    keys = {p: set(map(tuple, g[["scale", "Ds", "Dl"]].to_numpy())) for p, g in out.groupby("protocol")}
    if len({frozenset(k) for k in keys.values()}) > 1:
        raise ValueError(f"protocols cover different (scale, Ds, Dl) points: "
                         f"{ {p: len(k) for p, k in keys.items()} }")
    return out.sort_values(["scale", "Ds", "Dl", "protocol", "seed"]).reset_index(drop=True)

# ---------------------------------------------------------------------------------------
# Chapter 2: setup tables (Table 1, Tables 5-7, Table 9)
# ---------------------------------------------------------------------------------------
def model_table(b: Budget) -> pd.DataFrame:
    """Table 1 at a budget: architecture, non-embedding N, and the paper's N."""
    rows = []
    for s in SCALES:
        m = b.scale(s).model
        rows.append({"scale": s, "d_model": m["d_model"], "layers": m["n_layers"], "heads": m["n_heads"],
                     "kv heads": m["n_kv_heads"], "d_ff": m["d_ff"], "N (non-emb.)": b.n_params(s),
                     "paper N": b.scale(s).paper_n_params})
    return pd.DataFrame(rows)


def budget_table(b: Budget) -> pd.DataFrame:
    """Tables 5-7 at a budget: realized Ds, Dl (rounded to whole steps), LRs and batch sizes."""
    rows = []
    for s in SCALES:
        spec = b.scale(s)
        short = grid.short_stage(b, s)
        lds = [grid.lccp_linear_decay(b, s, b.ds_multiples[-1], dl).realized_tokens for dl in b.dl_multiples]
        rows.append({
            "scale": s, "N": b.n_params(s), "4K-analogue LR": spec.lr, "LCCP LR (start)": b.lccp_lr(s),
            "GBS short (seqs)": spec.batch_short, "GBS LCCP (seqs)": spec.batch_long, "warmup steps": spec.warmup_steps,
            "realized Ds (tokens)": ", ".join(f"{short.wsd[m].realized_tokens:,}" for m in b.ds_multiples),
            "realized Dl (tokens)": ", ".join(f"{t:,}" for t in lds),
        })
    return pd.DataFrame(rows)


def mixture_table(b: Budget) -> pd.DataFrame:
    """Table 9: configured bucket shares of the paper's 32K mixture next to the shares of the
    mixture this budget trains with, on its corpus, and how often each bucket is repeated."""
    stream = stream_for(grid.data_config(b, "long"), 0)
    stats = pd.DataFrame(stream.bucket_stats())
    stats.insert(1, "paper 32K mix", [w for w in LengthMixture.lccp_32k().weights])
    return stats.rename(columns={"configured": f"{b.lccp_mixture} mix"})


# ---------------------------------------------------------------------------------------
# Chapter 4: observation rules, trajectory points, spacing ablation (App. B, B.1)
# ---------------------------------------------------------------------------------------
OBSERVATION_RULES = {  # name -> (method, kwargs, how many of the newest pool checkpoints it uses)
    "Last4": ("lastM", {"m": 4}, 4), "Last8": ("lastM", {"m": 8}, 8), "Last12": ("lastM", {"m": 12}, 12),
    "Last25": ("lastM", {"m": 25}, 25), "1-Sqrt": ("one_sqrt", {}, None),
    "EMA 0.1": ("ema", {"beta": 0.1}, None), "EMA 0.5": ("ema", {"beta": 0.5}, None),
    "EMA 0.9": ("ema", {"beta": 0.9}, None), "DARE 0.1": ("dare", {"rho": 0.1, "seed": 42}, None),
    "DARE 0.5": ("dare", {"rho": 0.5, "seed": 42}, None), "TIES 0.1": ("ties", {"rho": 0.1}, None),
    "TIES 0.5": ("ties", {"rho": 0.5}, None),
}


def observation_rules(ev: Evaluator, run: Run, dl_mult: float, pool_spacing: float, pool_size: int = FIG4A_POOL,
                      workers=None) -> pd.DataFrame:
    """Fig. 4a: every App. B rule on a pool of `pool_size` checkpoints spaced `pool_spacing`*N,
    ending at Dl = dl_mult*N (paper: 25 checkpoints every 2N up to 50N at S4), plus Raw."""
    pool = [step_at(run, dl_mult - k * pool_spacing) for k in range(pool_size - 1, -1, -1)]
    names, jobs = ["Raw"], [(run.hash, "raw", pool[-1], None, {})]
    for name, (method, kw, m) in OBSERVATION_RULES.items():
        steps = pool[-m:] if m else pool
        kw = dict(kw)
        if method == "lastM":
            kw["m"] = len(steps)
        if method == "ema":
            kw["delta"] = pool[1] - pool[0]  # one nominal checkpoint interval, in iterations (Eq. 7)
        names.append(name)
        jobs.append((run.hash, "merged", steps, method, kw))
    res = evaluate_many(ev, jobs, workers, "observation rules")
    return pd.DataFrame([{"rule": n, "longppl": r["long_ppl"], "shortppl": r["short_ppl"]} for n, r in zip(names, res)])


def s5_eval_points(b: Budget) -> list[float]:
    """Dl/N of the long trajectory's evaluation points (§4.2: every s5_eval_every N, from
    s5_eval_every to s5_trajectory), from the first whose Last4 window lies after Dl = 0 (App.
    B.1's spacing ablation starts its targets at 20N for the same reason)."""
    gap = b.s5_last4_gap
    n_points = int(round(b.s5_trajectory / b.s5_eval_every))
    points = [round(b.s5_eval_every * k, 6) for k in range(1, n_points + 1)]
    return [t for t in points if t > 3 * gap + 1e-9]


def trajectory_points(ev: Evaluator, run: Run, dl_points, spacing: float, workers=None) -> pd.DataFrame:
    """Raw and Last4 (spacing*N apart) LongPPL/ShortPPL at each Dl in dl_points (§4.2)."""
    jobs, meta = [], []
    for dl in dl_points:
        jobs.append((run.hash, "raw", step_at(run, dl), None, {}))
        jobs.append((run.hash, "merged", last4_steps(run, dl, spacing), "lastM", {"m": 4}))
        meta.append(dl)
    res = evaluate_many(ev, jobs, workers, "trajectory points")
    rows = []
    for i, dl in enumerate(meta):
        tokens = step_at(run, dl) * run.config.tokens_per_step
        for rule, r in (("raw", res[2 * i]), ("last4", res[2 * i + 1])):
            rows.append({"dl_mult": dl, "Dl": tokens, "rule": rule, "longppl": r["long_ppl"], "shortppl": r["short_ppl"]})
    return pd.DataFrame(rows)


def spacing_ablation(ev: Evaluator, run: Run, targets, spacings, workers=None) -> pd.DataFrame:
    """App. B.1: Last4(s) over {T-3s, T-2s, T-s, T} for each target T and spacing s, and Raw at T."""
    jobs, meta = [], []
    for t in targets:
        jobs.append((run.hash, "raw", step_at(run, t), None, {}))
        meta.append((t, "Raw"))
        for s in spacings:
            jobs.append((run.hash, "merged", last4_steps(run, t, s), "lastM", {"m": 4}))
            meta.append((t, f"Last4({s:g}N)"))
    res = evaluate_many(ev, jobs, workers, "spacing ablation")
    return pd.DataFrame([{"target_mult": t, "protocol": p, "longppl": r["long_ppl"], "shortppl": r["short_ppl"]}
                         for (t, p), r in zip(meta, res)])


def spacing_means(sp: pd.DataFrame, default: str) -> pd.DataFrame:
    """Table 12: mean LongPPL/ShortPPL of each protocol over the targets, and the difference
    from the `default` protocol (e.g. "Last4(1N)")."""
    t = sp.groupby("protocol", sort=False)[["longppl", "shortppl"]].mean()
    ref = t.loc[default]
    t["Δ LongPPL vs default"] = t.longppl - ref.longppl
    t["Δ ShortPPL vs default"] = t.shortppl - ref.shortppl
    return t


def protocol_horizon_table(records: pd.DataFrame) -> pd.DataFrame:
    """Linear-Decay against Constant past the grid's Dl (§4.1, Fig. 4b; records of `python -m
    nblib.probes protocol_horizon`): one row per (design, scale, Ds, Dl) with the LongPPL of LD,
    Raw and Last4 (and Last4 at the other spacings probed, "Last4(2N)"...), and LD minus each
    (< 0: the decayed run is better). A design is its budget file's name (R for .../R.toml),
    else the budget's."""
    if records.empty:
        return pd.DataFrame()
    keys = ["design", "scale", "ds", "dl"]
    r = records.assign(design=records["budget"].map(lambda p: str(p).rsplit("/", 1)[-1].removesuffix(".toml")))
    r = r.drop_duplicates(keys + ["protocol"], keep="last")
    t = r.pivot_table(index=keys, columns="protocol", values="longppl", sort=True)
    spaced = sorted((c for c in t.columns if c.startswith("Last4(")), key=lambda c: float(c[6:-2]))
    t = t.reindex(columns=["LD", "Raw", "Last4", *spaced])
    t.columns.name = None
    t["LD - Raw"], t["LD - Last4"] = t["LD"] - t["Raw"], t["LD"] - t["Last4"]
    for c in spaced:
        t[f"LD - {c}"] = t["LD"] - t[c]
    return t.reset_index()


def rate_trajectory_table(records: pd.DataFrame, from_dl: float = 10, start_dl: float = 30) -> pd.DataFrame:
    """A Constant trajectory at each design's LCCP rate (records of `python -m nblib.probes
    protocol_horizon --no-ld`; §4.2's claim that it keeps improving): one row per (design,
    scale) with its points, the Spearman rho of Last4 and of Raw LongPPL against Dl over
    Dl >= `from_dl`, Last4 at `start_dl` and at the last point, and whether each of the last
    three points is at or below Last4 at `start_dl`. A design is named as in
    `protocol_horizon_table`."""
    from scipy.stats import spearmanr

    if records.empty:
        return pd.DataFrame()
    r = records.assign(design=records["budget"].map(lambda p: str(p).rsplit("/", 1)[-1].removesuffix(".toml")))
    r = r.drop_duplicates(["design", "scale", "ds", "dl", "protocol"], keep="last")
    rows = []
    for (design, scale, ds), g in r[r.dl >= from_dl].groupby(["design", "scale", "ds"], sort=False):
        last4 = g[g.protocol == "Last4"].set_index("dl")["longppl"].sort_index()
        raw = g[g.protocol == "Raw"].set_index("dl")["longppl"].sort_index()
        start = float(last4.get(start_dl, float("nan")))
        rows.append({"design": design, "scale": scale, "ds": ds, "points": len(last4),
                     "dl_max": float(last4.index.max()),
                     "rho Last4": float(spearmanr(last4.index, last4.to_numpy()).statistic),
                     "rho Raw": float(spearmanr(raw.index, raw.to_numpy()).statistic),
                     f"Last4 at {start_dl:g}": start, "Last4 at end": float(last4.iloc[-1]),
                     f"last 3 <= at {start_dl:g}": bool((last4.iloc[-3:] <= start).all())})
    return pd.DataFrame(rows)
