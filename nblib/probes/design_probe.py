"""A probe on a design of chapter 2's ladder: `python -m nblib.probes.design_probe --budget-file
F PROBE [probe args]` runs `nblib.probes` PROBE on the budget of a TOML budget file, whose runs
must already be in the store where the probe reads them (`make book BUDGET_FILE=...`). The
probe gets the Budget as a keyword, and its records name the file and this command. Probes
that take one: those whose `main` has a `budget` keyword (code_needle_levers, protocol_horizon).

    python -m nblib.probes.design_probe --budget-file data/probes/grid_designs/R.toml \\
        protocol_horizon --scales S4 S5 --dls 30 60 120

Its records of earlier designs name it by its first home, `python -m nblib.book.design_probe`,
which still runs it (nblib.cli.MOVED_MODULES).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import shlex
import sys

from nblib.budgets.budget_file import load_budget_file
from nblib.probes import PROBES, results


def takes_budget(name: str) -> bool:
    """Whether probe `name`'s main accepts a Budget (`budget=` keyword)."""
    return "budget" in inspect.signature(importlib.import_module(PROBES[name]).main).parameters


def run(probe: str, budget_file: str, argv: list[str]) -> int:
    """Run `probe` with `argv` on the budget of `budget_file` (records name the file)."""
    if probe not in PROBES or not takes_budget(probe):
        allowed = [n for n in PROBES if takes_budget(n)]
        raise SystemExit(f"error: probe {probe!r} does not take a budget file; allowed: {', '.join(allowed)}")
    main = importlib.import_module(PROBES[probe]).main
    with results.started_by(f"python -m nblib.probes.design_probe --budget-file {shlex.quote(str(budget_file))}"):
        return main(argv, budget=load_budget_file(budget_file), budget_name=budget_file)


def main(argv=None) -> int:
    """Read `--budget-file` and the probe's name; hand the rest of the arguments to the probe."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # no -h of its own: `--help` after the probe's name is the probe's
    p = argparse.ArgumentParser(prog="python -m nblib.probes.design_probe", description=__doc__.splitlines()[0],
                                add_help=False)
    p.add_argument("--budget-file", required=True, help="a TOML budget file, e.g. data/probes/grid_designs/R.toml")
    p.add_argument("probe", help="a probe whose main takes a budget (code_needle_levers, protocol_horizon)")
    if not argv or argv[0] in ("-h", "--help"):
        p.print_help()
        return 0
    a, rest = p.parse_known_args(argv)
    return run(a.probe, a.budget_file, rest)


if __name__ == "__main__":
    raise SystemExit(main())
