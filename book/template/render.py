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

The work is split by job into sibling modules of this file (this folder is put on
sys.path, so they import as top-level modules; none of them imports this file):
  sitestate.py    Site/Page state and small helpers (esc, attrs, write_text, resolve_url, ...)
  mdnodes.py      the mdast walker and handler registry; prose, links, xrefs, figures, tables
  directives.py   directives and roles: admonitions, tabs, cards, math, footnotes, ...
  nbcells.py      notebook cells and outputs (streams, errors, mime bundles, long outputs)
  searchindex.py  _static/search-index.js from myst.search.json
  pageshell.py    nav, sidebar, outline, prev/next, frontmatter, page.html, render_site
This file is the command-line entry point and re-exports those modules' names, so
`render.render_site`, `render.Site`, `render.collapse_cr`, ... keep working.

Usage: render.py [--site DIR] [--out DIR]   (defaults: $BUILD_DIRECTORY/../site, $BUILD_DIRECTORY)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List, Optional

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded by path (importlib, tests), not run as a script
    sys.path.insert(0, str(HERE))

# Re-exports: every name render.py defined before the split stays reachable as render.<name>.
# Importing directives and nbcells also registers their handlers into mdnodes.HANDLERS.
# Constants are copies: to change one for a test, patch its module (nbcells.INLINE_LIMIT).
import directives  # noqa: E402,F401
import mdnodes  # noqa: E402,F401
import nbcells  # noqa: E402,F401
import pageshell  # noqa: E402,F401
import searchindex  # noqa: E402,F401
import sitestate  # noqa: E402,F401
from mdnodes import (HANDLERS, handles, plain_text, render, render_children,  # noqa: E402,F401
                     render_unknown, simple)
from nbcells import (ANSI_RE, INLINE_LIMIT, MIME_ORDER, as_text, collapse_cr,  # noqa: E402,F401
                     long_text, merge_streams, render_code_cell, render_mime, render_output,
                     strip_ansi)
from pageshell import (STATIC_FILES, NavEntry, RenderReport, load_nav,  # noqa: E402,F401
                       read_page_json, render_footnotes, render_frontmatter, render_outline,
                       render_page, render_prev_next, render_sidebar, render_site)
from searchindex import write_search_index  # noqa: E402,F401
from sitestate import (SCHEME_RE, Page, Site, attrs, classes, comment,  # noqa: E402,F401
                       copy_file, esc, node_id, page_filename, resolve_url, style_attr,
                       write_text)


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
