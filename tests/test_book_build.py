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
    ended = []
    times = build.execute_all(names, "smoke", tmp_path, jobs=2, worker=_fake_chapter, needs=needs,
                              on_done=lambda r: ended.append((r["chapter"], r["status"], time.time())))
    assert [t["chapter"] for t in times] == names
    # on_done hears of each chapter once, the failed one too, as it ends
    assert sorted(n for n, _, _ in ended) == names and dict((n, s) for n, s, _ in ended)["03_broken"] == "failed"
    when = {n: t for n, _, t in ended}
    assert when["04_d"] < when["05_e"] and when["02_b"] < when["04_d"]
    assert [t["status"] for t in times] == ["ok", "ok", "failed", "ok", "ok"]
    assert "worker process failed: OSError: the worker died" in times[2]["error"]
    rec = {n: json.loads((tmp_path / f"{n}.json").read_text()) for n in ("01_a", "02_b", "04_d", "05_e")}
    assert rec["01_a"]["pid"] != rec["02_b"]["pid"] and os.getpid() not in {r["pid"] for r in rec.values()}
    assert rec["01_a"]["t0"] < rec["02_b"]["t1"] and rec["02_b"]["t0"] < rec["01_a"]["t1"]  # at the same time
    # a chapter starts after the chapters it needs have ended (a failed one too)
    assert rec["04_d"]["t0"] >= rec["02_b"]["t1"] and rec["05_e"]["t0"] >= rec["04_d"]["t1"]
    share = str(max(1, (os.cpu_count() or 1) // 2))  # each kernel trains with its share of the cores
    assert rec["01_a"]["env"] == {"NBLIB_WORKERS": share, "OMP_NUM_THREADS": share}
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


def test_nbval_runs_each_chapter_as_it_ends_below_the_chapters_priority_and_fails_on_a_failing_cell(tmp_path, capsys):
    """The test command's nbval pass (nbval_runs.NbvalRuns): a chapter that ended ok is
    re-executed by nbval-lax in its own pytest process, at nice +19 (a cell
    checks its own niceness) and saving its figures into a folder of its own, seeded from the
    build's; a failing cell fails the pass and its output is printed; a chapter
    whose papermill run failed is not run again."""
    import nbformat

    from nblib.book.nbval_runs import NICE, NbvalRuns

    def notebook(name, *sources):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
        nbformat.write(nb, str(tmp_path / f"{name}.ipynb"))

    notebook("01_ok", "import os", f"assert os.nice(0) >= {NICE}, os.nice(0)",
             # a figure saved by the re-execution lands in nbval's own folder, seeded from the build's
             "from pathlib import Path; d = Path(os.environ['NBLIB_FIGURES_DIR'])\n"
             "assert (d / 'c' / 'f.png').read_text() == 'first pass'; (d / 'c' / 'f.png').write_text('nbval')")
    notebook("02_bad", "x = 1", "raise ValueError('planted failure')")
    notebook("03_failed_before", "raise SystemExit('must not run')")
    build_figures = tmp_path / "build_figures"
    (build_figures / "c").mkdir(parents=True)
    (build_figures / "c" / "f.png").write_text("first pass")
    runs = NbvalRuns(tmp_path, tmp_path, jobs=2, cell_timeout_s=60, figures=build_figures)
    for name, status in (("01_ok", "ok"), ("02_bad", "ok"), ("03_failed_before", "failed")):
        runs.submit({"chapter": name, "status": status})
    assert set(runs.futures) == {"01_ok", "02_bad"}
    assert runs.finish() == 1
    out, err = capsys.readouterr()
    assert "[book] nbval-lax 01_ok: ok, 3 cells passed, 0 failed, in" in out
    assert (build_figures / "c" / "f.png").read_text() == "first pass"  # the build's figure is untouched
    assert (tmp_path / "figures" / "01_ok" / "c" / "f.png").read_text() == "nbval"
    assert "[book] nbval-lax 02_bad: FAILED, 1 cells passed, 1 failed, in" in out
    assert "nbval-lax: FAILED, 4 cells passed and 1 failed in 2 notebooks" in out and "planted failure" in err


def test_nbval_runs_one_at_a_time_while_chapters_run_and_all_jobs_after(tmp_path, monkeypatch):
    """While chapters still run they hold the other cores, so a second nbval run waits for the
    first; `finish` (the chapters have ended) lets `jobs` run at once; `cancel` drops the runs
    still waiting. The scheduling is under test, so each nbval process is a stand-in that marks
    its start and holds its slot until the test releases it (the test above runs real ones)."""
    import threading

    from nblib.book.nbval_runs import NbvalRuns

    release = {}

    def stand_in(self, name):
        (tmp_path / f"{name}.start").touch()
        assert release[name].wait(30), f"{name} was never released"
        return {"chapter": name, "rc": 0, "passed": 1, "failed": 0, "wall_s": 0.0, "end": time.time(), "output": ""}

    def started(name, timeout=30.0):
        end = time.time() + timeout
        while not (tmp_path / f"{name}.start").exists():
            if time.time() > end:
                return False
            time.sleep(0.01)
        return True

    def reset(*names):
        for n in names:
            release[n] = threading.Event()
            (tmp_path / f"{n}.start").unlink(missing_ok=True)

    monkeypatch.setattr(NbvalRuns, "_nbval", stand_in)
    reset("01_a", "02_b")
    runs = NbvalRuns(tmp_path, tmp_path, jobs=2, cell_timeout_s=60)
    runs.submit({"chapter": "01_a", "status": "ok"})
    runs.submit({"chapter": "02_b", "status": "ok"})
    assert started("01_a")
    time.sleep(0.3)
    assert not (tmp_path / "02_b.start").exists()  # it waits while chapters run and 01_a holds the slot
    release["01_a"].set()
    assert started("02_b")  # the slot is free again
    release["02_b"].set()
    assert runs.finish() == 0

    reset("01_a", "03_c")
    both = NbvalRuns(tmp_path, tmp_path, jobs=2, cell_timeout_s=60)
    both.submit({"chapter": "01_a", "status": "ok"})
    both.submit({"chapter": "03_c", "status": "ok"})
    assert started("01_a") and not started("03_c", timeout=0.3)
    finished = threading.Thread(target=both.finish)
    finished.start()
    assert started("03_c")  # the chapters have ended: both run at once while 01_a still holds its slot
    release["01_a"].set(), release["03_c"].set()
    finished.join(30)
    assert not finished.is_alive()

    reset("01_a", "03_c")
    later = NbvalRuns(tmp_path, tmp_path, jobs=2, cell_timeout_s=60)
    later.submit({"chapter": "01_a", "status": "ok"})
    later.submit({"chapter": "03_c", "status": "ok"})
    assert started("01_a")
    cancelled = threading.Thread(target=later.cancel)
    cancelled.start()
    time.sleep(0.2)
    release["01_a"].set()  # cancel waits for the running one
    cancelled.join(30)
    assert not cancelled.is_alive() and not (tmp_path / "03_c.start").exists()
