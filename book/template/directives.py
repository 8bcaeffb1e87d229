"""Handlers for MyST directives and roles of the offline book renderer: admonitions, asides,
details, tabs, grids and cards, spans and divs, raw HTML, targets, math, footnotes,
mermaid, iframes, citations, and the leftovers of directives and roles myst did not know.
Importing it registers them into mdnodes.HANDLERS. Imports only the standard library,
sitestate and mdnodes.
"""

from __future__ import annotations

from mdnodes import handles, render, render_children
from sitestate import attrs, classes, comment, esc, node_id, resolve_url, style_attr


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
