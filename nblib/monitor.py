"""Monitor a constant-LR LCCP run: Last4 LongPPL/ShortPPL so far, and Eq. 2's forecast.

    python -m nblib.monitor RUN_DIR [--eval-every 5] [--future 2e9 4e9] [--plot out.png]

RUN_DIR is either a run-store folder (it holds config.json and ckpt/step_*/) or a folder
of safetensors checkpoints named by step (`step_000123.safetensors` or
`step_000123/model.safetensors`); the latter needs --model-config (a JSON of
{"family": ..., **config}), --tokenizer, --tokens-per-step and --budget (whose annotated
LongPPL test set is used; it must exist in --run-root).

At every `eval-every`-th checkpoint it evaluates Last4 (the checkpoint and the three
before it; the LCCP paper §4.1) and caches the result, fits Eq. 2 (§4.3,
log LongPPL = Bl Dl^-βl + C') with Huber loss and a bootstrap over the points, and
prints the predicted LongPPL at the `--future` budgets with 95% intervals and the
marginal gain (LongPPL drop) per extra billion tokens.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # a CLI: draw to files, never to a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from nblib.atomic import atomic_path, atomic_write_json  # noqa: E402
from nblib.budgets import get_budget  # noqa: E402
from nblib.evaluation import Evaluator  # noqa: E402
from nblib.merge import merge  # noqa: E402
from nblib.models import build_model  # noqa: E402
from nblib.runstore import RunConfig, RunStore  # noqa: E402
from nblib.scaling import fit_fixed_model_law  # noqa: E402

MIN_POINTS = 4  # Eq. 2 has 3 parameters


class MonitorError(ValueError):
    """The folder cannot be monitored (too few checkpoints or points, missing options)."""


def _folder_checkpoints(folder: Path) -> dict[int, Path]:
    """step -> weights file of a plain folder of safetensors checkpoints."""
    out = {}
    for p in folder.iterdir():
        m = re.fullmatch(r"step_0*(\d+)(\.safetensors)?", p.name)
        if not m:
            continue
        w = p if p.is_file() else p / "model.safetensors"
        if w.exists():
            out[int(m.group(1))] = w
    return dict(sorted(out.items()))


def collect(run_dir: Path, args):
    """(steps->weights, tokens_per_step, build_model(state)->model, evaluator, cache path)."""
    if (run_dir / "config.json").exists():
        cfg = RunConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
        store = RunStore(run_dir.parent)
        run = store.run(cfg)
        if cfg.schedule["kind"] != "constant":
            print(f"warning: run {run.hash} uses a {cfg.schedule['kind']!r} schedule; Last4 monitoring is meant "
                  f"for constant-LR trajectories", file=sys.stderr)
        steps = {c.step: c.weights for c in run.checkpoints()}
        ev = Evaluator.build(get_budget(cfg.budget), store)
        return steps, cfg.tokens_per_step, lambda state: run.load_model(state_dict=state), ev, run.path / "evals"
    missing = [o for o in ("model_config", "tokenizer", "tokens_per_step", "budget") if getattr(args, o) is None]
    if missing:
        raise MonitorError(f"{run_dir} is not a run-store run (no config.json); a plain checkpoint folder needs "
                           + ", ".join("--" + m.replace("_", "-") for m in missing))
    mc = json.loads(Path(args.model_config).read_text())
    family = mc.pop("family")

    def build(state):
        model = build_model(family, dict(mc))
        model.load_state_dict(state)
        return model.eval()

    ev = Evaluator.build(get_budget(args.budget), RunStore(args.run_root))
    return _folder_checkpoints(run_dir), int(args.tokens_per_step), build, ev, run_dir / ".monitor"


def evaluate_points(steps: dict, tps: int, build, ev, cache: Path, eval_every: int, m: int = 4) -> list[dict]:
    """Last4 LongPPL/ShortPPL at every eval_every-th checkpoint that has m-1 predecessors."""
    order = sorted(steps)
    points = []
    for i in range(m - 1, len(order)):
        if (i + 1) % eval_every:
            continue
        window = order[i - m + 1:i + 1]
        key = cache / f"monitor-{ev.key}-last{m}-{'-'.join(map(str, window))}.json"
        if key.exists():
            res = json.loads(key.read_text())
        else:
            state = merge("lastM", [steps[s] for s in window], m=m, iterations=window)
            res = ev._evaluate(build(state))
            atomic_write_json(key, res)
        points.append({"step": window[-1], "Dl": window[-1] * tps, "long_ppl": res["long_ppl"],
                       "short_ppl": res["short_ppl"]})
    return points


def forecast(points: list[dict], future: list[float], n_boot: int = 200, seed: int = 0) -> dict:
    """Fit Eq. 2 to the points; predictions at `future` token budgets with bootstrap intervals
    and the marginal LongPPL drop per extra billion tokens."""
    if len(points) < MIN_POINTS:
        raise MonitorError(f"only {len(points)} Last4 evaluation point(s); Eq. 2 has 3 parameters, so at least "
                           f"{MIN_POINTS} are needed: train further or lower --eval-every")
    dl = np.array([p["Dl"] for p in points], float)
    y = np.log([p["long_ppl"] for p in points])
    if not np.all(np.isfinite(y)):
        raise MonitorError("some LongPPL values are not finite (no long key tokens in the test set?)")
    fit = fit_fixed_model_law(dl, y)
    targets = np.array(sorted(set([dl[-1], *future])), float)
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(dl), len(dl))
        if len(set(idx)) < MIN_POINTS:
            continue
        try:
            boot.append(fit_fixed_model_law(dl[idx], y[idx], n_starts=4).predict(Dl=targets))
        except Exception:  # a degenerate resample: skip it, report how many were used
            continue
    boot = np.exp(np.array(boot)) if boot else np.full((0, len(targets)), np.nan)
    est = np.exp(fit.predict(Dl=targets))
    eps = 1e-3 * targets
    slope = (np.exp(fit.predict(Dl=targets + eps)) - np.exp(fit.predict(Dl=targets - eps))) / (2 * eps)
    rows = []
    for j, t in enumerate(targets):
        lo, hi = (np.percentile(boot[:, j], [2.5, 97.5]) if len(boot) else (np.nan, np.nan))
        rows.append({"Dl": t, "long_ppl": est[j], "lo": lo, "hi": hi, "gain_per_1B_tokens": -slope[j] * 1e9,
                     "observed": bool(t <= dl[-1])})
    return {"fit": fit.absolute_params(), "predictions": rows, "n_boot_used": len(boot)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nblib.monitor", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--eval-every", type=int, default=5, help="evaluate Last4 at every k-th checkpoint (paper: 5)")
    ap.add_argument("--future", type=float, nargs="*", default=[], help="future Dl budgets in tokens")
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--plot", default=None, help="write a PNG of the points and the forecast")
    ap.add_argument("--model-config", default=None)
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--tokens-per-step", type=int, default=None)
    ap.add_argument("--budget", default=None)
    ap.add_argument("--run-root", default=None)
    args = ap.parse_args(argv)
    run_dir = Path(args.run_dir)
    try:
        if not run_dir.is_dir():
            raise MonitorError(f"{run_dir} is not a folder")
        if args.eval_every < 1:
            raise MonitorError(f"--eval-every must be >= 1, got {args.eval_every}")
        steps, tps, build, ev, cache = collect(run_dir, args)
        if len(steps) < 4:
            raise MonitorError(f"{run_dir} has {len(steps)} checkpoint(s); Last4 needs at least 4")
        points = evaluate_points(steps, tps, build, ev, cache, args.eval_every)
        print(f"{len(points)} Last4 evaluation points ({len(steps)} checkpoints, {tps:,} tokens/step)")
        print(f"{'Dl (tokens)':>14} {'LongPPL':>9} {'ShortPPL':>9}")
        for p in points:
            print(f"{p['Dl']:>14,.0f} {p['long_ppl']:>9.4f} {p['short_ppl']:>9.4f}")
        fc = forecast(points, args.future, args.n_boot)
    except MonitorError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    f = fc["fit"]
    print(f"\nEq. 2 fit: log LongPPL = {f['Bl']:.4g} * Dl^-{f['beta_l']:.4f} + {f['C_prime']:.4f} "
          f"({fc['n_boot_used']} bootstrap refits)")
    print(f"{'Dl (tokens)':>14} {'LongPPL':>9} {'95% interval':>19} {'drop per +1B tokens':>20}")
    for r in fc["predictions"]:
        tag = "(last observed)" if r["observed"] else ""
        print(f"{r['Dl']:>14,.0f} {r['long_ppl']:>9.4f} [{r['lo']:>8.4f}, {r['hi']:>8.4f}] {r['gain_per_1B_tokens']:>20.4g} {tag}")
    if args.plot:
        _plot(points, fc, Path(args.plot))
        print(f"plot: {args.plot}")
    return 0


def _plot(points, fc, path: Path) -> None:
    dl = np.array([p["Dl"] for p in points])
    pr = fc["predictions"]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(dl, [p["long_ppl"] for p in points], "ko", ms=4, label="Last4 LongPPL")
    t = np.array([r["Dl"] for r in pr])
    ax.errorbar(t, [r["long_ppl"] for r in pr], yerr=[[r["long_ppl"] - r["lo"] for r in pr],
                [r["hi"] - r["long_ppl"] for r in pr]], fmt="s", c="tab:red", label="Eq. 2 forecast (95%)")
    ax.set(xscale="log", xlabel="$D_l$ (tokens)", ylabel="LongPPL", title="Constant-Last4 monitor")
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=100, bbox_inches="tight", format="png")
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
