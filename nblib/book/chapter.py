"""What every chapter does first and last: validate its papermill parameters, open the run
store, time itself, and save figures under figures/<chapter>/.

    ch = Chapter("04_constant_last4", budget=budget, seed=seed, run_root=run_root, scale=scale)
    ...
    ch.save_figure(fig, "fig04a_observation_rules", runs=[...])
    ch.done()   # prints the chapter's wall time
"""

from __future__ import annotations

import time

import matplotlib.pyplot as plt
from IPython.display import Image, display
from markdown_it import MarkdownIt

from nblib.book.figures import save_figure, save_table
from nblib.book.plan import require_inputs
from nblib.budgets import BudgetError, check_scale, get_budget
from nblib.store.runstore import RunStore

_MD = MarkdownIt("commonmark").enable("table")


class Chapter:
    def __init__(self, name: str, budget: str = "toy", seed: int = 0, run_root: str | None = None,
                 scale: str | None = None, allowed_scales=None, n_boot: int | None = None, **params):
        self.name = name
        self.budget = get_budget(budget)  # raises BudgetError listing smoke, toy, full
        require_inputs(self.budget, name)  # every missing input at once, before any work
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise BudgetError(f"seed={seed!r} is not allowed; allowed values: integers >= 0")
        self.seed = seed
        self.scale = check_scale(scale) if scale is not None else None
        if scale is not None and allowed_scales is not None and scale not in allowed_scales:
            raise BudgetError(f"scale={scale!r} is not allowed in chapter {name}; allowed values: "
                              f"{', '.join(allowed_scales)}")
        if n_boot is not None and (not isinstance(n_boot, int) or isinstance(n_boot, bool) or n_boot == 1
                                   or n_boot < 0):
            raise BudgetError(f"n_boot={n_boot!r} is not allowed; allowed values: 0 (the budget's default) or "
                              f"integers >= 2")
        self.n_boot = n_boot or self.budget.n_boot  # bootstrap refits behind intervals
        self.params = params
        self.store = RunStore(run_root or None)
        self.t0 = time.time()
        self.figures: list = []
        print(f"[{name}] budget={self.budget.name} seed={seed}" + (f" scale={scale}" if scale else "")
              + f" run store={self.store.root}")

    def save_figure(self, fig, name: str, runs=(), extra: dict | None = None, show: bool = True) -> None:
        """Save under figures/<chapter>/<name>.png (with provenance) and show that very file,
        so the page displays exactly the PNG the figures folder holds (path: self.figures[-1])."""
        path = save_figure(fig, self.name, name, self.budget.name, runs=runs, extra=extra)
        plt.close(fig)
        self.figures.append(path)
        if show:
            display(Image(filename=str(path)))

    def save_table(self, df, name: str, runs=(), extra: dict | None = None):
        """Save a table as figures/<chapter>/<name>.csv with provenance."""
        return save_table(df, self.name, name, self.budget.name, runs=runs, extra=extra)

    @staticmethod
    def markdown(text: str) -> None:
        """Show computed text (a chapter's conclusions, a table) as Markdown: Jupyter renders
        the Markdown, the book the same text as HTML (markdown-it, with tables)."""
        display({"text/markdown": text, "text/html": _MD.render(text)}, raw=True)

    @property
    def elapsed(self) -> float:
        return time.time() - self.t0

    def done(self) -> None:
        """Print the chapter's wall time (the book runner also records it)."""
        wall = self.elapsed
        print(f"[{self.name}] chapter wall time: {wall:.1f} s ({wall / 60:.1f} min) at budget {self.budget.name}")

