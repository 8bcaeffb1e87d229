"""Executing chapters: an executed chapter made ready for the book, chapters run several at a
time after the chapters they need, and the jobs setting and per-chapter logs."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest


def test_prepare_for_book_hides_parameters_fills_captions_and_adds_a_banner(tmp_path):
    import nbformat

    from nblib.book.build import prepare_for_book

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 3. A chapter\n\nText."),
                nbformat.v4.new_code_cell('budget = "toy"  # smoke | toy | full\nseed = 0', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell('budget = "smoke"', metadata={"tags": ["injected-parameters"]}),
                nbformat.v4.new_markdown_cell(":::{figure} #cell-a\nLoss at budget {{ budget }}, seed {{seed}}.\n:::")]
    path = tmp_path / "ch.ipynb"
    nbformat.write(nb, str(path))
    prepare_for_book(path, {"budget": "smoke"})
    out = nbformat.read(str(path), as_version=4)
    assert "remove-cell" in out.cells[2].metadata["tags"] and "remove-cell" not in out.cells[1].metadata["tags"]
    assert out.cells[3].source == ":::{figure} #cell-a\nLoss at budget smoke, seed 0.\n:::"
    assert out.cells[0].source.startswith("# 3. A chapter\n*Built at budget **smoke**, seed 0, git `")
    assert out.cells[0].source.endswith("\n\nText.")


def test_a_progress_bar_that_refreshed_during_a_cell_is_one_line_in_the_book(tmp_path):
    """A slow host makes tqdm refresh mid-cell (TQDM_MININTERVAL): the kernel sends each refresh
    as a stream output of its own, and the book would show every one. After prepare_for_book
    the cell's stderr is one output with the bar's last state; stdout and other outputs stay."""
    import nbformat

    from nblib.book.build import prepare_for_book

    bars = ["\rgrid:   0%|  | 0/60 [00:00<?, ?run/s]", "\rgrid:  73%|# | 44/60 [00:30<00:10]",
            "\rgrid: 100%|##| 60/60 [00:45<00:00]"]
    cell = nbformat.v4.new_code_cell("run()")
    cell.outputs = ([nbformat.v4.new_output("stream", name="stderr", text=t) for t in bars]
                    + [nbformat.v4.new_output("stream", name="stderr", text="\nwarning: slow\n"),
                       nbformat.v4.new_output("stream", name="stdout", text="a\rb\n"),
                       nbformat.v4.new_output("execute_result", data={"text/plain": "1"}, execution_count=1)])
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 3. A chapter"), cell]
    path = tmp_path / "ch.ipynb"
    nbformat.write(nb, str(path))
    prepare_for_book(path, {"budget": "smoke"})
    outs = nbformat.read(str(path), as_version=4).cells[1].outputs
    assert [(o.output_type, o.get("name")) for o in outs] == [("stream", "stderr"), ("stream", "stdout"),
                                                              ("execute_result", None)]
    assert outs[0].text == "grid: 100%|##| 60/60 [00:45<00:00]\nwarning: slow\n"
    assert outs[1].text == "b\n"


def test_the_runner_writes_the_summary_once_after_the_chapters(tmp_path, monkeypatch):
    """After the chapters, beside writing their times, the runner writes the scorecard's summary
    to the build's figures folder (nblib.book.summary), which chapter 1 then reads."""
    from nblib.book import build, summary

    figures = tmp_path / "figures"
    monkeypatch.setenv("NBLIB_FIGURES_DIR", str(figures))
    order = []

    def chapters_ran(names, *a, **k):
        order.append("chapters")
        assert not (figures / "summary.json").exists()
        return [{"chapter": n, "status": "ok", "wall_s": 0.0, "error": None} for n in names]

    monkeypatch.setattr(build, "execute_all", chapters_ran)
    assert build._run_and_build("smoke", tmp_path / "out", ["01_introduction"], False, None, 1, None, None) == 0
    written = json.loads((figures / "summary.json").read_text())
    assert order == ["chapters"] and written["budget"] == "smoke"
    assert written["counts"]["not measured"] == written["claims"]  # an empty figures folder
    assert summary.chapter_summary(figures, "smoke") == (written, "written")


def test_chapter_times_record_the_code_version_the_chapters_started_from(tmp_path, monkeypatch):
    """chapter_times.json (and the run report) name the git commit and dirty flag read before the
    first chapter runs: a commit made while the chapters run does not relabel their times."""
    from nblib.book import build
    from nblib.book.run_report import run_report

    monkeypatch.setenv("NBLIB_FIGURES_DIR", str(tmp_path / "figures"))
    tree = {"git": "a" * 40, "dirty": False, "nblib": "0.1.0"}
    monkeypatch.setattr(build, "code_version", lambda: dict(tree))

    def chapters_ran(names, *a, **k):  # a commit lands and a file changes while the chapters run
        tree.update(git="b" * 40, dirty=True)
        return [{"chapter": n, "status": "ok", "wall_s": 0.0, "error": None} for n in names]

    monkeypatch.setattr(build, "execute_all", chapters_ran)
    assert build._run_and_build("smoke", tmp_path / "out", ["01_introduction"], False, None, 1, None, None) == 0
    times = json.loads((tmp_path / "out" / "chapter_times.json").read_text())
    assert times["code"] == {"git": "a" * 40, "dirty": False, "nblib": "0.1.0"}
    assert "git `aaaaaaaaaa`)" in run_report(times["chapters"], "smoke", code=times["code"])


# --------------------------------------------------------------------------- chapters at once

def _fake_chapter(name, budget, out_dir, params, env):
    """Stands in for one chapter in run_book's worker pool: records when it ran, where, and
    with which kernel environment."""
    t0 = time.time()
    if name == "03_broken":
        raise OSError("the worker died")
    time.sleep(1.0)
    (Path(out_dir) / f"{name}.json").write_text(json.dumps({"pid": os.getpid(), "t0": t0, "t1": time.time(),
                                                            "env": env}))
    return {"chapter": name, "status": "ok", "wall_s": round(time.time() - t0, 1), "error": None}


def test_chapters_run_two_at_a_time_after_those_they_need_and_a_dead_worker_is_a_failed_chapter(tmp_path):
    from nblib.book import build

    names = ["01_a", "02_b", "03_broken", "04_d", "05_e"]
    needs = {"04_d": ("02_b", "03_broken"), "05_e": ("04_d", "09_not_run")}
    times = build.execute_all(names, "smoke", tmp_path, jobs=2, worker=_fake_chapter, needs=needs)
    assert [t["chapter"] for t in times] == names
    assert [t["status"] for t in times] == ["ok", "ok", "failed", "ok", "ok"]
    assert "worker process failed: OSError: the worker died" in times[2]["error"]
    rec = {n: json.loads((tmp_path / f"{n}.json").read_text()) for n in ("01_a", "02_b", "04_d", "05_e")}
    assert rec["01_a"]["pid"] != rec["02_b"]["pid"] and os.getpid() not in {r["pid"] for r in rec.values()}
    assert rec["01_a"]["t0"] < rec["02_b"]["t1"] and rec["02_b"]["t0"] < rec["01_a"]["t1"]  # at the same time
    # a chapter starts after the chapters it needs have ended (a failed one too)
    assert rec["04_d"]["t0"] >= rec["02_b"]["t1"] and rec["05_e"]["t0"] >= rec["04_d"]["t1"]
    cores = os.cpu_count() or 1  # two chapters starting together share the cores; one starting alone gets them all
    share = str(max(1, cores // 2))
    assert rec["01_a"]["env"] == rec["02_b"]["env"] == {"NBLIB_WORKERS": share, "OMP_NUM_THREADS": share}
    assert rec["05_e"]["env"] == {"NBLIB_WORKERS": str(cores), "OMP_NUM_THREADS": str(cores)}
    with pytest.raises(RuntimeError, match="wait for each other"):
        build.execute_all(["01_a", "02_b"], "smoke", tmp_path, jobs=2, worker=_fake_chapter,
                          needs={"01_a": ("02_b",), "02_b": ("01_a",)})


def test_chapters_wait_for_the_registry_needs_by_default(tmp_path):
    """With no `needs` given, the runner waits as the chapter registry says: chapter 7 reads
    chapter 6's Models A and B, so it starts once chapter 6 has ended; the introduction needs
    nothing and runs beside chapter 6."""
    from nblib.book import build

    names = ["01_introduction", "06_models_ab", "07_kv_cache"]
    times = build.execute_all(names, "smoke", tmp_path, jobs=2, worker=_fake_chapter)
    assert [t["status"] for t in times] == ["ok"] * 3
    rec = {n: json.loads((tmp_path / f"{n}.json").read_text()) for n in names}
    assert rec["07_kv_cache"]["t0"] >= rec["06_models_ab"]["t1"]
    intro, models = rec["01_introduction"], rec["06_models_ab"]
    assert intro["t0"] < models["t1"] and models["t0"] < intro["t1"]  # at the same time


def test_book_jobs_and_prefixed_logs(tmp_path, monkeypatch):
    import logging

    from nblib.book import build

    monkeypatch.setenv("NBLIB_BOOK_JOBS", "3")
    assert build.book_jobs() == 3 and build.book_jobs(1) == 1
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("NBLIB_BOOK_JOBS", bad)
        with pytest.raises(SystemExit, match=f"jobs='{bad}' is not allowed.*integers >= 1"):
            build.book_jobs()
    monkeypatch.delenv("NBLIB_BOOK_JOBS")
    assert build.book_jobs() == (os.cpu_count() or 1)
    try:
        build._log_cell_outputs(tmp_path, "05_downstream")
        logging.getLogger("papermill").info("line one\nline two")
        for h in logging.getLogger("papermill").handlers:
            h.flush()
        assert (tmp_path / "logs" / "05_downstream.log").read_text() == "line one\nline two\n"
        fmt = build._PrefixLines("[05_downstream] ")
        rec = logging.LogRecord("papermill", logging.INFO, "", 0, "a\nb", None, None)
        assert fmt.format(rec) == "[05_downstream] a\n[05_downstream] b"
    finally:
        for h in list(logging.getLogger("papermill").handlers):
            logging.getLogger("papermill").removeHandler(h)
            h.close()


def test_nbval_keeps_the_outputs_papermill_would_and_a_failing_cell_its_traceback(tmp_path):
    """The test command executes each chapter once, under nbval-lax, and builds the book from
    the notebook nbval_runs records. A second executor is the truth: papermill, which `make
    book` uses, executes the same notebook, and the two agree on every cell's outputs (a
    print, a displayed value with its execution count, a progress line written twice, a
    kernel variable). A failing cell fails the run and keeps its traceback in the notebook."""
    import nbformat
    import papermill as pm

    from nblib.book.nbval_runs import nbval_execute

    def notebook(name, *sources):
        nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                               "language": "python"}})
        nb.cells = [nbformat.v4.new_markdown_cell("# A title")] + [nbformat.v4.new_code_cell(s) for s in sources]
        nbformat.write(nb, str(tmp_path / f"{name}.ipynb"))
        return tmp_path / f"{name}.ipynb"

    ok = notebook("01_ok", "import os, sys\nprint('hello', os.environ['NBLIB_PLANTED'])",
                  "sys.stderr.write('bar 1\\n'); sys.stderr.flush(); sys.stderr.write('bar 2\\n')", "x = 6 * 7\nx",
                  "x + 1")
    r = nbval_execute(ok, tmp_path / "out" / "01_ok.ipynb", tmp_path, 60, env={"NBLIB_PLANTED": "value"},
                      log=tmp_path / "logs" / "01_ok.log")
    assert (r["rc"], r["passed"], r["failed"]) == (0, 4, 0), r["output"]
    assert "4 passed" in (tmp_path / "logs" / "01_ok.log").read_text()
    got = nbformat.read(str(tmp_path / "out" / "01_ok.ipynb"), as_version=4)
    nbformat.validate(got)
    os.environ["NBLIB_PLANTED"] = "value"
    try:
        ref = pm.execute_notebook(str(ok), str(tmp_path / "papermill.ipynb"), kernel_name="python3",
                                  progress_bar=False)
    finally:
        del os.environ["NBLIB_PLANTED"]

    def shown(nb):
        text = []
        for c in nb.cells[1:]:
            outs = [{k: o.get(k) for k in ("output_type", "name", "text", "data", "execution_count")}
                    for o in c.outputs]
            text.append((c.execution_count, [{**o, "text": "".join(o["text"]) if o["text"] else None} for o in outs]))
        return text

    from nbconvert.preprocessors import CoalesceStreamsPreprocessor  # as the book shows both (prepare_for_book)

    assert shown(got) == shown(CoalesceStreamsPreprocessor().preprocess(ref, {})[0])
    assert shown(got)[2] == (3, [{"output_type": "execute_result", "name": None, "text": None,
                                  "data": {"text/plain": "42"}, "execution_count": 3}])

    bad = notebook("02_bad", "y = 1", "raise ValueError('planted failure')", "print('after')")
    r = nbval_execute(bad, tmp_path / "out" / "02_bad.ipynb", tmp_path, 60)
    assert r["rc"] != 0 and (r["passed"], r["failed"]) == (2, 1) and "planted failure" in r["output"]
    got = nbformat.read(str(tmp_path / "out" / "02_bad.ipynb"), as_version=4)
    err = got.cells[2].outputs[0]
    assert err.output_type == "error" and err.ename == "ValueError" and err.evalue == "planted failure"
