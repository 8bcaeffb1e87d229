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

Two levers change the form and nothing else (sizing, depths, values and `string_match_all`
stay RULER's); chapter 5 measures them on the toy's S5:
- `haystack_form`: "code" (above); "comments", every haystack line a comment (RULER's noise
  sentences one per line for niah_single_1_code, the held-out documents' lines commented out
  for the others); "prose", as "comments" with every line holding an "=" dropped, so the
  needle is the only assignment in the context.
- `key_form`: "magic" (`magic_number_{key} = ...`, above) or "word", the needle key a single
  haystack word that is one token of the tokenizer, not a keyword, and never assigned in the
  haystack (`{key} = ...`, answered from `{key} =`): the key and " =" together occur only in
  the needle.
"""

from __future__ import annotations

import dataclasses
import keyword
import re

import numpy as np
import torch

from nblib.evals import ruler as R

TASKS = ("niah_single_1_code", "niah_single_2_code", "niah_single_3_code")
NOISE_CODE = "grass = 'green'\nsky = 'blue'\nsun = 'yellow'\nhere = 'we go'\nthere = 'and back again'\n"
HEADER = "# Magic {noun}s are hidden in this code. Memorize them.\n"
NEEDLE = "magic_{noun}_{key} = {literal}\n"
QUESTION = "\n# What is the magic {noun} for {key}?\n"
ANSWER = "magic_{noun}_{key} ="
LINE_START = r"\n"
HAYSTACK_FORMS = ("code", "comments", "prose")
KEY_FORMS = ("magic", "word")
VALUE_FORMS = ("ruler", "short")
SHORT_PIECES = 2  # a short value is at most this many tokens (with its leading space)
STOP_SLACK = 2  # tokens generated past a short value's own length
_SPEC = {"niah_single_1_code": ("noise", "numbers"), "niah_single_2_code": ("essay", "numbers"),
         "niah_single_3_code": ("essay", "uuids")}


def _as_comments(src: str, drop_assignments: bool) -> str:
    """Every line of `src` as a comment line ("# ..."); blank lines stay blank; with
    `drop_assignments`, lines holding an "=" are left out first."""
    lines = [ln for ln in src.split("\n") if not (drop_assignments and "=" in ln)]
    return "\n".join(f"# {ln.strip()}" if ln.strip() else "" for ln in lines)


def _one_token_keys(words: list[str], tokenizer, src: str) -> list[str]:
    """Haystack words that are a single token at a line start, not a Python keyword, and never
    followed by "=" anywhere in `src`, not even as the end of a longer name ("variable =" rules
    out "able"): the key's token and " =" then meet only in the needle."""
    return [w for w in words if len(tokenizer.encode(w)) == 1 and len(tokenizer.encode("\n" + w)) == 2
            and not keyword.iskeyword(w) and not keyword.issoftkeyword(w)
            and not re.search(rf"{w}\s*=", src)]


def _fewest_pieces(candidates, tokenizer) -> list:
    """The candidates whose " {c}" is at most SHORT_PIECES tokens, or, where the tokenizer
    makes none that short (byte tokens), those with the fewest tokens."""
    n = {c: len(tokenizer.encode(f" {c}")) for c in candidates}
    limit = max(SHORT_PIECES, min(n.values(), default=SHORT_PIECES))
    return [c for c in candidates if n[c] <= limit]


def short_numbers(tokenizer) -> list[int]:
    """The short value pool of niah_single_1/2_code: the 2-3 digit numbers of the fewest
    tokens (at most SHORT_PIECES in a BPE), ascending."""
    return _fewest_pieces(range(10, 1000), tokenizer)


def _short_value(kind: str, rng, tokenizer, words: list[str], src: str, key: str) -> str:
    """A value of at most SHORT_PIECES tokens: a number for the number tasks, otherwise an
    identifier of the haystack's word pool that the prompt's haystack never contains."""
    if kind == "numbers":
        pool = short_numbers(tokenizer)
    else:
        present = set(re.findall(r"\w+", src))
        pool = _fewest_pieces([w for w in words if w != key and w not in present], tokenizer)
    if not pool:
        raise ValueError(f"value_form='short' found no {kind[:-1]} value absent from the haystack")
    return str(pool[int(rng.integers(0, len(pool)))])


def without_needle(sample: R.Sample) -> R.Sample:
    """The control of a single-needle sample: the same prompt with the needle line (and its
    newline) removed, the same answer prefix, references and scoring; `needles` empty."""
    (a, b), = sample.needles[:1]
    prompt = sample.prompt[:a] + sample.prompt[b + 1:]
    return dataclasses.replace(sample, prompt=prompt, needles=[], meta=sample.meta | {"control": True})


def make_task(task: str, tokenizer, length: int, n: int, seed: int = 0, haystack=(), haystack_form: str = "code",
              key_form: str = "magic", value_form: str = "ruler") -> list[R.Sample]:
    """n samples of one code-format single-needle task, `length` tokens each (within 1%), the
    needle's depth evenly spread over [0, 1]; `haystack`: the corpus's held-out documents (keys
    come from their words; niah_single_2/3_code also hide the needle in them); `haystack_form`,
    `key_form` and `value_form` as in the module docstring. The same arguments give the same
    samples."""
    if task not in TASKS:
        raise ValueError(f"task={task!r} is not allowed; allowed: {', '.join(TASKS)}")
    if haystack_form not in HAYSTACK_FORMS or key_form not in KEY_FORMS or value_form not in VALUE_FORMS:
        raise ValueError(f"haystack_form={haystack_form!r}, key_form={key_form!r}, value_form={value_form!r}; "
                         f"allowed: haystack_form one of {', '.join(HAYSTACK_FORMS)}, key_form one of "
                         f"{', '.join(KEY_FORMS)}, value_form one of {', '.join(VALUE_FORMS)}")
    if not (isinstance(n, int) and n >= 1) or not (isinstance(length, int) and length >= 32):
        raise ValueError(f"n={n!r}, length={length!r}; allowed: n an int >= 1, length an int >= 32")
    texts = list(haystack)
    words = [w for w in R.word_pool(texts if texts else [NOISE_CODE * 3, HEADER, QUESTION]) if w.isidentifier()]
    if len(words) < 40:
        raise ValueError(f"the haystack has only {len(words)} distinct words of 4-10 letters; the keys need >= 40")
    hay_kind, value_kind = _SPEC[task]
    # a short value of niah_single_3_code is a word (an identifier as a string), not a UUID
    noun = "word" if (value_kind, value_form) == ("uuids", "short") else value_kind[:-1]
    depths = np.linspace(0.0, 1.0, n) if n > 1 else np.array([0.5])
    out = []
    for i, depth in enumerate(depths):
        rng = np.random.default_rng([seed, 100 + TASKS.index(task), length, i])
        if key_form == "magic":  # the original draw order, so the default samples never change
            key = R._key("words", rng, words, set())
        value = R._value(value_kind, rng)
        if hay_kind == "essay":
            src = R._haystack_source("essay", texts, rng)
            src = src if haystack_form == "code" else _as_comments(src, drop_assignments=haystack_form == "prose")
        elif haystack_form == "code":
            src = NOISE_CODE * (16 * length // len(NOISE_CODE) + 1)
        else:  # RULER's own noise sentences, one comment line each
            lines = "".join(f"# {x.strip()}.\n" for x in R.NOISE.split(".") if x.strip())
            src = lines * (16 * length // len(lines) + 1)
        if key_form == "word":
            pool = _one_token_keys(words, tokenizer, src[: 16 * length])  # no prompt uses more of src
            if len(pool) < 8:
                raise ValueError(f"key_form='word' needs >= 8 one-token words never assigned in the haystack; "
                                 f"this one has {len(pool)}")
            key = pool[int(rng.integers(0, len(pool)))]
        if value_form == "short":  # drawn after the key: the ruler-form samples never change
            value = _short_value(value_kind, rng, tokenizer, words, src[: 16 * length], key)
        literal = value if value_kind == "numbers" else repr(value)
        if key_form == "word":
            needle, prefix = f"{key} = {literal}\n", f"{key} ="
        else:
            needle, prefix = NEEDLE.format(noun=noun, key=key, literal=literal), ANSWER.format(noun=noun, key=key)
        head, question = HEADER.format(noun=noun), QUESTION.format(noun=noun, key=key)

        def build(c, src=src, needle=needle, head=head, question=question, prefix=prefix, depth=float(depth)):
            ctx, spans = R._insert(src[:c], [(depth, needle)], boundary=LINE_START)
            ctx = ctx if ctx.endswith("\n") else ctx + "\n"
            return head + ctx + question + prefix, [(a + len(head), b + len(head)) for a, b in spans]

        text, n_tok, spans = R._fit(build, tokenizer, length, len(src))
        out.append(R.Sample(task, text[: len(text) - len(prefix)], prefix, [value], n_tok, float(depth), spans,
                            {"keys": [key], "kind": value_kind}
                            | ({} if (haystack_form, key_form) == ("code", "magic") else
                               {"haystack_form": haystack_form, "key_form": key_form})
                            | ({} if value_form == "ruler" else
                               {"value_form": value_form,
                                "stop_after_tokens": len(tokenizer.encode(f" {literal}")) + STOP_SLACK})))
    return out


@torch.no_grad()
def needle_logprobs(model, tokenizer, sample: R.Sample) -> dict:
    """Teacher-forced: log-probabilities of the needle's right-hand side (the value as written
    in the needle) after the prompt + answer prefix, with the needle in the prompt and with
    the needle line removed; and whether the first value token is the argmax."""
    (a, b), = sample.needles[:1]
    cont = sample.prompt[a:b][len(sample.answer_prefix):]  # " 8418021" or " '<uuid>'"
    without = without_needle(sample).prompt
    out = {}
    for name, prompt in (("with", sample.prompt), ("without", without)):
        ctx = list(tokenizer.encode(prompt + sample.answer_prefix))
        full = list(tokenizer.encode(prompt + sample.answer_prefix + cont))
        if full[:len(ctx)] != ctx:
            raise ValueError(f"the value {cont!r} merges with the answer prefix in the tokenizer; "
                             "the teacher-forced score needs a clean token boundary")
        ids = torch.as_tensor(full, dtype=torch.long)[None]
        logits, _ = model(ids[:, :-1])
        logp = torch.log_softmax(logits.float(), dim=-1)[0]
        tgt = ids[0, len(ctx):]
        lp = logp[len(ctx) - 1:].gather(-1, tgt[:, None])[:, 0]
        out[name] = float(lp.mean())
        if name == "with":
            hits = logp[len(ctx) - 1:].argmax(-1) == tgt  # teacher-forced: each piece given the true ones before it
            out["first_hit"] = bool(hits[0])
            out["piece_hit"] = float(hits.float().mean())
            out["all_hit"] = bool(hits.all())
    return out


def needle_measures(model, tokenizer, samples: list[R.Sample], max_new_tokens: int | None = None) -> dict:
    """One task's needle measures on one model (chapter 5's needle trajectory): RULER's score
    (greedy decoding, `string_match_all`, x100), the control's score (`without_needle`, decoded
    and scored the same way), and the teacher-forced measures of `needle_logprobs` averaged
    over the samples: the needle gain (nats per value token, with the needle against without
    it), the share of value pieces that are the argmax given the true ones before them
    (piece_hit), the first piece's and the whole value's hit rates."""
    preds = R.predict(model, tokenizer, samples, max_new_tokens)
    controls = [without_needle(s) for s in samples]
    lps = [needle_logprobs(model, tokenizer, s) for s in samples]
    return {"score": R.score_task(samples, preds),
            "control_score": R.score_task(controls, R.predict(model, tokenizer, controls, max_new_tokens)),
            "needle_gain": float(np.mean([x["with"] - x["without"] for x in lps])),
            "piece_hit": float(np.mean([x["piece_hit"] for x in lps])),
            "first_hit": float(np.mean([x["first_hit"] for x in lps])),
            "whole_hit": float(np.mean([x["all_hit"] for x in lps]))}
