"""benchmarks/bench_make_test.py: what it reads from a `make test` log and how it pairs runs; the
order `make test` runs the test files in (tests/conftest.py)."""

from pathlib import Path

import pytest

from benchmarks import bench_make_test as B

LOG = """
........................................................................ [ 95%]
1503 passed, 1 skipped, 4 warnings in 255.95s (0:04:15)
[book] nbval-lax 12_toy_ladders: ok, 13 cells passed, 0 failed, in 9.4 s
[book] nbval-lax: passed, 253 cells passed and 0 failed in 12 notebooks, 268.3 s from the first chapter's start, 20.6 s past the last chapter's end
"""


def test_the_log_gives_the_unit_and_smoke_seconds():
    assert B.parse_log(LOG) == {"unit_s": 255.95, "smoke_s": 268.3}
    failed = LOG.replace("nbval-lax: passed", "nbval-lax: FAILED").replace("1503 passed, 1 skipped", "3 failed, 1500 passed")
    assert B.parse_log(failed) == {"unit_s": 255.95, "smoke_s": 268.3}
    assert B.parse_log("make: *** [Makefile:41: test] Error 1") == {"unit_s": None, "smoke_s": None}


def test_an_unknown_commit_is_refused_by_name():
    with pytest.raises(SystemExit, match="'no-such-commit-x' is not in"):
        B.resolve("no-such-commit-x")


def test_the_report_gives_each_rounds_candidate_minus_baseline():
    def run(rnd, role, wall, unit, smoke):
        return {"round": rnd, "role": role, "commit": role, "sha": "0123456789", "started": "t", "wall_s": wall,
                "unit_s": unit, "smoke_s": smoke, "rc": 0}

    meta = {"machine": "m", "gate_s": 600, "runs": [run(1, "baseline", 614.0, 287.9, 251.9), run(1, "candidate", 594.0, 256.0, 268.3),
                                                    run(2, "baseline", 700.0, 300.0, None), run(2, "candidate", 650.0, 280.0, 270.0)]}
    md = B.to_markdown(meta)
    assert "| 1 | -20 | -32 | +16 |" in md
    assert "| 2 | -50 | -20 | - |" in md


def test_the_run_report_names_each_run_of_the_committed_result():
    import json

    from nblib.book.run_report import benchmark_summary
    from nblib.store.provenance import REPO_ROOT

    d = json.loads((REPO_ROOT / "benchmarks" / "results" / "bench_make_test.json").read_text())
    line = next(x for x in benchmark_summary() if "bench_make_test.md" in x)
    for r in d["runs"]:
        assert f"{r['role']} {r['sha'][:7]} {r['wall_s']:.0f} s" in line
    assert f"(gate {d['gate_s']} s)" in line


def test_the_heavy_files_exist_and_run_first_in_their_order():
    """tests/conftest.py's HEAVY_FIRST names files that exist (a rename would silently drop one to
    the end of the run), and its hook puts their tests first, each file's own order kept."""
    from types import SimpleNamespace

    from tests import conftest

    tests = Path(conftest.__file__).parent
    assert [n for n in conftest.HEAVY_FIRST if not (tests / n).is_file()] == []
    items = [SimpleNamespace(path=tests / f, name=t) for f, t in
             [("test_merge.py", "a"), ("test_plan.py", "b"), ("test_models.py", "c"), ("test_train.py", "d"),
              ("test_plan.py", "e"), ("test_train.py", "f")]]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.name for i in items] == ["d", "f", "b", "e", "a", "c"]
