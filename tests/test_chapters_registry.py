"""The chapter registry (nblib/book/toc.py): it agrees with the notebooks, myst.yml, the
plan and the book runner, and every way it can disagree is reported with the chapter's name
before any chapter runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nblib.book import build, plan
from nblib.book.toc import (CHAPTERS, PARTS, SCORECARD_PAGE, ChapterEntry, chapter_needs, check_registry, input_chapters,
                                 sync_toc, toc_lines, with_toc)
from nblib.budgets import get_budget
from nblib.store.provenance import REPO_ROOT


def _notebooks(folder: Path, registry, extra=()) -> Path:
    """A notebooks folder holding a percent-format source for each registry chapter (headed
    as the registry says) and for each name in `extra`."""
    folder.mkdir(parents=True, exist_ok=True)
    titles = {c.name: f"{c.number}. {c.title}" for c in registry}
    for name in [c.name for c in registry] + list(extra):
        heading = titles.get(name, f"{int(name[:2])}. Not registered")
        (folder / f"{name}.py").write_text(f"# %% [markdown]\n# # {heading}\n\n# %% tags=[\"parameters\"]\n"
                                           f"budget = \"toy\"\n")
    return folder


SMALL = (ChapterEntry("01_a", "Alpha", "lccp"), ChapterEntry("02_b", "Beta", "lccp", needs=("01_a",)),
         ChapterEntry("03_c", "Gamma", "gemma"))


# --------------------------------------------------------------------------- the book agrees

def test_the_registry_lists_every_notebook_and_nothing_else():
    assert check_registry(build.NOTEBOOKS) == []
    assert build.chapters() == sorted(p.stem for p in build.NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def test_every_chapter_a_chapter_needs_comes_before_it():
    names = build.chapters()
    for n, before in chapter_needs().items():
        assert n in names and all(b in names and names.index(b) < names.index(n) for b in before), (n, before)


def test_myst_yml_toc_is_the_registry():
    """The toc Jupyter Book reads: the landing page, each part's title over its chapters in
    registry order with the scorecard right after the first, the run report (`python -m
    nblib.book toc` writes it)."""
    text = (REPO_ROOT / "myst.yml").read_text()
    toc = yaml.safe_load(text)["project"]["toc"]
    assert toc[0] == {"file": "book/index.md"} and toc[-1] == {"file": "book/run_report.md"}
    parts = [(e["title"], [c["file"] for c in e["children"]]) for e in toc[1:-1]]
    expected = [(title, [f"notebooks/{c.name}.ipynb" for c in CHAPTERS if c.part == key])
                for key, title in PARTS.items()]
    expected[0][1].insert(1, SCORECARD_PAGE)
    assert parts == expected
    assert with_toc(text) == text and sync_toc(check=True) is False


def test_the_plan_reads_the_registry():
    """The plan's input lists are the registry's chapters that read inputs, by part; each
    chapter that trains a run is in the list of its models' part (Llama: the LCCP paper;
    GPT-2 and Gemma 3: the blog) and the introduction, which trains none, in neither."""
    assert plan.LCCP_CHAPTERS == input_chapters("lccp") and plan.PAIR_CHAPTERS == input_chapters("gemma")
    assert set(plan.LCCP_CHAPTERS + plan.PAIR_CHAPTERS) == {c.name for c in CHAPTERS if c.inputs}
    runs = plan.run_list(get_budget("toy"))
    for r in runs:
        assert r["chapter"] in (plan.LCCP_CHAPTERS if r["family"] == "llama" else plan.PAIR_CHAPTERS), r
    assert "01_introduction" not in {r["chapter"] for r in runs} | set(plan.LCCP_CHAPTERS + plan.PAIR_CHAPTERS)
    with pytest.raises(ValueError, match="allowed: lccp, gemma"):
        input_chapters("blog")


def test_the_staged_book_gets_the_registry_toc(tmp_path, monkeypatch):
    """The book's build folder gets myst.yml with the toc of the registry in use, whatever the
    repository's myst.yml holds."""
    monkeypatch.setattr(build, "CHAPTERS", CHAPTERS[:2] + CHAPTERS[5:6])
    build.stage_book(tmp_path, "# Run report\n", "# Scorecard\n")
    toc = yaml.safe_load((tmp_path / "myst.yml").read_text())["project"]["toc"]
    assert [[c["file"] for c in e["children"]] for e in toc[1:-1]] == [
        ["notebooks/01_introduction.ipynb", SCORECARD_PAGE, "notebooks/02_setup.ipynb"],
        ["notebooks/06_models_ab.ipynb"]]
    assert (tmp_path / "book" / "run_report.md").read_text() == "# Run report\n"
    assert (tmp_path / "book" / "scorecard.md").read_text() == "# Scorecard\n"


def test_toc_writer_replaces_only_the_toc(tmp_path):
    myst = tmp_path / "myst.yml"
    myst.write_text("version: 1\nproject:\n  title: t\n  toc:\n    - file: old.md\n    - title: Old\n"
                    "      children:\n        - file: x.ipynb\n  exclude:\n    - a/**\nsite:\n  template: ./t\n")
    before = yaml.safe_load(myst.read_text())
    assert sync_toc(myst, check=True, registry=SMALL) is True and yaml.safe_load(myst.read_text()) == before
    assert sync_toc(myst, registry=SMALL) is True and sync_toc(myst, check=True, registry=SMALL) is False
    after = yaml.safe_load(myst.read_text())
    assert after["project"]["toc"] == [
        {"file": "book/index.md"},
        {"title": PARTS["lccp"], "children": [{"file": "notebooks/01_a.ipynb"}, {"file": SCORECARD_PAGE},
                                              {"file": "notebooks/02_b.ipynb"}]},
        {"title": PARTS["gemma"], "children": [{"file": "notebooks/03_c.ipynb"}]},
        {"file": "book/run_report.md"}]
    del after["project"]["toc"], before["project"]["toc"]
    assert after == before
    assert len(toc_lines(SMALL)) == 10
    with pytest.raises(ValueError, match="no `  toc:` line"):
        with_toc("version: 1\nproject:\n  title: t\n")


# --------------------------------------------------------------------------- what it catches

def test_a_notebook_missing_from_the_registry_fails_naming_it(tmp_path):
    folder = _notebooks(tmp_path / "notebooks", SMALL, extra=["04_extra"])
    problems = check_registry(folder, SMALL)
    assert len(problems) == 1 and problems[0].startswith("chapter 04_extra: notebook "), problems
    assert "missing from the chapter registry" in problems[0]
    assert check_registry(_notebooks(tmp_path / "clean", SMALL), SMALL) == []


@pytest.mark.parametrize("needs, cycle", [
    ({"01_a": ("02_b",), "02_b": ("01_a",)}, {"01_a", "02_b"}),
    ({"01_a": ("03_c",), "02_b": ("01_a",), "03_c": ("02_b",)}, {"01_a", "02_b", "03_c"}),
    ({"02_b": ("02_b",)}, {"02_b"}),
], ids=["two-chapters", "three-chapters", "needs-itself"])
def test_a_needs_cycle_fails_naming_a_chapter_on_it(tmp_path, needs, cycle):
    registry = tuple(ChapterEntry(c.name, c.title, c.part, needs=needs.get(c.name, ())) for c in SMALL)
    problems = check_registry(_notebooks(tmp_path / "notebooks", registry), registry)
    lines = [p for p in problems if "cycle" in p]
    assert len(lines) == 1, problems
    named = lines[0].split(":")[0].removeprefix("chapter ")
    assert named in cycle and set(lines[0].split("cycle ")[1].split(" -> ")) == cycle, lines
    assert all(p.split(":")[0].removeprefix("chapter ") in cycle for p in problems), problems


@pytest.mark.parametrize("change, chapter, needle", [
    (lambda r: r[:2] + (ChapterEntry("03_c", "Gamma", "gemma", needs=("09_gone",)),), "03_c",
     "needs 09_gone, which is not a chapter"),
    (lambda r: (ChapterEntry("01_a", "Alpha", "lccp", needs=("03_c",)),) + r[1:], "01_a", "does not come before it"),
    (lambda r: r + (ChapterEntry("04_d", "Delta", "gemma"),), "04_d", "there is no notebook"),
    (lambda r: (ChapterEntry("01_a", "Alpha, renamed", "lccp"),) + r[1:], "01_a",
     "differs from the notebook's '1. Alpha'"),
    (lambda r: r[:2] + (ChapterEntry("03_c", "Gamma", "blog"),), "03_c", "part 'blog' is not one of lccp, gemma"),
    (lambda r: (ChapterEntry("02_b", "Beta", "lccp"), r[0], r[2]), "01_a", "the registry's order must follow"),
    (lambda r: (r[0], ChapterEntry("02_b", "Beta", "gemma"), ChapterEntry("03_c", "Gamma", "lccp")), "03_c",
     "part 'lccp' resumes after part 'gemma'"),
    (lambda r: r + (r[2],), "03_c", "listed twice"),
], ids=["unknown-need", "later-need", "no-notebook", "title", "unknown-part", "order", "split-part", "twice"])
def test_each_registry_problem_names_its_chapter(tmp_path, change, chapter, needle):
    folder = _notebooks(tmp_path / "notebooks", SMALL)
    problems = check_registry(folder, change(SMALL))
    assert len(problems) == 1 and problems[0].startswith(f"chapter {chapter}: ") and needle in problems[0], problems


def test_run_and_test_stop_before_any_chapter_when_the_registry_disagrees(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(build, "NOTEBOOKS", _notebooks(tmp_path / "notebooks", SMALL, extra=["04_extra"]))
    monkeypatch.setattr(build, "CHAPTERS", SMALL)
    ran = []
    for step in ("execute", "execute_all", "preflight_html", "sync"):
        monkeypatch.setattr(build, step, lambda *a, step=step, **k: ran.append(step))
    assert build.run_book("smoke", tmp_path / "out", ["01_a"], build=False) == 1
    assert build.test_book(tmp_path / "smoke", jobs=1) == 1
    assert build.main(["toc", "--check"]) == 1
    assert ran == [] and not (tmp_path / "out").exists() and not (tmp_path / "smoke").exists()
    err = capsys.readouterr().err
    assert err.count("[book] chapter registry: chapter 04_extra: notebook") == 3, err
    assert "no chapter was run" in err
