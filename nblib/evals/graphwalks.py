"""GraphWalks, offline and sized in the evaluated model's tokens (OpenAI, 2025, "GraphWalks: a
multi hop reasoning long context benchmark", huggingface.co/datasets/openai/graphwalks; the
LCCP paper §5.3, Fig. 8b and App. C.3 / Fig. 14 evaluate with it after long-context SFT).
Part of `nblib.evals.long_benchmarks`, which documents what follows GraphWalks and what is ours.

A random directed graph is given as an edge list ("a3f9c1 -> 07be2d41"); the question asks for
the BFS frontier at depth k from a node (the nodes whose shortest distance from it is exactly
k) or for a node's parents (the nodes with an edge into it, itself excluded). Scored by set F1
between the "Final Answer: [...]" list and the reference, as OpenAI's grader does.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from nblib.evals.long_common import read_records
from nblib.evals.ruler import Sample, _fit

TASKS = ("graphwalks_bfs", "graphwalks_parents")
HEX = np.array(list("0123456789abcdef"))
NAME_MIN, NAME_MAX, NAME_CAP = 6, 14, 20  # GraphWalks' names are 10 hex characters
DEGREE = 4  # edges per node, as in GraphWalks' graphs
MIN_EDGES = 4
DEPTHS = (1, 2, 3)

HEAD = (
    "You will be given a graph as a list of directed edges. All nodes are at least degree 1. You will also get "
    "a description of an operation to perform on the graph.\nYour job is to execute the operation on the graph "
    "and return the set of nodes that the operation results in. If asked for a breadth-first search (BFS), only "
    "return the nodes that are reachable at that depth, do not return the starting node.\nIf asked for the "
    "parents of a node, only return the nodes that have an edge leading to the given node, do not return the "
    "given node itself.\n\nHere is an example:\n<begin example>\nThe graph has the following edges:\n"
    "uvwx -> alke\nabcd -> uvwx\nabcd -> efgh\nefgh -> uvwx\n\nExample 1:\nOperation:\nPerform a BFS from node "
    "abcd with depth 1.\nFinal Answer: [uvwx, efgh]\n\nExample 2:\nOperation:\nFind the parents of node uvwx.\n"
    "Final Answer: [abcd, efgh]\n\n<end example>\n\nHere is the graph to operate on:\n"
    "The graph has the following edges:\n")
TAIL = (
    "\n\n\nOperation:\n{operation}\n\nYou should immediately return the set of nodes that the operation results "
    "in, with no additional text. Return your final answer as a list of nodes in the very last line of your "
    "response. For example, if the operation returns the set of nodes [node1, node2, node3], your response "
    "should be:\nFinal Answer: [node1, node2, node3]\nIf the operation returns the empty set, your response "
    "should be:\nFinal Answer: []")
OPERATIONS = {"bfs": "Perform a BFS from node {node} with depth {depth}.",
              "parents": "Find the parents of node {node}."}
ANSWER = "\nFinal Answer:"
FINAL = re.compile(r"Final Answer:[ \t]*\[([^\]\n]*)\]")


# ---------------------------------------------------------------------------------------
# Graph operations and scoring
# ---------------------------------------------------------------------------------------
def bfs_frontier(edges, start, depth: int) -> set:
    """Nodes whose shortest directed distance from `start` is exactly `depth` (GraphWalks'
    "BFS ... with depth k": the nodes reached at that depth, the start node excluded)."""
    seen, level = {start}, {start}
    out: dict = {}
    for a, b in edges:
        out.setdefault(a, []).append(b)
    for _ in range(depth):
        level = {b for a in level for b in out.get(a, ())} - seen
        seen |= level
    return level


def parents(edges, node) -> set:
    """Sources of the edges into `node`, `node` itself excluded (GraphWalks' parents operation)."""
    return {a for a, b in edges if b == node and a != node}


def parse_final_answer(text: str) -> list[str]:
    """Nodes of the last "Final Answer: [a, b, ...]" in `text` ([] when there is none), split
    on commas and stripped of whitespace, as OpenAI's GraphWalks grader reads them (it reads
    only the response's last line; a base model's greedy continuation runs on past its
    answer, so the last such list anywhere counts here)."""
    found = FINAL.findall(text)
    return [x.strip() for x in found[-1].split(",") if x.strip()] if found else []


def set_f1(pred, truth) -> float:
    """F1 of two node sets (OpenAI's GraphWalks metric): 2PR / (P + R) with precision P =
    overlap / |pred|, recall R = overlap / |truth|; 0 when either set is empty."""
    pred, truth = set(pred), set(truth)
    overlap = len(pred & truth)
    if not overlap:
        return 0.0
    p, r = overlap / len(pred), overlap / len(truth)
    return 2 * p * r / (p + r)


def score_sample(sample: Sample, pred: str) -> float:
    """Set F1 in [0, 1] of the nodes listed after "Final Answer:" (the answer prefix ends
    with it, so the prediction may start straight at the list) against the reference."""
    return set_f1(parse_final_answer(sample.answer_prefix + pred), sample.answers)


# ---------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------
def _names(rng, n: int) -> list[str]:
    """n random 24-hex-digit strings with distinct 6-digit prefixes, so that any prefixes of
    >= NAME_MIN digits of different strings are different names."""
    digits = rng.integers(0, 16, (n, 24))
    while True:
        _, first = np.unique(digits[:, :NAME_MIN], axis=0, return_index=True)
        dup = np.setdiff1d(np.arange(n), first)
        if not len(dup):
            return ["".join(HEX[row]) for row in digits]
        digits[dup] = rng.integers(0, 16, (len(dup), 24))


def make_sample(task: str, tokenizer, length: int, depth: float, rng, texts=(), index: int = 0) -> Sample:
    """One GraphWalks prompt of `length` tokens (within 1%) (OpenAI GraphWalks; LCCP §5.3).

    The graph grows as its edges are drawn: edge i joins two nodes drawn uniformly from the
    first 2 + i // DEGREE, so every prefix of the edge list is a random graph with about
    DEGREE out-edges a node; self-loops and repeated edges occur, as in GraphWalks. The
    prompt holds the longest prefix that fits; the characters left over (less than one edge)
    go to lengthening the names of nodes that occur once (names are 6-14 hex digits, up to
    20 when lengthened) so the prompt fills the length. The queried node is the first, in a
    random order drawn per sample, whose answer is not empty. `depth`, `texts`, `index`: unused
    (the common signature of nblib.evals.long_benchmarks)."""
    kind = task.split("_", 1)[1]
    n_edges = MIN_EDGES + 16 * length // (2 * NAME_MIN + 5) + 2
    n_nodes = 2 + (n_edges - 1) // DEGREE + 1
    full = _names(rng, n_nodes)
    base = rng.integers(NAME_MIN, NAME_MAX + 1, n_nodes)
    avail = 2 + np.arange(n_edges) // DEGREE
    src = (rng.random(n_edges) * avail).astype(int)
    dst = (rng.random(n_edges) * avail).astype(int)
    dst[0] = 1 - src[0]  # the smallest graph already has a non-empty answer
    priority = rng.permutation(n_nodes)
    want_depth = int(DEPTHS[int(rng.integers(0, len(DEPTHS)))])
    chars = np.cumsum(base[src] + base[dst] + 5)  # "a -> b" plus its line break
    floor = int(chars[MIN_EDGES - 1])

    def query(e):
        edges = list(zip(src[:e].tolist(), dst[:e].tolist()))
        nodes = sorted({x for ab in edges for x in ab}, key=lambda j: priority[j])
        for k in ([want_depth - d for d in range(want_depth)] if kind == "bfs" else [None]):
            for q in nodes:
                ans = bfs_frontier(edges, q, k) if kind == "bfs" else parents(edges, q)
                if ans:
                    return edges, q, k, ans
        raise AssertionError("unreachable: edge 0 joins two different nodes")

    cache: dict = {}

    def build(c):
        e = int(np.searchsorted(chars, floor + c, side="right"))
        if e not in cache:
            cache[e] = query(e)
        edges, q, k, ans = cache[e]
        left = floor + c - int(chars[e - 1])
        occ = np.bincount(np.concatenate([src[:e], dst[:e]]), minlength=n_nodes)
        extra = np.zeros(n_nodes, dtype=int)
        for j in sorted(np.flatnonzero(occ), key=lambda j: (occ[j], priority[j])):
            if left < occ[j]:
                break
            extra[j] = min(NAME_CAP - base[j], left // occ[j])
            left -= extra[j] * occ[j]
        name = lambda j: full[j][: base[j] + extra[j]]  # noqa: E731
        lines = [f"{name(a)} -> {name(b)}" for a, b in edges]
        operation = OPERATIONS[kind].format(node=name(q), depth=k)
        prompt = HEAD + "\n".join(lines) + TAIL.format(operation=operation)
        if kind == "bfs":  # the edges that reach the frontier from the level before it
            prev = bfs_frontier(edges, q, k - 1) if k > 1 else {q}
            support = [i for i, (a, b) in enumerate(edges) if a in prev and b in ans]
        else:
            support = [i for i, (a, b) in enumerate(edges) if b == q and a != q]
        starts = len(HEAD) + np.concatenate([[0], np.cumsum([len(x) + 1 for x in lines])])
        spans = [(int(starts[i]), int(starts[i]) + len(lines[i])) for i in support]
        meta = {"query": name(q), "depth": k, "n_edges": e, "n_nodes": int((occ > 0).sum()),
                "answer_names": sorted(name(j) for j in ans)}
        return prompt + ANSWER, (spans, meta)

    text, n, (spans, meta) = _fit(build, tokenizer, length, int(chars[-1]) - floor)
    answers = meta.pop("answer_names")
    meta["max_new_tokens"] = len(tokenizer.encode(" [" + ", ".join(answers) + "]")) + 8
    return Sample(task, text[: len(text) - len(ANSWER)], ANSWER, answers, n, None, spans, meta)


# ---------------------------------------------------------------------------------------
# OpenAI's data, for users who have it locally
# ---------------------------------------------------------------------------------------
def load_graphwalks(path: str | Path, tokenizer=None) -> list[Sample]:
    """OpenAI's GraphWalks rows (fields prompt, answer_nodes, problem_type "bfs" / "parents",
    read from a local parquet / jsonl / json copy) as Samples of graphwalks_bfs /
    graphwalks_parents (LCCP §5.3): the prompt as given, "\\nFinal Answer:" as the answer
    prefix, answer_nodes as the references; n_tokens counted with `tokenizer` (0 without one)."""
    out = []
    for row in read_records(path):
        kind = str(row.get("problem_type") or ("bfs" if "Perform a BFS" in row["prompt"] else "parents")).lower()
        if kind not in ("bfs", "parents"):
            raise ValueError(f"problem_type={kind!r} is not allowed; allowed: bfs, parents")
        answers = [str(x) for x in row["answer_nodes"]]
        text = row["prompt"] + ANSWER
        meta = {"source": str(path), "max_new_tokens": 8 + 8 * max(1, len(answers))}
        if tokenizer is not None:
            meta["max_new_tokens"] = len(tokenizer.encode(" [" + ", ".join(answers) + "]")) + 8
        n = len(tokenizer.encode(text)) if tokenizer is not None else 0
        out.append(Sample(f"graphwalks_{kind}", row["prompt"], ANSWER, answers, n, None, [], meta))
    return out
