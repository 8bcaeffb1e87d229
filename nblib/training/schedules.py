"""Learning-rate schedules of the paper (LCCP paper §3.1, App. A.3), as pure functions of the step.

A schedule maps a global optimizer step (0-based: the LR used for update number
`step`) to a learning rate. Being a pure function of the step is what makes
exact resume and branched WSD decays (several budgets sharing one stable run)
possible: the LR at a step never depends on how the run got there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

SCHEDULE_KINDS = ("wsd", "linear_decay", "constant")


@dataclass(frozen=True)
class Schedule:
    """One LR schedule.

    kind:
      - "wsd": linear warmup over `warmup_steps`, constant `lr`, then a linear decay to
        `lr * final_lr_frac` over the last `decay_frac` of `total_steps` (App. A.3: the
        warmup+stable and decay phases hold tokens in an 8:1 ratio, so decay_frac = 1/9).
      - "linear_decay": from `lr` to `lr * final_lr_frac` linearly over `total_steps`, no
        warmup (the Linear-Decay LCCP runs, §3.1).
      - "constant": `lr` after an optional linear warmup (Constant-Raw LCCP, §4.1). Its
        length is open-ended, so `total_steps` may be None.
    """

    kind: str
    lr: float
    total_steps: int | None = None
    warmup_steps: int = 0
    decay_frac: float = 1.0 / 9.0
    final_lr_frac: float = 0.1

    def __post_init__(self):
        if self.kind not in SCHEDULE_KINDS:
            raise ValueError(f"unknown schedule kind {self.kind!r}; allowed: {', '.join(SCHEDULE_KINDS)}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr!r}")
        if self.kind != "constant" and (self.total_steps is None or self.total_steps < 1):
            raise ValueError(f"a {self.kind!r} schedule needs total_steps >= 1, got {self.total_steps!r}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps!r}")
        if not 0 < self.decay_frac <= 1:
            raise ValueError(f"decay_frac must be in (0, 1], got {self.decay_frac!r}")

    @property
    def decay_start(self) -> int:
        """First step of the WSD decay phase: warmup+stable take round(8/9 of the steps)."""
        if self.kind != "wsd":
            raise ValueError("decay_start is defined for 'wsd' schedules only")
        return wsd_stable_steps(self.total_steps, self.decay_frac)

    def __call__(self, step: int) -> float:
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        if self.warmup_steps and step < self.warmup_steps and self.kind != "linear_decay":
            return self.lr * (step + 1) / self.warmup_steps
        if self.kind == "constant":
            return self.lr
        end = self.lr * self.final_lr_frac
        if self.kind == "linear_decay":
            start, n = 0, self.total_steps
        else:  # wsd
            start = self.decay_start
            if step < start:
                return self.lr
            n = self.total_steps - start
        # Linear from lr (first decay step) to lr*final_lr_frac (last step).
        frac = (step - start) / max(n - 1, 1)
        return self.lr + (end - self.lr) * min(frac, 1.0)

    def to_dict(self) -> dict:
        return asdict(self)


def wsd_stable_steps(total_steps: int, decay_frac: float = 1.0 / 9.0) -> int:
    """Steps in WSD's warmup+stable phase for a run of `total_steps` (App. A.3, 8:1 ratio)."""
    return int(round(total_steps * (1.0 - decay_frac)))


def schedule_of(config) -> Schedule:
    """The LR schedule of a run config (`RunConfig.schedule` plus its derived step count): a
    constant-LR trajectory has no end, every other schedule ends at the run's last step."""
    total = None if config.extensible else config.total_steps
    return Schedule(total_steps=total, **config.schedule)
