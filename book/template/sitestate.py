"""Site and page state for the offline book renderer, and the small helpers every other
module of it uses: HTML escaping and attributes, html ids, atomic file writes and copies,
page file names, and resolving myst urls to relative hrefs (copying public/ files on the
way). The bottom of the renderer's import graph: it imports only the standard library,
never a sibling module.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import html
import os
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

SCHEME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")


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
