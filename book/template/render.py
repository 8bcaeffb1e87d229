"""Offline HTML renderer for a Jupyter Book 2 (mystmd) site. Python stdlib only.

`jupyter book build --html` with `site: template: ./book/template` runs this file (via
render.sh) with BUILD_DIRECTORY=<book>/_build/html. By then myst has written its own
JSON next to it, in <book>/_build/site/:
  config.json             projects[0].index (index slug) and projects[0].pages (with level)
  content/<slug>.json     {slug, frontmatter.title, mdast}: the mdast is fully transformed
                          (titles, caption numbers, cross-reference text and urls resolved)
  public/                 images, notebook outputs by hash, long outputs (> 25,000 chars)

We walk each page's mdast and write one flat page per slug:
  index.html, <slug>.html, _static/ (book.css, book.js, the vendored MiniSearch and the
  search index built from myst's myst.search.json), public/<only the files pages reference>.
The pages work from file:// and offline: the search index is a script, not a fetch.
Unknown node types become their children plus an HTML comment naming the type; an
exception inside one node becomes a comment too, so a page is never lost.

Usage: render.py [--site DIR] [--out DIR]   (defaults: $BUILD_DIRECTORY/../site, $BUILD_DIRECTORY)
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import html
import json
import os
import re
import shutil
import string
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
# copied from template/static/ to <out>/_static/; MiniSearch (MIT, vendored: the book builds
# offline) indexes the pages in the browser
STATIC_FILES = ("book.css", "book.js", "vendor/minisearch-7.2.0.umd.js", "vendor/minisearch-LICENSE.txt")
INLINE_LIMIT = 200_000  # chars of a spilled long output shown inline; the rest is linked
ANSI_RE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
SCHEME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")
# Jupyter display priority (nbconvert's order, html before images, as notebooks show it)
MIME_ORDER = ("text/html", "image/svg+xml", "image/png", "image/jpeg", "image/gif",
              "image/webp", "text/markdown", "text/latex", "application/json", "text/plain")


# --------------------------------------------------------------------------- site state

@dataclass
class Site:
    """Everything shared by all pages: where things are, slug -> href, what was copied."""
    site_dir: Path  # <book>/_build/site
    out_dir: Path  # <book>/_build/html
    index_slug: str = "index"
    hrefs: Dict[str, str] = field(default_factory=dict)  # slug -> "index.html" | "<slug>.html"
    copied: set = field(default_factory=set)  # public/ paths already copied
    unknown: Counter = field(default_factory=Counter)  # unknown node type -> count
    warnings: List[str] = field(default_factory=list)

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)

    def public_file(self, rel: str) -> Optional[Path]:
        """The file at public/<rel> if it exists and stays inside public/, else None."""
        public = (self.site_dir / "public").resolve()
        p = (public / rel).resolve()
        if public not in p.parents or not p.is_file():
            return None
        return p

    def copy_public(self, rel: str) -> Optional[str]:
        """Copy public/<rel> into <out>/public/<rel> (once); return its href or None."""
        rel = rel.lstrip("/")
        src = self.public_file(rel)
        if src is None:
            self.warn(f"missing file in _build/site/public: {rel}")
            return None
        if rel not in self.copied:
            copy_file(src, self.out_dir / "public" / rel)
            self.copied.add(rel)
        return "public/" + rel

    def write_inline_image(self, mime: str, b64: str) -> Optional[str]:
        """An image myst left inline (base64, e.g. a figure embedding a cell's output) as a
        file public/<sha256>.<ext>, written once; returns its href (None if not base64)."""
        try:
            data = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            return None
        rel = f"{hashlib.sha256(data).hexdigest()[:32]}.{mime.split('/')[-1].split('+')[0]}"
        if rel not in self.copied:
            dst = self.out_dir / "public" / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{rel}.", suffix=".tmp", dir=dst.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)
            os.replace(tmp, dst)
            self.copied.add(rel)
        return "public/" + rel

    def read_public(self, rel: str) -> Optional[str]:
        """Text of public/<rel> (long outputs are spilled there), or None."""
        src = self.public_file(rel.lstrip("/"))
        return None if src is None else src.read_text(encoding="utf-8", errors="replace")


@dataclass
class Page:
    """Per-page state filled while walking: footnotes and the headings for the side TOC."""
    site: Site
    slug: str
    footnotes: List[Tuple[str, str, str]] = field(default_factory=list)  # (enumerator, id, html)
    headings: List[Tuple[int, str, str]] = field(default_factory=list)  # (depth, id, text)
    ids: set = field(default_factory=set)  # html ids already used on this page
    figure_alt: Optional[str] = None  # alt text for images inside the figure being rendered


# --------------------------------------------------------------------------- small helpers

def esc(s) -> str:
    """HTML-escape any value (None -> '')."""
    return html.escape("" if s is None else str(s), quote=True)


def comment(s: str) -> str:
    """An HTML comment whose body cannot close it early."""
    return "<!-- " + str(s).replace("--", "- -").replace(">", "&gt;") + " -->"


def strip_ansi(s: str) -> str:
    """Drop ANSI colour codes and keep only what follows the last carriage return of a line
    (tqdm-style progress bars rewrite one line with \\r)."""
    s = ANSI_RE.sub("", s).replace("\r\n", "\n")
    return "\n".join(([seg for seg in line.split("\r") if seg] or [""])[-1] for line in s.split("\n"))


def as_text(v) -> str:
    """nbformat multiline strings may be a list of lines."""
    if isinstance(v, list):
        return "".join(str(x) for x in v)
    return "" if v is None else str(v)


def attrs(**kw) -> str:
    """' k="v"' pairs for the non-empty values; class_ -> class."""
    out = []
    for k, v in kw.items():
        if v is None or v == "" or v is False:
            continue
        out.append(f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"')
    return "".join(out)


def style_attr(style) -> Optional[str]:
    """mdast `style` is a dict (from raw HTML) or a string."""
    if isinstance(style, dict):
        return "; ".join(f"{k}: {v}" for k, v in style.items()) or None
    return style or None


def classes(*names) -> Optional[str]:
    """Join class names, flattening lists and dropping empties."""
    flat = []
    for n in names:
        if isinstance(n, (list, tuple)):
            flat.extend(str(x) for x in n if x)
        elif n:
            flat.append(str(n))
    return " ".join(flat) or None


def node_id(node: dict, page: "Page") -> Optional[str]:
    """The node's html id, claimed for this page; a repeated id (a cell block and the figure
    inside it share one, embeds repeat one) is dropped so ids stay unique."""
    hid = node.get("html_id") or node.get("identifier")
    if not hid or hid in page.ids:
        return None
    page.ids.add(str(hid))
    return str(hid)


def plain_text(node) -> str:
    """Concatenated text of a subtree (for TOC entries and alt text)."""
    if isinstance(node, list):
        return "".join(plain_text(n) for n in node)
    if not isinstance(node, dict):
        return ""
    if node.get("type") in ("text", "inlineCode"):
        return str(node.get("value", ""))
    if node.get("type") == "inlineMath":
        return str(node.get("value", ""))
    return plain_text(node.get("children", []))


def write_text(path: Path, text: str) -> None:
    """Write UTF-8 text atomically (temp file in the same folder, then os.replace), mode 644."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def copy_file(src: Path, dst: Path) -> None:
    """Copy a file atomically (temp file next to dst, then os.replace), mode 644."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def page_filename(slug: str) -> str:
    """Flat output name for a slug (myst slugs are already flat; '/' is folded just in case)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", slug).strip("-") + ".html"


def resolve_url(url: Optional[str], page: Page) -> str:
    """Map a myst url to a relative href: '/' and '/<slug>' to pages, '/<file>' to a copy
    of public/<file>; external urls, '#frag' and relative urls are kept."""
    site = page.site
    if not url:
        return "#"
    url = str(url)
    if url.startswith("#") or SCHEME_RE.match(url) or url.startswith("//"):
        return url
    if not url.startswith("/"):
        if re.search(r"\.(md|ipynb)$", url.split("#")[0]):  # myst resolves links to known pages
            site.warn(f"page {page.slug}: link to {url!r} is not a page of this book")
        return url
    path, _, frag = url[1:].partition("#")
    frag = "#" + frag if frag else ""
    path = path.rstrip("/")
    if path in ("", site.index_slug):
        return site.hrefs.get(site.index_slug, "index.html") + frag
    if path in site.hrefs:
        return site.hrefs[path] + frag
    if site.public_file(path) is not None:
        return (site.copy_public(path) or url) + frag
    site.warn(f"page {page.slug}: cannot resolve url {url!r}")
    return url


# --------------------------------------------------------------------------- the walker

HANDLERS: Dict[str, Callable[[dict, Page], str]] = {}


def handles(*types: str):
    """Register a renderer for one or more mdast node types."""
    def deco(fn):
        for t in types:
            HANDLERS[t] = fn
        return fn
    return deco


def render(node, page: Page) -> str:
    """Render one mdast node (or a list of nodes) to HTML; never raises."""
    if isinstance(node, list):
        return "".join(render(n, page) for n in node)
    if not isinstance(node, dict):
        return esc(node) if isinstance(node, str) else ""
    if node.get("visibility") == "remove":
        return ""
    ntype = str(node.get("type", "?"))
    fn = HANDLERS.get(ntype)
    try:
        if fn is None:
            return render_unknown(node, page)
        return fn(node, page)
    except Exception as e:  # one bad node must not lose the page
        page.site.warn(f"page {page.slug}: error rendering {ntype}: {type(e).__name__}: {e}")
        return comment(f"render error in {ntype}: {type(e).__name__}") + render_children(node, page)


def render_children(node: dict, page: Page) -> str:
    kids = node.get("children")
    return render(kids, page) if isinstance(kids, list) else ""


def render_unknown(node: dict, page: Page) -> str:
    """Unknown types: a comment naming the type, then the children (or the escaped value)."""
    ntype = str(node.get("type", "?"))
    page.site.unknown[ntype] += 1
    body = render_children(node, page)
    if not body and isinstance(node.get("value"), str):
        body = f'<span class="unknown-value">{esc(node["value"])}</span>'
    return comment(f"unknown node type: {ntype}") + body


def simple(tag: str, cls: Optional[str] = None):
    """Handler for nodes that are one tag around their children."""
    def fn(node, page):
        c = classes(cls, node.get("class"))
        return f"<{tag}{attrs(id=node_id(node, page), class_=c)}>{render_children(node, page)}</{tag}>"
    return fn


for _t, _tag in {"emphasis": "em", "strong": "strong", "delete": "del", "underline": "u",
                 "subscript": "sub", "superscript": "sup", "keyboard": "kbd",
                 "blockquote": "blockquote", "definitionList": "dl",
                 "definitionTerm": "dt", "definitionDescription": "dd",
                 "summary": "summary", "legend": "div"}.items():
    HANDLERS[_t] = simple(_tag)
HANDLERS["smallcaps"] = simple("span", "smallcaps")
HANDLERS["glossary"] = simple("div", "glossary")
HANDLERS["cardTitle"] = simple("div", "card-title")
HANDLERS["footer"] = simple("div", "card-footer")
HANDLERS["header"] = simple("div", "card-header")


@handles("root", "embed", "include")
def _root(node, page):
    return render_children(node, page)


@handles("text")
def _text(node, page):
    return esc(node.get("value", ""))


@handles("paragraph")
def _paragraph(node, page):
    return f"<p>{render_children(node, page)}</p>\n"


@handles("heading")
def _heading(node, page):
    depth = min(max(int(node.get("depth", 2)), 1), 6)
    hid = node_id(node, page)
    number = ""
    if node.get("enumerator") and node.get("enumerated", True):
        number = f'<span class="heading-number">{esc(node["enumerator"])}</span> '
    inner = render_children(node, page)
    link = f'<a class="headerlink" href="#{esc(hid)}" aria-label="Link to this heading">#</a>' if hid else ""
    if hid:
        page.headings.append((depth, hid, plain_text(node)))
    return f"<h{depth}{attrs(id=hid)}>{number}{inner}{link}</h{depth}>\n"


@handles("break")
def _break(node, page):
    return "<br>\n"


@handles("thematicBreak")
def _hr(node, page):
    return "<hr>\n"


@handles("inlineCode")
def _inline_code(node, page):
    return f"<code>{esc(node.get('value', ''))}</code>"


@handles("code")
def _code(node, page):
    lang = node.get("lang") or ""
    value = str(node.get("value", ""))
    emph = set(node.get("emphasizeLines") or [])
    if node.get("showLineNumbers") or emph:
        start = int(node.get("startingLineNumber") or 1)
        lines = []
        for i, line in enumerate(value.split("\n")):
            c = classes("line", "hl" if (start + i) in emph else None,
                        "numbered" if node.get("showLineNumbers") else None)
            lines.append(f'<span class="{c}" data-n="{start + i}">{esc(line)}</span>')
        body = "\n".join(lines)
    else:
        body = esc(value)
    cls = classes(f"language-{lang}" if lang else None)
    return (f'<pre class="code"{attrs(id=node_id(node, page), data_lang=lang)}>'
            f"<code{attrs(class_=cls)}>{body}</code></pre>\n")


@handles("link", "linkBlock")
def _link(node, page):
    href = resolve_url(node.get("url"), page)
    external = bool(SCHEME_RE.match(href)) and not href.startswith("mailto:")
    inner = render_children(node, page) or esc(node.get("url", ""))
    a = attrs(href=href, title=node.get("title"), class_="external" if external else None)
    return f"<a{a}>{inner}</a>"


@handles("crossReference")
def _xref(node, page):
    hid = node.get("html_id") or node.get("identifier")  # a target id, not ours to claim
    frag = f"#{hid}" if hid else ""
    if node.get("remote") and node.get("url"):
        href = resolve_url(str(node["url"]).split("#")[0], page) + frag
    else:
        href = frag or "#"
    inner = render_children(node, page) or esc(node.get("label") or hid or "")
    if node.get("resolved") is False:
        return f'<span class="xref unresolved">{inner}</span>'
    return f'<a class="xref" href="{esc(href)}">{inner}</a>'


@handles("image")
def _image(node, page):
    url = node.get("url") or ""
    src = resolve_url(url, page)
    style = []
    if node.get("width"):
        style.append(f"width: {node['width']}")
    if node.get("height"):
        style.append(f"height: {node['height']}")
    cls = classes("image", f"align-{node['align']}" if node.get("align") else None, node.get("class"))
    a = attrs(src=src, title=node.get("title"), id=node_id(node, page), class_=cls, style="; ".join(style))
    alt = esc(node.get("alt") or node.get("title") or "")
    return f'<img{a} alt="{alt}" loading="lazy">'


@handles("container")
def _container(node, page):
    kind = node.get("kind") or "figure"
    cls = classes("container", f"{kind}-container", node.get("class"))
    kids = node.get("children") or []
    captions = [k for k in kids if isinstance(k, dict) and k.get("type") in ("caption", "legend")]
    body = [k for k in kids if k not in captions]
    # A figure embedding a notebook cell's outputs (`:::{figure} #cell-label`) shows them even
    # when the cell itself hides them (tag remove-output: the plot appears once, numbered).
    body = [{**k, "visibility": "show"} if isinstance(k, dict) and k.get("type") == "outputs" else k for k in body]
    alt = re.sub(r"^(Figure|Table)\s*[\d.]+:\s*", "", " ".join(plain_text(c) for c in captions).strip())
    page.figure_alt = alt or None
    try:
        body_html = render(body, page)
    finally:
        page.figure_alt = None
    cap_html = render(captions, page)
    inner = cap_html + body_html if kind == "table" else body_html + cap_html  # table captions on top
    return f"<figure{attrs(id=node_id(node, page), class_=cls)}>{inner}</figure>\n"


@handles("caption")
def _caption(node, page):
    return f'<figcaption>{render_children(node, page)}</figcaption>'


@handles("captionNumber")
def _caption_number(node, page):
    return f'<span class="caption-number">{render_children(node, page)}</span> '


@handles("list")
def _list(node, page):
    tag = "ol" if node.get("ordered") else "ul"
    start = node.get("start")
    start_attr = f' start="{int(start)}"' if tag == "ol" and start not in (None, 1) else ""
    return f"<{tag}{start_attr}>{render_children(node, page)}</{tag}>\n"


@handles("listItem")
def _list_item(node, page):
    box = ""
    if node.get("checked") is not None:
        box = f'<input type="checkbox" disabled{" checked" if node["checked"] else ""}> '
    cls = "task" if box else None
    return f"<li{attrs(class_=cls)}>{box}{render_children(node, page)}</li>\n"


@handles("table")
def _table(node, page):
    rows = [r for r in node.get("children") or [] if isinstance(r, dict)]
    head, body = [], []
    for r in rows:  # leading rows made only of header cells form the <thead>
        cells = r.get("children") or []
        is_head = cells and all(isinstance(c, dict) and c.get("header") for c in cells)
        (head if is_head and not body else body).append(r)
    thead = f"<thead>{render(head, page)}</thead>" if head else ""
    tbody = f"<tbody>{render(body, page)}</tbody>" if body else ""
    return f'<div class="table-wrap"><table{attrs(id=node_id(node, page))}>{thead}{tbody}</table></div>\n'


@handles("tableRow")
def _table_row(node, page):
    return f"<tr>{render_children(node, page)}</tr>"


@handles("tableCell")
def _table_cell(node, page):
    tag = "th" if node.get("header") else "td"
    align = node.get("align")
    span = attrs(colspan=node.get("colspan"), rowspan=node.get("rowspan"))
    style = f' style="text-align: {esc(align)}"' if align else ""
    return f"<{tag}{span}{style}>{render_children(node, page)}</{tag}>"


@handles("admonition")
def _admonition(node, page):
    kind = node.get("kind") or "note"
    cls = classes("admonition", kind, node.get("class"))
    kids = node.get("children") or []
    titles = [k for k in kids if isinstance(k, dict) and k.get("type") == "admonitionTitle"]
    rest = [k for k in kids if k not in titles]
    title = render(titles[0], page) if titles else f'<p class="admonition-title">{esc(kind.title())}</p>'
    if "dropdown" in (cls or "").split():  # {admonition} :class: dropdown folds
        title_txt = render_children(titles[0], page) if titles else esc(kind.title())
        return (f"<details{attrs(id=node_id(node, page), class_=cls)}><summary class=\"admonition-title\">"
                f"{title_txt}</summary>{render(rest, page)}</details>\n")
    return f"<aside{attrs(id=node_id(node, page), class_=cls)}>{title}{render(rest, page)}</aside>\n"


@handles("admonitionTitle")
def _admonition_title(node, page):
    return f'<p class="admonition-title">{render_children(node, page)}</p>'


@handles("aside")
def _aside(node, page):
    cls = classes("aside", node.get("kind"), node.get("class"))
    return f"<aside{attrs(id=node_id(node, page), class_=cls)}>{render_children(node, page)}</aside>\n"


@handles("details")
def _details(node, page):
    cls = classes("details", node.get("class"))
    open_ = " open" if node.get("open") else ""
    a = attrs(id=node_id(node, page), class_=cls)
    return f"<details{a}{open_}>{render_children(node, page)}</details>\n"


@handles("tabSet")
def _tab_set(node, page):
    return f'<div class="tab-set">{render_children(node, page)}</div>\n'


@handles("tabItem")
def _tab_item(node, page):  # no JS: every tab is an open <details>
    return (f'<details class="tab-item" open><summary>{esc(node.get("title", "Tab"))}</summary>'
            f"{render_children(node, page)}</details>\n")


@handles("grid")
def _grid(node, page):
    cols = node.get("columns") or [1]
    n = int(cols[-1]) if isinstance(cols, list) and cols else 1
    return f'<div class="grid" style="--grid-cols: {max(n, 1)}">{render_children(node, page)}</div>\n'


@handles("card")
def _card(node, page):
    inner = render_children(node, page)
    if node.get("url"):
        inner += f'<p class="card-link"><a href="{esc(resolve_url(node["url"], page))}">Open</a></p>'
    return f"<div{attrs(id=node_id(node, page), class_=classes('card', node.get('class')))}>{inner}</div>\n"


@handles("span", "div")
def _span_div(node, page):
    tag = node["type"]
    a = attrs(id=node_id(node, page), class_=classes(node.get("class")), style=style_attr(node.get("style")))
    return f"<{tag}{a}>{render_children(node, page)}</{tag}>"


@handles("abbreviation")
def _abbr(node, page):
    return f"<abbr{attrs(title=node.get('title'))}>{render_children(node, page)}</abbr>"


@handles("html")
def _raw_html(node, page):  # author-written raw HTML is kept as-is
    return str(node.get("value", ""))


@handles("comment")
def _comment(node, page):
    return ""


@handles("target")
def _target(node, page):
    hid = node_id(node, page)
    return f'<span id="{esc(hid)}"></span>' if hid else ""


@handles("math", "inlineMath")
def _math(node, page):
    """KaTeX html (with MathML) from myst; `.katex-html` is hidden by the CSS so browsers
    show the native MathML. No html -> the raw LaTeX in <code>."""
    display = node["type"] == "math"
    pre = node.get("html")
    if pre:
        body = str(pre)
    else:
        tex = esc(node.get("value", ""))
        body = f'<code class="math-fallback">{"$$" if display else "$"}{tex}{"$$" if display else "$"}</code>'
    if not display:
        return f'<span class="math inline">{body}</span>'
    number = f'<span class="eq-number">({esc(node["enumerator"])})</span>' if node.get("enumerator") else ""
    return f'<div{attrs(id=node_id(node, page), class_="math display")}>{body}{number}</div>\n'


@handles("footnoteReference")
def _footnote_ref(node, page):
    n = node.get("enumerator") or node.get("identifier") or "?"
    return f'<sup class="footnote-ref"><a id="fnref-{esc(n)}" href="#fn-{esc(n)}">{esc(n)}</a></sup>'


@handles("footnoteDefinition")
def _footnote_def(node, page):  # collected; shown at the page end
    n = str(node.get("enumerator") or node.get("identifier") or "?")
    page.footnotes.append((n, f"fn-{n}", render_children(node, page)))
    return ""


@handles("mermaid")
def _mermaid(node, page):  # no JS offline: show the diagram source
    return f'<pre class="mermaid">{esc(node.get("value", ""))}</pre>\n'


@handles("iframe")
def _iframe(node, page):  # remote content; a link works offline-ish, an iframe would not
    src = node.get("src") or ""
    return f'<p class="iframe"><a class="external" href="{esc(src)}">{esc(src)}</a></p>\n'


@handles("mystDirective")
def _myst_directive(node, page):
    """A directive myst did not know: show its name, args and body, never drop content."""
    name = node.get("name", "?")
    page.site.unknown[f"mystDirective:{name}"] += 1
    head = f'<p class="directive-name">{{{esc(name)}}} {esc(node.get("args") or "")}</p>'
    kids = render_children(node, page)
    body = kids or (f'<pre>{esc(node.get("value"))}</pre>' if node.get("value") else "")
    return f'{comment(f"unknown directive: {name}")}<div class="myst-directive">{head}{body}</div>\n'


@handles("mystRole")
def _myst_role(node, page):
    name = node.get("name", "?")
    page.site.unknown[f"mystRole:{name}"] += 1
    kids = render_children(node, page)
    inner = kids or f"{{{esc(name)}}}`{esc(node.get('value', ''))}`"
    return f'{comment(f"unknown role: {name}")}<code class="myst-role">{inner}</code>'


@handles("cite")
def _cite(node, page):
    inner = render_children(node, page) or esc(node.get("label") or node.get("identifier") or "")
    return f'<span class="cite">{inner}</span>'


@handles("citeGroup")
def _cite_group(node, page):
    return f'<span class="cite-group">({render_children(node, page)})</span>'


# --------------------------------------------------------------------------- notebook cells

@handles("block")
def _block(node, page):
    kind = node.get("kind") or ""
    if kind == "notebook-code":
        return render_code_cell(node, page)
    cls = classes("block", kind or None, node.get("class"))
    return f"<div{attrs(id=node_id(node, page), class_=cls)}>{render_children(node, page)}</div>\n"


def render_code_cell(node: dict, page: Page) -> str:
    """block{kind: notebook-code}: its `code` then its `outputs`; visibility 'hide' folds
    the part into <details>, 'remove' drops it (tags hide-input, remove-output, ...)."""
    parts = []
    for child in node.get("children") or []:
        if not isinstance(child, dict) or child.get("visibility") == "remove":
            continue
        html_part = render(child, page)
        if not html_part.strip():
            continue
        if child.get("visibility") == "hide":
            label = "Show code" if child.get("type") == "code" else "Show output"
            html_part = f'<details class="hidden-part"><summary>{label}</summary>{html_part}</details>'
        parts.append(html_part)
    return f'<div{attrs(id=node_id(node, page), class_="cell code-cell")}>{"".join(parts)}</div>\n'


def collapse_cr(text: str) -> str:
    """What a terminal shows of text with carriage returns: on each line only what follows
    its last \\r (a progress bar's final state); a line that ends cleared (tqdm's
    leave=False writes blanks) is dropped."""
    out = []
    for line in text.split("\n"):
        if "\r" in line:
            segments = [p for p in line.split("\r") if p]
            if not segments or not segments[-1].strip():
                continue  # cleared by the writer (blanks after the last \\r) or empty
            line = segments[-1]
        out.append(line)
    return "\n".join(out)


def merge_streams(children: list) -> list:
    """Adjacent stream outputs of the same name (stdout, stderr) as one output, as Jupyter
    shows them; long outputs spilled to files are left alone."""
    merged: list = []
    for c in children:
        jd = c.get("jupyter_data") if isinstance(c, dict) else None
        prev = merged[-1].get("jupyter_data") if merged and isinstance(merged[-1], dict) else None
        if (isinstance(jd, dict) and isinstance(prev, dict) and jd.get("output_type") == "stream"
                and prev.get("output_type") == "stream" and jd.get("name") == prev.get("name")
                and not jd.get("path") and not prev.get("path")):
            merged[-1] = {**merged[-1], "jupyter_data": {**prev, "text": as_text(prev.get("text")) + as_text(jd.get("text"))}}
            continue
        merged.append(c)
    return merged


@handles("outputs")
def _outputs(node, page):
    inner = render(merge_streams(node.get("children") or []), page)
    return f'<div{attrs(id=node_id(node, page), class_="outputs")}>{inner}</div>' if inner.strip() else ""


@handles("output")
def _output(node, page):
    jd = node.get("jupyter_data")
    if not isinstance(jd, dict):
        return render_children(node, page)
    return render_output(jd, node, page)


def long_text(entry: dict, inline: str, page: Page, cls: str) -> str:
    """Text that may have been spilled to public/<path> (> 25,000 chars): read it back and
    inline up to INLINE_LIMIT chars, linking the full file when it is longer. Streams show
    what a terminal would: carriage-return updates collapsed (`collapse_cr`)."""
    clean = (lambda t: collapse_cr(strip_ansi(t))) if "stream" in cls else strip_ansi
    path = entry.get("path")
    if not path:
        return f'<pre class="{cls}">{esc(clean(inline))}</pre>'
    full = page.site.read_public(str(path))
    if full is None:
        page.site.warn(f"page {page.slug}: long output {path} missing from public/")
        return f'<pre class="{cls}">{esc(clean(inline))}</pre>'
    full = clean(full)
    link = ""
    if len(full) > INLINE_LIMIT:
        href = page.site.copy_public(str(path))
        link = f'<p class="output-more"><a href="{esc(href)}">Full output ({len(full):,} characters)</a></p>'
        full = full[:INLINE_LIMIT] + "\n..."
    return f'<pre class="{cls}">{esc(full)}</pre>{link}'


def render_output(jd: dict, node: dict, page: Page) -> str:
    """One nbformat-like output (myst's `jupyter_data`): stream, error, or a mime bundle."""
    otype = jd.get("output_type")
    if otype == "stream":
        name = jd.get("name") or "stdout"
        if not jd.get("path") and not collapse_cr(strip_ansi(as_text(jd.get("text")))).strip():
            return ""  # only progress-bar updates that ended cleared
        return long_text(jd, as_text(jd.get("text")), page, f"output stream {name}")
    if otype == "error":
        tb = jd.get("traceback")
        text = "\n".join(map(str, tb)) if isinstance(tb, list) else as_text(tb)
        text = text or f"{jd.get('ename', 'Error')}: {jd.get('evalue', '')}"
        return f'<pre class="output error">{esc(strip_ansi(text))}</pre>'
    data = jd.get("data") or {}
    for mime in MIME_ORDER:
        if mime in data:
            return render_mime(mime, data[mime], node, page)
    for mime in data:  # e.g. only a widget view: nothing we can show offline
        if mime.startswith("image/"):
            return render_mime(mime, data[mime], node, page)
    return comment(f"output with no renderable mime type: {', '.join(sorted(data)) or otype}")


def render_mime(mime: str, entry, node: dict, page: Page) -> str:
    """One mime entry: myst gives {content, content_type} or {hash, path} for files."""
    if not isinstance(entry, dict):  # raw nbformat: a string, a list of lines, or JSON
        entry = {"content": entry}
    content = entry.get("content")
    if mime.startswith("image/") and mime != "image/svg+xml":
        if entry.get("path"):
            src = page.site.copy_public(str(entry["path"]))
        else:  # inline base64: written out as a file, so pages stay small and figures are files
            b64 = as_text(content).replace("\n", "")
            src = (page.site.write_inline_image(mime, b64) or f"data:{mime};base64,{b64}") if b64 else None
        if not src:
            return comment(f"missing image output {entry.get('path')}")
        alt = page.figure_alt or "a plot from this cell's output"
        return f'<div class="output image"><img src="{esc(src)}" alt="{esc(alt)}" loading="lazy"></div>'
    if mime == "image/svg+xml":
        svg = page.site.read_public(str(entry["path"])) if entry.get("path") else as_text(content)
        return f'<div class="output svg">{svg or ""}</div>'
    if mime == "text/html":
        body = page.site.read_public(str(entry["path"])) if entry.get("path") else as_text(content)
        return f'<div class="output html">{body or ""}</div>'
    if mime == "text/markdown" and node.get("children"):
        return f'<div class="output markdown">{render_children(node, page)}</div>'
    if mime == "application/json" and not isinstance(content, str):
        content = json.dumps(content, indent=2)
    return long_text(entry, as_text(content), page, f"output text {mime.replace('/', '-')}")


@handles("inlineExpression")
def _inline_expression(node, page):  # {eval}: show the stored result
    res = node.get("result")
    if node.get("children"):
        return render_children(node, page)
    if isinstance(res, dict) and isinstance(res.get("data"), dict):
        txt = res["data"].get("text/plain")
        txt = txt.get("content") if isinstance(txt, dict) else txt
        return f"<code>{esc(as_text(txt))}</code>"
    return f"<code>{esc(node.get('value', ''))}</code>"


# --------------------------------------------------------------------------- pages

@dataclass
class NavEntry:
    title: str
    level: int
    slug: Optional[str]  # None for a part heading (toc entry with children but no file)


def load_nav(site: Site, config: dict) -> List[NavEntry]:
    """Index page first, then config.projects[0].pages in order (myst leaves the index out)."""
    projects = config.get("projects") or []
    if not projects:
        raise ValueError(f"{site.site_dir / 'config.json'} has no projects; expected one book project")
    if len(projects) > 1:
        site.warn(f"config.json has {len(projects)} projects; rendering only the first")
    proj = projects[0]
    site.index_slug = proj.get("index") or "index"
    index_doc = read_page_json(site, site.index_slug)
    index_title = (index_doc or {}).get("frontmatter", {}).get("title") or proj.get("title") or "Home"
    nav = [NavEntry(index_title, 1, site.index_slug)]
    for p in proj.get("pages") or []:
        slug = p.get("slug")
        title = p.get("short_title") or p.get("title") or slug or ""
        nav.append(NavEntry(title, int(p.get("level") or 1), slug))
    for e in nav:
        if e.slug:
            site.hrefs[e.slug] = "index.html" if e.slug == site.index_slug else page_filename(e.slug)
    return nav


def read_page_json(site: Site, slug: str) -> Optional[dict]:
    p = site.site_dir / "content" / f"{slug}.json"
    if not p.is_file():
        return None
    return json.loads(p.read_text(encoding="utf-8"))


def render_sidebar(nav: List[NavEntry], current: str, page: Page) -> str:
    """The book TOC: every page, indented by level, the current one marked."""
    base = min((e.level for e in nav), default=1)
    items = []
    for e in nav:
        lvl = e.level - base
        if not e.slug:
            items.append(f'<li class="toc-part level-{lvl}">{esc(e.title)}</li>')
            continue
        cur = e.slug == current
        cls = classes(f"level-{lvl}", "current" if cur else None)
        aria = ' aria-current="page"' if cur else ""
        href = esc(page.site.hrefs[e.slug])
        items.append(f'<li class="{cls}"><a href="{href}"{aria}>{esc(e.title)}</a></li>')
    return "\n".join(items)


def render_outline(page: Page) -> str:
    """The right-hand outline: the page's section and subsection headings."""
    hs = [h for h in page.headings if h[0] in (2, 3)]
    if not hs:
        return ""
    items = "".join(f'<li class="h{d}"><a href="#{esc(i)}">{esc(t)}</a></li>' for d, i, t in hs)
    return (f'<nav class="outline" aria-label="On this page"><p class="outline-title">On this page</p>'
            f'<ul>{items}</ul></nav>')


def write_search_index(site: Site, out_dir: Path) -> int:
    """_static/search-index.js: myst's myst.search.json records (one per section) as a
    script that sets BOOK_SEARCH_DOCS, with urls pointing at this renderer's page files.
    A script, not JSON: browsers refuse fetch() on file:// pages. Returns the record count."""
    src = site.site_dir / "myst.search.json"
    records = json.loads(src.read_text(encoding="utf-8")).get("records", []) if src.is_file() else []
    if not src.is_file():
        site.warn("myst.search.json missing: the search box will find nothing")
    by_path = {"/" + slug.lstrip("/"): href for slug, href in site.hrefs.items()}
    by_path["/"] = site.hrefs.get(site.index_slug, "index.html")
    docs = []
    for i, r in enumerate(records):
        path, _, anchor = str(r.get("url") or "/").partition("#")
        href = by_path.get(path.rstrip("/") or "/")
        if href is None:
            continue
        hier = r.get("hierarchy") or {}
        levels = [hier[k] for k in sorted(hier) if hier.get(k)]
        text = r.get("content") or ""
        if not text and not levels:
            continue
        docs.append({"id": i, "page": levels[0] if levels else "", "title": " › ".join(levels),
                     "url": href + (f"#{anchor}" if anchor else ""), "text": text})
    write_text(out_dir / "_static" / "search-index.js",
               "window.BOOK_SEARCH_DOCS = " + json.dumps(docs, ensure_ascii=False) + ";\n")
    return len(docs)


def render_prev_next(nav: List[NavEntry], current: str, site: Site) -> str:
    pages = [e for e in nav if e.slug]
    i = next(k for k, e in enumerate(pages) if e.slug == current)
    out = []
    for rel, label, k in (("prev", "Previous", i - 1), ("next", "Next", i + 1)):
        if 0 <= k < len(pages):
            e = pages[k]
            out.append(f'<a class="{rel}" rel="{rel}" href="{esc(site.hrefs[e.slug])}">'
                       f"<span>{label}</span>{esc(e.title)}</a>")
    return "".join(out)


def render_frontmatter(fm: dict, page: Page) -> str:
    """Subtitle, authors and source downloads under the title."""
    out = []
    if fm.get("subtitle"):
        out.append(f'<p class="subtitle">{esc(fm["subtitle"])}</p>')
    names = [a.get("name") for a in fm.get("authors") or [] if isinstance(a, dict) and a.get("name")]
    if names:
        out.append(f'<p class="authors">{esc(", ".join(map(str, names)))}</p>')
    links = []
    for ex in fm.get("exports") or []:
        if isinstance(ex, dict) and ex.get("url") and page.site.public_file(str(ex["url"]).lstrip("/")):
            href = page.site.copy_public(str(ex["url"]))
            label = ex.get("filename") or ex.get("format") or "source"
            links.append(f'<a class="download" href="{esc(href)}" download="{esc(label)}">{esc(label)}</a>')
    if links:
        out.append(f'<p class="downloads">Source: {" ".join(links)}</p>')
    return "\n".join(out)


def render_footnotes(page: Page) -> str:
    if not page.footnotes:
        return ""
    def order(f):  # numbered footnotes by number, then any named ones
        return (not f[0].isdigit(), int(f[0]) if f[0].isdigit() else 0, f[0])

    items = "".join(f'<li id="{esc(fid)}" value="{esc(n) if n.isdigit() else ""}">{body}'
                    f' <a class="footnote-back" href="#fnref-{esc(n)}" aria-label="Back to text">&#8617;</a></li>'
                    for n, fid, body in sorted(page.footnotes, key=order))
    return f'<section class="footnotes"><h2>Footnotes</h2><ol>{items}</ol></section>'


def render_page(doc: dict, entry: NavEntry, nav: List[NavEntry], site: Site, book_title: str,
                template: string.Template) -> str:
    """One full HTML page for one content/<slug>.json document."""
    page = Page(site=site, slug=entry.slug)
    fm = doc.get("frontmatter") or {}
    title = fm.get("title") or entry.title or entry.slug
    body = render(doc.get("mdast") or {}, page)
    return template.substitute(
        lang="en",
        page_title=esc(title if entry.slug == site.index_slug else f"{title} - {book_title}"),
        book_title=esc(book_title),
        home=esc(site.hrefs[site.index_slug]),
        sidebar=render_sidebar(nav, entry.slug, page),
        outline=render_outline(page),
        title=esc(title),
        frontmatter=render_frontmatter(fm, page),
        content=body,
        footnotes=render_footnotes(page),
        prev_next=render_prev_next(nav, entry.slug, site),
        kind=esc(doc.get("kind") or "Article"),
        source=esc(doc.get("location") or ""),  # e.g. /notebooks/01_a.ipynb, for check_site
    )


@dataclass
class RenderReport:
    pages: List[str]  # written file names, in book order
    copied: List[str]  # public/ files copied
    unknown: Dict[str, int]  # unknown node types and how often they occurred
    warnings: List[str]
    seconds: float


def render_site(site_dir, out_dir) -> RenderReport:
    """Render every page of myst's `_build/site` JSON into flat HTML files in `out_dir`."""
    t0 = time.perf_counter()
    site_dir, out_dir = Path(site_dir), Path(out_dir)
    cfg_path = site_dir / "config.json"
    if not cfg_path.is_file():
        raise ValueError(f"no myst config.json at {cfg_path}; run `jupyter book build --html` first")
    site = Site(site_dir=site_dir, out_dir=out_dir)
    config = json.loads(cfg_path.read_text(encoding="utf-8"))
    nav = load_nav(site, config)
    book_title = config["projects"][0].get("title") or nav[0].title
    template = string.Template((HERE / "page.html").read_text(encoding="utf-8"))
    written = []
    for entry in nav:
        if not entry.slug:
            continue
        doc = read_page_json(site, entry.slug)
        if doc is None:
            site.warn(f"content/{entry.slug}.json missing; page skipped")
            continue
        fname = site.hrefs[entry.slug]
        write_text(out_dir / fname, render_page(doc, entry, nav, site, book_title, template))
        written.append(fname)
    for name in STATIC_FILES:
        copy_file(HERE / "static" / name, out_dir / "_static" / name)
    write_search_index(site, out_dir)
    return RenderReport(written, sorted(site.copied), dict(site.unknown), site.warnings,
                        time.perf_counter() - t0)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    build = os.environ.get("BUILD_DIRECTORY")
    ap.add_argument("--out", default=build, help="output folder (default: $BUILD_DIRECTORY)")
    ap.add_argument("--site", default=None, help="myst site JSON folder (default: <out>/../site)")
    args = ap.parse_args(argv)
    if not args.out:
        ap.error("no output folder: set BUILD_DIRECTORY (myst does) or pass --out")
    out = Path(args.out)
    site = Path(args.site) if args.site else out.parent / "site"
    rep = render_site(site, out)
    # stdout is shown by myst only with -d; stderr is shown as errors, so warnings go there
    for w in rep.warnings:
        print(f"render.py: warning: {w}", file=sys.stderr)
    unknown = ", ".join(f"{k} x{v}" for k, v in sorted(rep.unknown.items()))
    print(f"render.py: wrote {len(rep.pages)} pages and {len(rep.copied)} files to {out} "
          f"in {rep.seconds:.2f} s" + (f"; unknown nodes: {unknown}" if unknown else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
