"""The toy build kept in the tree (issue 68): executed chapters in book/toy/ with build.json
(nblib.book.executed), their agreement with the figures (book/check_build.py), the chapters
edited since the build (said, never failed on), `make html` from them executing nothing
(nblib.book.reader), and the landing page's findings (nblib.book.summary.landing_page).

The committed tree holds no toy build until the final `make book`, so every test but one runs on a
planted build: twelve small executed chapters, their figures and manifests, in a temporary folder.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json

import nbformat
import pytest
from book_scripts import BOOK, load_script

from nblib.book import executed as E
from nblib.book.summary import LANDING_END, LANDING_FIGURE, LANDING_START, landing_page, tables_sha256
from nblib.book.toc import CHAPTERS

check_build = load_script("book_check_build", BOOK / "check_build.py")
COMMIT = "c" * 40
NAMES = [c.name for c in CHAPTERS]


def _png(seed: int) -> bytes:
    """A small real PNG, different for each seed (the HTML build copies it into the site)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    buf = io.BytesIO()
    plt.imsave(buf, [[seed % 7, 1], [2, 3]], format="png")
    return buf.getvalue()


def _executed(name: str, png: bytes | None) -> nbformat.NotebookNode:
    """An executed chapter as papermill leaves it: a title, a cell that prints, one that shows a figure."""
    nb = nbformat.v4.new_notebook(metadata={"papermill": {"duration": 1.0},
                                            "kernelspec": {"name": "python3", "display_name": "Python 3"}})
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {int(name[:2])}. {name}\n\nWhat it shows."),
                nbformat.v4.new_code_cell("print('hello')", metadata={"papermill": {"duration": 0.1}},
                                          outputs=[nbformat.v4.new_output("stream", name="stdout", text="hello\n")])]
    if png is not None:
        nb.cells.append(nbformat.v4.new_code_cell(
            "ch.save_figure(fig, 'fig')", outputs=[nbformat.v4.new_output(
                "display_data", data={"image/png": base64.b64encode(png).decode(), "text/plain": "<Image>"})]))
    return nb


@pytest.fixture
def planted(tmp_path):
    """A repository-like folder with a published toy build of every chapter: (repo, dest, figures, notebooks)."""
    repo, run = tmp_path / "repo", tmp_path / "run" / "notebooks"
    figures, notebooks, dest = repo / "figures", repo / "notebooks", repo / "book" / "toy"
    run.mkdir(parents=True)
    notebooks.mkdir(parents=True)
    for i, name in enumerate(NAMES):
        (notebooks / f"{name}.py").write_text(f"# %% [markdown]\n# # {i + 1}. {name}\n")
        png = _png(i) if i % 2 else None
        if png is not None:
            (figures / name).mkdir(parents=True)
            (figures / name / "fig.png").write_bytes(png)
            (figures / name / "t.csv").write_text("a,b\n1,2\n")
            (figures / name / "manifest.json").write_text(json.dumps(
                {f: {"budget": "toy", "code": {"git": COMMIT, "dirty": False}} for f in ("fig.png", "t.csv")}))
        nbformat.write(_executed(name, png), str(run / f"{name}.ipynb"))
    (figures / "summary.json").write_text(json.dumps({"budget": "toy", "figures": "figures", "claims": 1, "controls": 0,
                                                      "counts": {"not": 1}, "reproduced": [],
                                                      "tables_sha256": tables_sha256(figures)}))
    records = [{"chapter": n, "status": "ok", "wall_s": 1.0} for n in NAMES]
    E.publish(run, records, {"git": COMMIT, "dirty": False}, figures, dest, notebooks, repo)
    return repo, dest, figures, notebooks


def test_publish_keeps_outputs_and_references_the_figures_files(planted, tmp_path):
    repo, dest, figures, _ = planted
    build = json.loads((dest / "build.json").read_text())
    assert build["commit"] == COMMIT and build["budget"] == "toy" and set(build["chapters"]) == set(NAMES)
    assert build["figures"]["commits"] == [COMMIT] and build["figures"]["root"] == "figures"
    assert build["size_bytes"] == sum(p.stat().st_size for p in dest.glob("*.ipynb"))
    nb = nbformat.read(str(dest / "02_setup.ipynb"), as_version=4)
    assert "papermill" not in nb.metadata and "papermill" not in nb.cells[1].metadata
    assert nb.cells[1].outputs[0]["text"] == "hello\n"  # text outputs are kept
    fig = nb.cells[2].outputs[0]
    assert "image/png" not in fig["data"]
    ref = {"path": "figures/02_setup/fig.png", "sha256": hashlib.sha256(_png(1)).hexdigest()}
    assert fig["metadata"][E.FIGURE_KEY] == ref
    assert nb.metadata[E.BUILD_KEY] == {"budget": "toy", "commit": COMMIT,
                                        "source_sha256": build["chapters"]["02_setup"]["source_sha256"]}
    assert E.inflate(nb, repo) == [] and base64.b64decode(nb.cells[2].outputs[0]["data"]["image/png"]) == _png(1)


def test_a_warning_names_paths_relative_to_the_repository(tmp_path):
    repo = tmp_path / "repo"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output(
        "stream", name="stderr", text=f"{repo}/nblib/gemma/fit.py:80: RuntimeWarning: overflow\n"
                                      "/tmp/ipykernel_3660/3174174310.py:3: Pandas4Warning: item\n"),
        nbformat.v4.new_output("execute_result", data={"text/plain": f"PosixPath('{repo}/figures/t.csv')"})])])
    E.slim(nb, tmp_path, {}, repo)
    assert nb.cells[0].outputs[0]["text"] == ("nblib/gemma/fit.py:80: RuntimeWarning: overflow\n"
                                              "<cell>:3: Pandas4Warning: item\n")
    assert nb.cells[0].outputs[1]["data"]["text/plain"] == "PosixPath('figures/t.csv')"


def test_an_output_too_large_to_commit_is_replaced_by_a_line_saying_so(tmp_path):
    nb = _executed("03_scaling_law", None)
    nb.cells[1].outputs.append(nbformat.v4.new_output("stream", name="stdout", text="x" * (E.MAX_OUTPUT_CHARS + 10)))
    slim = E.slim(nb, tmp_path, {"commit": COMMIT}, tmp_path)
    assert slim.cells[1].outputs[0]["text"] == "hello\n"
    assert "left out of the committed copy" in slim.cells[1].outputs[1]["text"]


def test_the_planted_build_agrees_with_its_figures(planted):
    repo, dest, figures, _ = planted
    assert check_build.build_problems(dest, figures, repo) == []


@pytest.mark.parametrize("plant", ["figure_manifest", "notebook_build", "figure_bytes", "summary", "missing_copy",
                                   "no_output", "dirty"])
def test_the_agreement_check_finds_a_planted_mismatch(planted, plant):
    repo, dest, figures, _ = planted
    copy = dest / "04_constant_last4.ipynb"
    nb = nbformat.read(str(copy), as_version=4)
    if plant == "figure_manifest":  # one figure re-made by another build
        m = json.loads((figures / "04_constant_last4" / "manifest.json").read_text())
        m["fig.png"]["code"]["git"] = "d" * 40
        (figures / "04_constant_last4" / "manifest.json").write_text(json.dumps(m))
        expected = "04_constant_last4/fig.png: made at dddddddddd"
    elif plant == "notebook_build":  # a copy from another build
        nb.metadata[E.BUILD_KEY]["commit"] = "d" * 40
        nbformat.write(nb, str(copy))
        expected = "04_constant_last4: build.json says ok at cccccccccc, the copy names dddddddddd"
    elif plant == "figure_bytes":
        (figures / "04_constant_last4" / "fig.png").write_bytes(_png(5))
        expected = "04_constant_last4: figures/04_constant_last4/fig.png: changed since the build"
    elif plant == "summary":
        (figures / "04_constant_last4" / "t.csv").write_text("a,b\n1,3\n")
        expected = "summary.json: not the build's tables"
    elif plant == "missing_copy":
        copy.unlink()
        expected = "04_constant_last4: no executed copy"
    elif plant == "no_output":
        nb.cells[1].outputs = []
        nbformat.write(nb, str(copy))
        expected = "04_constant_last4: a cell that shows something has no output: print('hello')"
    else:
        b = json.loads((dest / "build.json").read_text())
        (dest / "build.json").write_text(json.dumps({**b, "dirty": True}))
        expected = "build.json: budget 'toy', dirty True"
    problems = check_build.build_problems(dest, figures, repo)
    assert any(expected in p for p in problems), problems


def test_a_chapter_edited_since_the_build_is_named_and_is_no_problem(planted):
    repo, dest, figures, notebooks = planted
    assert E.stale_chapters(dest, notebooks) == []
    with (notebooks / "05_downstream.py").open("a") as f:
        f.write("# one more sentence\n")
    assert E.stale_chapters(dest, notebooks) == ["05_downstream"]
    lines = E.staleness_lines(dest, notebooks)
    assert "cccccccccc" in lines[0] and any("Edited since that build" in x and "05_downstream" in x for x in lines)
    assert check_build.build_problems(dest, figures, repo) == []


def test_no_build_in_the_tree_is_said_and_not_failed_on(tmp_path, capsys):
    assert E.load_build(tmp_path) is None and E.stale_chapters(tmp_path) == []
    assert "No executed toy chapters are in the tree yet" in E.staleness_lines(tmp_path)[0]
    assert check_build.main(["--executed", str(tmp_path)]) == 0
    assert "no toy build in the tree yet" in capsys.readouterr().out


def test_the_committed_toy_build_agrees_with_the_committed_figures():
    """The tree's own build, once the final toy `make book` has committed it."""
    if E.load_build() is None:
        pytest.skip("no toy build in the tree yet (book/toy/build.json): a toy `make book` writes it")
    assert check_build.build_problems() == []


def test_make_html_builds_the_planted_build_executing_nothing_and_names_the_edited_chapter(planted, tmp_path,
                                                                                           monkeypatch):
    """`python -m nblib.book html` on the planted build: every page, every figure put back, the
    run report naming the chapter edited since; papermill is never called."""
    import papermill

    from nblib.book.reader import html_book

    repo, dest, figures, notebooks = planted
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: pytest.fail("make html executed a notebook"))
    with (notebooks / "07_kv_cache.py").open("a") as f:
        f.write("# edited\n")
    out = tmp_path / "site"
    assert html_book(out, dest, figures, repo, notebooks) == 0
    html = out / "_build" / "html"
    report = (html / "run-report.html").read_text()
    assert "Edited since that build" in report and "07_kv_cache" in report
    assert "has changed since" in (html / "kv-cache.html").read_text()
    assert "What the book found" in (html / "index.html").read_text()


def test_the_only_toy_run_keeps_its_record_in_the_tree(tmp_path, monkeypatch):
    """A toy run of the book writes book/toy/ and the filled pages (keep_in_tree); a smoke run,
    or a toy run whose figures go elsewhere, writes only under its output folder."""
    from nblib.book import build

    kept = []
    monkeypatch.setattr(build, "keep_in_tree", lambda out, times, *a: kept.append((out, [t["chapter"] for t in times])))
    monkeypatch.setattr(build, "execute_all", lambda names, *a, **k: [
        {"chapter": n, "status": "ok", "wall_s": 0.0, "error": None} for n in names])
    monkeypatch.setattr(build, "REPO_ROOT", tmp_path)  # the tree's figures folder, here
    monkeypatch.setenv("NBLIB_FIGURES_DIR", str(tmp_path / "elsewhere"))
    assert build._run_and_build("toy", tmp_path / "out", ["01_introduction"], False, None, 1, None, None) == 0
    monkeypatch.setenv("NBLIB_FIGURES_DIR", str(tmp_path / "figures"))
    assert build._run_and_build("smoke", tmp_path / "out", ["01_introduction"], False, None, 1, None, None) == 0
    assert kept == []
    assert build._run_and_build("toy", tmp_path / "out", ["01_introduction"], False, None, 1, None, None) == 0
    assert kept == [(tmp_path / "out", ["01_introduction"])]


def test_the_landing_page_shows_the_counts_the_reproduced_claims_and_the_s5_figure(tmp_path):
    page = (BOOK / "index.md").read_text()
    assert LANDING_START in page and LANDING_END in page
    summary = {"budget": "toy", "figures": "figures", "claims": 3, "controls": 0,
               "counts": {"reproduced": 1, "partly": 0, "not": 2},
               "reproduced": [{"work": "LCCP paper", "where": "title, §4.2", "claim": "S5 keeps improving",
                               "chapter": "04_constant_last4", "link": "notebooks/04_constant_last4.ipynb"}]}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    without = landing_page(page, tmp_path)
    assert "**1 reproduced**" in without and "[title, §4.2](../notebooks/04_constant_last4.ipynb)" in without
    assert "appears here once chapter 4 has run" in without and "![" not in without
    (tmp_path / LANDING_FIGURE).parent.mkdir(parents=True)
    (tmp_path / LANDING_FIGURE).write_bytes(_png(1))
    filled = landing_page(without, tmp_path)
    assert f"](../figures/{LANDING_FIGURE})" in filled and filled.count(LANDING_START) == 1
    assert filled.split(LANDING_START)[0] == page.split(LANDING_START)[0]  # the hand-written part is kept
    assert "/tmp" not in filled and str(tmp_path) not in filled
    with pytest.raises(ValueError, match="no findings block"):
        landing_page("# A page\n", tmp_path)


def test_chapter_4s_figure_of_the_title_claim_is_readable():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from nblib.chapters.figures import readability_problems, tidy
    from nblib.chapters.part1.protocol_figures import last4_trajectory_figure

    traj = pd.DataFrame([{"dl": d, "protocol": p, "longppl": 10 / d ** 0.3 + (p == "Raw"), "shortppl": 3.0}
                         for d in (5.0, 10.0, 20.0, 40.0, 80.0, 150.0) for p in ("Raw", "Last4")])
    fig = last4_trajectory_figure(traj, "S5", " N(S1)")
    tidy(fig)
    assert readability_problems(fig) == []
    assert "N(S1)" in fig.axes[0].get_xlabel() and len(fig.axes[0].lines) == 2
    plt.close(fig)
