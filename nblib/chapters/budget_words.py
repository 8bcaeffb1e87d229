"""A budget in words: the toy grid's shapes, token unit, multiples and RoPE bases as the book's
prose names them (chapter 1's grid size, chapter 2's departures from the paper's setup, §3.1 and
App. A.3; appendix A's design table), the contexts and LongPPL chunk the prose names (chapter 2's
length mixture, chapter 3's copy distance), and which row of the design ladder the book's grid
is and how often it was repeated (chapter 2's spread, appendices A and B). Every number is read
off the budgets, the grid's run configs and the ladder's records, so the words follow the grid
when it changes."""

from __future__ import annotations

import re

import pandas as pd

from nblib.budgets import LLAMA_VARIANTS, PAPER_N, SCALES, get_budget
from nblib.lccp import grid
from nblib.probes import grid_ladder as GL
from nblib.probes.results import record_path
from nblib.store.provenance import REPO_ROOT

def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


_NUMBER_WORDS = dict(enumerate(("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")))
_SHARE_WORDS = {0.25: "a quarter of", 0.5: "half", 1.0: "as many as", 2.0: "twice"}
_VARIANT_WORDS = {"smeared": "smeared keys"}  # nblib.budgets.LLAMA_VARIANTS by name, in words


def _variant(model: dict) -> str:
    """The LLAMA_VARIANTS name whose fields a model config carries ("plain" if none)."""
    return next((name for name, fields in LLAMA_VARIANTS.items()
                 if fields and all(model.get(k) == v for k, v in fields.items())), "plain")


def shape_words(b) -> str:
    """The grid's shapes at budget `b` in words, read off its scales' model configs: per scale
    the width and heads, then what every scale shares (layers, KV heads, tied embeddings, a
    variant of nblib.budgets.LLAMA_VARIANTS)."""
    m = {s: b.scale(s).model for s in SCALES}

    def shared(key, default=None):
        values = {m[s].get(key, default) for s in SCALES}
        return values.pop() if len(values) == 1 else None

    layers, kv = shared("n_layers"), shared("n_kv_heads")
    per = [f"{s} d{x['d_model']}" + ("" if layers else f" x {_count(x['n_layers'], 'layer')}")
           + f" ({x['n_heads']} x {x.get('head_size') or x['d_model'] // x['n_heads']}-dim heads"
           + ("" if kv else f", {_count(x['n_kv_heads'], 'KV head')}") + ")" for s, x in m.items()]
    common = ([_count(layers, "layer")] if layers else []) + ([_count(kv, "KV head")] if kv else [])
    common += ["tied embeddings"] if shared("tie_embeddings", False) else []
    variants = {_variant(x) for x in m.values()}
    common += [_VARIANT_WORDS.get(v, v) for v in variants if len(variants) == 1 and v != "plain"]
    return ", ".join(per) + ("; " + ", ".join(common) if common else "")


def _unit_words(b) -> str:
    return f"N({b.token_unit}) = {b.n_tokens(b.token_unit, 1):,} tokens at every scale" if b.token_unit else "each scale's N"


def _contexts(b, fmt) -> str:
    return f"{fmt(b.long_seq_len)} / {fmt(b.ext_seq_len)} ({b.long_seq_len / b.short_seq_len:g}x, " \
           f"{b.ext_seq_len / b.long_seq_len:g}x)"


def _bases(b) -> tuple[str, str, str]:
    r = b.rope_bases
    return " / ".join(_base(x) for x in r), f"x{r[1] / r[0]:,.0f}", f"x{r[2] / r[1]:,.0f}"


def _multiples(values) -> str:
    return f"{min(values):g}-{max(values):g} x N ({len(values)} values)"


def _base(b: float) -> str:
    return f"{b:.0e}".replace("e+0", "e")



def departures_markdown(b, paper=None) -> str:
    """Chapter 2's list of where budget `b` departs from the paper's setup (§3.1, App. A.3),
    every number read from the budgets: the shapes (`shape_words`) and the span of N against
    the paper's, the KV heads, the token unit, the grid's multiples, the LCCP batch and LR, the
    RoPE bases and S5's trajectory. Appendix A holds the measurement behind each."""
    paper = paper or get_budget("full")
    n = [b.n_params(s) for s in SCALES]
    kv = {b.scale(s).model["n_kv_heads"] == b.scale(s).model["n_heads"] for s in SCALES}
    spec, p_spec = b.scale("S1"), paper.scale("S1")
    bases, abf, ext = _bases(b)
    p_bases, p_abf, _ = _bases(paper)
    smeared = all(all(b.scale(s).model.get(k) == v for k, v in LLAMA_VARIANTS["smeared"].items()) for s in SCALES)
    lines = [
        f"**Shapes:** {shape_words(b)}. N spans {n[-1] / n[0]:.1f}x ({n[0]:,} .. {n[-1]:,} non-embedding), "
        f"the paper's {PAPER_N['S5'] / PAPER_N['S1']:.0f}x.",
        ("**Smeared keys** at every scale (the section below): the one change to the paper's architecture."
         if smeared else "The paper's Llama at every scale."),
        ("**A KV head per query head** at every scale (the paper's models share KV heads): with one shared KV "
         "head a long constant-LR LCCP lost the toy's long-range copying." if kv == {True} else
         "KV heads shared by the query heads, as in the paper."),
        f"**Token unit:** {_unit_words(b)}, where the paper counts each scale's own N.",
        f"**Grid:** Ds {', '.join(f'{x:g}' for x in b.ds_multiples)} {b.unit}, Dl "
        f"{', '.join(f'{x:g}' for x in b.dl_multiples)} {b.unit} (the paper: Ds "
        f"{_multiples(paper.ds_multiples)}, Dl {_multiples(paper.dl_multiples)}); S5's trajectory to "
        f"{b.s5_trajectory:g} {b.unit} (the paper: {paper.s5_trajectory:g}N).",
        f"**LCCP:** {spec.batch_long} x {b.long_seq_len:,} tokens a step against the short stage's "
        f"{spec.batch_short} x {b.short_seq_len} (the paper: GBS / {p_spec.batch_short // p_spec.batch_long}), at "
        f"{b.lccp_lr_frac:g} of the short stage's LR (the paper: {paper.lccp_lr_frac:g}).",
        f"**RoPE bases** {bases} (ABF {abf} at LCCP; the paper's {p_bases}, {p_abf}).",
        precision_words(b),
    ]
    return "\n".join(f"- {x}" for x in lines)


def precision_words(b) -> str:
    """Where budget `b` trains in bf16 against the paper's bfloat16 everywhere (App. A.3):
    `Budget.long_precision` on CPU; GPUs always train under bf16 autocast."""
    if b.long_precision == "bf16":
        bf16 = [s for s in b.scales if s in b.bf16_short_scales]
        fp32 = [s for s in b.scales if s not in b.bf16_short_scales]
        short = ("the short stage trains in fp32" if not bf16 else
                 f"so does the short stage of {', '.join(bf16)}" + (f", and that of {', '.join(fp32)} trains in fp32"
                                                                   if fp32 else ""))
        return ("**Precision:** the LongPPL reference, LCCP, the extension and SFT train under bf16 autocast with "
                f"fp32 weights (the paper trains every stage in bfloat16); {short}.")
    return "**Precision:** fp32 on CPU (the paper trains in bfloat16; GPUs here train under bf16 autocast)."


def grid_size_words(b, paper=None) -> str:
    """The introduction's sentence on the grid's size at budget `b` against the paper's (§3.1),
    every number counted from the grid (`grid.run_counts`) and the budgets."""
    paper = paper or get_budget("full")
    n, p = grid.run_counts(b), grid.run_counts(paper)
    ch3 = n.get("short", 0) + n.get("linear-decay", 0)
    grid_words = f"{len(b.ds_multiples)} x {len(b.dl_multiples)}"
    return (f"The {b.name} grid takes {grid_words} of the paper's {len(paper.ds_multiples)} x "
            f"{len(paper.dl_multiples)} ($D_s$ {', '.join(f'{x:g}' for x in b.ds_multiples)} and $D_l$ "
            f"{', '.join(f'{x:g}' for x in b.dl_multiples)}, in {b.unit}) at S1-S4 and {len(b.s5_configs)} of its "
            f"{len(paper.s5_configs)} S5 configurations. Chapter 3 trains {ch3} runs "
            f"({n.get('short', 0)} short-stage, {n.get('linear-decay', 0)} Linear-Decay; the paper's grid "
            f"{p.get('short', 0) + p.get('linear-decay', 0)}), chapter 4 "
            f"{n.get('constant', 0) + n.get('trajectory', 0)} Constant trajectories ({b.n_constant_seeds} seeds "
            f"at S1-S4, and S5's to {b.s5_trajectory:g} {b.unit}).")


def short_documents_words(b, mix: pd.DataFrame) -> str:
    """How short the corpus runs against budget `b`'s LCCP target (Table 9, App. A.4), from its
    length-mixture table (`experiments.mixture_table`, first row: the bucket under half the
    target): the documents in that bucket, their share of the stream's tokens, and how much more
    often Table 9's share would draw them than the budget's own mixture."""
    first = mix.iloc[0]
    paper, own = float(first["paper 32K mix"]), float(first[f"{b.lccp_mixture} mix"])
    tokens = float(first["n_tokens"]) / float(mix["n_tokens"].sum())
    text = (f"At budget {b.name} the LCCP target is {b.long_seq_len:,} tokens: {int(first['n_docs']):,} documents, "
            f"{tokens:.1%} of the tokens the LCCP stream draws from, are shorter than half of it "
            f"(bucket {first['bucket']}). Table 9 draws {paper:.2%} from that bucket, the "
            f"`{b.lccp_mixture}` mix {own:.2%}")
    if own > 0 and paper / own > 1.5:
        return text + f": Table 9's share would repeat those documents {paper / own:.0f} times as often."
    return text + "."


def far_copy_distance(b) -> int:
    """The distance of chapter 3's copy curve (a random segment and its repeat, `copy_gain`):
    just past two local chunks of LongPPL (App. A.1). A chunk window is trunc_len + sliding_window
    tokens (`nblib.metrics.longppl.chunk_windows`), so a token's chunk sees fewer than that
    back; a repeat twice that far from its source lies past two whole chunk windows. Capped at
    half the LCCP context, so the segment and its repeat fit in one sequence."""
    spec = b.longppl
    return min(2 * (spec.trunc_len + spec.sliding_window), b.long_seq_len // 2)


def far_copy_words(b) -> str:
    """`far_copy_distance` in words, with the chunk it is measured against."""
    spec, d = b.longppl, far_copy_distance(b)
    window = spec.trunc_len + spec.sliding_window
    if d >= 2 * window:
        return (f"distance {d:,}, just past two local chunks: each chunk window of LongPPL is {window:,} tokens "
                f"(trunc_len {spec.trunc_len:,} + sliding_window {spec.sliding_window:,}), so every repeated token's "
                f"source lies two whole windows back")
    return (f"distance {d:,}, half the {b.long_seq_len:,}-token LCCP context: two local chunk windows of LongPPL "
            f"({2 * window:,} tokens) do not fit twice in it")


_PARENT = re.compile(r"(?:as |design )?([A-Z][A-Za-z0-9]*)\b")


def grid_lineage(ladder: pd.DataFrame, design: str) -> list[str]:
    """`design` and the designs it was built from, newest first, as the design ladder's `change`
    column names them (a row's change starts with its parent: "Vb with ...", "as F, ...",
    "design N's ..."); stops at a row whose change names no other row."""
    change = dict(zip(ladder["design"].astype(str), ladder["change"].astype(str)))
    chain = [design]
    while True:
        m = _PARENT.match(change.get(chain[-1], ""))
        if not m or m.group(1) not in change or m.group(1) in chain:
            return chain
        chain.append(m.group(1))


def book_grid_words(ladder: pd.DataFrame, origin: str = "V", design: str | None = None) -> str:
    """A sentence: which row of the design ladder the book's grid is (`grid_ladder.BOOK_GRID_DESIGN`)
    and the rows between it and `origin`, each with its `change`; ValueError when the grid does not
    descend from `origin`, so prose that names `origin` as the grid's root fails loudly."""
    design = design or GL.BOOK_GRID_DESIGN
    chain = grid_lineage(ladder, design)
    if origin not in chain:
        raise ValueError(f"the book's grid {design} does not descend from design {origin} in the ladder: "
                         f"its lineage is {' <- '.join(chain)}")
    if design == origin:
        return f"The book's grid is design **{design}** itself."
    change = dict(zip(ladder["design"].astype(str), ladder["change"].astype(str)))
    steps = list(reversed(chain[:chain.index(origin)]))
    return (f"The book's grid is design **{design}**: {origin} changed by row{'s' if len(steps) > 1 else ''} "
            + " and then ".join(f"{d} ({change[d]})" for d in steps) + " of the design ladder.")


def grid_repeats_words(ladder: pd.DataFrame, design: str | None = None) -> str:
    """Chapter 2's precision-and-kernel spread in words: the design ladder's rows that ran the
    book's grid (`grid_ladder.book_grid_rows`), where and how each ran (`grid_ladder.RAN_ON`),
    and what varied between them (`grid_ladder.what_varied`), so a spread measured on one host
    is never called a host spread."""
    design = design or GL.BOOK_GRID_DESIGN
    path = record_path("toy_grid_ladder")
    path = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    rows = GL.book_grid_rows(ladder, design)
    names = [str(d) for d in rows["design"]]
    if len(names) < 2:
        return (f"The book's grid (design **{design}**) has {_count(len(names), 'row')} in the design ladder "
                f"(`{path}`): no repeat of it is measured, so there is no precision or kernel spread yet.")
    ran_on = GL.RAN_ON
    how = [f"**{d}** ({ran_on[d][1]}, on {ran_on[d][0]})" if d in ran_on else f"**{d}**" for d in names]
    varied = GL.what_varied(names)
    hosts, kernels = ({ran_on[d][i] for d in names if d in ran_on} for i in (0, 1))
    text = (f"The book's grid, design **{design}**, has {len(names)} rows in the design ladder (`{path}`, "
            f"appendix A): {', '.join(how)}. What varied between them: {varied}.")
    if len(hosts) == 1 and len(kernels) > 1 and all(d in ran_on for d in names):
        text += (" One host ran every row, so their difference is a precision-and-instruction-set spread, "
                 "not a host spread.")
    return text
