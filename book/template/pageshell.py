"""Whole pages and the whole site for the offline book renderer: the navigation read from
myst's config.json, the sidebar TOC, the outline, prev/next links, frontmatter, the
footnotes section, the page shell (page.html filled by string.Template), and render_site,
which writes every page, the static files and the search index. Imports the standard
library and the sibling modules sitestate, mdnodes, directives and nbcells (the
last two for their handler registration) and searchindex; nothing imports it but render.py.
"""

from __future__ import annotations

import json
import string
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

import directives  # noqa: F401  (registers the directive and role handlers)
import nbcells  # noqa: F401  (registers the notebook cell handlers)
from mdnodes import render
from searchindex import write_search_index
from sitestate import Page, Site, classes, copy_file, esc, page_filename, write_text

HERE = Path(__file__).resolve().parent
# copied from template/static/ to <out>/_static/; MiniSearch (MIT, vendored: the book builds
# offline) indexes the pages in the browser
STATIC_FILES = ("book.css", "book.js", "vendor/minisearch-7.2.0.umd.js", "vendor/minisearch-LICENSE.txt")


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
