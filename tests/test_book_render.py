"""The offline template's mdast walker (book/template/render.py): each node type, notebook
cell outputs, whole sites with navigation and search, and what readers see of progress bars
and figures."""

from __future__ import annotations

import base64
import json
import os
import re
import sys
from pathlib import Path

import pytest

import subproc
from book_scripts import BOOK, check, render


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
