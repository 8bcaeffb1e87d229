"""Check a built offline HTML book (book/template/render.py output) before shipping it.

check_site(html_dir, chapters, figure_files) -> list of problems (empty = fine):
  - a page exists for every chapter, given as a source file ("notebooks/01_streams.ipynb",
    matched against each page's <meta name="source">, so the index page is found too),
    a slug ("streams": myst drops folder, extension and numeric prefix, `_` -> `-`) or a
    page title ("Streams and errors");
  - every page is non-empty HTML (a <title>/<h1>, body text, and at least one content
    element such as <p>, <pre>, <img> or <table> in <main> outside navigation);
  - every listed figure PNG is in the site and referenced by some page. A figure matches
    by basename (myst renames `loss.png` to `loss-<hash>.png`) or, when the listed path
    exists, by identical bytes (a notebook output shown with `IPython.display.Image(path)`
    is stored as `<md5>.png`);
  - no page references a missing local file, or a missing #anchor on a local page.

CLI: python book/check_site.py _build/html --chapters intro 01_a.ipynb --figures figures/*.png
Exit status 1 and one problem per line when anything is wrong.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set
from urllib.parse import unquote, urlsplit

SCHEME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
             "source", "track", "wbr"}
CONTENT_TAGS = {"p", "pre", "img", "figure", "table", "ul", "ol", "dl", "math", "svg", "blockquote"}
META_CLASSES = {"downloads", "subtitle", "authors", "page-title"}
URL_ATTRS = {("a", "href"), ("link", "href"), ("img", "src"), ("script", "src"),
             ("source", "src"), ("video", "src"), ("audio", "src"), ("iframe", "src")}


@dataclass
class PageInfo:
    """What one HTML page contains, from a single parse."""
    path: Path
    title: str = ""
    h1: str = ""
    source: str = ""  # <meta name="source">: the page's source file, e.g. /notebooks/01_a.ipynb
    body_text_chars: int = 0
    content_elems: int = 0  # p/pre/img/table/... inside <main>, outside nav and page metadata
    ids: Set[str] = field(default_factory=set)
    refs: List[str] = field(default_factory=list)  # href/src values, in order


class _Scanner(HTMLParser):
    """Collect title, first h1, body text size, ids and url attributes of one page."""

    def __init__(self, info: PageInfo):
        super().__init__(convert_charrefs=True)
        self.info = info
        self.stack: List[str] = []  # open elements (void elements are never pushed)
        self.seen: Set[str] = set()
        self.in_body = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.in_body = True
        if tag == "meta" and a.get("name") == "source":
            self.info.source = a.get("content") or ""
        for key in ("id", "name") if tag == "a" else ("id",):
            if a.get(key):
                self.info.ids.add(a[key])
        for t, attr in URL_ATTRS:
            if tag == t and a.get(attr):
                self.info.refs.append(a[attr])
        in_main = "main" in self.stack or "main" not in self.seen
        if (tag in CONTENT_TAGS and in_main and "nav" not in self.stack
                and not META_CLASSES & set((a.get("class") or "").split())):
            self.info.content_elems += 1
        self.seen.add(tag)
        if tag not in VOID_TAGS:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in self.stack:  # tolerate unclosed tags: pop back to the match
            while self.stack and self.stack.pop() != tag:
                pass

    def handle_data(self, data):
        if "title" in self.stack and not self.info.title:
            self.info.title = data.strip()
        if "h1" in self.stack:
            self.info.h1 += data
        if self.in_body and not {"script", "style"} & set(self.stack):
            self.info.body_text_chars += len(data.strip())


def scan_page(path: Path) -> PageInfo:
    """Parse one HTML file into a PageInfo."""
    info = PageInfo(path=path)
    _Scanner(info).feed(path.read_text(encoding="utf-8", errors="replace"))
    info.h1 = " ".join(info.h1.split()).rstrip("#").strip()
    return info


def slug_candidates(chapter: str) -> List[str]:
    """Slugs myst may give a chapter: as written, and from a file name without its folder,
    extension and numeric prefix (`notebooks/01_streams.ipynb` -> `streams`)."""
    name = Path(chapter).name
    stem = re.sub(r"\.(ipynb|md|myst|tex)$", "", name, flags=re.I)
    bare = re.sub(r"^\d+[_\-. ]+", "", stem)
    out = []
    for s in (chapter, stem, bare):
        for v in (s, re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")):
            if v and v not in out:
                out.append(v)
    return out


def find_chapter_page(chapter: str, pages: Dict[str, PageInfo]) -> Optional[PageInfo]:
    """The page for a chapter given by source file, slug or title, if any."""
    src = re.sub(r"^(\./)+", "", chapter.replace("\\", "/"))
    if "." in Path(src).name:  # a file name: match the page's recorded source path
        for info in pages.values():
            have = info.source.lstrip("/")
            if have and (have == src or have.endswith("/" + src) or src.endswith("/" + have)):
                return info
    for slug in slug_candidates(chapter):
        for rel in (f"{slug}.html", f"{slug}/index.html"):
            if rel in pages:
                return pages[rel]
    want = " ".join(chapter.split()).casefold()
    for info in pages.values():
        title = info.title.casefold()
        if want in (info.h1.casefold(), title) or title.startswith(want + " - "):
            return info
    return None


def figure_pattern(name: str) -> re.Pattern:
    """`loss.png` matches `loss.png` and myst's hashed copy `loss-<32 hex>.png`."""
    p = Path(name)
    return re.compile(re.escape(p.stem) + r"(-[0-9a-f]{8,64})?" + re.escape(p.suffix) + "$")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_site(html_dir, chapter_slugs_or_titles: Iterable[str], figure_files: Iterable) -> List[str]:
    """Problems with the built book in `html_dir` (empty list = all checks pass)."""
    html_dir = Path(html_dir)
    if not html_dir.is_dir():
        return [f"{html_dir}: not a directory (build the book first)"]
    problems: List[str] = []
    pages: Dict[str, PageInfo] = {}
    for path in sorted(html_dir.rglob("*.html")):
        rel = path.relative_to(html_dir).as_posix()
        if path.stat().st_size == 0:
            problems.append(f"{rel}: empty file")
            continue
        info = scan_page(path)
        pages[rel] = info
        if not (info.title or info.h1) or info.body_text_chars == 0:
            problems.append(f"{rel}: no title or no body text")
        elif info.content_elems == 0:
            problems.append(f"{rel}: page has a title but no content")
    if "index.html" not in pages:
        problems.append("index.html: missing")

    for chapter in chapter_slugs_or_titles:
        if find_chapter_page(str(chapter), pages) is None:
            tried = slug_candidates(str(chapter))
            problems.append(f"chapter {chapter!r}: no page (tried source files, slugs {tried} and titles)")

    all_files = [p for p in html_dir.rglob("*") if p.is_file()]
    referenced = {unquote(urlsplit(r).path).rsplit("/", 1)[-1] for info in pages.values() for r in info.refs}
    digests: Dict[str, List[str]] = {}  # sha256 -> site file names, filled on first need
    for fig in figure_files:
        name = Path(fig).name
        pat = figure_pattern(name)
        present = [p.name for p in all_files if pat.match(p.name)]
        if Path(fig).is_file():  # also accept a byte-identical copy under another name
            if not digests:  # e.g. a notebook output shown with IPython.display.Image(path)
                for p in all_files:
                    digests.setdefault(_sha256(p), []).append(p.name)
            present += [n for n in digests.get(_sha256(Path(fig)), []) if n not in present]
        if not present:
            problems.append(f"figure {name}: not in the built site")
        elif not any(n in referenced for n in present):
            problems.append(f"figure {name}: in the site ({present[0]}) but no page references it")

    root = html_dir.resolve()
    for rel, info in pages.items():
        for ref in info.refs:
            if ref.startswith(("#", "//")) or SCHEME_RE.match(ref):
                if ref.startswith("#") and len(ref) > 1 and unquote(ref[1:]) not in info.ids:
                    problems.append(f"{rel}: link to missing anchor {ref}")
                continue
            parts = urlsplit(ref)
            target_rel = unquote(parts.path)
            base = root if target_rel.startswith("/") else info.path.parent.resolve()
            target = (base / target_rel.lstrip("/")).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                problems.append(f"{rel}: reference to missing local file {ref}")
                continue
            if root not in target.parents and target != root:
                problems.append(f"{rel}: reference outside the site {ref}")
                continue
            if parts.fragment and target.suffix == ".html":
                other = pages.get(target.relative_to(root).as_posix())
                if other is not None and unquote(parts.fragment) not in other.ids:
                    problems.append(f"{rel}: link to missing anchor {ref}")
    return problems


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Check a built offline HTML book.")
    ap.add_argument("html_dir", help="the built site, e.g. _build/html")
    ap.add_argument("--chapters", nargs="*", default=[], help="slugs, titles or source files")
    ap.add_argument("--figures", nargs="*", default=[], help="figure files that must be shown")
    args = ap.parse_args(argv)
    problems = check_site(args.html_dir, args.chapters, args.figures)
    for p in problems:
        print(p)
    n_pages = len(list(Path(args.html_dir).rglob("*.html"))) if Path(args.html_dir).is_dir() else 0
    print(f"check_site: {len(problems)} problem(s) in {n_pages} pages", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
