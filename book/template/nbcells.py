"""Notebook cells and their outputs as HTML for the offline book renderer: code cells with
hidden or removed parts, merged streams with progress-bar updates collapsed, errors, mime
bundles (images written or copied to public/, SVG, HTML, markdown, JSON, text), long
outputs myst spilled to public/, and inline {eval} results. Importing it registers its
handlers into mdnodes.HANDLERS. Imports only the standard library, sitestate and
mdnodes.
"""

from __future__ import annotations

import json
import re

from mdnodes import handles, render, render_children
from sitestate import Page, attrs, classes, comment, esc, node_id

INLINE_LIMIT = 200_000  # chars of a spilled long output shown inline; the rest is linked
ANSI_RE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
# Jupyter display priority (nbconvert's order, html before images, as notebooks show it)
MIME_ORDER = ("text/html", "image/svg+xml", "image/png", "image/jpeg", "image/gif",
              "image/webp", "text/markdown", "text/latex", "application/json", "text/plain")


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
