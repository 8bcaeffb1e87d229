"""Saved tables keep the columns that label their rows (nblib.chapters.figures)."""

import numpy as np
import pandas as pd

from nblib.chapters.figures import identifying_columns, table_problems, with_row_labels


def test_a_labelled_index_becomes_a_column_and_a_plain_one_does_not():
    by_len = pd.DataFrame({"plain RoPE": [9.1, 9.5]}, index=pd.Index([256, 1024], name="length"))
    assert list(with_row_labels(by_len).columns) == ["length", "plain RoPE"]
    unnamed = pd.DataFrame({"x": [1.5, 2.5]}, index=["A", "B"])
    assert list(with_row_labels(unnamed).columns) == ["row", "x"]
    plain = pd.DataFrame({"x": [1.5, 2.5]})
    assert with_row_labels(plain) is plain
    clash = pd.DataFrame({"row": [1.5, 2.5]}, index=["A", "B"])
    assert list(with_row_labels(clash).columns) == ["row (row)", "row"]
    two = pd.DataFrame({"x": [1.0, 2.0]}, index=pd.MultiIndex.from_tuples([("S1", 1), ("S1", 2)]))
    assert list(with_row_labels(two).columns) == ["row 0", "row 1", "x"]


def test_tables_without_row_labels_are_flagged():
    measurements = pd.DataFrame({"plain RoPE": [9.1, 9.5, 8.7], "YaRN": [9.3, 9.0, 8.1]})
    assert table_problems(measurements) == ["no column labels the rows (first column 'plain RoPE' is a measurement)"]
    assert table_problems(with_row_labels(measurements.set_axis(pd.Index([256, 512, 1024], name="length")))) == []
    grid = pd.DataFrame({"dl": [0.2, 0.2, 0.4, 0.4], "protocol": ["Raw", "Last4"] * 2, "score": np.arange(4.0)})
    assert identifying_columns(grid) == ["dl", "protocol"] and table_problems(grid) == []
    dup = pd.DataFrame({"model": ["A", "A"], "loss": [1.0, 2.0]})
    assert table_problems(dup) == ["rows are not unique in their label columns ['model']"]
    assert table_problems(pd.DataFrame({"x": [1.0]})) == []
