"""The book's scripts beside nblib (book/template/render.py, book/check_site.py,
book/browser_check.py), loaded as modules for the test files that check them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"


def load_script(name: str, path: Path):
    """Import the script at `path` as module `name` (once per process)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look the module up while the class is built
    spec.loader.exec_module(mod)
    return mod


render = load_script("book_render", BOOK / "template" / "render.py")
check = load_script("book_check_site", BOOK / "check_site.py")
browser = load_script("book_browser_check", BOOK / "browser_check.py")
