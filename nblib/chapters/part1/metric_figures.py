"""Chapter 2's figures of the LongPPL metric (LCCP paper App. A.1): the reference model's
training curve and the key-token selection of the test set."""

from __future__ import annotations

import matplotlib.pyplot as plt

from nblib.lccp.grid import REFERENCE_THREADS
from nblib.lccp.speed_index import reference_step_rate


def reference_training_figure(metrics, reference_path: str | None = None):
    """Training loss of the LongPPL reference against tokens (`metrics`: the run's metrics table
    with `tokens` and `loss`), or, for a pretrained reference (metrics None), its path."""
    fig, ax = plt.subplots(figsize=(5, 3))
    if metrics is not None:
        ax.plot(metrics["tokens"], metrics["loss"], lw=1)
        ax.set(xlabel="tokens", ylabel="train loss (nats/token)", title="LongPPL reference model")
    else:
        ax.text(0.5, 0.5, f"the reference is a pretrained model\n({reference_path})", ha="center",
                transform=ax.transAxes)
    return fig


def key_token_figure(per_token, spec):
    """Every scored token by its full-context loss and its loss gap (App. A.1), long and short
    key tokens coloured, the LongPPLSpec `spec`'s thresholds dashed."""
    pt = per_token
    fig, ax = plt.subplots(figsize=(6, 4))
    other = ~(pt["long"] | pt["short"])
    ax.scatter(pt["loss_full"][other], pt["delta"][other], s=2, c="0.75", label="other", rasterized=True)
    ax.scatter(pt["loss_full"][pt["short"]], pt["delta"][pt["short"]], s=2, c="tab:blue", label="short key",
               rasterized=True)
    ax.scatter(pt["loss_full"][pt["long"]], pt["delta"][pt["long"]], s=4, c="tab:red", label="long key",
               rasterized=True)
    ax.axvline(spec.full_loss_max, ls="--", c="k", lw=0.8)
    ax.axhline(spec.long_delta_min, ls="--", c="tab:red", lw=0.8)
    ax.axhline(spec.short_delta_max, ls="--", c="tab:blue", lw=0.8)
    ax.set(xlabel=r"$\ell^{full}$ (nats)", ylabel=r"$\Delta = \ell^{chunk} - \ell^{full}$", title="Key-token selection")
    ax.legend(markerscale=4, loc="upper right")
    return fig


def training_speed(metrics) -> dict:
    """Optimizer steps per second of a run from its metrics table (`step`, `elapsed_s` of the
    train rows): over the last uninterrupted stretch (a resumed run restarts its clock), from
    its first logged step to its last. {steps, seconds, steps_per_s}; steps_per_s NaN if the
    stretch has fewer than two rows."""
    rows = metrics[metrics["kind"] == "train"] if "kind" in metrics else metrics
    t = rows["elapsed_s"].to_numpy(dtype=float)
    s = rows["step"].to_numpy(dtype=float)
    restarts = [i for i in range(1, len(t)) if t[i] < t[i - 1]]
    start = restarts[-1] if restarts else 0
    if len(t) - start < 2 or t[-1] <= t[start]:
        return {"steps": 0, "seconds": 0.0, "steps_per_s": float("nan")}
    steps, seconds = s[-1] - s[start], t[-1] - t[start]
    return {"steps": int(steps), "seconds": float(seconds), "steps_per_s": steps / seconds}


def training_speed_line(metrics, name: str) -> str:
    """One line for a chapter: a run's training speed (`training_speed`)."""
    sp = training_speed(metrics)
    return f"{name}: {sp['steps']:,} steps in {sp['seconds']:.0f} s, {sp['steps_per_s']:.2f} steps/s on this host"


def speed_index_line(budget) -> str:
    """One line for chapter 2: the host's speed index (`nblib.lccp.speed_index`), the
    LongPPL reference's fp32 training step rate, which the README scales chapter times by."""
    r = reference_step_rate(budget)
    return (f"speed index: {r:.2f} steps/s (the LongPPL reference's training step in fp32 at {REFERENCE_THREADS} "
            "threads; the README's chapter times scale with it)")
