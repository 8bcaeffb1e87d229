"""Saving figures and tables: `figures/<chapter>/<name>.png` plus a manifest of provenance.

Each figure or table is named after the paper's (`fig04a_observation_rules`,
`table03_variant_ablation`). The chapter's `manifest.json` records, per file, the budget,
the git revision and the run hashes it came from, so every figure can be traced to runs
the book can redo.
"""

from __future__ import annotations

import html
import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.font_manager import FontProperties, findfont
from matplotlib.ft2font import FT2Font
from matplotlib.ticker import NullFormatter

from nblib.store.atomic import atomic_path, atomic_write_json, atomic_write_text
from nblib.store.provenance import REPO_ROOT, code_version


def figures_root(budget: str = "toy", budget_file: str | os.PathLike | None = None) -> Path:
    """Where a budget's figures go: $NBLIB_FIGURES_DIR when set (tests write elsewhere), else
    `figures/` at the repository root for the toy book, and `_build/<budget>/figures/` for
    any other budget, so a smoke or full run never overwrites the committed toy figures. A
    budget file's book writes to `_build/<file name>/figures/` (`python -m nblib.book run
    --budget-file F.toml`, nblib.book.chapter)."""
    env = os.environ.get("NBLIB_FIGURES_DIR")
    if env:
        return Path(env)
    if budget_file:
        return REPO_ROOT / "_build" / Path(budget_file).stem / "figures"
    return REPO_ROOT / "figures" if budget == "toy" else REPO_ROOT / "_build" / budget / "figures"


def _record(chapter: str, filename: str, budget: str, runs, kind: str, extra: dict | None) -> None:
    folder = figures_root(budget) / chapter
    mpath = folder / "manifest.json"
    manifest = json.loads(mpath.read_text()) if mpath.exists() else {}
    hashes = sorted({getattr(r, "hash", r) for r in (runs or [])})
    manifest[filename] = {"kind": kind, "budget": budget, "code": code_version(), "runs": hashes,
                          "created": time.strftime("%Y-%m-%dT%H:%M:%S"), **(extra or {})}
    atomic_write_json(mpath, manifest)


def token_ticks(ax, axis: str, values) -> None:
    """Label a log axis of token counts at `values` (e.g. the grid's Ds or Dl, in tokens), as
    6.4M or 240K: a log axis spanning less than a decade has no major tick, so matplotlib would
    leave it without a single number. Up to 6 values: a tick at each; more (a trajectory's
    points, each scale its own budget at smoke): round 1-2-5 ticks inside their range, or
    decades where those are too many, or else 4 of the values themselves, so that the axis
    always carries at least 3 labels."""
    from matplotlib.ticker import FixedLocator, FuncFormatter

    vals = sorted({float(f"{v:.3g}") for v in values if np.isfinite(v) and v > 0})  # one tick per budget
    if not vals:
        return

    def words(x, _pos=None):
        return f"{x / 1e9:.3g}B" if x >= 1e9 else f"{x / 1e6:.3g}M" if x >= 1e6 else f"{x / 1e3:.3g}K" if x >= 1e3 \
            else f"{x:.3g}"

    a = ax.xaxis if axis == "x" else ax.yaxis
    a.set_major_locator(FixedLocator(vals if len(vals) <= 6 else _log_ticks(vals)))
    a.set_major_formatter(FuncFormatter(words))
    a.set_minor_formatter(NullFormatter())


def _log_ticks(vals, most: int = 8) -> list[float]:
    """Ticks for a log axis over the sorted positive `vals`: the 1-2-5 numbers inside their
    range when 3 to `most` of them fall there, else the decades when 3 to `most` do, else 4
    of the values evenly spaced in log."""
    lo, hi = vals[0] * (1 - 1e-9), vals[-1] * (1 + 1e-9)
    decades = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
    for subs in ((1, 2, 5), (1,)):
        ticks = [m * 10.0 ** e for e in decades for m in subs if lo <= m * 10.0 ** e <= hi]
        if 3 <= len(ticks) <= most:
            return ticks
    if len(ticks) > most:  # many decades: every k-th decade
        return ticks[::int(np.ceil(len(ticks) / most))]
    idx = np.unique(np.round(np.linspace(0, len(vals) - 1, min(4, len(vals)))).astype(int))
    return [vals[i] for i in idx]


def legend_outside(ax, where: str = "right", handles=None, below: float = 0.6, **kw):
    """A legend beside the axes (`where` "right") or under them ("below": `below` inches
    under the axes' bottom edge, clear of one row of tick labels and the axis label), so that
    it covers no data. `handles`: the artists to list (default: the axes' own)."""
    from matplotlib.transforms import ScaledTranslation

    kw.setdefault("fontsize", 8)
    if handles is not None:
        kw["handles"] = handles
    if where == "below":
        kw.setdefault("ncol", 2)
        shift = ax.transAxes + ScaledTranslation(0, -below, ax.figure.dpi_scale_trans)
        return ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=shift, borderaxespad=0, **kw)
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0, **kw)


def legend_below_figure(fig, handles, **kw):
    """One legend for every panel, under the whole figure (clear of the panels' axis labels:
    `tidy`'s tight layout leaves figure legends out, and saving with a tight bounding box
    takes it in)."""
    kw.setdefault("fontsize", 9)
    kw.setdefault("ncol", 3)
    return fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=fig.transFigure,
                      borderaxespad=0.3, **kw)


def tidy(fig) -> None:
    """House style before saving: no labels on minor log ticks (they collide), tight layout."""
    for ax in fig.axes:
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale == "log":
                axis.set_minor_formatter(NullFormatter())
    fig.tight_layout()


_RAW_COLUMNS = re.compile(r"\b(shortppl|longppl|dl_mult|ds_mult|piece_hit|needle_gain|control_score)\b")


def _words(text: str) -> str:
    """`text` without its $...$ math (where an underscore is a subscript)."""
    return re.sub(r"\$[^$]*\$", "", text)


def _data_points(ax):
    """Display coordinates of what `ax` draws as data: its lines (sampled along each segment,
    so a line crossing a box counts) and its scatter points."""
    from matplotlib.collections import PathCollection

    pts = []
    for line in ax.get_lines():
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), float))
        xy = xy[np.isfinite(xy).all(axis=1)]
        if len(xy) == 1 or line.get_linestyle() in ("None", "none", "", " "):
            pts.append(xy)
        elif len(xy) > 1:
            t = np.linspace(0, 1, 40)[:, None, None]
            pts.append((xy[:-1] + t * (xy[1:] - xy[:-1])).reshape(-1, 2))
    for coll in ax.collections:
        if isinstance(coll, PathCollection) and len(coll.get_offsets()):
            pts.append(coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), float)))
    return np.concatenate(pts) if pts else np.empty((0, 2))


def readability_problems(fig, min_log_ticks: int = 3) -> list[str]:
    """What makes a figure hard to read ([] when nothing): a log axis with fewer than
    `min_log_ticks` labelled ticks in view; an axis with tick labels but no label (its unit);
    a title or axis label that is a column name (shortppl, needle_gain) or has an underscore
    outside $...$; a legend that covers a data point or line of any axes. Call it on the
    figure as saved (after `tidy`)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = []
    texts = [("figure title", fig.get_suptitle())]
    for i, ax in enumerate(fig.axes):
        name = f"axes {i} ({ax.get_title() or 'untitled'})"
        texts.append((f"{name} title", ax.get_title()))
        for which, axis, lim in (("x", ax.xaxis, ax.get_xlim()), ("y", ax.yaxis, ax.get_ylim())):
            lo, hi = sorted(lim)
            labelled = [t for t in axis.get_majorticklabels() + axis.get_minorticklabels()
                        if t.get_visible() and t.get_text().strip()
                        and lo * (1 - 1e-9) <= (t.get_position()[0] if which == "x" else t.get_position()[1])
                        <= hi * (1 + 1e-9)]
            if axis.get_scale() == "log" and axis.get_visible() and len(labelled) < min_log_ticks:
                problems.append(f"{name}: the log {which} axis has {len(labelled)} labelled ticks "
                                f"({[t.get_text() for t in labelled]}), fewer than {min_log_ticks}")
            if labelled and axis.get_visible() and not axis.get_label_text().strip():
                problems.append(f"{name}: the {which} axis has tick labels but no label")
            texts.append((f"{name} {which} label", axis.get_label_text()))
    for where, text in texts:
        if "_" in _words(text) or _RAW_COLUMNS.search(_words(text)):
            problems.append(f"{where} {text!r} reads as a column name; write it in words")
    legends = [(ax.get_legend(), f"axes {i}") for i, ax in enumerate(fig.axes) if ax.get_legend()]
    legends += [(leg, "figure") for leg in fig.legends]
    for leg, owner in legends:
        box = leg.get_window_extent(renderer)
        for i, ax in enumerate(fig.axes):
            pts = _data_points(ax)
            inside = (pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1) & (pts[:, 1] >= box.y0) & (pts[:, 1] <= box.y1)
            if inside.any():
                problems.append(f"the legend of {owner} covers data of axes {i} ({ax.get_title() or 'untitled'})")
    return problems


def save_figure(fig, chapter: str, name: str, budget: str, runs=(), extra: dict | None = None, dpi: int = 110) -> Path:
    """Save a matplotlib figure as figures/<chapter>/<name>.png and record its provenance."""
    tidy(fig)
    path = figures_root(budget) / chapter / f"{name}.png"
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format="png")
    _record(chapter, path.name, budget, runs, "figure", extra)
    return path


def with_row_labels(df: pd.DataFrame) -> pd.DataFrame:
    """The table with its row labels as leading columns: an index that says what each row is
    (a length, a model, a checkpoint) becomes a column (named "row" when it has no name); a
    plain 0..n-1 index is dropped."""
    idx = df.index
    if isinstance(idx, pd.RangeIndex) and idx.start == 0 and idx.step == 1 and idx.name is None:
        return df
    names = [n if n is not None else ("row" if idx.nlevels == 1 else f"row {i}") for i, n in enumerate(idx.names)]
    taken = set(map(str, df.columns))
    names = [n if str(n) not in taken else f"{n} (row)" for n in names]
    return df.rename_axis(names).reset_index()


def identifying_columns(df: pd.DataFrame) -> list[str]:
    """The leading columns that label rows: text, integer or boolean columns, float columns
    whose values repeat (grid coordinates such as Dl/N), and a first float column that rises
    strictly (one row per point: lengths, Dl/N); the first measurement ends them."""
    out = []
    for i, c in enumerate(df.columns):
        col = df[c]
        grid = i == 0 and col.is_monotonic_increasing and col.is_unique
        if pd.api.types.is_float_dtype(col) and col.nunique(dropna=False) > max(1, len(df) // 2) and not grid:
            break
        out.append(c)
    return out


def table_problems(df: pd.DataFrame) -> list[str]:
    """Why a saved table's rows cannot be told apart ([] when they can): a table of more
    than one row needs leading label columns whose values are unique per row."""
    if len(df) <= 1:
        return []
    keys = identifying_columns(df)
    if not keys:
        return [f"no column labels the rows (first column {df.columns[0]!r} is a measurement)"]
    if df.duplicated(subset=keys).any():
        return [f"rows are not unique in their label columns {keys}"]
    return []


def save_table(df, chapter: str, name: str, budget: str, runs=(), extra: dict | None = None) -> Path:
    """Save a pandas table as figures/<chapter>/<name>.csv, its row labels included
    (`with_row_labels`), and record its provenance."""
    path = figures_root(budget) / chapter / f"{name}.csv"
    atomic_write_text(path, with_row_labels(df).to_csv(index=False))
    _record(chapter, path.name, budget, runs, "table", extra)
    return path


def glyph_available(char: str) -> bool:
    """Whether matplotlib's default font has a glyph for `char` (emoji usually are missing:
    labels then spell the code point instead of drawing an empty box)."""
    if char not in _GLYPHS:
        font = FT2Font(findfont(FontProperties()))
        _GLYPHS[char] = font.get_char_index(ord(char)) != 0
    return _GLYPHS[char]


_GLYPHS: dict = {}


def parity(ax, measured, predicted, title: str = "", label: str | None = None, color="tab:red", size: float = 25,
           diagonal=None, background=None) -> None:
    """A parity plot on `ax`: predicted against measured log(LongPPL) with the y = x line
    (Fig. 3, Fig. 5). background: optional (measured, predicted) of the fitted rows, drawn
    grey under the held-out points; diagonal: (lo, hi) of the y = x line (default: the
    range of every point drawn)."""
    if background is not None:
        ax.scatter(*background, s=10, c="0.6", label="fitted scales")
    ax.scatter(measured, predicted, s=size, c=color, label=label)
    if diagonal is None:
        pts = np.concatenate([np.asarray(measured, float), np.asarray(predicted, float)])
        diagonal = (pts.min(), pts.max())
    ax.plot(diagonal, diagonal, "k--", lw=0.8)
    ax.set(xlabel="measured log(LongPPL)", ylabel="predicted", title=title)
    if label is not None or background is not None:
        ax.legend(fontsize=8)


def highlight_html(text: str, long_iv, short_iv, max_chars: int = 4000) -> str:
    """HTML of a test document with long key tokens in red and short key tokens in blue."""
    mark = np.zeros(len(text), np.int8)
    for s, e in short_iv:
        mark[s:e] = 1
    for s, e in long_iv:
        mark[s:e] = 2
    out, i = [], 0
    text, mark = text[:max_chars], mark[:max_chars]
    style = {0: None, 1: "background:#dbe9ff", 2: "background:#ffc9c9;font-weight:bold"}
    while i < len(text):
        j = i
        while j < len(text) and mark[j] == mark[i]:
            j += 1
        chunk = html.escape(text[i:j])
        out.append(f'<span style="{style[mark[i]]}">{chunk}</span>' if style[mark[i]] else chunk)
        i = j
    return ('<pre style="white-space:pre-wrap;font-size:0.8em;max-height:28em;overflow:auto">' + "".join(out)
            + "</pre>")


# --------------------------------------------------------------------------- figure labels

# A code cell shows a figure when it saves one through Chapter.save_figure (which displays
# the saved PNG unless show=False) or displays an image or a pyplot figure itself.
_SAVES_FIGURE = re.compile(r"\bsave_figure\(")
_NOT_SHOWN = re.compile(r"\bsave_figure\([^\n]*\bshow\s*=\s*False")
_DISPLAYS_FIGURE = re.compile(r"\bdisplay\(\s*Image\(|\bplt\.show\(")
_CELL_LABEL = re.compile(r"^#\|\s*label:\s*(\S+)\s*$", re.M)
# a MyST figure directive: ':::{figure} #cell-x' (3 or more colons) or '```{figure} #cell-x'
_FIGURE_OPEN = re.compile(r"^(?P<fence>:{3,}|`{3,})\{figure\}\s*(?P<arg>\S*)\s*$")


def _figure_directives(markdown: str) -> list[dict]:
    """Every MyST `{figure}` directive of one Markdown cell: its argument, its options and
    its caption (the body lines that are not options, joined)."""
    out, lines, i = [], markdown.splitlines(), 0
    while i < len(lines):
        m = _FIGURE_OPEN.match(lines[i].strip())
        i += 1
        if not m:
            continue
        fence, options, body = m.group("fence"), {}, []
        while i < len(lines) and lines[i].strip() != fence:
            line = lines[i].strip()
            opt = re.match(r"^:([\w-]+):\s*(.*)$", line)
            if opt and not body:  # options come first, before the caption
                options[opt.group(1)] = opt.group(2).strip()
            elif line or body:
                body.append(line)
            i += 1
        closed = i < len(lines)
        i += 1
        out.append({"arg": m.group("arg"), "options": options, "caption": " ".join(body).strip(), "closed": closed})
    return out


def figure_problems(cells) -> list[str]:
    """Problems with a chapter's figures, from its cells (nbformat cells, or any objects with
    `cell_type`, `source` and `metadata`). Every code cell that shows a figure must:
      - carry a `#| label: cell-...` line, so the book can place its output in a figure;
      - be tagged `remove-output`, so the image is not shown a second time outside it;
      - be the target of a MyST `:::{figure} #cell-...` block with a `:label:` option (to
        cite it with {numref}) and a non-empty caption.
    A figure block pointing at a label no code cell has is a problem too. Empty list: fine."""
    problems, labels, shown = [], {}, []
    for n, cell in enumerate(cells, 1):
        if cell.cell_type != "code":
            continue
        src = cell.source
        found = _CELL_LABEL.findall(src)
        for label in found:
            labels[label] = n
        if _DISPLAYS_FIGURE.search(src) or (_SAVES_FIGURE.search(src) and not _NOT_SHOWN.search(src)):
            first = next((line.strip() for line in src.splitlines() if line.strip() and not line.startswith("#|")),
                         "")
            where = f"code cell {n} ({first[:60]!r})"
            tags = cell.metadata.get("tags", [])
            if not found:
                problems.append(f"{where} shows a figure but has no `#| label: cell-...` line, so the figure "
                                 f"has no label or caption; add the label and a `:::{{figure}} #cell-...` block "
                                 f"with `:label:` and a caption")
                continue
            if "remove-output" not in tags:
                problems.append(f"{where} shows a figure but is not tagged remove-output (tags: {tags}), so the "
                                f"image appears twice; tag it remove-output")
            shown.append((where, found[0]))
    blocks = {}
    for cell in cells:
        if cell.cell_type == "markdown":
            for d in _figure_directives(cell.source):
                blocks.setdefault(d["arg"].lstrip("#"), []).append(d)
    for where, label in shown:
        found = blocks.get(label)
        if not found:
            problems.append(f"{where}, label {label!r}: no `:::{{figure}} #{label}` block shows it; add one with "
                            f"`:label:` and a caption")
            continue
        d = found[0]
        if not d["closed"]:
            problems.append(f"figure #{label}: its block is never closed")
        if not d["options"].get("label"):
            problems.append(f"figure #{label}: the block has no `:label:` option (options: "
                            f"{sorted(d['options']) or 'none'}); add `:label: fig-...`")
        if not d["caption"]:
            problems.append(f"figure #{label}: the block has an empty caption; write one under its options")
    for target in blocks:
        if target.startswith("cell-") and target not in labels:
            problems.append(f"a `:::{{figure}} #{target}` block names a label no code cell has "
                            f"(labels: {', '.join(sorted(labels)) or 'none'})")
    return problems
