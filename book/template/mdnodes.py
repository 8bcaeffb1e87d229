"""The mdast walker of the offline book renderer and its handlers for prose: the handler
registry (HANDLERS, @handles), render() with its fallbacks for unknown types and failing
handlers, and text, headings, code, links, cross-references, images, figures, lists and
tables. Directives, roles, math and footnotes are in directives.py, notebook cells and
outputs in nbcells.py; both register into HANDLERS here. Imports only the standard
library and sitestate.
"""

from __future__ import annotations

import re
from typing import Callable, Dict, Optional

from sitestate import SCHEME_RE, Page, attrs, classes, comment, esc, node_id, resolve_url


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
