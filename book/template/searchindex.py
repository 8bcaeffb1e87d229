"""The offline book's search index: myst's myst.search.json records rewritten as
_static/search-index.js for the vendored MiniSearch in book.js, with urls pointing at the
renderer's flat page files. Imports only the standard library and sitestate.
"""

from __future__ import annotations

import json
from pathlib import Path

from sitestate import Site, write_text


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
