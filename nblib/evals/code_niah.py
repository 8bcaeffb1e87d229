"""RULER's three single-needle subtasks written in a code corpus's own format (LCCP paper §5.1
scores RULER's niah_single_1-3; Hsieh et al., 2024 define them).

RULER asks in English: the needle is "One of the special magic numbers for {key} is: {value}."
and the answer prefix "The special magic numbers for {key} mentioned in the provided text
are". A model trained only on Python source has never read such a sentence, and the answer
prefix does not repeat the needle's words, so copying alone cannot answer it. This module
keeps RULER's task (one key-value needle at a set depth in a haystack, asked for at the end,
scored by `string_match_all`) and writes it as code: the needle is an assignment line
`magic_number_{key} = {value}` (a UUID as a string literal), and the answer prefix is that
line's left side, so a model that retrieves by copying (an induction head) can answer.

    samples = make_task("niah_single_2_code", tokenizer, length=1024, n=10, haystack=texts)

| task               | haystack                        | value                  |
|--------------------|---------------------------------|------------------------|
| niah_single_1_code | repeated noise lines            | a 7-digit number       |
| niah_single_2_code | the corpus's held-out documents | a 7-digit number       |
| niah_single_3_code | the corpus's held-out documents | a UUID, a string       |

Sizing, depths, keys and values follow `nblib.evals.ruler` (same helpers): prompts within 1%
of `length` tokens, the needle's depth evenly over [0, 1] across a task's samples, keys from
the haystack's own words, needles inserted at line starts only.
"""

from __future__ import annotations

import numpy as np

from nblib.evals import ruler as R

TASKS = ("niah_single_1_code", "niah_single_2_code", "niah_single_3_code")
NOISE_CODE = "grass = 'green'\nsky = 'blue'\nsun = 'yellow'\nhere = 'we go'\nthere = 'and back again'\n"
HEADER = "# Magic {noun}s are hidden in this code. Memorize them.\n"
NEEDLE = "magic_{noun}_{key} = {literal}\n"
QUESTION = "\n# What is the magic {noun} for {key}?\n"
ANSWER = "magic_{noun}_{key} ="
LINE_START = r"\n"
_SPEC = {"niah_single_1_code": ("noise", "numbers"), "niah_single_2_code": ("essay", "numbers"),
         "niah_single_3_code": ("essay", "uuids")}


def make_task(task: str, tokenizer, length: int, n: int, seed: int = 0, haystack=()) -> list[R.Sample]:
    """n samples of one code-format single-needle task, `length` tokens each (within 1%), the
    needle's depth evenly spread over [0, 1]; `haystack`: the corpus's held-out documents (keys
    come from their words; niah_single_2/3_code also hide the needle in them). The same
    arguments give the same samples."""
    if task not in TASKS:
        raise ValueError(f"task={task!r} is not allowed; allowed: {', '.join(TASKS)}")
    if not (isinstance(n, int) and n >= 1) or not (isinstance(length, int) and length >= 32):
        raise ValueError(f"n={n!r}, length={length!r}; allowed: n an int >= 1, length an int >= 32")
    texts = list(haystack)
    words = [w for w in R.word_pool(texts if texts else [NOISE_CODE * 3, HEADER, QUESTION]) if w.isidentifier()]
    if len(words) < 40:
        raise ValueError(f"the haystack has only {len(words)} distinct words of 4-10 letters; the keys need >= 40")
    hay_kind, value_kind = _SPEC[task]
    noun = value_kind[:-1]
    depths = np.linspace(0.0, 1.0, n) if n > 1 else np.array([0.5])
    out = []
    for i, depth in enumerate(depths):
        rng = np.random.default_rng([seed, 100 + TASKS.index(task), length, i])
        key = R._key("words", rng, words, set())
        value = R._value(value_kind, rng)
        literal = value if value_kind == "numbers" else repr(value)
        src = NOISE_CODE * (16 * length // len(NOISE_CODE) + 1) if hay_kind == "noise" else \
            R._haystack_source("essay", texts, rng)
        needle = NEEDLE.format(noun=noun, key=key, literal=literal)
        head, question = HEADER.format(noun=noun), QUESTION.format(noun=noun, key=key)
        prefix = ANSWER.format(noun=noun, key=key)

        def build(c, src=src, needle=needle, head=head, question=question, prefix=prefix, depth=float(depth)):
            ctx, spans = R._insert(src[:c], [(depth, needle)], boundary=LINE_START)
            ctx = ctx if ctx.endswith("\n") else ctx + "\n"
            return head + ctx + question + prefix, [(a + len(head), b + len(head)) for a, b in spans]

        text, n_tok, spans = R._fit(build, tokenizer, length, len(src))
        out.append(R.Sample(task, text[: len(text) - len(prefix)], prefix, [value], n_tok, float(depth), spans,
                            {"keys": [key], "kind": value_kind}))
    return out
