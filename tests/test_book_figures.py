"""Figure labels: every figure a chapter shows has a `#| label:`, a `:::{figure}` block with
a `:label:` and a caption, checked from the chapters' sources before any chapter runs."""

from __future__ import annotations

from pathlib import Path

import pytest

PLANTED_HEAD = '''# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 99. A planted chapter

# %% tags=["parameters"]
budget = "toy"
'''


def _plant(folder: Path, body: str, name: str = "99_planted") -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(PLANTED_HEAD + body)
    return name


LABELLED = '''
# %% tags=["remove-output"]
#| label: cell-loss
fig, ax = plt.subplots()
ch.save_figure(fig, "loss")

# %% [markdown]
# :::{figure} #cell-loss
# :label: fig-loss
# Loss against tokens.
# :::
'''


@pytest.mark.parametrize("body,needle", [
    ('\n# %%\nfig, ax = plt.subplots()\nch.save_figure(fig, "loss")\n', "has no `#| label: cell-...` line"),
    ('\n# %%\ndisplay(Image("plot.png"))\n', "has no `#| label: cell-...` line"),
    (LABELLED.replace('# %% tags=["remove-output"]', "# %%"), "is not tagged remove-output"),
    (LABELLED.split("# %% [markdown]")[0], "no `:::{figure} #cell-loss` block shows it"),
    (LABELLED.replace("# :label: fig-loss\n", ""), "the block has no `:label:` option"),
    (LABELLED.replace("# Loss against tokens.\n", ""), "the block has an empty caption"),
    (LABELLED.replace("# :::\n", ""), "its block is never closed"),
    (LABELLED + "\n# %% [markdown]\n# :::{figure} #cell-gone\n# :label: fig-gone\n# Gone.\n# :::\n",
     "names a label no code cell has"),
])
def test_figure_check_fails_on_a_planted_figure_without_label_or_caption(tmp_path, body, needle):
    from nblib.book import build

    name = _plant(tmp_path / "notebooks", body)
    problems = build.check_figures([name], tmp_path / "notebooks")
    assert len(problems) == 1 and needle in problems[0] and problems[0].startswith(f"{name}: "), problems


def test_figure_check_passes_a_labelled_figure_and_a_saved_but_hidden_one(tmp_path):
    from nblib.book import build

    hidden = '\n# %%\nch.save_figure(fig, "raw", show=False)\n'
    name = _plant(tmp_path / "notebooks", LABELLED + hidden)
    assert build.check_figures([name], tmp_path / "notebooks") == []


def test_book_check_fails_on_a_planted_unlabelled_figure_and_passes_on_the_book(tmp_path, monkeypatch, capsys):
    """The planted chapter (in the chapter registry) fails the book check (check_book) and
    `run_book` stops before running any chapter; every real chapter passes the figure check."""
    from nblib.book import build
    from nblib.book.chapters import ChapterEntry

    assert build.check_figures(build.chapters()) == []
    name = _plant(tmp_path / "notebooks", '\n# %%\nfig, ax = plt.subplots()\nch.save_figure(fig, "loss")\n')
    monkeypatch.setattr(build, "NOTEBOOKS", tmp_path / "notebooks")
    monkeypatch.setattr(build, "CHAPTERS", (ChapterEntry(name, "A planted chapter", "lccp"),))
    problems = build.check_book(tmp_path / "no-site", [name], tmp_path / "figures")
    assert any(p.startswith(f"{name}: code cell") and "no `#| label" in p for p in problems), problems
    ran = []
    monkeypatch.setattr(build, "execute", lambda *a, **k: ran.append(a))
    monkeypatch.setattr(build, "preflight_html", lambda: ran.append("preflight"))
    assert build.run_book("smoke", tmp_path / "out", [name]) == 1 and ran == []
    err = capsys.readouterr().err
    assert f"figure problem: {name}: code cell" in err and "chapter registry" not in err, err
