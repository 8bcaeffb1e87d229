"""Helpers shared by the long-context benchmark analogues of `nblib.evals.long_benchmarks`
(LongBench, GraphWalks, LongReason, BABILong; the LCCP paper §5.3): needle insertion that keeps
needles placed at one spot apart, and reading local copies of the real datasets."""

from __future__ import annotations

import json
from pathlib import Path

from nblib.evals.ruler import _insert


def insert_needles(hay: str, needles: list[tuple[float, str]]) -> tuple[str, list[tuple[int, int]]]:
    """ruler._insert (each needle at the sentence or line boundary nearest its relative depth,
    spans in input order), plus a space between needles that land at the same boundary with
    nothing between them (at the haystack's end, or before indentation), so that they read as
    separate sentences. Used by the LongBench, LongReason and BABILong analogues (LCCP §5.3)."""
    text, spans = _insert(hay, needles)
    starts = {a for a, _ in spans}
    cuts = sorted({b for _, b in spans if b in starts})
    if not cuts:
        return text, spans
    pieces, last = [], 0
    for c in cuts:
        pieces += [text[last:c], " "]
        last = c
    shift = lambda x, strict: x + sum(c < x if strict else c <= x for c in cuts)  # noqa: E731
    return "".join(pieces) + text[last:], [(shift(a, False), shift(b, True)) for a, b in spans]


def read_records(path: str | Path) -> list[dict]:
    """Rows of a local .jsonl, .json (a list of objects) or .parquet file (parquet needs pandas
    with pyarrow or fastparquet), the forms OpenAI's GraphWalks and BABILong are shipped in."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(path).to_dict("records")
    text = path.read_text()
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return list(json.loads(text))
