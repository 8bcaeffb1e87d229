"""nblib.probes.needle_ladder: chapter 5's row per design, computed from the tables chapter 5
writes, checked on hand-made tables whose measures are known, and on the committed book."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nblib import probes
from nblib.probes import needle_ladder as NL
from nblib.probes import results

ROOT = Path(__file__).resolve().parents[1]


def _chapter5(figures: Path, *, piece=(0.2, 0.3, 0.25, 0.5), gain=(1.0, 1.5, 2.0, 3.0), t14_missing=0):
    """A chapter 5 folder with four trajectory points (10, 40, 80, 120) and known measures."""
    d = figures / NL.CHAPTER
    d.mkdir(parents=True)
    dls = [10.0, 40.0, 80.0, 120.0]
    rows = []
    for i, dl in enumerate(dls):
        for protocol, score in (("Raw", [0, 5, 10, 20][i]), ("Last4", [0, 5, 15, 30][i])):
            rows.append({"dl": dl, "protocol": protocol, "score": float(score), "control_score": 1.5 * (dl == 120),
                         "piece_hit": piece[i] + (0.01 if protocol == "Raw" else 0), "needle_gain": gain[i]})
    pd.DataFrame(rows).to_csv(d / "needle_trajectory.csv", index=False)
    ext = [{"stage": "after the 4x extension, 4096 tokens", "dl": dl, "protocol": p, "task": t, "score": s}
           for dl, p, t, s in ((10.0, "Raw", "a", 0.0), (10.0, "Raw", "b", 10.0), (10.0, "Last4", "a", 0.0),
                               (10.0, "Last4", "b", 0.0), (120.0, "Raw", "a", 5.0), (120.0, "Raw", "b", 5.0),
                               (120.0, "Last4", "a", 0.0), (120.0, "Last4", "b", 10.0))]
    lccp = [{"stage": "LCCP, 1024 tokens", "dl": 10.0, "protocol": "Raw", "task": "a", "score": 90.0}]
    pd.DataFrame(lccp + ext).to_csv(d / "code_needles.csv", index=False)
    pd.DataFrame({"dl": [10.0, 10.0, 120.0, 120.0], "layer": 0, "head": [0, 1, 0, 1],
                  "score": [0.9, 0.1, 0.05, 0.35]}).to_csv(d / "retrieval_heads.csv", index=False)
    t14 = pd.DataFrame({"stage": list("abcde"), "metric": "m", "Raw": 1.0, "Last4": 2.0})
    t14.loc[: t14_missing - 1, "Last4"] = np.nan
    t14.to_csv(d / "table14.csv", index=False)
    return d


def test_measures_are_read_from_chapter5s_tables(tmp_path):
    _chapter5(tmp_path / "figures", t14_missing=1)
    m = NL.needle_measures(tmp_path / "figures")
    # Last4's piece hit 0.2, 0.3, 0.25, 0.5 has ranks 1, 3, 2, 4: rho = 1 - 6 * 2 / (4 * 15) = 0.8
    assert m[NL.RHO_PIECE] == pytest.approx(0.8) and m[NL.RHO_GAIN] == pytest.approx(1.0)
    assert m[NL.FIRST] == 0.0 and m[NL.LAST["Raw"]] == 20.0 and m[NL.LAST["Last4"]] == 30.0
    assert m[NL.CONTROL] == 1.5 and m[NL.LAST_DL] == 120.0
    # after the extension: (dl, protocol) means 5 / 0 at 10 and 5 / 5 at 120; the LCCP row's 90 is not counted
    assert m[NL.EXT_BEST] == 5.0 and m[NL.EXT_LAST] == 5.0
    assert m[NL.RETRIEVAL] == 0.35  # the best head at the last point, not the first
    assert m[NL.TABLE14] == 4.0


def test_targets_follow_the_measures(tmp_path):
    _chapter5(tmp_path / "figures")
    row = NL.needle_measures(tmp_path / "figures")
    got = NL.meets(row)
    assert all(got.values()), got
    row[NL.LAST["Raw"]] = 11.0  # >= 15 fails, and 11 - 1.5 < 10 above the control
    got = NL.meets(row)
    assert not got["Raw and Last4 >= 15 at the last point"] and not got[">= 10 above control"]
    assert got["mean rises first to last"]
    assert not NL.meets({**row, NL.RETRIEVAL: None})["a retrieval head above 0.1 at the last point"]


def test_a_missing_table_is_named(tmp_path):
    d = _chapter5(tmp_path / "figures")
    (d / "retrieval_heads.csv").unlink()
    with pytest.raises(FileNotFoundError, match="retrieval_heads.csv"):
        NL.needle_measures(tmp_path / "figures")


def test_main_appends_a_row_with_a_manifest_and_refuses_a_design_twice(tmp_path):
    _chapter5(tmp_path / "build" / "figures")
    (tmp_path / "build" / "chapter_times.json").write_text(
        '{"chapters": [{"chapter": "05_downstream", "wall_s": 600.0}]}')
    out = tmp_path / "ladder.csv"
    argv = ["--figures", str(tmp_path / "build" / "figures"), "--design", "X", "--change", "as K",
            "--measured", "chapter 5", "--code", "abc1234", "--out", str(out)]
    assert NL.main(argv) == 0
    t = pd.read_csv(out)
    assert list(t.columns) == NL.COLUMNS and t.design.tolist() == ["X"]
    assert t.loc[0, NL.MINUTES] == 10.0 and t.loc[0, NL.RHO_PIECE] == 0.8 and t.loc[0, "code"] == "abc1234"
    assert results.read_manifest(out)["writes"][-1]["rows"] == [1, 1]
    with pytest.raises(SystemExit, match="already"):
        NL.main(argv)


def test_the_committed_book_row_is_the_committed_figures():
    """Row FIGURES_ROW (the book's trajectory on its grid, built fresh on the host the committed
    figures come from) was written from the book's committed chapter 5 tables; recomputed now, it
    is the same."""
    from nblib.probes.grid_ladder import FIGURES_ROW
    f = probes.records("toy_needle_ladder").set_index("design").loc[FIGURES_ROW]
    got = NL.needle_measures(ROOT / "figures")
    for k, v in got.items():
        assert v == pytest.approx(float(f[k]), abs=0.5 * 10 ** -NL.DIGITS[k]), k
