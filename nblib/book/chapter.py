"""What every chapter does first and last: validate its papermill parameters, open the run
store, time itself, and save figures under figures/<chapter>/.

    ch = Chapter("04_constant_last4", budget=budget, seed=seed, run_root=run_root, scale=scale)
    ch = Chapter("03_scaling_law", budget_file="my.toml")   # a budget file (README, "Your own data")
    ...
    ch.save_figure(fig, "fig04a_observation_rules", runs=[...])
    ch.done()   # prints the chapter's wall time

A budget file's `base` replaces `budget`. Its figures go to `_build/<file name>/figures/`
(unless $NBLIB_FIGURES_DIR says where), never over the committed toy figures, and every
run manifest and figure manifest written from the chapter names the file and its sha256.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Image, display
from markdown_it import MarkdownIt

from nblib.book.plan import require_inputs
from nblib.budgets import BudgetError, check_scale, get_budget
from nblib.budgets.budget_file import read_budget_file
from nblib.budgets.own_data import own_data
from nblib.chapters.claims.claim import Figures
from nblib.chapters.claims.noise import table14_noise
from nblib.chapters.claims.scorecard import verdict_line
from nblib.chapters.figures import figures_root, save_figure, save_table
from nblib.store.call_cache import cached_call
from nblib.store.provenance import REPO_ROOT, set_budget_file
from nblib.store.runstore import RunStore

_MD = MarkdownIt("commonmark").enable("table")


_FIGURES_SET_HERE: list = []  # the $NBLIB_FIGURES_DIR a budget file's chapter set in this process


def _budget_file_figures(path) -> None:
    """A budget file's figures go to `_build/<file name>/figures/` unless $NBLIB_FIGURES_DIR
    names a folder, so the committed toy figures stay the toy's; a later chapter without a
    file in the same process writes where it would have."""
    env = os.environ.get("NBLIB_FIGURES_DIR")
    if _FIGURES_SET_HERE and env == _FIGURES_SET_HERE[-1]:
        os.environ.pop("NBLIB_FIGURES_DIR")
        env = None
    _FIGURES_SET_HERE.clear()
    if path is not None and not env:
        os.environ["NBLIB_FIGURES_DIR"] = str(REPO_ROOT / "_build" / Path(path).stem / "figures")
        _FIGURES_SET_HERE.append(os.environ["NBLIB_FIGURES_DIR"])


def _shown(path) -> str:
    """A path as a chapter prints it: relative to the repository when inside it, so an executed
    page names no absolute path."""
    try:
        return str(Path(path).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


class Chapter:
    def __init__(self, name: str, budget: str = "toy", seed: int = 0, run_root: str | None = None,
                 scale: str | None = None, allowed_scales=None, n_boot: int | None = None, budget_file: str = "",
                 **params):
        self.name = name
        # a malformed budget file raises BudgetError naming the key and what is allowed
        self.budget_file = read_budget_file(budget_file) if budget_file else None
        # raises BudgetError listing smoke, toy, full
        self.budget = self.budget_file.budget if self.budget_file else get_budget(budget)
        require_inputs(self.budget, name, self.budget_file)  # every missing input at once, before any work
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
        set_budget_file(self.budget_file.record() if self.budget_file else None)  # into every manifest
        _budget_file_figures(self.budget_file.path if self.budget_file else None)
        if self.budget_file:
            self.budget = own_data(self.budget, self.store.root)  # the toy's BPE on the file's corpus, vocabularies
        self.t0 = time.time()
        self.figures: list = []
        print(f"[{name}] budget={self.budget.name} seed={seed}" + (f" scale={scale}" if scale else "")
              + (f" budget file={self.budget_file.path} (sha256 {self.budget_file.sha256[:12]})"
                 if self.budget_file else "") + f" run store={_shown(self.store.root)}")

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

    def cached(self, fn, *args, **kwargs):
        """fn(*args, **kwargs) from the run store's results cache, computed there once
        (`nblib.store.call_cache`): a chapter executed again over a finished store, as in a
        rebuild after an edit to its words, reads its fits instead of refitting them."""
        return cached_call(self.store.root, fn, *args, **kwargs)

    @staticmethod
    def markdown(text: str) -> None:
        """Show computed text (a chapter's conclusions, a table) as Markdown: Jupyter renders
        the Markdown, the book the same text as HTML (markdown-it, with tables)."""
        display({"text/markdown": text, "text/html": _MD.render(text)}, raw=True)

    def verdict(self, where: str) -> None:
        """Show the scorecard's verdict on the claim at `where` (e.g. "§3.3, Fig. 3"), read from
        the tables this build has saved so far, with the toy's number and the rule: the sentence
        under a section's "What we see" (`nblib.chapters.claims.scorecard.verdict_line`)."""
        self.markdown(verdict_line(Figures(figures_root(self.budget.name), self.budget.name), where))

    def table14_noise(self):
        """Table 14's later stages with their paired-bootstrap intervals, from this build's tables
        (`nblib.chapters.claims.noise.table14_noise`)."""
        return table14_noise(Figures(figures_root(self.budget.name), self.budget.name))

    @property
    def elapsed(self) -> float:
        return time.time() - self.t0

    def done(self) -> None:
        """Print the chapter's wall time (the book runner also records it)."""
        wall = self.elapsed
        print(f"[{self.name}] chapter wall time: {wall:.1f} s ({wall / 60:.1f} min) at budget {self.budget.name}")

