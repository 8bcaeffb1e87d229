"""LongBench-style single-document QA, multi-document QA and code completion, offline and sized
in the evaluated model's tokens (Bai et al., 2024, "LongBench: A Bilingual, Multitask Benchmark
for Long Context Understanding", github.com/THUDM/LongBench; the LCCP paper §5.3, Fig. 8b and
App. C.3 / Fig. 14 evaluate with it after long-context SFT). Part of
`nblib.evals.long_benchmarks`, which documents what follows LongBench and what is ours.

- longbench_single_doc_qa (MultiFieldQA-en's prompt): one fact planted in one held-out
  document among same-kind facts about other people; token F1 (`qa_f1_score`). The document
  is held-out files joined in a random order (RULER's essay haystack), since one file is
  often shorter than the context.
- longbench_multi_doc_qa (HotpotQA's prompt): passages cut from held-out files; the fact in
  one of them, or (every other sample) a two-hop question whose two facts sit in two
  different passages; token F1.
- longbench_code_completion (LCC's prompt): the held-out Python text before a line (the
  characters that fit, other held-out files first when the file is shorter); the reference
  is that line; edit similarity (`code_sim_score`).
"""

from __future__ import annotations

import io
import re
import string
import tokenize
from collections import Counter
from difflib import SequenceMatcher

import numpy as np

from nblib.evals.long_common import insert_needles
from nblib.evals.ruler import ATTRIBUTES, FIRST, LAST, Sample, _fit, _haystack_source

TASKS = ("longbench_single_doc_qa", "longbench_multi_doc_qa", "longbench_code_completion")
# LongBench's dataset2prompt.json (multifieldqa_en, hotpotqa, lcc) and dataset2maxlen.json
SINGLE_HEAD = "Read the following text and answer briefly.\n\n"
SINGLE_TAIL = ("\n\nNow, answer the following question based on the above text, only give me the answer and do "
               "not output any other words.\n\nQuestion: {question}")
MULTI_HEAD = ("Answer the question based on the given passages. Only give me the answer and do not output any "
              "other words.\n\nThe following are given passages.\n")
MULTI_TAIL = ("\n\nAnswer the question based on the given passages. Only give me the answer and do not output "
              "any other words.\n\nQuestion: {question}")
CODE_HEAD = "Please complete the code given below. \n"
CODE_TAIL = "Next line of code:\n"
QA_ANSWER = "\nAnswer:"
MAX_NEW_TOKENS = {"longbench_single_doc_qa": 64, "longbench_multi_doc_qa": 32, "longbench_code_completion": 64}
COMPANIES = ("Halcyon", "Brightlane", "Corvex", "Duskwater", "Emberline", "Foxglove", "Granite Peak", "Hollowmere",
             "Ironbark", "Juniper", "Kingsfold", "Larkspur")
N_DISTRACTORS = 3
PUNCTUATION = set(string.punctuation)


# ---------------------------------------------------------------------------------------
# Scoring (LongBench metrics.py)
# ---------------------------------------------------------------------------------------
def normalize_answer(s: str) -> str:
    """LongBench's (SQuAD's) answer normalisation: lowercase, no punctuation, no articles
    (a, an, the), single spaces."""
    s = "".join(ch for ch in s.lower() if ch not in PUNCTUATION)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def qa_f1_score(prediction: str, reference: str) -> float:
    """LongBench's qa_f1_score: F1 of the bags of normalised words of prediction and reference."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(reference).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if not same:
        return 0.0
    p, r = same / len(pred), same / len(ref)
    return 2 * p * r / (p + r)


def code_sim_score(prediction: str, reference: str) -> float:
    """LongBench's code_sim_score in [0, 1]: the first line of the prediction that holds no
    '`', '#' or '//' against the reference, by edit similarity. LongBench uses fuzzywuzzy's
    fuzz.ratio; here difflib's SequenceMatcher ratio 2M / (|a| + |b|) (fuzzywuzzy's own
    fallback without python-Levenshtein; no rapidfuzz), unrounded, on stripped lines
    (indentation is not scored)."""
    line = next((x for x in prediction.lstrip("\n").split("\n") if not any(m in x for m in ("`", "#", "//"))), "")
    return SequenceMatcher(None, line.strip(), reference.strip(), autojunk=False).ratio()


def score_sample(sample: Sample, pred: str) -> float:
    """A sample's LongBench score in [0, 1]: the best over its references of qa_f1_score (QA,
    on the prediction's first line: a base model does not stop after answering) or
    code_sim_score (code completion)."""
    if sample.task == "longbench_code_completion":
        return max(code_sim_score(pred, r) for r in sample.answers)
    first = pred.lstrip("\n").split("\n")[0]
    return max(qa_f1_score(first, r) for r in sample.answers)


# ---------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------
def _people(rng) -> list[str]:
    people = [f"{a} {b}" for a in FIRST for b in LAST]
    return [people[int(i)] for i in rng.permutation(len(people))]


def _pick(rng, seq):
    return seq[int(rng.integers(0, len(seq)))]


def _attribute_facts(rng, n: int):
    """A question about one person's attribute, its fact, and n - 1 facts of the same
    attribute about other people (the facts of RULER's qa_1, which this module reuses)."""
    attr, values = _pick(rng, ATTRIBUTES)
    people = _people(rng)[:n]
    drawn = [_pick(rng, values) for _ in people]
    facts = [f"The {attr} of {p} is {v}." for p, v in zip(people, drawn)]
    return f"What is the {attr} of {people[0]}?", drawn[0], facts


def _single_doc_sample(tokenizer, length, depth, rng, texts) -> Sample:
    question, answer, facts = _attribute_facts(rng, 1 + N_DISTRACTORS)
    needles = [(depth, facts[0])] + [(float(rng.random()), f) for f in facts[1:]]
    src = _haystack_source("essay", texts, rng)
    tail = SINGLE_TAIL.format(question=question)

    def build(c):
        ctx, spans = insert_needles(src[:c], needles)
        return SINGLE_HEAD + ctx + tail + QA_ANSWER, [(a + len(SINGLE_HEAD), b + len(SINGLE_HEAD)) for a, b in spans]

    text, n, spans = _fit(build, tokenizer, length, len(src))
    meta = {"question": question, "distractors": spans[1:], "max_new_tokens": MAX_NEW_TOKENS["longbench_single_doc_qa"]}
    return Sample("longbench_single_doc_qa", text[: -len(QA_ANSWER)], QA_ANSWER, [answer], n, depth, spans[:1], meta)


def _passages(texts, rng, cap: int, limit: int = 4000) -> list[str]:
    """Held-out files cut at line breaks into pieces of at most `cap` characters (the
    passages of multi-document QA), shuffled."""
    out = []
    for t in texts:
        start = 0
        while start < len(t) and len(out) < limit:
            end = len(t) if len(t) - start <= cap else t.rfind("\n", start, start + cap)
            end = start + cap if end <= start else end
            piece = t[start:end].strip("\n")
            if len(piece.strip()) >= 40:
                out.append(piece)
            start = end + 1
    return [out[int(i)] for i in rng.permutation(len(out))]


def _multi_doc_sample(tokenizer, length, depth, rng, texts, two_hop: bool) -> Sample:
    if not texts:
        raise ValueError("this task needs haystack texts (the corpus's held-out documents); got none")
    if two_hop:
        people, companies = _people(rng), [COMPANIES[int(i)] for i in rng.permutation(len(COMPANIES))]
        towns = ATTRIBUTES[1][1]
        k = 1 + N_DISTRACTORS // 2
        where = [_pick(rng, towns) for _ in range(k)]
        works = [f"{p} works at the {c} office." for p, c in zip(people[:k], companies)]
        sites = [f"The {c} office is in {t}." for c, t in zip(companies[:k], where)]
        question, answer = f"In which town is the office where {people[0]} works?", where[0]
        facts, n_gold = [works[0], sites[0]] + works[1:] + sites[1:], 2
    else:
        question, answer, facts = _attribute_facts(rng, 1 + N_DISTRACTORS)
        n_gold = 1
    # [document's relative position, position inside it] of each fact; the gold document's at `depth`
    places = rng.random((len(facts), 2))
    places[0, 0] = depth
    sample = texts[0][:4000]
    cap = max(200, int(length * len(sample) / max(1, len(tokenizer.encode(sample))) / 8))  # ~8 passages
    pool = _passages(texts, rng, cap)
    ends = np.cumsum([len(p) for p in pool])
    tail = MULTI_TAIL.format(question=question)

    def build(c):
        k = int(np.searchsorted(ends, c, side="right"))
        done = int(ends[k - 1]) if k else 0
        docs = pool[:k] + ([pool[k][: c - done]] if k < len(pool) and c > done else [])
        docs = docs or [""]
        at = [min(len(docs) - 1, int(round(u * (len(docs) - 1)))) for u in places[:, 0]]
        if n_gold == 2 and len(docs) > 1 and at[1] == at[0]:  # the two hops in different passages
            at[1] = (at[0] + 1) % len(docs)
        parts, spans, pos = [], [None] * len(facts), len(MULTI_HEAD)
        for d, doc in enumerate(docs):
            mine = [i for i in range(len(facts)) if at[i] == d]
            body, inner = insert_needles(doc, [(float(places[i, 1]), facts[i]) for i in mine])
            head = f"Passage {d + 1}:\n"
            for i, (a, b) in zip(mine, inner):
                spans[i] = (pos + len(head) + a, pos + len(head) + b)
            parts.append(head + body)
            pos += len(head) + len(body) + 1
        return MULTI_HEAD + "\n".join(parts) + tail + QA_ANSWER, (spans, at)

    text, n, (spans, at) = _fit(build, tokenizer, length, int(ends[-1]))
    meta = {"question": question, "hops": n_gold, "passages": at[:n_gold], "distractors": spans[n_gold:],
            "max_new_tokens": MAX_NEW_TOKENS["longbench_multi_doc_qa"]}
    return Sample("longbench_multi_doc_qa", text[: -len(QA_ANSWER)], QA_ANSWER, [answer], n, depth, spans[:n_gold],
                  meta)


def completable_lines(text: str) -> list[int]:
    """Indices (from 5 on) of the lines of Python `text` that LCC-style completion may ask
    for (LongBench's lcc; LCCP §5.3): 10-120 characters stripped, code rather than a comment
    or a line inside a multi-line string (by `tokenize`, when the text tokenizes), and no
    '`', '#' or '//', which code_sim_score would skip in a prediction."""
    lines, prose = text.split("\n"), set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                prose.update(range(tok.start[0], tok.end[0] + 1))  # 1-based rows
    except (tokenize.TokenError, SyntaxError):
        pass
    return [k for k in range(5, len(lines)) if k + 1 not in prose and 10 <= len(lines[k].strip()) <= 120
            and not any(m in lines[k] for m in ("`", "#", "//"))]


def _code_sample(tokenizer, length, rng, texts) -> Sample:
    doc, eligible = next(((int(i), e) for i in rng.permutation(len(texts)) if (e := completable_lines(texts[i]))),
                         (None, []))
    if doc is None:
        raise ValueError("code completion needs haystack texts with completable lines (10-120 characters of "
                         "code, no '#', '`' or '//'); got none")
    lines = texts[doc].split("\n")
    line = _pick(rng, eligible)
    before = "\n".join(lines[:line]) + "\n"
    others = [texts[int(i)] for i in rng.permutation(len(texts)) if int(i) != doc][:400]
    src = "".join(t.rstrip("\n") + "\n\n" for t in others) + before  # other held-out files, then this one

    def build(c):
        return CODE_HEAD + src[len(src) - c:] + CODE_TAIL, None

    text, n, _ = _fit(build, tokenizer, length, len(src))
    ctx = (len(CODE_HEAD), len(text) - len(CODE_TAIL))
    meta = {"doc": doc, "line": line, "context_span": ctx,
            "max_new_tokens": MAX_NEW_TOKENS["longbench_code_completion"]}
    return Sample("longbench_code_completion", text, "", [lines[line].strip()], n, None, [], meta)


def make_sample(task: str, tokenizer, length: int, depth: float, rng, texts=(), index: int = 0) -> Sample:
    """One LongBench-style sample of `length` tokens (within 1%) (LongBench, Bai et al. 2024;
    LCCP §5.3). Multi-document QA is two-hop for odd `index`."""
    if task == "longbench_single_doc_qa":
        return _single_doc_sample(tokenizer, length, depth, rng, texts)
    if task == "longbench_multi_doc_qa":
        return _multi_doc_sample(tokenizer, length, depth, rng, texts, two_hop=bool(index % 2))
    return _code_sample(tokenizer, length, rng, texts)
