"""The test command executes each smoke chapter once, under nbval-lax, and builds the book from it.

nbval (the design's CI tool) runs a notebook cell by cell in a fresh kernel and fails on a cell
that raises. `make test` used to execute every chapter twice: papermill for the executed
notebooks that the book is built and browser-checked from, then nbval-lax again over the runs
the first pass had stored. On a 2-core AMD EPYC that second execution cost about 240 of the
1,300 CPU-seconds of `make test`, for no check the first one lacked.

Now nbval's one execution is kept: this module is also a pytest plugin (`-p
nblib.book.nbval_runs`) that stores each cell's outputs, as nbval collected them from the
kernel, in the notebook, and writes that notebook to `$NBLIB_NBVAL_RECORD` when the session
ends, whether or not a cell failed (a failing cell keeps its traceback). The book is built and
browser-checked from it. papermill still injects the parameters (`prepare_only`), executes every
chapter in `make book`, and is executed end to end by tests/test_notebooks.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from nblib.store.atomic import atomic_write_text

RECORD_ENV = "NBLIB_NBVAL_RECORD"  # where the plugin writes the executed notebook
_COUNT = {k: re.compile(rf"(\d+) {k}") for k in ("passed", "failed")}
_RECORDED: dict = {}  # notebook path -> [notebook, cells executed]


def pytest_runtest_teardown(item) -> None:
    """pytest hook: keep the outputs nbval collected for this cell (`IPyNbCell.test_outputs`)."""
    outputs = getattr(item, "test_outputs", None)
    if outputs is None or not hasattr(item, "cell"):
        return  # a skipped cell, or not an nbval item
    entry = _RECORDED.setdefault(str(item.parent.fspath), [item.parent.nb, 0])
    entry[1] += 1
    item.cell.outputs = list(outputs)
    item.cell.execution_count = entry[1]
    for out in item.cell.outputs:
        if out.get("output_type") == "execute_result":
            out["execution_count"] = entry[1]


def pytest_sessionfinish(session) -> None:
    """pytest hook: write the executed notebook where $NBLIB_NBVAL_RECORD says (one per session)."""
    target = os.environ.get(RECORD_ENV)
    if not target or not _RECORDED:
        return
    if len(_RECORDED) != 1:
        raise RuntimeError(f"${RECORD_ENV} records one notebook a session; this one ran {sorted(_RECORDED)}")
    (nb, _), = _RECORDED.values()
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, nbformat.writes(nb))


def nbval_execute(prepared: Path, executed: Path, cwd: Path, cell_timeout_s: int, env: dict | None = None,
                  log: Path | None = None) -> dict:
    """Run nbval-lax on the notebook `prepared` in its own pytest process and write the executed
    notebook to `executed`; return {rc, passed, failed, wall_s, output}. `env`: variables for the
    kernel; `log`: a file that gets pytest's output."""
    t = time.time()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
           "-p", "nblib.book.nbval_runs", "--nbval-lax", "--nbval-cell-timeout", str(cell_timeout_s), str(prepared)]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {}), RECORD_ENV: str(executed)})
    output = proc.stdout + proc.stderr
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(log, output)
    counts = {k: int(f[-1]) if (f := rx.findall(proc.stdout)) else 0 for k, rx in _COUNT.items()}
    return {"rc": proc.returncode, **counts, "wall_s": time.time() - t, "output": output}


def nbval_summary(records: list[dict], t0: float) -> str:
    """The one line the test command ends its chapters with (benchmarks/bench_make_test reads it)."""
    failed = [r for r in records if r["status"] != "ok"]
    return (f"[book] nbval-lax: {'passed' if not failed else 'FAILED'}, {sum(r.get('passed', 0) for r in records)} "
            f"cells passed and {sum(r.get('failed', 0) for r in records)} failed in {len(records)} notebooks, "
            f"{time.time() - t0:.1f} s from the first chapter's start")
