"""The scorecard's one summary (nblib.book.summary): counts by verdict without the control rows,
the reproduced claims linked to their chapters, no absolute path; chapter 1 shows it and the
whole paper map, and the benchmark tables are on the run report, not in chapter 1."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from nblib.book import summary as S
from nblib.chapters.claims.claim import VERDICTS
from nblib.store.provenance import REPO_ROOT

ROW = {"work": "LCCP paper", "source": "-", "toy": "-", "value": 1.0, "rule": "-", "why": "-"}


def _table(with_columns: bool = True) -> pd.DataFrame:
    rows = [
        {"where": "§4.2", "claim": "the trajectory keeps improving", "verdict": "reproduced",
         "chapter": "04_constant_last4", "control": False},
        {"where": "§5.1, Fig. 7", "claim": "retrieval improves [with Dl]", "verdict": "reproduced",
         "chapter": "05_downstream", "control": False},
        {"where": "YaRN", "claim": "a control that came out reproduced", "verdict": "reproduced",
         "chapter": "09_yarn", "control": True},
        {"where": "YaRN", "claim": "a control not measured", "verdict": "not measured", "chapter": "09_yarn",
         "control": True},
        {"where": "§3.3", "claim": "the law fits", "verdict": "partly", "chapter": "03_scaling_law", "control": False},
        {"where": "§3.3, Table 3", "claim": "additive wins", "verdict": "within noise", "chapter": "03_scaling_law",
         "control": False},
        {"where": "§4.1", "claim": "Last4 <= Raw", "verdict": "not", "chapter": "04_constant_last4", "control": False},
        {"where": "§4.1", "claim": "LD <= Raw", "verdict": "not", "chapter": "", "control": False},
        {"where": "KV cache", "claim": "bytes", "verdict": "not measured", "chapter": "07_kv_cache", "control": False},
    ]
    t = pd.DataFrame([{**ROW, **r} for r in rows])
    return t if with_columns else t.drop(columns=["chapter", "control"])


def _no_absolute_path(text: str) -> None:
    assert str(REPO_ROOT) not in text and "/tmp" not in text and "/home/" not in text, text
    for m in re.finditer(r'(?:href="|\]\(|`)([^"\)`]+)', text):  # every link and every path in code
        assert not m.group(1).startswith("/"), m.group(1)


def test_the_counts_leave_out_control_rows_and_count_each_verdict():
    s = S.summary_json(_table(), "figures", "toy")
    assert list(s["counts"])[:len(VERDICTS)] == list(VERDICTS)
    assert s["counts"]["reproduced"] == 2  # the control row rated reproduced is not counted
    assert s["counts"]["partly"] == 1 and s["counts"]["within noise"] == 1 and s["counts"]["not"] == 2
    assert s["counts"]["not measured"] == 1 and s["counts"]["out of reach at toy"] == 0
    assert s["claims"] == 7 == sum(s["counts"].values()) and s["controls"] == 2


def test_the_reproduced_claims_link_to_chapters_of_the_book():
    s = S.summary_json(_table(), "figures", "toy")
    assert [r["where"] for r in s["reproduced"]] == ["§4.2", "§5.1, Fig. 7"]
    for r in s["reproduced"]:
        assert r["link"] == f"notebooks/{r['chapter']}.ipynb" and (REPO_ROOT / r["link"]).is_file()
    md = S.summary_markdown(s)  # from chapter 1, in notebooks/
    assert "[§4.2](04_constant_last4.ipynb)" in md and "[§5.1, Fig. 7](05_downstream.ipynb)" in md
    assert "retrieval improves \\[with Dl\\]" in md and "(../book/scorecard.md)" in md
    assert "control that came out" not in md and "**2 reproduced**" in md and "**2 not**" in md
    assert "[§4.2](../notebooks/04_constant_last4.ipynb)" in S.summary_markdown(s, base="book")
    html = S.summary_bundle(s, "computed")["text/html"]  # the book's pages: mystmd's slugs, one flat folder
    assert 'href="constant-last4.html"' in html and 'href="downstream.html"' in html
    assert 'href="scorecard.html"' in html


def test_a_table_without_chapter_and_control_columns_counts_every_row_and_links_nothing():
    s = S.summary_json(_table(with_columns=False), "figures", "toy")
    assert s["claims"] == 9 and s["controls"] == 0 and s["counts"]["reproduced"] == 3
    assert all(r["link"] is None and r["chapter"] == "" for r in s["reproduced"])
    md = S.summary_markdown(s)
    assert "- §4.2: the trajectory keeps improving" in md and ".ipynb" not in md


def test_a_row_naming_no_chapter_of_the_book_gets_no_link():
    assert S.chapter_link("03_scaling_law") == "notebooks/03_scaling_law.ipynb"
    assert S.chapter_link("99_nowhere") is None and S.chapter_link("") is None and S.chapter_link(float("nan")) is None


@pytest.mark.parametrize("path,page", [("notebooks/04_constant_last4.ipynb", "constant-last4.html"),
                                       ("notebooks/07_kv_cache.ipynb", "kv-cache.html"),
                                       ("book/scorecard.md", "scorecard.html")])
def test_site_pages_follow_mystmds_slugs(path, page):
    assert S.site_page(path) == page


def test_the_summary_names_no_absolute_path(tmp_path):
    s = S.summary_json(_table(), S.repo_relative(REPO_ROOT / "figures"), "toy")
    assert s["figures"] == "figures"
    assert S.repo_relative(tmp_path / "out" / "figures") == "out/figures"  # outside the repository: no full path
    for how in ("written", "computed", None):
        _no_absolute_path(json.dumps(s, ensure_ascii=False))
        _no_absolute_path(S.summary_markdown(s, how=how))
        _no_absolute_path(S.summary_bundle(s, how)["text/html"])


def test_chapter_1_says_it_shows_the_written_summary_only_while_that_matches_the_tables(tmp_path, monkeypatch):
    root = tmp_path / "figures"
    (root / "03_scaling_law").mkdir(parents=True)
    (root / "03_scaling_law" / "t.csv").write_text("a\n1\n")
    monkeypatch.setattr(S, "compute_summary", lambda r, b: S.summary_json(_table(), S.repo_relative(r), b,
                                                                          S.tables_sha256(r)))
    path = S.write_summary(root, "toy")
    assert path == root / "summary.json"
    written = json.loads(path.read_text())
    assert written["tables_sha256"] == S.tables_sha256(root)
    assert written["figures"].endswith("/figures") and not written["figures"].startswith("/")
    s, how = S.chapter_summary(root, "toy")
    assert how == "written" and s == written
    assert S.chapter_summary(root, "smoke")[1] == "computed"  # another budget's summary
    (root / "03_scaling_law" / "t.csv").write_text("a\n2\n")  # a chapter ran since: the tables changed
    s, how = S.chapter_summary(root, "toy")
    assert how == "computed" and s["tables_sha256"] == S.tables_sha256(root) != written["tables_sha256"]
    assert "Computed as this chapter ran" in S.summary_markdown(s, how=how)
    assert "the summary the book runner wrote to `" in S.summary_markdown(written, how="written")


def test_the_summary_of_an_empty_figures_folder_counts_every_claim_not_measured(tmp_path):
    s = S.compute_summary(tmp_path, "smoke")
    assert s["counts"]["not measured"] == s["claims"] > 0 and s["reproduced"] == []
    assert "No claim is rated reproduced" in S.summary_markdown(s)


def test_chapter_1_shows_the_summary_and_the_whole_paper_map_and_no_benchmark_tables():
    src = (REPO_ROOT / "notebooks" / "01_introduction.py").read_text()
    assert "chapter_summary(" in src and "summary_bundle(" in src and "paper_map_markdown(" in src
    assert "benchmarks/results" not in src and "## Benchmarks" not in src
    assert "display.max_colwidth" not in src and not re.search(r"(?m)^pm$", src)  # no truncated DataFrame


def test_the_run_report_holds_every_benchmark_table():
    from nblib.book.run_report import run_report
    report = run_report([{"chapter": "01_introduction", "status": "ok", "wall_s": 1.0}], "smoke")
    files = sorted((REPO_ROOT / "benchmarks" / "results").glob("*.md"))
    assert files
    for f in files:
        assert f"### `benchmarks/results/{f.name}`" in report
        table = [line for line in f.read_text().splitlines() if line.startswith("|")]
        assert table and all(line in report for line in table), f.name
    assert "the introduction shows them" not in report


def test_benchmark_tables_demote_the_reports_headings(tmp_path):
    from nblib.book.run_report import benchmark_tables
    (tmp_path / "bench_x.md").write_text("# X benchmark\n\n| a |\n|---|\n| 1 |\n")
    lines = benchmark_tables(tmp_path)
    assert lines[0] == "### `benchmarks/results/bench_x.md`" and "#### X benchmark" in lines[2]
    assert benchmark_tables(tmp_path / "absent") == []
