"""One error path for every command-line tool (`python -m nblib.training.train`, `nblib.lccp.merge`,
`nblib.lccp.monitor`, `nblib.lccp.scaling`, `nblib.data.bpe`), and the old module names of nblib's
first layout, which still import and still run.

A user error (a bad value, a missing or corrupt file, a locked run, a full disk, a
read-only folder) prints one line, `error: <what is wrong and what is allowed>`, and exits
with status 2: no traceback. `--debug` anywhere on the command line shows the traceback as
well. Anything else is a bug: it says so, exits 1, and `--debug` shows where.
"""

from __future__ import annotations

import errno
import importlib
import importlib.abc
import importlib.util
import json
import os
import sys
import traceback
import warnings


class UserError(Exception):
    """Base of nblib's own user-facing errors: a corrupt checkpoint, a locked run (the run store
    raises them; `run_cli` prints them as one line and exits 2)."""


# The error types a user can cause and fix. ValueError covers ConfigError, BudgetError,
# MonitorError, TableError and argument checks; UserError the checkpoint and lock errors.
USER_ERRORS = (ValueError, UserError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError,
               FileExistsError, json.JSONDecodeError, UnicodeDecodeError, FloatingPointError)
_RESUME = ("and run the same command again: a run resumes from its last complete checkpoint, "
           "and every checkpoint marked complete stays valid")
OS_HINTS = {  # {folder}: the folder the failed write or read was in
    errno.ENOSPC: "the disk is full: no space left to write in {folder}. Free some space there (or point "
                  "NBLIB_RUN_ROOT at another disk) " + _RESUME,
    errno.EDQUOT: "the disk quota is exceeded writing in {folder}. Free some space (or point NBLIB_RUN_ROOT "
                  "at another disk) " + _RESUME,
    errno.EROFS: "the file system is read-only: cannot write in {folder}. Point NBLIB_RUN_ROOT (or --run-root, "
                 "-o) at a writable folder",
    errno.EACCES: "permission denied in {folder}: use a folder you can write (NBLIB_RUN_ROOT, --run-root, -o) "
                  "or fix its permissions",
    errno.ELOOP: "a symbolic link stands where a file is written in {folder}: remove the link",
}


def _folder(path) -> str:
    """The folder of a failed file operation (the path itself when it is a folder)."""
    path = str(path)
    return path if os.path.isdir(path) else (os.path.dirname(path) or ".")


def user_message(e: BaseException) -> str | None:
    """The one-line message for a user error, or None when `e` is not one."""
    if isinstance(e, OSError) and e.errno in OS_HINTS:
        filename = getattr(e, "filename", None)
        folder = _folder(filename) if filename else "a folder of the run store"
        return OS_HINTS[e.errno].format(folder=folder) + (f" ({e.strerror}: {filename})" if filename else "")
    if isinstance(e, USER_ERRORS):
        text = str(e).strip() or type(e).__name__
        return " ".join(text.split()) if len(text) < 2000 else text[:2000] + " ..."
    return None


def run_cli(main, argv=None, on_error=None) -> int:
    """Run main(argv) and turn errors into the one error path: exit 2 for user errors, 1
    for bugs. on_error(message) is called with the message too (e.g. to write it to the
    run's train.log)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    try:
        return main(argv)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # the one place where any error becomes a message and an exit status
        msg = user_message(e)
        if debug:
            traceback.print_exc()
        if msg is not None:
            print(f"error: {msg}", file=sys.stderr)
            if on_error is not None:
                on_error(msg)
            return 2
        print(f"internal error: {type(e).__name__}: {e} (a bug: rerun with --debug for the traceback)",
              file=sys.stderr)
        return 1


# Where nblib's first layout (28 top-level modules) put each module, and where it lives now.
# The old names keep working, for `import` and for `python -m` (the README's commands were
# `python -m nblib.train`, `nblib.merge`, `nblib.scaling` and `nblib.monitor`), with a
# FutureWarning that names the new place.
MOVED_MODULES = {
    "nblib.atomic": "nblib.store.atomic", "nblib.provenance": "nblib.store.provenance",
    "nblib.checkpoint": "nblib.store.checkpoint", "nblib.runstore": "nblib.store.runstore",
    "nblib.train": "nblib.training.train", "nblib.optim": "nblib.training.optim",
    "nblib.schedules": "nblib.training.schedules", "nblib.runner": "nblib.training.runner",
    "nblib.grid": "nblib.lccp.grid", "nblib.experiments": "nblib.lccp.experiments",
    "nblib.evaluation": "nblib.lccp.evaluation", "nblib.merge": "nblib.lccp.merge",
    "nblib.monitor": "nblib.lccp.monitor", "nblib.downstream": "nblib.lccp.downstream",
    "nblib.scaling": "nblib.lccp.scaling",
    "nblib.pair": "nblib.gemma.pair", "nblib.position": "nblib.gemma.position",
    "nblib.extension": "nblib.gemma.extension", "nblib.inference_cost": "nblib.gemma.inference_cost",
    "nblib.attention_maps": "nblib.metrics.attention_maps",
    "nblib.chapter": "nblib.book.chapter", "nblib.figures": "nblib.chapters.figures",
    # findings.py was split by chapter: the old name is chapter 3's part (its first chapter)
    "nblib.findings": "nblib.chapters.part1.law_findings", "nblib.paper_map": "nblib.chapters.claims.paper_map",
    "nblib.paper_values": "nblib.chapters.claims.paper_values",
    # errors.py (one exception class) joined the one error path that prints its errors
    "nblib.errors": "nblib.cli",
    # Where nblib/book's modules went when it became the book runner only (issue 67). The probe
    # CLIs moved to the probes: data/probes/ manifests record `python -m nblib.book.design_probe
    # ...` as the commands that rerun their records; the README named `python -m nblib.book.scorecard`.
    "nblib.book.design_probe": "nblib.probes.design_probe", "nblib.book.design_needles": "nblib.probes.design_needles",
    "nblib.book.scorecard": "nblib.chapters.claims.scorecard",
    "nblib.book.budget_file": "nblib.budgets.budget_file", "nblib.book.own_data": "nblib.budgets.own_data",
    "nblib.book.chapters": "nblib.book.toc", "nblib.book.figures": "nblib.chapters.figures",
    "nblib.book.budget_words": "nblib.chapters.budget_words",
    "nblib.book.law_figures": "nblib.chapters.part1.law_figures",
    "nblib.book.protocol_figures": "nblib.chapters.part1.protocol_figures",
    "nblib.book.metric_figures": "nblib.chapters.part1.metric_figures",
    "nblib.book.downstream_figures": "nblib.chapters.part1.downstream_figures",
    "nblib.book.blog_findings": "nblib.chapters.part2.blog_findings",
    "nblib.book.toy_design": "nblib.chapters.appendix.toy_design",
    "nblib.book.toy_erosion": "nblib.chapters.appendix.toy_erosion",
    "nblib.book.toy_figures": "nblib.chapters.appendix.toy_figures",
    "nblib.book.grid_ladder_findings": "nblib.chapters.appendix.grid_ladder_findings",
    "nblib.book.noise": "nblib.chapters.claims.noise", "nblib.book.paper_map": "nblib.chapters.claims.paper_map",
    "nblib.book.paper_values": "nblib.chapters.claims.paper_values",
}


def moved_name(name: str) -> str | None:
    """The current name of a module of the first layout (`nblib.scaling.fit` ->
    `nblib.lccp.scaling.fit`), or None when `name` did not move."""
    for old, new in MOVED_MODULES.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return None


class _MovedLoader(importlib.abc.Loader):
    """Loads an old name as the module at its new place: the same module object (no second
    copy), and for `python -m old.name` (runpy asks for `get_code`) the new module's code."""

    def __init__(self, new: str, real_spec):
        self.new, self.real_spec = new, real_spec

    def create_module(self, spec):
        return importlib.import_module(self.new)

    def exec_module(self, module):
        module.__spec__ = self.real_spec  # the import system set it to the old name's spec

    def get_code(self, fullname):
        return self.real_spec.loader.get_code(self.new)


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of MOVED_MODULES under their old names. It sits at the end of
    sys.meta_path, so it is asked only for names that no longer exist as files."""

    def find_spec(self, fullname, path=None, target=None):
        new = moved_name(fullname)
        real = importlib.util.find_spec(new) if new else None
        if real is None:
            return None
        how = f"`python -m {new}`" if real.loader is not None and hasattr(real.loader, "get_code") else new
        warnings.warn(f"{fullname} moved to {new}: use {how}; the old name will go", FutureWarning, stacklevel=2)
        is_package = real.submodule_search_locations is not None
        spec = importlib.util.spec_from_loader(fullname, _MovedLoader(new, real), is_package=is_package)
        if is_package:
            spec.submodule_search_locations = list(real.submodule_search_locations)
        return spec


def install_moved_module_finder() -> None:
    """Let the old module names import (once per process; `nblib/__init__.py` calls it)."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
