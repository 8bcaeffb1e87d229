"""The book runner: execute every chapter with papermill, time it, build the HTML book, check it.

    python -m nblib.book run  --budget toy     # the main job (`make book`)
    python -m nblib.book run  --budget-file examples/toy-own-data.toml --set n_boot=50   # `make book BUDGET_FILE=...`
    python -m nblib.book test                  # smoke chapters under nbval-lax + book check (`make test`)
    python -m nblib.book run --jobs 2          # two chapters at a time (`test` runs one per core)
    python -m nblib.book sync                  # regenerate notebooks/*.ipynb from the .py sources
    python -m nblib.book toc                   # write myst.yml's table of contents from the registry

Chapters are the jupytext percent files `notebooks/NN_name.py`, paired with `.ipynb`, listed in the
chapter registry (nblib.book.toc: order, title, part, whose runs each reads); `run` and `test` stop
before any chapter runs when the two disagree. Executed notebooks go to `<out>/notebooks/`, the site
to `<out>/_build/html/`, each chapter's wall time to `<out>/chapter_times.json` and the "Run report"
page. After the chapters, with the scorecard page, the runner writes the scorecard's summary
(nblib.book.summary: counts by verdict, the claims rated reproduced) to `<figures>/summary.json`,
which chapter 1 shows. With a budget file (nblib.budgets.budget_file) every chapter gets it as its
`budget_file` parameter (with `--set`s, both written as one, `<out>/budget.toml`), its figures go to
`<out>/figures/`, and the run report names the file and its sha256.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import json
import logging
import multiprocessing as mp
import os
import re
import shutil
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

import jupytext
import nbformat
import pandas as pd
import papermill as pm

from nblib.book.executed import publish
from nblib.book.html import BOOK, build_html, preflight_html
from nblib.book.nbval_runs import nbval_execute, nbval_summary
from nblib.book.plan import budget_source
from nblib.book.run_report import run_report
from nblib.book.summary import LANDING_FIGURE, landing_page, repo_relative, site_page, write_summary
from nblib.book.toc import CHAPTERS, chapter_names, chapter_needs, check_registry, sync_toc, with_toc
from nblib.budgets import get_budget
from nblib.budgets.budget_file import BudgetFile
from nblib.chapters.claims.claim import Figures
from nblib.chapters.claims.scorecard import scorecard_markdown
from nblib.chapters.figures import figure_problems, figures_root, table_problems
from nblib.cli import run_cli
from nblib.store.atomic import atomic_write_json, atomic_write_text
from nblib.store.provenance import REPO_ROOT, code_version

NOTEBOOKS = REPO_ROOT / "notebooks"
NOT_RUN = "no chapter was run: the notebooks and the chapter registry (nblib/book/toc.py) disagree"


def chapters() -> list[str]:
    """Chapter names in book order (`01_introduction`, ...), from the chapter registry."""
    return chapter_names(CHAPTERS)


def registry_problems(stop: str = "") -> list[str]:
    """check_registry over NOTEBOOKS, each problem printed, then `stop` when there is one: the
    commands stop before any chapter runs when the notebooks and the registry disagree."""
    problems = check_registry(NOTEBOOKS, CHAPTERS)
    for p in problems:
        print(f"[book] chapter registry: {p}", file=sys.stderr)
    if problems and stop:
        print(f"[book] {stop}", file=sys.stderr)
    return problems


def sync(check: bool = False) -> list[str]:
    """Write notebooks/*.ipynb from the .py sources (outputs stripped). Returns stale names.

    check=True only reports which .ipynb differ from their .py source.
    """
    stale = []
    for name in chapters():
        nb = jupytext.read(NOTEBOOKS / f"{name}.py")
        text = nbformat.writes(nb)
        target = NOTEBOOKS / f"{name}.ipynb"
        if not target.exists() or _cells(nbformat.reads(target.read_text(), 4)) != _cells(nb):
            stale.append(name)
            if not check:
                atomic_write_text(target, text)
    return stale


def _cells(nb) -> list:
    return [(c.cell_type, c.source.strip(), sorted(c.metadata.get("tags", []))) for c in nb.cells]


# Progress bars in executed chapters refresh at most this often (seconds). tqdm reads its
# TQDM_* variables when it is imported, so they are set for the kernel, not in the chapter.
KERNEL_ENV = {"TQDM_MININTERVAL": "30", "TQDM_MAXINTERVAL": "120"}


# A smoke cell takes seconds; one that hangs fails the test command after this, naming the cell
# (toy and full cells train for many minutes and have no limit).
SMOKE_CELL_TIMEOUT_S = 600


def kernel_environment(env: dict | None = None) -> dict:
    """The variables a chapter's kernel gets: KERNEL_ENV and `env`, where a value already set in
    the environment wins."""
    return {k: os.environ.get(k) or v for k, v in {**KERNEL_ENV, **(env or {})}.items()}


def execute(name: str, budget: str, out_dir: Path, params: dict | None = None, log_output: bool = True,
            env: dict | None = None) -> dict:
    """Execute one chapter with papermill at `budget`; return {chapter, status, wall_s}.
    `env`: more variables for the chapter's kernel (a value already set in the environment wins)."""
    out_nb = out_dir / "notebooks" / f"{name}.ipynb"
    out_nb.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    status, error = "ok", None
    print(f"[book] {name}: running at budget={budget} ...", flush=True)
    parameters = {"budget": budget, **(params or {})}
    kernel_env = kernel_environment(env)
    saved = {k: os.environ.get(k) for k in kernel_env}
    os.environ.update(kernel_env)  # the kernel inherits them
    try:
        pm.execute_notebook(str(NOTEBOOKS / f"{name}.ipynb"), str(out_nb), parameters=parameters,
                            kernel_name="python3", cwd=str(REPO_ROOT), log_output=log_output, progress_bar=False,
                            execution_timeout=SMOKE_CELL_TIMEOUT_S if budget == "smoke" else None)
    except Exception as e:  # papermill raises PapermillExecutionError with the cell's traceback
        status, error = "failed", f"{type(e).__name__}: {str(e)[:2000]}"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if out_nb.exists():
        prepare_for_book(out_nb, parameters)
    wall = time.time() - t0
    print(f"[book] {name}: {status} in {wall:.1f} s", flush=True)
    return {"chapter": name, "status": status, "wall_s": round(wall, 1), "error": error}


def prepare_for_book(path: Path, parameters: dict) -> None:
    """Make an executed chapter read well in the book: papermill's injected-parameters cell
    is removed (tag remove-cell) and its values shown as a one-line banner under the title,
    and `{{ name }}` in Markdown cells (figure captions: "at budget {{ budget }}") becomes
    the parameter's value (the .py/.ipynb sources keep the placeholders). Stream outputs are shown
    as Jupyter shows them (nbconvert's CoalesceStreamsPreprocessor): a bar that refreshed is one line."""
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor  # only where chapters are built
    nb = nbformat.read(str(path), as_version=4)
    nb, _ = CoalesceStreamsPreprocessor().preprocess(nb, {})
    shown = {**{c: v for c, v in _defaults(nb).items()}, **parameters}
    code = code_version()
    banner = (f"\n\n*Built at budget **{shown.get('budget')}**{_file_words(shown.get('budget_file'))}, seed "
              f"{shown.get('seed', 0)}, git `{code['git'][:7]}`{' + local changes' if code['dirty'] else ''}, "
              f"{time.strftime('%Y-%m-%d')}.*")
    titled = False
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
        if cell.cell_type != "markdown":
            continue
        for k, v in shown.items():
            cell.source = re.sub(r"\{\{\s*" + re.escape(k) + r"\s*\}\}", str(v), cell.source)
        lines = cell.source.split("\n")
        title = next((i for i, line in enumerate(lines) if line.startswith("# ")), None)
        if not titled and title is not None:  # the banner goes right under the chapter title
            cell.source = "\n".join(lines[:title + 1] + [banner.strip(), ""] + lines[title + 1:])
            titled = True
    nbformat.write(nb, str(path))


def _file_words(path) -> str:
    """", budget file `my.toml` (sha256 0123456789ab)" for a chapter's banner; "" without one."""
    if not path or not Path(path).is_file():
        return ""
    return f" from budget file `{Path(path).name}` (sha256 {hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]})"


def _defaults(nb) -> dict:
    """The chapter's default parameters: simple `name = literal` lines of its parameters cell."""
    out = {}
    for cell in nb.cells:
        if "parameters" in cell.metadata.get("tags", []):
            for line in cell.source.splitlines():
                m = re.match(r"^(\w+)\s*=\s*([^#]+?)\s*(#.*)?$", line)
                if m:
                    with contextlib.suppress(ValueError, SyntaxError):
                        out[m.group(1)] = ast.literal_eval(m.group(2))
    return out


def stage_book(out_dir: Path, report_md: str, scorecard_md: str | None = None, figures: Path | None = None) -> None:
    """Assemble the buildable book in out_dir: myst.yml (its table of contents written from the
    chapter registry), book/ pages (the run report, and the scorecard read from the build's
    figures), template, executed notebooks. `figures`: the build's figures folder, whose
    summary and chapter 4's figure the landing page shows (summary.landing_page)."""
    atomic_write_text(out_dir / "myst.yml", with_toc((REPO_ROOT / "myst.yml").read_text(), CHAPTERS))
    dst = out_dir / "book"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(BOOK, dst, ignore=shutil.ignore_patterns("sample", "toy", "__pycache__", "_build"))
    atomic_write_text(dst / "run_report.md", report_md)
    if scorecard_md is not None:
        atomic_write_text(dst / "scorecard.md", scorecard_md)
    if figures is not None:
        atomic_write_text(dst / "index.md", landing_page((BOOK / "index.md").read_text(), figures))
        shown, staged = Path(figures) / LANDING_FIGURE, out_dir / "figures" / LANDING_FIGURE
        if shown.is_file() and shown.resolve() != staged.resolve():  # the page links to ../figures/
            staged.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shown, staged)


def check_book(html: Path, names: list[str], figures_dir: Path, shown: list[str] | None = None) -> list[str]:
    """Problems with the built site: a missing chapter page or a missing figure of an executed
    chapter (`shown`, default `names`: the chapters whose figures the site must show)."""
    sys.path.insert(0, str(BOOK))  # book/check_site.py is a script beside the book, not part of nblib
    try:
        from check_site import check_site
    finally:
        sys.path.pop(0)
    figs = sorted(str(p) for n in (names if shown is None else shown) for p in Path(figures_dir, n).glob("*.png"))
    # a partial run (--chapters) links to chapters it did not execute: those are not problems
    skipped = tuple(x for c in chapters() if c not in names for x in (f"{c}.ipynb", site_page(f"{c}.ipynb")))
    return ([p for p in check_site(html, names, figs)
             if not ("missing local file" in p and skipped and p.endswith(skipped))]
            + check_tables(figures_dir, names) + check_figures(names))


def check_figures(names: list[str], notebooks: Path | None = None) -> list[str]:
    """Every figure a chapter shows has a `#| label:`, a `:::{figure}` block with `:label:` and
    a caption (figures.figure_problems), read from the chapters' .py sources in `notebooks`."""
    folder = notebooks or NOTEBOOKS
    out = []
    for n in names:
        src = folder / f"{n}.py"
        if not src.is_file():
            out.append(f"{n}: no chapter source {src} to check its figures")
            continue
        out += [f"{n}: {p}" for p in figure_problems(jupytext.read(src).cells)]
    return out


def check_tables(figures_dir: Path, names: list[str]) -> list[str]:
    """Every table the executed chapters saved labels its rows (figures.table_problems)."""
    out = []
    for n in names:
        for csv in sorted((figures_dir / n).glob("*.csv")) if figures_dir.exists() else []:
            out += [f"{n}/{csv.name}: {p}" for p in table_problems(pd.read_csv(csv))]
    return out


def browser_check(html: Path, screenshots: Path) -> list[str]:
    """book/browser_check.py in headless Chromium: what a reader meets in the built site
    (console errors, search, alt text, phone width, progress spam), with screenshots. Skipped
    with a message when Chromium or Playwright is missing."""
    sys.path.insert(0, str(BOOK))  # book/browser_check.py is a script beside the book, not part of nblib
    try:
        import browser_check as bc
    finally:
        sys.path.pop(0)
    chromium = bc.find_chromium()
    if chromium is None:
        print("[book] browser check skipped: no chromium on PATH (Debian: apt-get install chromium)", flush=True)
        return []
    try:
        import playwright  # noqa: F401  (optional: the browser driver, in requirements.txt)
    except ImportError:
        print("[book] browser check skipped: the playwright package is not installed (make setup)", flush=True)
        return []
    t0 = time.time()
    problems = bc.check_book_in_browser(html, screenshots, chromium)
    print(f"[book] browser check ({chromium}): {len(problems)} problem(s) in {time.time() - t0:.1f} s; "
          f"screenshots in {screenshots}", flush=True)
    return problems


class _PrefixLines(logging.Formatter):
    """Every line of a record prefixed with `[chapter] `, so the outputs of chapters that
    run at the same time stay readable where they interleave."""

    def __init__(self, prefix: str):
        super().__init__("%(message)s")
        self.prefix = prefix

    def format(self, record) -> str:
        return "\n".join(self.prefix + line for line in super().format(record).split("\n"))


def _log_cell_outputs(out_dir: Path, chapter: str | None = None) -> None:
    """Stream every executed cell's output to stdout and to a log file (papermill logs them
    at INFO level), so long chapters show progress and leave a readable log: <out>/book.log
    when chapters run one at a time, else <out>/logs/<chapter>.log per chapter, with each
    line on stdout prefixed by `[chapter] `."""
    log = logging.getLogger("papermill")
    log.setLevel(logging.INFO)
    for h in list(log.handlers):
        log.removeHandler(h)
        h.close()
    if chapter is None:
        handlers = [(logging.StreamHandler(sys.stdout), logging.Formatter("%(message)s")),
                    (logging.FileHandler(out_dir / "book.log"), logging.Formatter("%(message)s"))]
    else:
        (out_dir / "logs").mkdir(parents=True, exist_ok=True)
        handlers = [(logging.StreamHandler(sys.stdout), _PrefixLines(f"[{chapter}] ")),
                    (logging.FileHandler(out_dir / "logs" / f"{chapter}.log", mode="w"), logging.Formatter("%(message)s"))]
    for h, fmt in handlers:
        h.setFormatter(fmt)
        log.addHandler(h)
    log.propagate = False


def book_jobs(jobs: int | None = None) -> int:
    """How many chapters run at once: `jobs`, else $NBLIB_BOOK_JOBS, else one per CPU core."""
    raw = jobs if jobs is not None else os.environ.get("NBLIB_BOOK_JOBS") or (os.cpu_count() or 1)
    try:
        n = int(raw)
    except (TypeError, ValueError):
        n = 0
    if n < 1 or (isinstance(raw, float) and raw != n):
        raise SystemExit(f"jobs={raw!r} is not allowed (--jobs or $NBLIB_BOOK_JOBS); allowed values: integers >= 1")
    return n


def _execute_in_worker(name: str, budget: str, out_dir: Path, params: dict | None, env: dict) -> dict:
    """`execute` in a worker process of run_book's pool, logging to the chapter's own file."""
    _log_cell_outputs(out_dir, name)
    return execute(name, budget, out_dir, params, env=env)


def execute_all(names: list[str], budget: str, out_dir: Path, params: dict | None = None, jobs: int = 1,
                worker=None, needs: dict | None = None) -> list[dict]:
    """Execute chapters, `jobs` at a time; return their records in the order of `names`.

    A chapter starts once the chapters it reads runs from (`needs`, default the chapter
    registry's, those among `names`) have ended, whether or not they succeeded; otherwise
    chapters start in book order. So chapter 5 never reads chapter 4's S5 trajectory while
    chapter 4 is training it (the run store's lock would make it wait, but the lock's
    "waiting for it" lines would land on its page, among its progress bars), and Part 2 runs
    beside Part 1. Were two chapters to need the same run at
    once anyway, the run store's per-run lock makes the second wait for the first to finish
    it and then read it, never train it twice (`nblib.training.runner.get_or_run`); every
    shared cache is written atomically. Each chapter's kernel gets, for its training workers
    and threads ($NBLIB_WORKERS, $OMP_NUM_THREADS), the cores that no running chapter holds,
    shared equally among the chapters starting with it: two chapters on two cores train one
    run each instead of four at once, and a chapter that starts alone (chapter 5, once Part 2
    has ended) gets every core. `worker`: what runs
    one chapter (default `_execute_in_worker` in a pool process, `execute` when `jobs` is 1;
    the test command passes `_nbval_in_worker`, tests a stand-in).
    """
    jobs = max(1, min(jobs, len(names)))
    if jobs == 1:
        return [worker(n, budget, out_dir, params, {}) if worker else execute(n, budget, out_dir, params)
                for n in names]
    needs = chapter_needs(CHAPTERS) if needs is None else needs
    waits = {n: set(needs.get(n, ())) & set(names) for n in names}
    cores = os.cpu_count() or 1
    where = "" if worker else ", prefixed with [chapter], here"  # the test command keeps them in the notebook
    print(f"[book] {len(names)} chapters, up to {jobs} at a time; each chapter's log goes to "
          f"{out_dir / 'logs'}/<chapter>.log{where}", flush=True)
    done: dict = {}
    running: dict = {}  # future -> (chapter, cores it was given)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as pool:
        while len(done) < len(names):
            started = {n for n, _ in running.values()}
            ready = [n for n in names if n not in done and n not in started and waits[n] <= set(done)]
            starting = ready[:jobs - len(running)]
            free = cores - sum(share for _, share in running.values())
            for n in starting:
                share = max(1, free // len(starting))
                env = {"NBLIB_WORKERS": str(share), "OMP_NUM_THREADS": str(share)}
                running[pool.submit(worker or _execute_in_worker, n, budget, out_dir, params, env)] = (n, share)
            if not running:
                raise RuntimeError(f"chapters that wait for each other: {sorted(set(names) - set(done))}")
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in finished:
                n, _ = running.pop(fut)
                try:
                    done[n] = fut.result()
                except Exception as e:  # the worker itself died (execute catches a chapter's own errors)
                    done[n] = {"chapter": n, "status": "failed", "wall_s": 0.0,
                               "error": f"worker process failed: {type(e).__name__}: {e}"}
    return [done[n] for n in names]


def run_book(budget: str, out_dir: Path, names: list[str] | None = None, build: bool = True,
             params: dict | None = None, jobs: int = 1, source: BudgetFile | None = None, worker=None) -> int:
    """Execute chapters (`jobs` at a time, `execute_all`), write the timings, build and check
    the HTML book. Returns an exit code. `source`: a budget file (`budget` is its base); the
    chapters read it (`chapter_budget_file`) and write their figures under `out_dir`.
    `worker`: what executes one chapter (`execute_all`; default papermill, `execute`)."""
    get_budget(budget)
    if registry_problems(stop=NOT_RUN):
        return 1
    names = names or chapters()
    unknown = set(names) - set(chapters())
    if unknown:
        raise SystemExit(f"unknown chapters {sorted(unknown)}; allowed: {', '.join(chapters())}")
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = max(1, min(jobs, len(names)))
    if jobs == 1:  # else each chapter's worker process logs to its own file (execute_all)
        _log_cell_outputs(out_dir)
    if build:  # the book check would fail at the end anyway: say so before any chapter runs
        unlabelled = check_figures(names)
        if unlabelled:
            for p in unlabelled:
                print(f"[book] figure problem: {p}", file=sys.stderr)
            print("[book] no chapter was run: every figure needs a label and a caption", file=sys.stderr)
            return 1
    if build:
        try:
            preflight_html()
        except RuntimeError as e:
            print(f"[book] the HTML build cannot work here, so no chapter was run: {e}", file=sys.stderr)
            return 2
    stale = sync()
    if stale:
        print(f"[book] regenerated {len(stale)} .ipynb from their .py sources: {', '.join(stale)}")
    chapter_file = source.for_chapters(out_dir) if source else None
    if chapter_file:
        params = {**(params or {}), "budget_file": str(chapter_file.path)}
    saved_figures = os.environ.get("NBLIB_FIGURES_DIR")
    if chapter_file and not saved_figures:  # never over the committed toy figures
        os.environ["NBLIB_FIGURES_DIR"] = str(out_dir / "figures")
    try:
        return _run_and_build(budget, out_dir, names, build, params, jobs, source, chapter_file, worker)
    finally:
        if chapter_file and not saved_figures:
            os.environ.pop("NBLIB_FIGURES_DIR", None)


def _run_and_build(budget: str, out_dir: Path, names: list[str], build: bool, params: dict | None, jobs: int,
                   source: BudgetFile | None, chapter_file: BudgetFile | None, worker=None) -> int:
    """run_book's work once everything is checked: the chapters, their timings, the book. The
    code version the timings and the report name is the one the chapters started from (a commit
    made while they run does not relabel them)."""
    code = code_version()
    t0 = time.time()
    times = execute_all(names, budget, out_dir, params, jobs=jobs, worker=worker)
    elapsed = round(time.time() - t0, 1)
    atomic_write_json(out_dir / "chapter_times.json", {
        "budget": budget, "chapters": times, "total_s": elapsed, "jobs": jobs, "code": code,
        **({"budget_file": chapter_file.record(), "budget_file_given": source.record()} if source else {})})
    print("[book] chapter wall times:")
    for t in times:
        print(f"  {t['chapter']:<22} {t['status']:<7} {t['wall_s']:>8.1f} s")
    print(f"  {'total':<30} {sum(t['wall_s'] for t in times):>8.1f} s")
    if jobs > 1:
        print(f"  {f'elapsed, {jobs} chapters at a time':<30} {elapsed:>8.1f} s")
    failed = [t for t in times if t["status"] != "ok"]
    for t in failed:
        print(f"[book] FAILED {t['chapter']}: {t['error']}", file=sys.stderr)
    path = write_summary(figures_root(budget), budget)  # once, after the chapters; chapter 1 shows it
    print(f"[book] summary of the scorecard: {repo_relative(path)}")
    report = run_report(times, budget, elapsed, jobs, source, chapter_file, code=code)
    card = scorecard_markdown(Figures(figures_root(budget), budget))
    if budget == "toy" and source is None and figures_root(budget) == REPO_ROOT / "figures":
        keep_in_tree(out_dir, times, code, report, card)
    if build:
        stage_book(out_dir, report, card, figures_root(budget))
        html = build_html(out_dir)
        problems = check_book(html, names, figures_root(budget))
        problems += browser_check(html, out_dir / "screenshots")
        for p in problems:
            print(f"[book] site problem: {p}", file=sys.stderr)
        if problems:
            return 1
    return 1 if failed else 0


def keep_in_tree(out_dir: Path, times: list[dict], code: dict, report_md: str, scorecard_md: str) -> None:
    """A toy run keeps its record in the tree, so a reader opens the book without training it
    (`make html`): the executed chapters and build.json in book/toy/ (nblib.book.executed), the
    scorecard and run report pages, and the landing page's findings. Smoke, full and budget-file
    runs write only under `_build/`."""
    manifest = publish(out_dir / "notebooks", times, code, REPO_ROOT / "figures")
    atomic_write_text(BOOK / "scorecard.md", scorecard_md)
    atomic_write_text(BOOK / "run_report.md", report_md)
    atomic_write_text(BOOK / "index.md", landing_page((BOOK / "index.md").read_text(), REPO_ROOT / "figures"))
    print(f"[book] kept in the tree: {len(manifest['chapters'])} executed chapters in book/toy/ "
          f"({manifest['size_bytes'] / 1e6:.2f} MB), book/scorecard.md, book/run_report.md, book/index.md", flush=True)


def _nbval_in_worker(name: str, budget: str, out_dir: Path, params: dict | None, env: dict) -> dict:
    """One chapter of the test command: nbval-lax executes its papermill-prepared copy
    (<out>/nbval/), and its recorded outputs become the executed chapter the book is built from
    (<out>/notebooks/, `nbval_runs`); pytest's output goes to <out>/logs/<chapter>.log."""
    print(f"[book] {name}: running under nbval-lax at budget={budget} ...", flush=True)
    executed = out_dir / "notebooks" / f"{name}.ipynb"
    r = nbval_execute(out_dir / "nbval" / f"{name}.ipynb", executed, out_dir, SMOKE_CELL_TIMEOUT_S,
                      kernel_environment(env), log=out_dir / "logs" / f"{name}.log")
    if executed.exists():
        prepare_for_book(executed, {"budget": budget, **(params or {})})
    ok = r["rc"] == 0 and executed.exists()
    print(f"[book] {name}: {'ok' if ok else 'failed'} in {r['wall_s']:.1f} s (nbval-lax: {r['passed']} cells passed, "
          f"{r['failed']} failed)", flush=True)
    return {"chapter": name, "status": "ok" if ok else "failed", "wall_s": round(r["wall_s"], 1),
            "error": None if ok else r["output"][-4000:], "passed": r["passed"], "failed": r["failed"]}


def test_book(out_dir: Path, jobs: int | None = None) -> int:
    """The test command's notebook part: every chapter at smoke, executed once under nbval-lax
    (`jobs` at a time, default one per core, in the registry's order of needs), then the book
    built from those executions and checked (`nbval_runs`)."""
    jobs = book_jobs(jobs)
    if registry_problems(stop=NOT_RUN):
        return 1
    if out_dir.exists():
        shutil.rmtree(out_dir)  # always fresh: never pass on runs cached by older code
    out_dir.mkdir(parents=True)
    os.environ["NBLIB_RUN_ROOT"] = str(out_dir / "runs")
    os.environ["NBLIB_FIGURES_DIR"] = str(out_dir / "figures")
    stale = sync(check=True)
    if stale:
        print(f"[book] notebooks/*.ipynb out of sync with their .py: {stale}; run `python -m nblib.book sync`",
              file=sys.stderr)
        return 1
    (out_dir / "nbval").mkdir()
    for n in chapters():  # papermill injects the parameters; nbval executes
        pm.execute_notebook(str(NOTEBOOKS / f"{n}.ipynb"), str(out_dir / "nbval" / f"{n}.ipynb"),
                            parameters={"budget": "smoke"}, prepare_only=True, kernel_name="python3")
    t0 = time.time()
    rc = run_book("smoke", out_dir, jobs=jobs, worker=_nbval_in_worker)
    times = out_dir / "chapter_times.json"  # absent where run_book stopped before any chapter ran
    if times.exists():
        print(nbval_summary(json.loads(times.read_text())["chapters"], t0), flush=True)
    return rc


def main(argv=None) -> int:
    """`python -m nblib.book run|test|sync|toc`; a user error (a malformed budget file, an
    unknown budget) prints one line and exits 2 (nblib.cli)."""
    return run_cli(_main, argv)


def _main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nblib.book", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="execute chapters at a budget and build the book")
    r.add_argument("--budget", default=None, help="smoke, toy or full (default toy, or the budget file's base)")
    r.add_argument("--budget-file", default="", help="a TOML budget file (README, \"Your own data\")")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one budget field, e.g. --set scales.S1.lr=5e-4 (repeatable)")
    r.add_argument("--chapters", default="", help="comma-separated chapter names (default: all)")
    r.add_argument("--out", default=None, help="output folder (default: _build/<budget> or _build/<budget file name>)")
    r.add_argument("--no-build", action="store_true")
    r.add_argument("--jobs", type=int, default=1,
                   help="chapters executed at once (default 1; they share the run store safely)")
    t = sub.add_parser("test", help="smoke chapters, book build check, nbval-lax")
    t.add_argument("--out", default=str(REPO_ROOT / "_build" / "smoke"))
    t.add_argument("--jobs", type=int, default=None,
                   help="smoke chapters executed at once (default: $NBLIB_BOOK_JOBS, else one per CPU core)")
    s = sub.add_parser("sync", help="regenerate notebooks/*.ipynb from the .py sources")
    s.add_argument("--check", action="store_true")
    c = sub.add_parser("toc", help="write myst.yml's table of contents from the chapter registry")
    c.add_argument("--check", action="store_true", help="only report whether myst.yml's toc is stale")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        source = budget_source(args.budget, args.budget_file, args.set)  # checked before any chapter runs
        budget = source.base if source else args.budget or "toy"
        folder = Path(args.budget_file).stem if args.budget_file else budget
        out = Path(args.out) if args.out else REPO_ROOT / "_build" / folder
        names = [c.strip() for c in args.chapters.split(",") if c.strip()] or None
        return run_book(budget, out, names, build=not args.no_build, jobs=book_jobs(args.jobs), source=source)
    if args.cmd == "test":
        return test_book(Path(args.out), jobs=args.jobs)
    if registry_problems():
        return 1
    if args.cmd == "toc":
        stale = sync_toc(check=args.check)
        print(f"myst.yml's toc: {'stale' if stale and args.check else 'rewritten' if stale else 'up to date'}")
        return 1 if (args.check and stale) else 0
    stale = sync(check=args.check)
    print("stale: " + (", ".join(stale) if stale else "none"))
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
