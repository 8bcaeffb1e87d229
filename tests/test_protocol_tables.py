"""Chapter 4's protocol tables (nblib.lccp.experiments): every S1-S4 point under Raw, Last4 and
Linear-Decay with the same keys, and the long trajectory's Raw and Last4 points."""

import pandas as pd
import pytest

from nblib.chapters.figures import table_problems
from nblib.lccp import experiments


def _const(points, seeds=(0, 1)):
    rows = []
    for scale, ds, dl in points:
        for seed in seeds:
            for rule, v in (("raw", 10.0 + seed), ("last4", 9.0 + seed)):
                rows.append({"scale": scale, "ds_mult": ds, "dl_mult": dl, "seed": seed, "rule": rule,
                             "longppl": v + dl / 100, "shortppl": 3.0})
    return pd.DataFrame(rows)


def _ld(points):
    return pd.DataFrame([{"scale": s, "ds_mult": ds, "dl_mult": dl, "longppl": 9.5, "shortppl": 3.1}
                         for s, ds, dl in points])


POINTS = [(s, ds, dl) for s in ("S1", "S4") for ds in (90, 270) for dl in (10, 30)]


def test_every_protocol_has_the_same_keys_and_ld_has_seed_0():
    t = experiments.protocols_table(_const(POINTS), _ld(POINTS + [("S5", 90, 10)]))
    assert list(t.columns) == ["scale", "Ds", "Dl", "seed", "protocol", "longppl", "shortppl"]
    assert set(t.protocol) == {"Raw", "Last4", "LD"} and "S5" not in set(t.scale)
    keys = {p: set(map(tuple, g[["scale", "Ds", "Dl"]].to_numpy())) for p, g in t.groupby("protocol")}
    assert keys["Raw"] == keys["Last4"] == keys["LD"] == set(POINTS)
    assert (t[t.protocol == "LD"].seed == 0).all() and len(t[t.protocol == "LD"]) == len(POINTS)
    assert len(t[t.protocol == "Raw"]) == 2 * len(POINTS)  # one row per seed
    # the Last4 <= Raw count of chapter 4 is a pairing of this table by (scale, Ds, Dl, seed)
    paired = t[t.protocol != "LD"].pivot_table(index=["scale", "Ds", "Dl", "seed"], columns="protocol",
                                                values="longppl")
    assert (paired["Last4"] <= paired["Raw"]).all()
    assert table_problems(t) == []


def test_a_protocol_missing_a_point_is_an_error():
    with pytest.raises(ValueError, match="different"):
        experiments.protocols_table(_const(POINTS), _ld(POINTS[:-1]))


def test_trajectory_table_has_raw_and_last4_by_dl():
    tp = pd.DataFrame([{"dl_mult": dl, "Dl": dl * 100, "rule": rule, "longppl": 5.0 + (rule == "raw"),
                        "shortppl": 2.0} for dl in (5, 10, 120) for rule in ("raw", "last4")])
    t = experiments.trajectory_protocol_table(tp)
    assert list(t.columns) == ["dl", "protocol", "longppl", "shortppl"]
    assert t[t.protocol == "Last4"].dl.tolist() == [5.0, 10.0, 120.0]
    assert (t[t.protocol == "Raw"].longppl == 6.0).all() and table_problems(t) == []
