"""Where the repository is and which version of its code produced a result.

Every run manifest, figure manifest and book report records `code_version()`, so a number
in the book can be traced to the commit that computed it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from nblib import __version__

REPO_ROOT = Path(__file__).resolve().parents[2]


def code_version() -> dict:
    """git revision of the repository (and whether the tree had uncommitted changes)."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        rev, dirty = "", False
    return {"git": rev or "unknown", "dirty": dirty, "nblib": __version__}
