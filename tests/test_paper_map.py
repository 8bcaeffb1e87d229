"""The paper map names real functions and real chapters."""

import importlib
from pathlib import Path

import pytest

from nblib.chapters.claims.paper_map import PAPER_MAP

REPO = Path(__file__).resolve().parent.parent
STATUSES = ("done", "library", "planned", "not reproduced")


def _resolve(dotted: str):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


@pytest.mark.parametrize("row", PAPER_MAP, ids=[f"{r[0][:6]}-{r[1]}" for r in PAPER_MAP])
def test_row_points_at_real_code_and_chapter(row):
    work, item, what, funcs, chapter, status = row
    assert (REPO / "notebooks" / f"{chapter}.py").exists(), chapter
    assert status.startswith(STATUSES), status
    if funcs != "-":
        for f in funcs.split(";"):
            assert callable(_resolve(f.strip())), f
    if status in ("done", "library"):
        assert funcs != "-", f"{item} is {status} but names no function"


def test_done_rows_are_in_built_chapters():
    """A row marked done must sit in a chapter that is not a placeholder."""
    for work, item, what, funcs, chapter, status in PAPER_MAP:
        text = (REPO / "notebooks" / f"{chapter}.py").read_text()
        if status == "done":
            assert "Not built yet" not in text, f"{item} is marked done but {chapter} is a placeholder"


def test_the_markdown_paper_map_has_every_row():
    """Chapter 1 shows the whole map as one Markdown table: a line per row, none left out ("...")."""
    from markdown_it import MarkdownIt

    from nblib.chapters.claims.paper_map import paper_map, paper_map_markdown
    pm = paper_map()
    md = paper_map_markdown(pm)
    lines = md.strip().splitlines()
    assert len(lines) == len(pm) + 2 == len(PAPER_MAP) + 2  # header, separator, the rows
    assert not any(set(line.replace("|", " ").split()) <= {"..."} for line in lines[2:])  # no elided row
    assert [line.split(" | ")[1] for line in lines[2:]] == [r[1].replace("|", "\\|") for r in PAPER_MAP]
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert html.count("<tr>") == len(pm) + 1  # an escaped | inside a cell splits no row
    assert html.count("<td>") == len(pm) * len(pm.columns)
