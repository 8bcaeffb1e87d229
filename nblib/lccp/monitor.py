"""Monitor a constant-LR LCCP run: Last4 LongPPL/ShortPPL so far, and Eq. 2's forecast.

    python -m nblib.lccp.monitor RUN_DIR [--eval-every 5] [--future 2e9 4e9] [--plot out.png]

RUN_DIR is either a run-store folder (it holds config.json and ckpt/step_*/) or a folder
of safetensors checkpoints named by step (`step_000123.safetensors` or
`step_000123/model.safetensors`); the latter needs --model-config (a JSON of
{"family": ..., **config}), --tokens-per-step and --budget or --budget-file (whose annotated
LongPPL test set and tokenizer are used; its reference must exist in --run-root, or
--train-reference trains it there). A run-store run is evaluated at the budget it was trained
at, or at a --budget-file over that budget. Checkpoints are verified (sha256) before use and
evaluations are cached under the hash of the weights they read, so changed weights are
evaluated anew; a run-store run's Last4 points share the cache of `Evaluator.merged`, so what
chapter 4 evaluated is read.
Errors print one line and exit 2.

At every `eval-every`-th checkpoint it evaluates Last4 (the checkpoint and the three
before it, the LCCP paper §4.1; with `--last4-spacing s`, the three that lie s, 2s and 3s
checkpoints back, App. B.1's Last4(s)) and caches the result, fits Eq. 2 (§4.3,
log LongPPL = Bl Dl^-βl + C') with Huber loss and a bootstrap over the points, and
prints the predicted LongPPL at the `--future` budgets with 95% intervals and the
marginal gain (LongPPL drop) per extra billion tokens.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # a CLI: draw to files, never to a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from nblib.budgets import get_budget  # noqa: E402
from nblib.budgets.budget_file import add_budget_args, budget_from_args  # noqa: E402
from nblib.cli import run_cli  # noqa: E402
from nblib.lccp.evaluation import Evaluator, annotation_path  # noqa: E402
from nblib.lccp.grid import reference_config  # noqa: E402
from nblib.lccp.merge import merge  # noqa: E402
from nblib.lccp.scaling import fit_fixed_model_law  # noqa: E402
from nblib.models import build_model  # noqa: E402
from nblib.store.atomic import atomic_path, atomic_write_json  # noqa: E402
from nblib.store.checkpoint import checkpoint_of, verify_checkpoint, weights_sha256  # noqa: E402
from nblib.store.runstore import RunConfig, RunStore  # noqa: E402

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


def collect(run_dir: Path, args, budget=None):
    """(steps->weights, tokens_per_step, evaluate(window steps)->{long_ppl, short_ppl}).

    A run-store run's Last4 goes through `Evaluator.merged`, the cache the chapters read too,
    so a point chapter 4 has evaluated is read, not recomputed. A plain folder's Last4 is
    cached in <folder>/.monitor under the hash of the weights it reads. `budget`: the
    command line's (`--budget` or `--budget-file`; a run-store run takes a budget file's only,
    over the budget it was trained at)."""
    if (run_dir / "config.json").exists():
        cfg = RunConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
        store = RunStore(run_dir.parent)
        run = store.run(cfg)
        if cfg.schedule["kind"] != "constant":
            print(f"warning: run {run.hash} uses a {cfg.schedule['kind']!r} schedule; Last4 monitoring is meant "
                  f"for constant-LR trajectories", file=sys.stderr)
        ckpts = run.checkpoints()
        for c in ckpts:  # corrupt weights are reported first, before anything is evaluated
            verify_checkpoint(c.path, deep=True)
        steps = {c.step: c.weights for c in ckpts}
        if args.budget_file and budget.name != cfg.budget:
            raise MonitorError(f"--budget-file {args.budget_file} (base {budget.name!r}) is not allowed for run "
                               f"{run.hash}, trained at {cfg.budget!r}; allowed: a budget file whose base is "
                               f"{cfg.budget!r}")
        b = budget if args.budget_file else get_budget(cfg.budget)
        ev = _evaluator(b, store, args.train_reference)
        return steps, cfg.tokens_per_step, lambda window: ev.merged(run, window, "lastM", m=len(window))
    missing = [f"--{o.replace('_', '-')}" for o in ("model_config", "tokens_per_step") if getattr(args, o) is None]
    missing += ["--budget (or --budget-file)"] if budget is None else []
    if missing:
        raise MonitorError(f"{run_dir} is not a run-store run (no config.json); a plain checkpoint folder needs "
                           + ", ".join(missing))
    mc = json.loads(Path(args.model_config).read_text())
    if not isinstance(mc, dict) or "family" not in mc:
        raise MonitorError(f"--model-config {args.model_config}: expected a JSON object with 'family' and that "
                           f"family's config fields")
    family = mc.pop("family")
    if args.tokens_per_step < 1:
        raise MonitorError(f"--tokens-per-step={args.tokens_per_step} is not allowed; allowed: an int >= 1")

    def build(state):
        model = build_model(family, dict(mc))
        try:
            model.load_state_dict(state)
        except RuntimeError as e:  # missing/unexpected keys or shapes: not this model's weights
            raise MonitorError(f"the checkpoints in {run_dir} are not weights of the --model-config model: "
                               f"{str(e).splitlines()[0]}") from None
        return model.eval()

    steps = _folder_checkpoints(run_dir)
    ev = _evaluator(budget, RunStore(args.run_root), args.train_reference)
    cache = run_dir / ".monitor"

    def evaluate_window(window):
        files = [steps[s] for s in window]
        key = cache / f"monitor-{ev.key}-last{len(window)}-{'-'.join(map(str, window))}-{_window_id(files)}.json"
        if key.exists():
            return json.loads(key.read_text())
        state = merge("lastM", files, m=len(window), iterations=window)  # verifies, refuses non-finite weights
        res = ev._evaluate(build(state))
        if np.isfinite([res["long_ppl"], res["short_ppl"]]).all():
            atomic_write_json(key, res)
        return res

    return steps, int(args.tokens_per_step), evaluate_window


def _evaluator(budget, store: RunStore, train_reference: bool) -> Evaluator:
    """The budget's LongPPL evaluator from `store`; never trains the reference silently."""
    if budget.reference["kind"] == "nblib" and not train_reference:
        ref = store.run(reference_config(budget))
        if not ref.is_complete() and not annotation_path(budget, store).exists():
            raise MonitorError(f"the run store {store.root} has no LongPPL reference for budget {budget.name!r}: "
                               f"pass --run-root of the store that has it, or --train-reference to train it here")
    return Evaluator.build(budget, store)


def _window_id(files: list) -> str:
    """A short hash of the weights in a Last4 window: checkpoint folders by their recorded
    (and verified) sha256, plain files by their bytes. The cache key, so changed weights
    are evaluated anew."""
    h = hashlib.sha256()
    for f in files:
        ck = checkpoint_of(f)
        h.update((weights_sha256(ck) if ck is not None else hashlib.sha256(Path(f).read_bytes()).hexdigest()).encode())
    return h.hexdigest()[:16]


def last_m_windows(steps, eval_every: int, m: int = 4, spacing: int = 1) -> list[list[int]]:
    """The checkpoint windows Last-m merges (§4.1; App. B.1's Last-m(s)): at every
    eval_every-th checkpoint that has (m-1)*spacing predecessors, that checkpoint and the m-1
    that lie spacing, 2*spacing, ... checkpoints before it, oldest first."""
    order = sorted(steps)
    reach = (m - 1) * spacing
    return [order[i - reach:i + 1:spacing] for i in range(reach, len(order)) if (i + 1) % eval_every == 0]


def evaluate_points(steps: dict, tps: int, evaluate_window, eval_every: int, m: int = 4,
                    spacing: int = 1) -> list[dict]:
    """Last4 LongPPL/ShortPPL at every window of `last_m_windows`: `evaluate_window(window
    steps)` scores the merge of the m checkpoints of that window."""
    points = []
    for window in last_m_windows(steps, eval_every, m, spacing):
        res = evaluate_window(window)
        if not all(np.isfinite([res["long_ppl"], res["short_ppl"]])):
            raise MonitorError(f"Last4 at step {window[-1]} gives LongPPL {res['long_ppl']} and ShortPPL "
                               f"{res['short_ppl']}: the merged weights do not evaluate to finite numbers")
        points.append({"step": window[-1], "Dl": window[-1] * tps, "long_ppl": res["long_ppl"],
                       "short_ppl": res["short_ppl"]})
    return points


def forecast(points: list[dict], future: list[float], n_boot: int = 200, seed: int = 0, method: str = "profile") -> dict:
    """Fit Eq. 2 to the points; predictions at `future` token budgets with bootstrap intervals
    and the marginal LongPPL drop per extra billion tokens. Each bootstrap refit polishes from
    the full fit's optimum; method: fit_fixed_model_law's."""
    if len(points) < MIN_POINTS:
        raise MonitorError(f"only {len(points)} Last4 evaluation point(s); Eq. 2 has 3 parameters, so at least "
                           f"{MIN_POINTS} are needed: train further or lower --eval-every")
    dl = np.array([p["Dl"] for p in points], float)
    y = np.log([p["long_ppl"] for p in points])
    if not np.all(np.isfinite(y)):
        raise MonitorError("some LongPPL values are not finite: NaN weights, or a test set without long key tokens")
    fit = fit_fixed_model_law(dl, y, method=method)
    targets = np.array(sorted(set([dl[-1], *future])), float)
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(dl), len(dl))
        if len(set(idx)) < MIN_POINTS:
            continue
        try:
            boot.append(fit_fixed_model_law(dl[idx], y[idx], start=fit.theta, method=method).predict(Dl=targets))
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


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m nblib.lccp.monitor", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--eval-every", type=int, default=5, help="evaluate Last4 at every k-th checkpoint (paper: 5)")
    ap.add_argument("--last4-spacing", type=int, default=1,
                    help="checkpoints between Last4's merged checkpoints (App. B.1's Last4(s); paper §4.1: 1)")
    ap.add_argument("--future", type=float, nargs="*", default=[], help="future Dl budgets in tokens")
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--plot", default=None, help="write a PNG of the points and the forecast")
    ap.add_argument("--model-config", default=None, help="plain folders: JSON of {family, **config}")
    ap.add_argument("--tokens-per-step", type=int, default=None, help="plain folders: tokens per optimizer step")
    add_budget_args(ap, default=None, help="plain folders: the budget whose LongPPL test set to use")
    ap.add_argument("--run-root", default=None, help="plain folders: the run store holding that budget's "
                                                    "LongPPL reference and annotation")
    ap.add_argument("--train-reference", action="store_true",
                    help="train the budget's LongPPL reference if the run store lacks it (minutes at toy)")
    return ap


def main(argv=None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    budget, _ = budget_from_args(ap, args)  # a bad --budget or --budget-file stops here, before any work
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise MonitorError(f"{run_dir} is not a folder")
    if args.eval_every < 1:
        raise MonitorError(f"--eval-every must be >= 1, got {args.eval_every}")
    steps, tps, evaluate_window = collect(run_dir, args, budget)
    if args.last4_spacing < 1:
        raise MonitorError(f"--last4-spacing must be >= 1 (checkpoints), got {args.last4_spacing}")
    need = 3 * args.last4_spacing + 1
    if len(steps) < need:
        raise MonitorError(f"{run_dir} has {len(steps)} checkpoint(s); Last4 needs at least {need}"
                           + (f" at --last4-spacing {args.last4_spacing}" if args.last4_spacing > 1 else ""))
    points = evaluate_points(steps, tps, evaluate_window, args.eval_every, spacing=args.last4_spacing)
    print(f"{len(points)} Last4 evaluation points ({len(steps)} checkpoints, {tps:,} tokens/step)")
    print(f"{'Dl (tokens)':>14} {'LongPPL':>9} {'ShortPPL':>9}")
    for p in points:
        print(f"{p['Dl']:>14,.0f} {p['long_ppl']:>9.4f} {p['short_ppl']:>9.4f}")
    fc = forecast(points, args.future, args.n_boot)
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
    sys.exit(run_cli(main))
