"""LongReason-style reasoning over premises scattered through a long context, offline and sized
in the evaluated model's tokens (Ling et al., 2025, "LongReason: A Synthetic Long-Context
Reasoning Benchmark via Context Expansion"; the LCCP paper §5.3, Fig. 8b and App. C.3 /
Fig. 14 evaluate with it after long-context SFT). Part of `nblib.evals.long_benchmarks`,
which documents what follows LongReason and what is ours.

LongReason expands a short reasoning question by spreading its background sentences through
long unrelated text and asking the final inquiry at the end. Here the short question is
synthetic, over 2-4 premises: arithmetic along a chain ("Brisa has 3 more stamps than Arlen.")
or an ordering ("Arlen is older than Brisa."); exact match on the short answer.
"""

from __future__ import annotations

from nblib.evals.long_common import insert_needles
from nblib.evals.ruler import FIRST, Sample, _fit, _haystack_source

TASKS = ("longreason",)
HEAD = ("Read the following text carefully. A few of its sentences state facts about some people; use those "
        "facts to answer the question at the end.\n\n")
TAIL = "\n\nQuestion: {question}\nGive only the final answer, with no other words."
ANSWER = "\nAnswer:"
ITEMS = ("stamps", "marbles", "coins", "shells", "tickets", "postcards")
ORDERS = (("older", "oldest", "youngest"), ("taller", "tallest", "shortest"), ("faster", "fastest", "slowest"))
MAX_NEW_TOKENS = 16


def exact_match(prediction: str, reference: str) -> float:
    """1.0 when the prediction's first line, stripped of spaces, quotes and a final period,
    equals the reference (case-insensitive), else 0.0: the LongReason analogue's metric
    (LongReason itself scores multiple-choice accuracy; LCCP §5.3)."""
    first = prediction.lstrip("\n").split("\n")[0].strip().strip("\"'").rstrip(".").strip()
    return float(first.lower() == reference.strip().lower())


def score_sample(sample: Sample, pred: str) -> float:
    """exact_match against any of the sample's references (LongReason scores accuracy)."""
    return max(exact_match(pred, r) for r in sample.answers)


def premises(rng, kind: str) -> tuple[list[str], str, str]:
    """(premises in logical order, question, answer) of a LongReason-style short puzzle (the
    question that LongReason's context expansion spreads out) with 2-4 premises:
    "arithmetic" (a count carried along a chain of people) or "comparison" (a strict order
    of 3-5 people; who is first or last)."""
    n = int(rng.integers(2, 5))
    names = [FIRST[int(i)] for i in rng.permutation(len(FIRST))]
    if kind == "arithmetic":
        item = ITEMS[int(rng.integers(0, len(ITEMS)))]
        value = int(rng.integers(3, 20))
        out = [f"{names[0]} has {value} {item}."]
        for j in range(1, n):
            op, d = int(rng.integers(0, 3)), int(rng.integers(2, 10))
            if op == 0 or (op == 1 and value - d < 1):
                value += d
                out.append(f"{names[j]} has {d} more {item} than {names[j - 1]}.")
            elif op == 1:
                value -= d
                out.append(f"{names[j]} has {d} fewer {item} than {names[j - 1]}.")
            else:
                value *= 2
                out.append(f"{names[j]} has twice as many {item} as {names[j - 1]}.")
        return out, f"How many {item} does {names[n - 1]} have?", str(value)
    rel, top, bottom = ORDERS[int(rng.integers(0, len(ORDERS)))]
    chain = names[: n + 1]  # chain[0] > chain[1] > ... > chain[n]
    out = [f"{chain[j]} is {rel} than {chain[j + 1]}." for j in range(n)]
    asked = [chain[int(i)] for i in rng.permutation(n + 1)]
    first = bool(rng.integers(0, 2))
    question = f"Of {', '.join(asked[:-1])} and {asked[-1]}, who is the {top if first else bottom}?"
    return out, question, chain[0] if first else chain[-1]


def make_sample(task: str, tokenizer, length: int, depth: float, rng, texts=(), index: int = 0) -> Sample:
    """One LongReason-style sample of `length` tokens (within 1%) (Ling et al. 2025; LCCP §5.3):
    arithmetic for even `index`, comparison for odd; the premises in a random order at depths
    running evenly from `depth` to the end of the haystack (`needles` gives them in logical order)."""
    kind = "comparison" if index % 2 else "arithmetic"
    facts, question, answer = premises(rng, kind)
    order = rng.permutation(len(facts))  # order[t]: the premise placed t-th in the text
    depths = [0.0] * len(facts)
    for t, j in enumerate(order):
        depths[int(j)] = depth + (1 - depth) * t / len(facts)
    src = _haystack_source("essay", texts, rng)
    tail = TAIL.format(question=question)

    def build(c):
        ctx, spans = insert_needles(src[:c], list(zip(depths, facts)))
        return HEAD + ctx + tail + ANSWER, [(a + len(HEAD), b + len(HEAD)) for a, b in spans]

    text, n, spans = _fit(build, tokenizer, length, len(src))
    meta = {"question": question, "kind": kind, "max_new_tokens": MAX_NEW_TOKENS}
    return Sample(task, text[: -len(ANSWER)], ANSWER, [answer], n, depth, spans, meta)
