"""What erodes along the toy's Constant LCCP trajectory (chapter 2, "What erodes").

The LCCP paper's constant-LR trajectory keeps improving LongPPL to 120N (§4.2, Fig. 6). The
toy's, at the paper's LCCP LR (a tenth of the short stage's, App. A.3), bottoms out and rises
again while ShortPPL keeps falling. The records of `python -m nblib.probes erosion`
(data/probes/toy_erosion_probe.jsonl) measure, at each checkpoint of one trajectory per
variant, LongPPL on file beginnings (the evaluation set) and on file middles (what LCCP trains
on), the random-segment copy gain far back, the smear gates, and each head's attention mass by
distance. These helpers turn them into the chapter's table, figure data and findings.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

FAR_BINS = ("128-511", "512+")  # attention beyond the short context (128 tokens at toy)


def _given(v) -> bool:
    return v is not None and not (isinstance(v, float) and np.isnan(v))


def variant_name(n_heads: int, n_kv_heads: int, expanded_from=None, aligned=None) -> str:
    """How a record's head layout is written: "1 KV head for 3 query heads", "a KV head per
    query head (3)", or with ", copied from 1 at LCCP" when LCCP started from a short stage
    with `expanded_from` KV heads (`nblib.models.llama.expand_kv_heads`), and ", aligned
    windows" when LCCP read whole segments of long documents (Budget.lccp_aligned)."""
    if n_kv_heads == n_heads and n_heads > 1:
        name = f"a KV head per query head ({n_heads})"
    elif n_heads == 1:
        name = "one head"
    else:
        name = f"{n_kv_heads} KV head" + ("s" if n_kv_heads > 1 else "") + f" for {n_heads} query heads"
    if _given(expanded_from):
        name += f", copied from {int(expanded_from)} at LCCP"
    if _given(aligned) and aligned:
        name += ", aligned windows"
    return name


def _variant(r) -> str:
    return variant_name(r.n_heads, r.n_kv_heads, getattr(r, "kv_expanded_from", None), getattr(r, "aligned", None))


def _check(records: pd.DataFrame) -> None:
    need = {"scale", "n_heads", "n_kv_heads", "n_params", "lr_frac", "batch_long", "dl", "longppl", "shortppl",
            "longppl_middle", "copy_gain", "smear", "attention"}
    missing = sorted(need - set(records.columns))
    if missing:
        raise ValueError(f"erosion records lack columns {missing}; allowed: the JSON lines of "
                         "`python -m nblib.probes erosion`")


def far_attention(attention: list[dict]) -> dict:
    """{layer: the largest share, over that layer's heads, of attention put >= 128 tokens back}."""
    out: dict = {}
    for row in attention:
        share = sum(row.get(k, 0.0) for k in FAR_BINS)
        out[row["layer"]] = max(out.get(row["layer"], 0.0), share)
    return out


def erosion_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per (scale, variant, Dl): LongPPL on beginnings and middles, ShortPPL, the copy
    gain at 128/256/512 back, the mean smear gate and the far-attention share of each layer.
    When a trajectory was measured twice, the newest record of each point is kept."""
    _check(records)
    rows = []
    for r in records.itertuples(index=False):
        row = {"scale": r.scale, "variant": _variant(r), "N": int(r.n_params),
               "LCCP LR": f"{r.lr_frac:g} x short", "LCCP batch": f"{r.batch_long} x 1,024", "Dl": float(r.dl),
               "LongPPL (beginnings)": r.longppl, "LongPPL (middles)": r.longppl_middle, "ShortPPL": r.shortppl}
        row.update({f"copy gain @{d}": float(v) for d, v in r.copy_gain.items()})
        row.update({f"smear gate L{i}": float(np.mean(g)) for i, g in enumerate(r.smear)})
        row.update({f"far attention L{layer} (best head)": v for layer, v in far_attention(r.attention).items()})
        rows.append(row)
    t = pd.DataFrame(rows)
    keys = ["scale", "variant", "Dl"]
    return t.drop_duplicates(keys, keep="last").sort_values(keys).reset_index(drop=True)


def head_distance_table(records: pd.DataFrame) -> pd.DataFrame:
    """Long form of every head's attention mass by distance: scale, variant, Dl, layer, head,
    bin, share (the figure's heat map)."""
    _check(records)
    rows = []
    for r in records.itertuples(index=False):
        for a in r.attention:
            for k, v in a.items():
                if k not in ("layer", "head"):
                    rows.append({"scale": r.scale, "variant": _variant(r),
                                 "Dl": float(r.dl), "layer": a["layer"], "head": a["head"], "bin": k, "share": v})
    return pd.DataFrame(rows).drop_duplicates(["scale", "variant", "Dl", "layer", "head", "bin"], keep="last")


def _change(sub: pd.DataFrame, col: str, dl_from: float, dl_to: float) -> float:
    at = sub.set_index("Dl")[col]
    return float(at.get(dl_to, np.nan) - at.get(dl_from, np.nan))


def erosion_findings(table: pd.DataFrame, dl_from: float = 30, dl_to: float = 120) -> str:
    """What the table says, per (scale, variant): the change of each measure from Dl = dl_from
    to dl_to, and whether LongPPL's rise shows on file middles too."""
    lines = [f"From Dl = {dl_from:g} to {dl_to:g} N(S1), along each trajectory:"]
    for (scale, variant), sub in table.groupby(["scale", "variant"], sort=False):
        if not {dl_from, dl_to} <= set(sub["Dl"]):
            continue
        lb, lm = (_change(sub, c, dl_from, dl_to) for c in ("LongPPL (beginnings)", "LongPPL (middles)"))
        sp = _change(sub, "ShortPPL", dl_from, dl_to)
        gains = ", ".join(f"@{c.split('@')[1]} {_change(sub, c, dl_from, dl_to):+.2f}"
                          for c in sub.columns if c.startswith("copy gain"))
        far = ", ".join(f"{c.split()[2]} {_change(sub, c, dl_from, dl_to):+.3f}"
                        for c in sub.columns if c.startswith("far attention"))
        smear = ", ".join(f"{c.split()[-1]} {_change(sub, c, dl_from, dl_to):+.3f}"
                          for c in sub.columns if c.startswith("smear gate"))
        lines.append(f"- **{scale}, {variant}**: LongPPL {lb:+.2f} on beginnings and {lm:+.2f} on middles, "
                     f"ShortPPL {sp:+.2f}; copy gain (nats) {gains}; far-attention share of the best head "
                     f"{far}; mean smear gate {smear}.")
    return "\n".join(lines)
