"""nbval-lax over each smoke chapter as soon as its papermill run has ended (the test command).

`make test` executes every chapter twice at smoke: once through papermill (the figures and the
executed notebooks that the book is built and browser-checked from) and once through nbval-lax,
which re-executes each notebook over the runs the first pass stored and checks that no cell
fails. nbval used to start after the last chapter, the book build and the browser check. But
on a 2-core machine the chapters leave a core idle for minutes: chapters 3, 4 and 5 each wait
for the one before, while Part 2's chapters have long ended.

`NbvalRuns` starts nbval on a chapter the moment its papermill run has ended: one at a time
while chapters still run (they hold the other cores), `jobs` at a time once they have all
ended. Each runs in its own pytest process at the lowest CPU priority (nice 19), so it takes
only the core the chapters leave idle. nbval still executes every notebook, one pytest session
per notebook instead of one for all.

A re-executed chapter saves its figures again, and a figure need not come out byte for byte
the same (a plot of losses that differ in the last bits, from another thread count, moves an
antialiased pixel). The book is built and checked from the first pass's figures while nbval
runs, so each nbval run writes into a folder of its own, `<nbval_dir>/figures/<chapter>`,
seeded with a copy of the build's figures when it starts (a chapter may read what an earlier
one saved, as chapter 12 reads chapter 5's needles).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

NICE = 19  # CPU priority of the nbval processes: the lowest, below the chapters' (0)
_COUNT = {k: re.compile(rf"(\d+) {k}") for k in ("passed", "failed")}


def _lower_priority() -> None:  # runs in the child before exec
    os.nice(NICE)


class NbvalRuns:
    """nbval-lax on chapters as they end (`submit`): one pytest process at a time while chapters
    run, `jobs` at a time from `finish` on, which waits for them all, prints each notebook's
    result and time, and returns the exit code."""

    def __init__(self, nbval_dir: Path, cwd: Path, jobs: int, cell_timeout_s: int, figures: Path | None = None):
        self.nbval_dir, self.cwd, self.cell_timeout_s = Path(nbval_dir), Path(cwd), cell_timeout_s
        self.figures = Path(figures) if figures else None  # the build's figures: copied, never written
        self.pool = ThreadPoolExecutor(max_workers=max(1, jobs))
        self.futures: dict = {}
        self.t0 = self.chapters_ended = time.time()
        self.jobs, self.limit, self.active, self.cancelled = max(1, jobs), 1, 0, False
        self.slots = threading.Condition()

    def submit(self, record: dict) -> None:
        """Start nbval on a chapter whose papermill record says it ended ok (a failed chapter
        fails the test command before nbval matters). The last call marks the chapters' end."""
        self.chapters_ended = time.time()
        if record["status"] == "ok":
            self.futures[record["chapter"]] = self.pool.submit(self._one, record["chapter"])

    def _one(self, name: str) -> dict:
        with self.slots:
            self.slots.wait_for(lambda: self.active < self.limit or self.cancelled)
            if self.cancelled:
                return {"chapter": name, "rc": None, "passed": 0, "failed": 0, "wall_s": 0.0, "end": time.time(),
                        "output": "cancelled"}
            self.active += 1
        try:
            return self._nbval(name)
        finally:
            with self.slots:
                self.active -= 1
                self.slots.notify_all()

    def _nbval(self, name: str) -> dict:
        t = time.time()
        figures = self.nbval_dir / "figures" / name
        if self.figures is not None and self.figures.is_dir():
            shutil.copytree(self.figures, figures, dirs_exist_ok=True)
        figures.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--nbval-lax",
               "--nbval-cell-timeout", str(self.cell_timeout_s), str(self.nbval_dir / f"{name}.ipynb")]
        proc = subprocess.run(cmd, cwd=self.cwd, capture_output=True, text=True,
                              env={**os.environ, "NBLIB_FIGURES_DIR": str(figures)},
                              preexec_fn=_lower_priority if os.name == "posix" else None)
        counts = {k: int(f[-1]) if (f := rx.findall(proc.stdout)) else 0 for k, rx in _COUNT.items()}
        return {"chapter": name, "rc": proc.returncode, **counts, "wall_s": time.time() - t, "end": time.time(),
                "output": proc.stdout + proc.stderr}

    def cancel(self) -> None:
        """Drop the nbval runs not yet started and wait for the running ones."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        with self.slots:  # the runs waiting for a slot return without running
            self.cancelled = True
            self.slots.notify_all()
        self.pool.shutdown(wait=True)

    def finish(self) -> int:
        """The chapters have ended: run `jobs` nbval processes at a time, wait for every one,
        print one line per notebook, then the total and how long nbval ran past the end of the
        last chapter."""
        with self.slots:
            self.limit = self.jobs
            self.slots.notify_all()
        results = [f.result() for f in self.futures.values()]
        self.pool.shutdown(wait=True)
        failed = [r for r in results if r["rc"] != 0]
        for r in results:
            print(f"[book] nbval-lax {r['chapter']}: {'ok' if r['rc'] == 0 else 'FAILED'}, {r['passed']} cells passed, "
                  f"{r['failed']} failed, in {r['wall_s']:.1f} s", flush=True)
        for r in failed:
            print(f"[book] nbval-lax output of {r['chapter']}:\n{r['output'][-6000:]}", file=sys.stderr, flush=True)
        last = max((r["end"] for r in results), default=self.chapters_ended)
        print(f"[book] nbval-lax: {'passed' if not failed else 'FAILED'}, {sum(r['passed'] for r in results)} cells "
              f"passed and {sum(r['failed'] for r in results)} failed in {len(results)} notebooks, "
              f"{time.time() - self.t0:.1f} s from the first chapter's start, "
              f"{max(0.0, last - self.chapters_ended):.1f} s past the last chapter's end", flush=True)
        return 1 if failed else 0
