"""`python -m nblib.probes <name> [args]`: run one probe (without a name: list them)."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

from nblib.probes import PROBES


def summary(name: str) -> str:
    """What probe `name` measures: its docstring's first paragraph up to the chapter it serves,
    read from its source (nothing is imported)."""
    path = Path(__file__).with_name(PROBES[name].rsplit(".", 1)[-1] + ".py")
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return re.split(r" \((?:chapter|was )", first)[0].rstrip(":")


def listing() -> str:
    """Every probe's name and what it measures."""
    width = max(map(len, PROBES))
    return "\n".join(["usage: python -m nblib.probes <name> [args]   (--help after a name for its arguments)", "",
                      "probes:"] + [f"  {n:<{width}}  {summary(n)}" for n in PROBES])


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(listing())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in PROBES:
        print(f"error: no probe {name!r}; allowed: {', '.join(PROBES)}", file=sys.stderr)
        return 2
    return importlib.import_module(PROBES[name]).main(rest) or 0


if __name__ == "__main__":
    raise SystemExit(main())
