"""Chapter 2's toy-design evidence (nblib.book.toy_design) on records whose answers are known."""

import numpy as np
import pandas as pd

from nblib.book import toy_design as TD


def _record(batch, lr, losses, gains, seq_len=128, steps=(100, 200, 300, 400)):
    return {"name": "t", "d": 48, "layers": 4, "heads": 4, "kv": 2, "seq_len": seq_len, "batch": batch, "lr": lr,
            "tokens": steps[-1] * batch * seq_len, "steps": steps[-1], "n_params": 1000, "wall_s": 1.0,
            "points": [{"step": s, "heldout_loss": l, "copy_gain": {"32": g, "64": g / 2}}
                       for s, l, g in zip(steps, losses, gains)]}


RECORDS = pd.DataFrame([
    _record(8, 1e-2, [4.0, 3.8, 3.7, 3.69], [0.1, 0.5, 1.2, 1.5]),  # copies from step 300; flat second half
    _record(32, 1e-2, [3.9, 3.5, 3.3, 3.1], [0.0, 0.1, 0.2, 0.3], steps=(25, 50, 75, 100)),  # never copies
])


def test_table_has_one_row_per_point_with_tokens():
    t = TD.lr_batch_table(RECORDS)
    assert len(t) == 8
    assert list(t["tokens"][:4]) == [s * 8 * 128 for s in (100, 200, 300, 400)]
    assert {"copy gain @32", "copy gain @64"} <= set(t.columns)


def test_summary_finds_onset_best_and_flat_runs():
    s = TD.lr_batch_summary(TD.lr_batch_table(RECORDS)).set_index("batch")
    assert s.loc[8, "copies from step"] == 300 and s.loc[8, "copies from tokens"] == 300 * 8 * 128
    assert np.isnan(s.loc[32, "copies from step"])
    assert abs(s.loc[8, "fall over the second half"] - (3.8 - 3.69)) < 1e-12
    assert s.loc[32, "max copy gain @32"] == 0.3
    text = TD.lr_batch_findings(TD.lr_batch_summary(TD.lr_batch_table(RECORDS)))
    assert "lowest held-out loss after 0.4M tokens is 3.100, at batch 32" in text
    assert "the larger batch wins (8: 3.690, 32: 3.100" in text
    assert "batch 8, LR 0.01 from step 300" in text
