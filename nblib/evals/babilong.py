"""BABILong qa1 / qa2, offline and sized in the evaluated model's tokens (Kuratov et al., 2024,
"BABILong: Testing the Limits of LLMs with Long Context Reasoning-in-a-Haystack",
github.com/booydar/babilong; the LCCP paper §5.3, Fig. 8b and App. C.3 / Fig. 14 evaluate with
it after long-context SFT). Part of `nblib.evals.long_benchmarks`, which documents what
follows BABILong and what is ours.

bAbI stories (Weston et al., 2015) hidden sentence by sentence, in order, in long unrelated
text: qa1 (single supporting fact: "Where is Mary?") and qa2 (two supporting facts: "Where is
the apple?", from who took it and where they went). BABILong's prompts and its answer check
(`compare_answers`: the first sentence of the output names the target location and no other).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nblib.evals.long_common import insert_needles, read_records
from nblib.evals.ruler import Sample, _fit, _haystack_source

TASKS = ("babilong_qa1", "babilong_qa2")
PERSONS = ("Mary", "John", "Daniel", "Sandra")
LOCATIONS = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")  # BABILong's TASK_LABELS qa1, qa2
OBJECTS = ("apple", "football", "milk")
MOVE = ("moved to", "went to", "journeyed to", "travelled to", "went back to")
TAKE = ("picked up", "got", "grabbed", "took")
DROP = ("dropped", "discarded", "put down", "left")
MAX_NEW_TOKENS = 20
# BABILong's prompts.py (DEFAULT_TEMPLATE and DEFAULT_PROMPTS qa1, qa2)
TEMPLATE = "{instruction}\n\n{examples}\n\n{post_prompt}\n\n<context>\n{context}\n</context>\n\nQuestion: {question}"
PROMPTS = {
    "qa1": dict(
        instruction="I will give you context with the facts about positions of different persons hidden in some "
                    "random text and a question. You need to answer the question based only on the information "
                    "from the facts. If a person was in different locations, use the latest location to answer "
                    "the question.",
        examples="<example>\nCharlie went to the hallway. Judith come back to the kitchen. Charlie travelled to "
                 "balcony. Where is Charlie?\nAnswer: The most recent location of Charlie is balcony.\n</example>"
                 "\n\n<example>\nAlan moved to the garage. Charlie went to the beach. Alan went to the shop. Rouse "
                 "travelled to balcony. Where is Alan?\nAnswer: The most recent location of Alan is shop.\n"
                 "</example>",
        post_prompt="Always return your answer in the following format: The most recent location of ’person’ is "
                    "’location’. Do not write anything else after that."),
    "qa2": dict(
        instruction="I give you context with the facts about locations and actions of different persons hidden "
                    "in some random text and a question.You need to answer the question based only on the "
                    "information from the facts.\nIf a person got an item in the first location and travelled to "
                    "the second location the item is also in the second location. If a person dropped an item in "
                    "the first location and moved to the second location the item remains in the first location.",
        examples="<example>\nCharlie went to the kitchen. Charlie got a bottle. Charlie moved to the balcony. Where "
                 "is the bottle?\nAnswer: The bottle is in the balcony.\n</example>\n<example>\nAlan moved to the "
                 "garage. Alan got a screw driver. Alan moved to the kitchen. Where is the screw driver?\nAnswer: "
                 "The screw driver is in the kitchen.\n</example>",
        post_prompt="Always return your answer in the following format: The ’item’ is in ’location’. "
                    "Do not write anything else after that."),
}


def _answer_prefix(question: str) -> str:
    """The start of BABILong's required answer format, so a model continues with the location."""
    what = question.removeprefix("Where is ").rstrip("?").strip()
    if what.startswith("the "):
        return f"\nAnswer: The {what[4:]} is in the"
    return f"\nAnswer: The most recent location of {what} is"


# ---------------------------------------------------------------------------------------
# Scoring (BABILong metrics.py)
# ---------------------------------------------------------------------------------------
def compare_answers(target: str, output: str, question: str, labels=LOCATIONS) -> bool:
    """BABILong's compare_answers: the output's first sentence (lowercased, cut before any
    "<context>", "<example>" or "question") must name the target and no other label, labels
    that the question names not counting."""
    out = output.lower().split(".")[0].split("<context>")[0].split("<example>")[0].split("question")[0]
    labels = {x.lower() for x in labels}
    named = {x for x in labels if x in out} - {x for x in labels if x in question.lower()}
    return target.lower() in named and len(named) == 1


def score_sample(sample: Sample, pred: str) -> float:
    """1.0 when BABILong's compare_answers accepts the prediction, else 0.0."""
    return float(compare_answers(sample.answers[0], pred, sample.meta["question"]))


# ---------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------
def story(kind: str, rng) -> tuple[list[str], str, str, list[int]]:
    """A bAbI qa1 or qa2 story: (facts in order, question, answer, indices of the supporting
    facts). qa1: 4-10 moves, "Where is <person>?" of someone who moved, supported by their last
    move. qa2: 8-16 moves, pick-ups and drops (only by someone whose location is known),
    "Where is the <object>?", supported by the last pick-up and the holder's last move, or by
    the drop and the dropper's last move before it; a held object that moved after being
    picked up is asked first."""
    pick = lambda seq: seq[int(rng.integers(0, len(seq)))]  # noqa: E731
    facts, where, last_move = [], {}, {}

    def move(p):
        loc = pick([x for x in LOCATIONS if x != where.get(p)])
        where[p], last_move[p] = loc, len(facts)
        facts.append(f"{p} {pick(MOVE)} the {loc}.")

    if kind == "qa1":
        for _ in range(int(rng.integers(4, 11))):
            move(pick(PERSONS))
        p = pick(sorted(where))
        return facts, f"Where is {p}?", where[p], [last_move[p]]
    holder, taken, dropped = {}, {}, {}  # object -> person; object -> fact index (pick-up / (drop, move))
    steps = int(rng.integers(8, 17))
    while True:
        located = [p for p in PERSONS if p in where]
        if not located or rng.random() < 0.5:
            move(pick(PERSONS))
        else:
            p = pick(located)
            mine, free = [o for o in OBJECTS if holder.get(o) == p], [o for o in OBJECTS if o not in holder]
            if mine and (not free or rng.random() < 0.5):
                o = pick(mine)
                del holder[o]
                dropped[o] = (len(facts), last_move[p], where[p])
                facts.append(f"{p} {pick(DROP)} the {o}.")
            elif free:
                o = pick(free)
                holder[o], taken[o] = p, len(facts)
                dropped.pop(o, None)
                facts.append(f"{p} {pick(TAKE)} the {o} there.")
            else:
                move(p)
        held = [o for o in OBJECTS if o in holder]
        moved = [o for o in held if last_move[holder[o]] > taken[o]]
        if len(facts) >= steps and (held or dropped):
            break
    if moved or held:
        o = pick(moved or held)
        return facts, f"Where is the {o}?", where[holder[o]], sorted([taken[o], last_move[holder[o]]])
    o = pick(sorted(dropped))
    at, mv, loc = dropped[o]
    return facts, f"Where is the {o}?", loc, sorted([mv, at])


def make_sample(task: str, tokenizer, length: int, depth: float, rng, texts=(), index: int = 0) -> Sample:
    """One BABILong-style sample of `length` tokens (within 1%) (Kuratov et al. 2024; LCCP
    §5.3): a bAbI story's facts at sorted uniform random depths of the held-out haystack, in
    BABILong's prompt. `needles` are the supporting facts' spans, meta["facts"] every fact's."""
    kind = task.split("_")[1]
    facts, question, answer, support = story(kind, rng)
    depths = np.sort(rng.random(len(facts)))
    src = _haystack_source("essay", texts, rng)
    head, tail = TEMPLATE.format(context="\0", question=question, **PROMPTS[kind]).split("\0")
    prefix = _answer_prefix(question)

    def build(c):
        ctx, spans = insert_needles(src[:c].strip(), list(zip(depths.tolist(), facts)))
        return head + ctx + tail + prefix, [(a + len(head), b + len(head)) for a, b in spans]

    text, n, spans = _fit(build, tokenizer, length, len(src))
    meta = {"question": question, "facts": spans, "support": support, "max_new_tokens": MAX_NEW_TOKENS}
    return Sample(task, text[: -len(prefix)], prefix, [answer], n, None, [spans[i] for i in support], meta)


# ---------------------------------------------------------------------------------------
# BABILong's data, for users who have it locally
# ---------------------------------------------------------------------------------------
def load_babilong(path: str | Path, task: str | None = None, tokenizer=None) -> list[Sample]:
    """BABILong rows (fields input, question, target, as in the RMT-team/babilong datasets;
    read from a local parquet / jsonl / json copy) as Samples in this module's prompt (LCCP
    §5.3). `task` "qa1" / "qa2" (or "babilong_qa1" / "babilong_qa2"); None infers it per row
    from the question ("Where is the <object>?" is qa2). n_tokens counted with `tokenizer`
    (0 without one)."""
    out = []
    for row in read_records(path):
        question, target = str(row["question"]).strip(), str(row["target"]).strip()
        kind = (task or ("qa2" if question.startswith("Where is the ") else "qa1")).removeprefix("babilong_")
        if kind not in PROMPTS:
            raise ValueError(f"task={task!r} is not allowed; allowed: qa1, qa2, babilong_qa1, babilong_qa2")
        head, tail = TEMPLATE.format(context="\0", question=question, **PROMPTS[kind]).split("\0")
        prompt, prefix = head + str(row["input"]).strip() + tail, _answer_prefix(question)
        n = len(tokenizer.encode(prompt + prefix)) if tokenizer is not None else 0
        out.append(Sample(f"babilong_{kind}", prompt, prefix, [target], n, None, [],
                          {"question": question, "source": str(path), "max_new_tokens": MAX_NEW_TOKENS}))
    return out
