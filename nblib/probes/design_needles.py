"""The code-needle lever probe on a design of chapter 2's ladder (chapter 5, "The needles on
the trajectories of chapter 2's ladder"): `nblib.probes.code_needle_levers` on the S5 trajectory
of a budget file, which must already be in the store (`make book BUDGET_FILE=...` or
`python -m nblib.book run --budget-file ... --chapters 03_scaling_law,04_constant_last4`).
Every other argument is the probe's:

    python -m nblib.probes.design_needles --budget-file data/probes/grid_designs/K.toml \\
        --forms code:magic:short --points 10 60 120 --samples 20

Its first home, `python -m nblib.book.design_needles`, still runs it (nblib.cli.MOVED_MODULES).
"""

from __future__ import annotations

import argparse
import sys

from nblib.probes.design_probe import run


def main(argv=None) -> int:
    """Read `--budget-file` and hand the rest of the arguments to the lever probe."""
    p = argparse.ArgumentParser(prog="python -m nblib.probes.design_needles", description=__doc__.splitlines()[0])
    p.add_argument("--budget-file", required=True, help="a TOML budget file, e.g. data/probes/grid_designs/K.toml")
    a, rest = p.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    return run("code_needle_levers", a.budget_file, rest)


if __name__ == "__main__":
    raise SystemExit(main())
