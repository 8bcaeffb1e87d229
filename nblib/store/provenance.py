"""Where the repository is and which version of its code, and which budget file, produced a result.

Every run manifest, figure manifest and book report records `code_version()`, so a number
in the book can be traced to the commit that computed it and, when a chapter was given a
budget file (README, "Your own data"), to that file and its sha256: the data that made it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from nblib import __version__

REPO_ROOT = Path(__file__).resolve().parents[2]
# The budget file of this process and the processes it starts (training workers, torchrun):
# JSON {"path", "sha256", "base"[, "sets"]}, set by the chapter that read the file.
BUDGET_FILE_ENV = "NBLIB_BUDGET_FILE"
# What the toy book's build writes into the tree (figures, the executed chapters, the pages it
# fills): a change there is the build's own output, not a change to the code, so it does not
# mark the code `dirty` (else every figure after the first of a build would say so).
BUILD_OUTPUTS = ("figures", "book/toy", "book/scorecard.md", "book/run_report.md", "book/index.md")


def set_budget_file(record: dict | None) -> None:
    """Name the budget file (`BudgetFile.record()`) that every manifest written from now on,
    here and in the processes started from here, records; None: no budget file."""
    if record:
        os.environ[BUDGET_FILE_ENV] = json.dumps(record, sort_keys=True)
    else:
        os.environ.pop(BUDGET_FILE_ENV, None)


def budget_file_record() -> dict | None:
    """The budget file named by `set_budget_file` in this process or a parent, else None."""
    try:
        record = json.loads(os.environ.get(BUDGET_FILE_ENV) or "null")
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def code_version() -> dict:
    """git revision of the repository (and whether the tree had uncommitted changes outside the
    book build's own outputs, BUILD_OUTPUTS), and the budget file when one is named
    (`set_budget_file`)."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                *(f":(exclude){p}" for p in BUILD_OUTPUTS)], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        rev, dirty = "", False
    budget_file = budget_file_record()
    return {"git": rev or "unknown", "dirty": dirty, "nblib": __version__,
            **({"budget_file": budget_file} if budget_file else {})}
