"""What a scorecard row is made of: the verdicts, a claim (`Claim`), the rule that judges it
(`Rule`, or `Conditions` when its measure judges several at once), the toy's number for it
(`Measure`), and the saved tables of one build it is read from (`Figures`).

The claims themselves are in `lccp_claims` (the LCCP paper) and `blog_claims` (the Gemma
blog); `scorecard` judges them and writes the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

VERDICTS = ("reproduced", "partly", "within noise", "out of reach at toy", "not", "not measured")


@dataclass(frozen=True)
class Rule:
    """A claim's verdict from one number: reproduced when it is at or past `target`, partly
    when at or past `partly`, else not (`higher`: which way is better)."""

    target: float
    partly: float
    higher: bool = True
    unit: str = ""

    def verdict(self, value: float) -> str:
        if value is None or not np.isfinite(value):
            return "not measured"
        past = (lambda t: value >= t) if self.higher else (lambda t: value <= t)
        return "reproduced" if past(self.target) else "partly" if past(self.partly) else "not"

    def words(self) -> str:
        op = "≥" if self.higher else "≤"
        return f"reproduced {op} {self.target:g}{self.unit}; partly {op} {self.partly:g}{self.unit}"


@dataclass(frozen=True)
class Conditions:
    """A claim judged on several conditions at once (its measure sets the verdict and names the
    conditions that failed); `words` states the rule."""

    text: str

    def verdict(self, value: float) -> str:  # the measure's own verdict is used instead
        return "not measured"

    def words(self) -> str:
        return self.text


@dataclass(frozen=True)
class Measure:
    """The toy's number for a claim: `value` (what the rule reads), `shown` (the number as the
    page shows it, with its interval or spread) and, for a rule of several conditions or a
    noise, the `verdict` the measure reached itself."""

    value: float
    shown: str
    verdict: str | None = None


NOT_MEASURED = Measure(float("nan"), "–")


class Figures:
    """The saved tables of one build: `root`/<chapter>/<name>.csv."""

    def __init__(self, root: Path, budget: str = "toy"):
        self.root, self.budget = Path(root), budget

    def csv(self, chapter: str, name: str) -> pd.DataFrame | None:
        p = self.root / chapter / f"{name}.csv"
        return pd.read_csv(p) if p.is_file() else None


@dataclass(frozen=True)
class Claim:
    """One claim: which work and section, the claim, the source's number, how the toy's number
    is read (`measure`), the rule, one line of why the rule is what it is, the chapter whose
    figures give the number, and whether it is a control row (shown, not counted)."""

    work: str
    where: str
    claim: str
    source: str
    measure: Callable[[Figures], Measure]
    rule: Rule | Conditions
    why: str = ""
    chapter: str = ""
    control: bool = False
