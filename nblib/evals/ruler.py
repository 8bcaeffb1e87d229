"""RULER's 13 subtasks, offline and deterministic from a seed (Hsieh et al., 2024, "RULER:
What's the Real Context Size of Your Long-Context Language Models?"; the LCCP paper §5.1,
Fig. 7 and Fig. 12 evaluate with it).

    samples = make_task("niah_single_2", tokenizer, length=4096, n=100, seed=0, haystack=texts)
    preds = predict(model, tokenizer, samples)          # greedy, through the KV cache
    score = score_task(samples, preds)                  # RULER's string_match_all / _part, x100

What follows RULER and what is ours:
- Task definitions, needle sentences, question templates, answer prefixes and the two
  scorers follow RULER's (NVIDIA/RULER, `synthetic.yaml` and `eval/synthetic/constants.py`).
- Haystacks: RULER's "noise" sentences for niah_single_1 and vt; for the "essay" tasks, the
  project's own held-out corpus text (`haystack=`) instead of downloaded Paul Graham essays.
- QA (qa_1, qa_2): synthetic documents, since SQuAD and HotpotQA need downloading. qa_1
  asks one attribute of one entity whose value appears in exactly one passage among
  passages about other entities; qa_2 is two-hop (a person's birth city in one passage, the
  city's country in another). `load_squad` / `load_hotpotqa` read local copies of those
  datasets into the same form, for users who have them.
- Keys are words from the haystack's own vocabulary (RULER draws English words); values
  are 7-digit numbers or UUIDs drawn from the seed.
- Prompts are sized in the evaluated model's own tokens to the target length (within 1%),
  by a search over the haystack's length in characters; the queried needle's depth runs
  evenly from 0 to 1 over a task's samples.
- cwe at short contexts: RULER's 30 / 3 occurrences of 10 common / other words do not fit
  a few hundred tokens, so the counts shrink (never below a 2x gap) until they fit.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NIAH_TASKS = ("niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2",
              "niah_multikey_3", "niah_multivalue", "niah_multiquery")
TASKS = (*NIAH_TASKS, "vt", "cwe", "fwe", "qa_1", "qa_2")

# task -> (haystack, key kind, value kind, needles, values per key, keys asked)
NIAH = {
    "niah_single_1": ("noise", "words", "numbers", 1, 1, 1),
    "niah_single_2": ("essay", "words", "numbers", 1, 1, 1),
    "niah_single_3": ("essay", "words", "uuids", 1, 1, 1),
    "niah_multikey_1": ("essay", "words", "numbers", 4, 1, 1),
    "niah_multikey_2": ("needle", "words", "numbers", 1, 1, 1),
    "niah_multikey_3": ("needle", "uuids", "uuids", 1, 1, 1),
    "niah_multivalue": ("essay", "words", "numbers", 1, 4, 1),
    "niah_multiquery": ("essay", "words", "numbers", 4, 1, 4),
}
NIAH_TEMPLATE = ("Some special magic {kind} are hidden within the following text. Make sure to memorize it. "
                 "I will quiz you about the {kind} afterwards.\n{context}\nWhat are all the special magic {kind} "
                 "for {query} mentioned in the provided text?")
NIAH_ANSWER = " The special magic {kind} for {query} mentioned in the provided text are"
NEEDLE = "One of the special magic {kind} for {key} is: {value}."
VT_TEMPLATE = ("Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
               "Question: Find all variables that are assigned the value {query} in the text above.")
VT_ANSWER = (" Answer: According to the chain(s) of variable assignment in the text above, {n} variables are "
             "assigned the value {query}, they are: ")
CWE_TEMPLATE = ("Below is a numbered list of words. In these words, some appear more often than others. Memorize "
                "the ones that appear most often.\n{context}\nQuestion: What are the 10 most common words in the "
                "above list?")
CWE_ANSWER = " Answer: The top 10 words that appear most often in the list are:"
FWE_TEMPLATE = ("Read the following coded text and track the frequency of each coded word. Find the three most "
                "frequently appeared coded words. {context}\nQuestion: Do not provide any explanation. Please ignore "
                "the dots '....'. What are the three most frequently appeared words in the above coded text?")
FWE_ANSWER = " Answer: According to the coded text above, the three most frequently appeared words are:"
QA_TEMPLATE = ("Answer the question based on the given documents. Only give me the answer and do not output any "
               "other words.\n\nThe following are given documents.\n\n{context}\n\nAnswer the question based on "
               "the given documents. Only give me the answer and do not output any other words.\n\nQuestion: {query}")
QA_ANSWER = " Answer:"
MAX_NEW_TOKENS = {**{t: 128 for t in NIAH_TASKS}, "vt": 30, "cwe": 120, "fwe": 50, "qa_1": 32, "qa_2": 32}


@dataclass
class Sample:
    """One RULER prompt: `prompt` (template with the context) + `answer_prefix` is what the
    model reads; `answers` are the references; `needles` the (start, end) character spans of
    the inserted needles in `prompt` (the queried ones first); `depth` the queried needle's
    relative depth in the haystack (None where the task has none); `n_tokens` the prompt's
    length in the sizing tokenizer's tokens."""

    task: str
    prompt: str
    answer_prefix: str
    answers: list
    n_tokens: int
    depth: float | None = None
    needles: list = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.prompt + self.answer_prefix


# ---------------------------------------------------------------------------------------
# Scoring (RULER eval/synthetic/constants.py)
# ---------------------------------------------------------------------------------------
def string_match_all(preds, refs) -> float:
    """Mean over samples of the fraction of a sample's references found in its prediction
    (case-insensitive substring), x100 (RULER's niah, vt, cwe and fwe metric)."""
    _same_length(preds, refs)
    return 100.0 * float(np.mean([np.mean([r.lower() in p.lower() for r in rs]) for p, rs in zip(preds, refs)]))


def string_match_part(preds, refs) -> float:
    """Mean over samples of 1 if any reference is found in the prediction, x100 (RULER's QA metric)."""
    _same_length(preds, refs)
    return 100.0 * float(np.mean([max(r.lower() in p.lower() for r in rs) for p, rs in zip(preds, refs)]))


def _same_length(preds, refs):
    if len(preds) != len(refs) or not len(preds):
        raise ValueError(f"need as many predictions as reference lists (> 0), got {len(preds)} and {len(refs)}")


def score_task(samples: list[Sample], preds: list[str]) -> float:
    """A task's RULER score: string_match_part for qa_1 / qa_2, string_match_all otherwise."""
    refs = [s.answers for s in samples]
    return (string_match_part if samples[0].task.startswith("qa") else string_match_all)(preds, refs)


# ---------------------------------------------------------------------------------------
# Building prompts
# ---------------------------------------------------------------------------------------
def word_pool(texts, min_len: int = 4, max_len: int = 10, limit: int = 5000) -> list[str]:
    """Distinct lowercase alphabetic words of the haystack text, most frequent first: RULER's
    keys and cwe words, taken from the evaluated corpus instead of an English word list."""
    counts = Counter(w.lower() for t in texts for w in re.findall(rf"\b[A-Za-z]{{{min_len},{max_len}}}\b", t))
    return [w for w, _ in counts.most_common(limit)]


def _value(kind: str, rng) -> str:
    if kind == "numbers":
        return str(int(rng.integers(1_000_000, 10_000_000)))
    return str(uuid.UUID(int=int(rng.integers(0, 2**63)) << 64 | int(rng.integers(0, 2**63)), version=4))


def _key(kind: str, rng, words: list[str], taken: set) -> str:
    while True:
        k = _value("uuids", rng) if kind == "uuids" else words[int(rng.integers(0, len(words)))]
        if k not in taken:
            taken.add(k)
            return k


SENTENCE_OR_LINE = r"\n|(?<=[.!?]) "


def _boundaries(text: str, boundary: str = SENTENCE_OR_LINE) -> np.ndarray:
    """Character offsets where a needle may go: the ends of `boundary`'s matches (by default
    after a line break or a sentence end), plus the text's start and end."""
    pos = [0] + [m.end() for m in re.finditer(boundary, text)] + [len(text)]
    return np.unique(np.asarray(pos))


def _insert(hay: str, needles: list[tuple[float, str]], boundary: str = SENTENCE_OR_LINE
            ) -> tuple[str, list[tuple[int, int]]]:
    """Insert needle sentences at relative depths (each at the nearest `boundary`), returning
    the text and every needle's (start, end) span in it, in the input order. A needle that
    ends in whitespace (a whole line) is inserted as it is; its span leaves that whitespace out."""
    b = _boundaries(hay, boundary)
    at = [int(b[np.abs(b - d * len(hay)).argmin()]) for d, _ in needles]
    order = np.argsort(at, kind="stable")
    out, spans, last = [], [None] * len(needles), 0
    for i in order:
        piece, needle = hay[last:at[i]], needles[i][1]
        whole = needle != needle.rstrip()
        if whole:  # a line: it starts a line of its own
            sep = "" if not piece or piece.endswith("\n") else "\n"
        else:
            sep = "" if not piece or piece.endswith(("\n", " ")) else " "
        out.append(piece + sep)
        start = sum(map(len, out))
        out.append(needle + (" " if not whole and at[i] < len(hay) and not hay[at[i]:at[i] + 1].isspace() else ""))
        spans[i] = (start, start + len(needle.rstrip()))
        last = at[i]
    out.append(hay[last:])
    return "".join(out), spans


def _fit(build, tokenizer, length: int, max_chars: int) -> tuple[str, int, object]:
    """Largest haystack size c (characters) whose prompt build(c) has <= length tokens, by
    bisection then a short local scan (BPE counts are nearly, not exactly, monotone in c)."""
    count = lambda c: len(tokenizer.encode(build(c)[0]))  # noqa: E731
    lo, hi = 0, min(max_chars, 16 * length)  # no token spans 16 characters here
    if count(0) > length:
        raise ValueError(f"the template alone needs {count(0)} tokens; length={length} is too short for it")
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(mid) <= length:
            lo = mid
        else:
            hi = mid - 1
    best = lo
    for c in range(lo + 1, min(max_chars, lo + 24) + 1):
        if count(c) <= length:
            best = c
    text, extra = build(best)
    return text, len(tokenizer.encode(text)), extra


def _haystack_source(kind: str, texts, rng) -> str:
    if kind == "noise":
        return " ".join([NOISE] * 4000)
    if not texts:
        raise ValueError("this task needs haystack texts (the corpus's held-out documents); got none")
    order = rng.permutation(len(texts))
    return "\n".join(texts[i] for i in order[: min(len(order), 400)])


def _niah_sample(task, tokenizer, length, depth, rng, texts, words) -> Sample:
    hay_kind, key_kind, value_kind, n_needles, n_values, n_queries = NIAH[task]
    kind = "numbers" if value_kind == "numbers" else "uuids"
    taken: set = set()
    keys = [_key(key_kind, rng, words, taken) for _ in range(max(n_needles, n_queries))]
    values = {k: [_value(value_kind, rng) for _ in range(n_values)] for k in keys}
    asked = keys[:n_queries]
    placed = [(k, v) for k in keys for v in values[k]]  # asked keys first
    depths = [depth] + [float(rng.random()) for _ in placed[1:]]
    src = _haystack_source(hay_kind, texts, rng)
    if hay_kind == "needle":  # RULER: the haystack is made of distractor needles, all keys distinct
        if key_kind == "uuids":
            others = [_key("uuids", rng, words, taken) for _ in range(2000)]
        else:
            free = [w for w in (words[int(i)] for i in rng.permutation(len(words))) if w not in taken]
            others = free + [f"{a}-{b}" for a, b in zip(free, free[1:] + free[:1])]
        src = " ".join(NEEDLE.format(kind=kind, key=k, value=_value(value_kind, rng)) for k in others[:2000])
    query = ", ".join(asked[:-1]) + (" and " if len(asked) > 1 else "") + asked[-1]
    needle_texts = [(d, NEEDLE.format(kind=kind, key=k, value=v)) for d, (k, v) in zip(depths, placed)]

    def build(c):
        ctx, spans = _insert(src[:c], needle_texts)
        prompt = NIAH_TEMPLATE.format(kind=kind, context=ctx, query=query)
        offset = prompt.index(ctx) if ctx else 0
        return prompt + NIAH_ANSWER.format(kind=kind, query=query), [(a + offset, b + offset) for a, b in spans]

    text, n, spans = _fit(build, tokenizer, length, len(src))
    prefix = NIAH_ANSWER.format(kind=kind, query=query)
    answers = [v for k in asked for v in values[k]]
    return Sample(task, text[: len(text) - len(prefix)], prefix, answers, n, depth, spans,
                  {"keys": asked, "kind": kind})


def _vt_sample(tokenizer, length, depth, rng, hops: int = 4) -> Sample:
    names, taken = [], set()
    while len(names) < hops + 1:
        v = "".join(chr(65 + int(x)) for x in rng.integers(0, 26, 5))
        if v not in taken:
            taken.add(v)
            names.append(v)
    value = str(int(rng.integers(10000, 100000)))
    chain = [f"VAR {names[0]} = {value}."] + [f"VAR {names[i]} = VAR {names[i - 1]}." for i in range(1, hops + 1)]
    # the chain spread evenly from `depth` to the end of the haystack, in order
    depths = [depth + (1 - depth) * i / (hops + 1) for i in range(hops + 1)]
    src = " ".join([NOISE] * 4000)

    def build(c):
        ctx, spans = _insert(src[:c], list(zip(depths, chain)))
        prompt = VT_TEMPLATE.format(context=ctx, query=value)
        off = prompt.index(ctx) if ctx else 0
        return prompt + VT_ANSWER.format(n=hops + 1, query=value), [(a + off, b + off) for a, b in spans]

    text, n, spans = _fit(build, tokenizer, length, len(src))
    prefix = VT_ANSWER.format(n=hops + 1, query=value)
    return Sample("vt", text[: len(text) - len(prefix)], prefix, names, n, depth, spans, {"value": value})


def _cwe_sample(tokenizer, length, rng, words) -> Sample:
    common = [words[int(i)] for i in rng.choice(len(words), 10, replace=False)]
    rest = [w for w in words if w not in common]
    shuffle = int(rng.integers(0, 2**31))
    for freq_cw, freq_ucw in ((30, 3), (20, 3), (12, 2), (8, 2), (6, 2), (4, 2), (2, 1)):
        others = [rest[int(i)] for i in np.random.default_rng(shuffle).permutation(len(rest))]
        stream = " ".join(w for w in others for _ in range(freq_ucw))

        def build(c, freq_cw=freq_cw, stream=stream):
            # c characters of the other words' stream (a cut last word is a fragment seen once)
            bag = [w for w in common for _ in range(freq_cw)] + stream[:c].split()
            order = np.random.default_rng([shuffle, len(bag)]).permutation(len(bag))
            listing = "\n".join(f"{i + 1}. {bag[j]}" for i, j in enumerate(order))
            return CWE_TEMPLATE.format(context=listing) + CWE_ANSWER, None
        if len(tokenizer.encode(build(0)[0])) <= length:
            break
    else:
        raise ValueError(f"cwe does not fit length={length} tokens even with 2 occurrences of 10 words")
    text, n, _ = _fit(build, tokenizer, length, len(stream))
    return Sample("cwe", text[: len(text) - len(CWE_ANSWER)], CWE_ANSWER, common, n, None, [],
                  {"freq_common": freq_cw, "freq_other": freq_ucw})


def _fwe_sample(tokenizer, length, rng, alpha: float = 2.0) -> Sample:
    vocab = sorted({"".join(chr(97 + int(x)) for x in rng.integers(0, 26, 5)) for _ in range(400)})
    vocab = [vocab[int(i)] for i in rng.permutation(len(vocab))]
    draws = rng.zipf(alpha, 20000)
    draws = draws[draws <= len(vocab)] - 1
    stream = " .... ".join(vocab[i] for i in draws)

    def build(c):  # c characters of the coded text; a cut last word is not counted
        words = stream[:c].split(" .... ")
        counts = Counter(w for w in words[:-1] if w) + Counter(words[-1:] if stream[c:c + 1] in ("", " ") else [])
        return FWE_TEMPLATE.format(context=stream[:c]) + FWE_ANSWER, counts

    text, n, counts = _fit(build, tokenizer, length, len(stream))
    top = counts.most_common(4)
    answers = [w for w, _ in top[:3]]
    return Sample("fwe", text[: len(text) - len(FWE_ANSWER)], FWE_ANSWER, answers, n, None, [],
                  {"counts": [c for _, c in top]})


FIRST = ("Arlen", "Brisa", "Corvin", "Delia", "Evander", "Fenna", "Gideon", "Halle", "Ivo", "Jessa", "Kiran",
         "Liora", "Matteo", "Nerys", "Osric", "Petra", "Quill", "Rosalind", "Soren", "Talia")
LAST = ("Ashdown", "Brightwater", "Calloway", "Dunmore", "Everly", "Fairholm", "Greaves", "Hollis", "Ingram",
        "Jessop", "Kestrel", "Lockwood", "Marlow", "Northcott", "Oakley", "Penrose", "Quarry", "Redfern")
ATTRIBUTES = (("favourite colour", ("amber", "cobalt", "crimson", "jade", "ochre", "violet", "teal", "silver")),
              ("home town", ("Varnholt", "Quessel", "Dravik", "Olmere", "Tarrow", "Zennick", "Burra", "Ilvay")),
              ("profession", ("cartographer", "glassblower", "archivist", "beekeeper", "luthier", "surveyor")),
              ("pet", ("ferret", "tortoise", "parrot", "lynx", "heron", "axolotl", "gecko")))
COUNTRIES = ("Valdoria", "Kestmark", "Orrenland", "Tavoria", "Quelmar", "Brisund", "Ellarch", "Zemora")


def _qa_sample(task, tokenizer, length, depth, rng, items=None) -> Sample:
    people = [f"{a} {b}" for a in FIRST for b in LAST]
    people = [people[int(i)] for i in rng.permutation(len(people))]
    if items:  # real QA data (load_squad / load_hotpotqa): gold passages among others
        item = items[int(rng.integers(0, len(items)))]
        gold, question, answers = list(item["gold"]), item["question"], list(item["answers"])
        others = [x for x in item["others"]] + [g for it in items if it is not item for g in it["gold"]]
        pool = [others[int(i)] for i in rng.permutation(len(others))]
    elif task == "qa_1":
        attr, values = ATTRIBUTES[int(rng.integers(0, len(ATTRIBUTES)))]
        gold_person = people[0]
        answer = values[int(rng.integers(0, len(values)))]
        gold = [f"{gold_person} is a member of the society. The {attr} of {gold_person} is {answer}."]
        question = f"What is the {attr} of {gold_person}?"

        def distractor(i):
            v = values[int(rng.integers(0, len(values)))]
            return f"{people[i]} is a member of the society. The {attr} of {people[i]} is {v}."
    else:
        cities = [f"{c}{s}" for c in ("Port ", "New ", "Old ", "East ", "West ") for s in
                  ("Harrow", "Lisle", "Corrin", "Mabry", "Tolland", "Fenwick", "Aldous", "Sarn")]
        cities = [cities[int(i)] for i in rng.permutation(len(cities))]
        gold_person, city = people[0], cities[0]
        answer = COUNTRIES[int(rng.integers(0, len(COUNTRIES)))]
        gold = [f"{gold_person} was born in {city}.", f"{city} is a city in the country of {answer}."]
        question = f"In which country was {gold_person} born?"

        def distractor(i):
            c = cities[1 + i % (len(cities) - 1)]
            if i % 2:
                return f"{people[i]} was born in {c}."
            return f"{c} is a city in the country of {COUNTRIES[int(rng.integers(0, len(COUNTRIES)))]}."
    if not items:
        pool, answers = [distractor(i) for i in range(1, len(people))], [answer]

    # every document carries a fixed number in its header, so the context can be cut at any
    # character (RULER numbers them in order; the numbers carry no information either way)
    ids = rng.permutation(len(pool) + len(gold)) + 1
    gold = [f"Document {i}:\n{g}" for i, g in zip(ids[:len(gold)], gold)]
    pool = [f"Document {i}:\n{d}" for i, d in zip(ids[len(gold):], pool)]
    ends = np.cumsum([len(d) + 2 for d in pool])  # each distractor plus its separator

    def build(c):  # c characters of distractor documents: the whole ones, then a cut one
        k = int(np.searchsorted(ends, c, side="right"))
        done = int(ends[k - 1]) if k else 0
        docs = pool[:k] + ([pool[k][: c - done]] if k < len(pool) and c > done else [])
        where = int(round(depth * len(docs)))
        docs = docs[:where] + gold + docs[where:]
        prompt = QA_TEMPLATE.format(context="\n\n".join(docs), query=question)
        spans = [(prompt.index(g), prompt.index(g) + len(g)) for g in gold]
        return prompt + QA_ANSWER, spans

    text, n, spans = _fit(build, tokenizer, length, int(ends[-1]))
    return Sample(task, text[: len(text) - len(QA_ANSWER)], QA_ANSWER, answers, n, depth, spans,
                  {"question": question})


def make_task(task: str, tokenizer, length: int, n: int, seed: int = 0, haystack=(), qa_items=None) -> list[Sample]:
    """n samples of one RULER subtask, each `length` tokens long (within 1%) in `tokenizer`'s
    tokens, the queried needle's depth evenly spread over [0, 1] across the samples.
    `haystack`: texts for the essay haystacks and the key words (the corpus's held-out
    documents). `qa_items`: real QA data for qa_1 / qa_2 (`load_squad`, `load_hotpotqa`)
    instead of the synthetic documents. The same arguments give the same samples."""
    if task not in TASKS:
        raise ValueError(f"task={task!r} is not allowed; allowed: {', '.join(TASKS)}")
    if not (isinstance(n, int) and n >= 1) or not (isinstance(length, int) and length >= 32):
        raise ValueError(f"n={n!r}, length={length!r}; allowed: n an int >= 1, length an int >= 32")
    texts = list(haystack)
    words = word_pool(texts) if texts else word_pool([NOISE * 3, CWE_TEMPLATE, NIAH_TEMPLATE, VT_TEMPLATE])
    if len(words) < 40:
        raise ValueError(f"the haystack has only {len(words)} distinct words of 4-10 letters; RULER's keys need >= 40")
    depths = np.linspace(0.0, 1.0, n) if n > 1 else np.array([0.5])
    out = []
    for i, depth in enumerate(depths):
        rng = np.random.default_rng([seed, TASKS.index(task), length, i])
        if task in NIAH:
            out.append(_niah_sample(task, tokenizer, length, float(depth), rng, texts, words))
        elif task == "vt":
            out.append(_vt_sample(tokenizer, length, float(depth), rng))
        elif task == "cwe":
            out.append(_cwe_sample(tokenizer, length, rng, words))
        elif task == "fwe":
            out.append(_fwe_sample(tokenizer, length, rng))
        else:
            out.append(_qa_sample(task, tokenizer, length, float(depth), rng, qa_items))
    return out


# ---------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------
@torch.no_grad()
def predict(model, tokenizer, samples: list[Sample], max_new_tokens: int | None = None) -> list[str]:
    """Greedy continuations of every sample's prompt + answer prefix (RULER decodes greedily),
    through the KV cache, for an nblib model; or any object with `generate_text(text,
    max_new_tokens) -> str` (`HFModel` wraps a local Hugging Face model that way). Tokens to
    generate: `max_new_tokens`, else the sample's meta["max_new_tokens"], else RULER's for the task,
    and never more than the sample's meta["stop_after_tokens"] where it has one (a short needle
    value's length plus a few tokens, `nblib.evals.code_niah`)."""
    out = []
    for s in samples:
        n_new = max_new_tokens or s.meta.get("max_new_tokens") or MAX_NEW_TOKENS[s.task]
        n_new = min(n_new, s.meta.get("stop_after_tokens", n_new))
        if hasattr(model, "generate_text"):
            out.append(model.generate_text(s.text, n_new))
            continue
        ids = torch.as_tensor(tokenizer.encode(s.text), dtype=torch.long)[None]
        if getattr(model, "max_positions", None) is not None:
            n_new = min(n_new, model.max_positions - ids.size(1))
        gen = model.generate(ids, max(n_new, 1), temperature=0.0)
        out.append(tokenizer.decode(gen[0, ids.size(1):]))
    return out


class HFModel:
    """A local Hugging Face causal LM (a folder with config, weights and tokenizer) behind
    `generate_text`, greedy: for evaluating released models offline with the same prompts."""

    def __init__(self, path: str):
        from transformers import AutoModelForCausalLM, AutoTokenizer  # optional: only for HF models

        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True).eval()

    @torch.no_grad()
    def generate_text(self, text: str, max_new_tokens: int) -> str:
        ids = self.tokenizer(text, return_tensors="pt").input_ids
        out = self.model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False,
                                  pad_token_id=self.tokenizer.eos_token_id)
        return self.tokenizer.decode(out[0, ids.size(1):], skip_special_tokens=True)


# ---------------------------------------------------------------------------------------
# Real QA data, for users who have it locally
# ---------------------------------------------------------------------------------------
def load_squad(path: str | Path) -> list[dict]:
    """SQuAD v1/v2 JSON (data -> paragraphs -> qas) as QA items {question, answers, gold
    passages, other passages}: the form RULER's qa_1 builds its prompts from (gold passage
    among distractor passages). Unanswerable v2 questions are skipped."""
    data = json.loads(Path(path).read_text())["data"]
    paragraphs = [p["context"] for art in data for p in art["paragraphs"]]
    items = []
    for art in data:
        for p in art["paragraphs"]:
            for qa in p["qas"]:
                if qa.get("is_impossible") or not qa["answers"]:
                    continue
                items.append({"question": qa["question"], "answers": sorted({a["text"] for a in qa["answers"]}),
                              "gold": [p["context"]], "others": [x for x in paragraphs if x != p["context"]]})
    return items


def load_hotpotqa(path: str | Path) -> list[dict]:
    """HotpotQA JSON (question, answer, context = [[title, sentences]], supporting_facts) as QA
    items: the supporting paragraphs are gold, the rest of each example's paragraphs others."""
    items = []
    for ex in json.loads(Path(path).read_text()):
        gold_titles = {t for t, _ in ex["supporting_facts"]}
        paras = {t: " ".join(s) for t, s in ex["context"]}
        items.append({"question": ex["question"], "answers": [ex["answer"]],
                      "gold": [paras[t] for t in paras if t in gold_titles],
                      "others": [paras[t] for t in paras if t not in gold_titles]})
    return items
