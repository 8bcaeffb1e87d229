"""Long-context benchmark analogues (nblib.evals.long_benchmarks: LongBench, GraphWalks,
LongReason, BABILong; LCCP §5.3, Fig. 8b): determinism, sizes, the supporting facts where
the metadata says, answers recomputed independently from the prompt (graphs by brute force),
the scorers on hand-computed cases, the real-data readers and predict."""

import json
import re

import numpy as np
import pytest

from nblib.data import get_corpus, get_tokenizer
from nblib.evals import babilong as BB
from nblib.evals import graphwalks as G
from nblib.evals import long_benchmarks as L
from nblib.evals import longbench as LB
from nblib.evals import longreason as LR
from nblib.evals import ruler as R

TOK = get_tokenizer("bpe:stdlib-1024")
BYTE = get_tokenizer("byte")
HAY = [d.text for d in get_corpus("python-stdlib").split("eval")[:30]]


@pytest.fixture(scope="module")
def samples():
    return {t: L.make_task(t, TOK, 1024, 4, seed=1, haystack=HAY) for t in L.TASKS}


# ---------------------------------------------------------------------------------------
# Independent truth, recomputed from the prompt text alone
# ---------------------------------------------------------------------------------------
def graph_of(s):
    body = s.prompt.split("Here is the graph to operate on:\nThe graph has the following edges:\n")[1]
    edges_text, operation = body.split("\n\n\nOperation:\n")
    return [tuple(line.split(" -> ")) for line in edges_text.split("\n")], operation.split("\n")[0]


def brute_force(edges, operation):
    """Parents by a scan; BFS frontier by Bellman-Ford shortest distances (no queue, no levels)."""
    m = re.fullmatch(r"Find the parents of node (\w+)\.", operation)
    if m:
        return {a for a, b in edges if b == m.group(1) and a != m.group(1)}
    start, depth = re.fullmatch(r"Perform a BFS from node (\w+) with depth (\d+)\.", operation).groups()
    dist, changed = {start: 0}, True
    while changed:
        changed = False
        for a, b in edges:
            if a in dist and dist[a] + 1 < dist.get(b, 1 << 30):
                dist[b], changed = dist[a] + 1, True
    return {v for v, d in dist.items() if d == int(depth)}


def babi_truth(facts, question):
    where, holder, left_at = {}, {}, {}
    for f in facts:
        if m := re.fullmatch(r"(\w+) (?:moved to|went to|journeyed to|travelled to|went back to) the (\w+)\.", f):
            where[m[1]] = m[2]
        elif m := re.fullmatch(r"(\w+) (?:picked up|got|grabbed|took) the (\w+) there\.", f):
            assert m[1] in where and m[2] not in holder  # a located person takes a free object
            holder[m[2]] = m[1]
            left_at.pop(m[2], None)
        elif m := re.fullmatch(r"(\w+) (?:dropped|discarded|put down|left) the (\w+)\.", f):
            assert holder.pop(m[2]) == m[1]
            left_at[m[2]] = where[m[1]]
        else:
            raise AssertionError(f"not a bAbI fact: {f!r}")
    if m := re.fullmatch(r"Where is the (\w+)\?", question):
        return where[holder[m[1]]] if m[1] in holder else left_at[m[1]]
    return where[re.fullmatch(r"Where is (\w+)\?", question)[1]]


def solve_puzzle(premises, question):
    if m := re.fullmatch(r"How many (\w+) does (\w+) have\?", question):
        value, todo = {}, list(premises)
        while todo:
            f = todo.pop(0)
            if p := re.fullmatch(r"(\w+) has (\d+) \w+\.", f):
                value[p[1]] = int(p[2])
            elif (p := re.fullmatch(r"(\w+) has (\d+) (more|fewer) \w+ than (\w+)\.", f)) and p[4] in value:
                value[p[1]] = value[p[4]] + (int(p[2]) if p[3] == "more" else -int(p[2]))
            elif (p := re.fullmatch(r"(\w+) has twice as many \w+ as (\w+)\.", f)) and p[2] in value:
                value[p[1]] = 2 * value[p[2]]
            else:
                todo.append(f)
        return str(value[m[2]])
    pairs = [re.fullmatch(r"(\w+) is \w+ than (\w+)\.", f).groups() for f in premises]
    people = {x for p in pairs for x in p}
    top = people - {b for _, b in pairs}
    bottom = people - {a for a, _ in pairs}
    want = re.search(r"who is the (\w+)\?", question)[1]
    (who,) = top if want in ("oldest", "tallest", "fastest") else bottom
    return who


def truth(s):
    """The reference answer, recomputed from the prompt (and for code, from the source file)."""
    if s.task.startswith("graphwalks"):
        return sorted(brute_force(*graph_of(s)))
    if s.task.startswith("babilong"):
        return babi_truth([s.prompt[a:b] for a, b in s.meta["facts"]], s.meta["question"])
    if s.task == "longreason":
        return solve_puzzle([s.prompt[a:b] for a, b in s.needles], s.meta["question"])
    if s.task == "longbench_code_completion":
        return HAY[s.meta["doc"]].split("\n")[s.meta["line"]].strip()
    q = s.meta["question"]
    if m := re.fullmatch(r"In which town is the office where (.+) works\?", q):
        (company,) = re.findall(rf"{m[1]} works at the (.+?) office\.", s.prompt)
        (town,) = re.findall(rf"The {company} office is in (\w+)\.", s.prompt)
        return town
    attr, person = re.fullmatch(r"What is the (.+) of (.+)\?", q).groups()
    (value,) = re.findall(rf"The {attr} of {person} is (\w+)\.", s.prompt)
    return value


def oracle(s):
    t = truth(s)
    if s.task.startswith("graphwalks"):
        return " [" + ", ".join(t) + "]"
    return t if s.task == "longbench_code_completion" else " " + t + "."


# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("task", L.TASKS)
def test_generation_is_deterministic_for_a_seed(task):
    a = L.make_task(task, BYTE, 2400, 3, seed=5, haystack=HAY)
    b = L.make_task(task, BYTE, 2400, 3, seed=5, haystack=HAY)
    c = L.make_task(task, BYTE, 2400, 3, seed=6, haystack=HAY)
    assert [s.text for s in a] == [s.text for s in b] and [s.meta for s in a] == [s.meta for s in b]
    assert [s.text for s in a] != [s.text for s in c]


@pytest.mark.parametrize("spec,length", [("bpe", 1024), ("bpe", 2500), ("byte", 2048), ("byte", 5000)])
def test_every_prompt_has_the_requested_length_within_one_percent(spec, length):
    tok = TOK if spec == "bpe" else BYTE
    for task in L.TASKS:
        for s in L.make_task(task, tok, length, 2, seed=3, haystack=HAY):
            n = len(tok.encode(s.text))
            assert n == s.n_tokens and length - 0.01 * length <= n <= length, (task, n)


@pytest.mark.parametrize("task", L.TASKS)
def test_supporting_facts_sit_at_the_spans_the_metadata_gives(samples, task):
    for s in samples[task]:
        found = [s.prompt[a:b] for a, b in s.needles]
        ids, _ = TOK.encode_with_offsets(s.text)
        for (t0, t1), f in zip(s.meta["needle_tokens"], found):  # token spans cover the fact, and no more
            assert f in TOK.decode(ids[t0:t1])
            assert f not in TOK.decode(ids[t0 + 1:t1]) and f not in TOK.decode(ids[t0:t1 - 1])
        if task.startswith("graphwalks"):
            edges, operation = graph_of(s)
            assert all(tuple(f.split(" -> ")) in edges for f in found)
            q = s.meta["query"]
            if task == "graphwalks_parents":
                assert {f.split(" -> ")[0] for f in found} == set(s.answers)
                assert all(f.endswith(f" -> {q}") for f in found)
            else:
                assert {f.split(" -> ")[1] for f in found} == set(s.answers)
                assert operation == f"Perform a BFS from node {q} with depth {s.meta['depth']}."
        elif task.startswith("babilong"):
            assert set(s.needles) <= set(s.meta["facts"]) and len(s.needles) == int(task[-1])
            assert f"the {s.answers[0]}." in " ".join(found)  # the supporting move names the answer
            facts = [s.prompt[a:b] for a, b in s.meta["facts"]]
            assert [a for a, _ in s.meta["facts"]] == sorted(a for a, _ in s.meta["facts"])  # the story's order
            who = (r"\b(?:Mary|John|Daniel|Sandra) "
                   r"(?:moved|went|journeyed|travelled|picked|got|grabbed|took|dropped|discarded|put|left)\b")
            assert len(re.findall(who, s.prompt.split("<context>")[1])) == len(facts)  # no other fact-like text
        elif task == "longreason":
            assert 2 <= len(found) <= 4 and all(s.prompt.count(f) == 1 for f in found)
        elif task == "longbench_code_completion":
            a, b = s.meta["context_span"]
            before = "\n".join(HAY[s.meta["doc"]].split("\n")[: s.meta["line"]]) + "\n"
            assert s.prompt[a:b] == before[-(b - a):] if b - a <= len(before) else s.prompt[a:b].endswith(before)
            assert s.prompt.endswith("Next line of code:\n") and s.needles == []
        elif s.meta.get("hops") == 2:
            assert re.fullmatch(r".+ works at the .+ office\.", found[0])
            assert found[1].endswith(f" is in {s.answers[0]}.")
            starts = [s.prompt.rfind("Passage ", 0, a) for a, _ in s.needles]
            assert starts[0] != starts[1]  # the two hops sit in two different passages
        else:
            assert found[0].endswith(f" is {s.answers[0]}.")
            assert re.search(r"of (.+)\?", s.meta["question"])[1] in found[0]
        assert [truth(s)] == s.answers or sorted(truth(s)) == sorted(s.answers)


def test_token_spans_agree_without_offsets_and_depths_run_in_order():
    class PlainBytes:  # no encode_with_offsets: the prefix-encoding path
        encode = staticmethod(BYTE.encode)

    s = L.make_task("babilong_qa2", BYTE, 2400, 1, haystack=HAY)[0]
    assert L.token_spans(PlainBytes(), s.text, s.needles) == s.meta["needle_tokens"]
    assert all(b - a == len(s.text[x:y].encode()) for (a, b), (x, y) in zip(s.meta["needle_tokens"], s.needles))
    ss = L.make_task("longbench_single_doc_qa", TOK, 1024, 6, seed=0, haystack=HAY)
    assert np.allclose([s.depth for s in ss], np.linspace(0, 1, 6))
    head, end = len(LB.SINGLE_HEAD), [s.prompt.index("\n\nNow, answer the following question") for s in ss]
    realised = [(s.needles[0][0] - head) / (e - head) for s, e in zip(ss, end)]
    assert np.all(np.diff(realised) > 0) and np.abs(np.asarray(realised) - np.linspace(0, 1, 6)).max() < 0.1


@pytest.mark.parametrize("task", L.TASKS)
def test_the_oracle_scores_100_and_an_empty_answer_0(samples, task):
    ss = samples[task]
    assert L.score_task(ss, [oracle(s) for s in ss]) == 100.0
    assert L.score_task(ss, ["" for _ in ss]) == 0.0


@pytest.mark.parametrize("task", G.TASKS)
def test_graphwalks_answers_match_a_brute_force_search_on_many_graphs(task):
    ss = L.make_task(task, BYTE, 2200, 40, seed=11, haystack=HAY)
    depths = set()
    for s in ss:
        edges, operation = graph_of(s)
        assert set(s.answers) == brute_force(edges, operation) != set()
        assert s.meta["n_edges"] == len(edges) and s.meta["n_nodes"] == len({x for e in edges for x in e})
        assert all(re.fullmatch(r"[0-9a-f]{6,20}", x) for e in edges for x in e)
        depths.add(s.meta["depth"])
    assert task == "graphwalks_parents" or len(depths) >= 2
    rng = np.random.default_rng(0)
    for _ in range(300):  # the graph functions themselves, on small random graphs with loops and repeats
        n = int(rng.integers(1, 9))
        edges = [(int(a), int(b)) for a, b in rng.integers(0, n, (int(rng.integers(1, 20)), 2))]
        q, k = int(rng.integers(0, n)), int(rng.integers(1, 5))
        strs = [(str(a), str(b)) for a, b in edges]
        bfs = brute_force(strs, f"Perform a BFS from node {q} with depth {k}.")
        assert G.bfs_frontier(edges, q, k) == {int(x) for x in bfs}
        assert G.parents(edges, q) == {int(x) for x in brute_force(strs, f"Find the parents of node {q}.")}


def test_set_f1_and_the_final_answer_parser_on_known_cases():
    assert G.set_f1(["a", "b", "c"], ["b", "c", "d", "e"]) == pytest.approx(2 * (2 / 3) * (1 / 2) / (2 / 3 + 1 / 2))
    assert G.set_f1(["a", "a", "b"], ["a", "b"]) == 1.0 and G.set_f1([], ["a"]) == 0.0 and G.set_f1(["x"], ["a"]) == 0.0
    assert G.parse_final_answer("think\nFinal Answer: [a1, b2 ,c3]\nmore") == ["a1", "b2", "c3"]
    assert G.parse_final_answer("Final Answer: [a]\nFinal Answer: [b, c]") == ["b", "c"]  # the last one counts
    assert G.parse_final_answer("Final Answer: []") == [] and G.parse_final_answer("[a, b]") == []
    s = L.make_task("graphwalks_parents", BYTE, 2200, 10, seed=2)
    s = next(x for x in s if len(x.answers) >= 2)
    half, k = s.answers[:1] + ["nothex"], len(s.answers)  # 1 right of 2 predicted, 1 of k found
    assert L.score_task([s], [" [" + ", ".join(half) + "]"]) == pytest.approx(100 * 2 * 0.5 * (1 / k) / (0.5 + 1 / k))
    assert L.score_task([s], ["Final Answer: [" + ", ".join(s.answers) + "]"]) == 100.0


def test_longbench_longreason_and_babilong_scorers_on_known_cases():
    assert LB.normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert LB.qa_f1_score("the Olmere town", "Olmere") == pytest.approx(2 / 3)
    assert LB.qa_f1_score("nothing", "Olmere") == 0.0
    assert LB.code_sim_score("x = 1  # set\n    return x", "return x") == 1.0  # commented lines skipped
    assert LB.code_sim_score("abcd", "abce") == pytest.approx(0.75)  # 2 * 3 matches / 8 characters
    assert LR.exact_match(" 12.\nQuestion: ...", "12") == 1.0 and LR.exact_match("12 coins", "12") == 0.0
    assert BB.compare_answers("kitchen", " kitchen. Then the garden.", "Where is Mary?")
    assert not BB.compare_answers("kitchen", " kitchen or garden", "Where is Mary?")
    assert not BB.compare_answers("garden", " garden, not the kitchen", "Where is Mary?")
    assert BB.compare_answers("garden", " garden, not the kitchen", "Was Mary in the kitchen?")  # asked, not counted


def test_benchmark_average_is_the_equal_weight_mean_of_the_four_benchmarks():
    scores = dict(zip(L.TASKS, [30.0, 60.0, 90.0, 10.0, 30.0, 50.0, 40.0, 80.0]))
    got = L.benchmark_average(scores)
    assert L.BENCHMARKS == {"longbench": L.TASKS[:3], "graphwalks": L.TASKS[3:5], "longreason": L.TASKS[5:6],
                            "babilong": L.TASKS[6:]}
    assert got == pytest.approx({"longbench": 60.0, "graphwalks": 20.0, "longreason": 50.0, "babilong": 60.0,
                                 "average": 47.5})
    with pytest.raises(ValueError, match="'babilong' has no scores"):
        L.benchmark_average({t: 1.0 for t in L.TASKS[:6]})
    with pytest.raises(ValueError, match="not allowed"):
        L.benchmark_average({**scores, "qa_1": 3.0})


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="task='graphwalks'"):
        L.make_task("graphwalks", TOK, 1024, 1)
    with pytest.raises(ValueError, match="too short"):
        L.make_task("graphwalks_bfs", TOK, 600, 1)
    with pytest.raises(ValueError, match="needs haystack texts"):
        L.make_task("babilong_qa1", TOK, 1024, 1)
    with pytest.raises(ValueError, match="gives only"):
        L.make_task("longreason", BYTE, 3000, 1, haystack=["x = 1\n" * 50])


def test_graphwalks_and_babilong_readers_give_scoreable_samples(tmp_path):
    prompt = ("You will be given a graph.\nThe graph has the following edges:\naa01 -> bb02\naa01 -> cc03\n"
              "cc03 -> bb02\n\n\nOperation:\nFind the parents of node bb02.\n")
    rows = [{"prompt": prompt, "answer_nodes": ["aa01", "cc03"], "problem_type": "parents", "prompt_chars": 1},
            {"prompt": prompt.replace("Find the parents of node bb02.", "Perform a BFS from node aa01 with depth 1."),
             "answer_nodes": ["bb02", "cc03"]}]
    p = tmp_path / "graphwalks.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows))
    ss = L.load_graphwalks(p, tokenizer=TOK)
    assert [s.task for s in ss] == ["graphwalks_parents", "graphwalks_bfs"] and ss[0].answers == ["aa01", "cc03"]
    assert ss[0].n_tokens == len(TOK.encode(ss[0].text)) and ss[0].text.endswith("\nFinal Answer:")
    assert L.score_task(ss, [" [aa01, cc03]", " [bb02]"]) == pytest.approx(100 * (1 + 2 / 3) / 2)
    babi = [{"input": "Text. Mary went to the garden. More text.", "question": "Where is Mary?", "target": "garden"},
            {"input": "John got the milk there.", "question": "Where is the milk?", "target": "office"}]
    q = tmp_path / "babilong.json"
    q.write_text(json.dumps(babi))
    bs = L.load_babilong(q)
    assert [s.task for s in bs] == ["babilong_qa1", "babilong_qa2"] and bs[1].answers == ["office"]
    context = "<context>\nText. Mary went to the garden. More text.\n</context>\n\nQuestion: Where is Mary?"
    assert context in bs[0].prompt
    assert bs[1].answer_prefix == "\nAnswer: The milk is in the" and bs[0].n_tokens == 0
    assert L.score_task(bs, [" garden.", " office."]) == 100.0 and L.score_task(bs, [" office.", ""]) == 0.0
    with pytest.raises(ValueError, match="not allowed"):
        L.load_babilong(q, task="qa9")


def test_predict_runs_on_these_samples_with_their_own_answer_budgets():
    import torch

    from nblib.models import build_model

    ss = L.make_task("babilong_qa1", TOK, 1024, 1, haystack=HAY) + L.make_task("graphwalks_parents", TOK, 1024, 1)
    torch.manual_seed(0)
    model = build_model("llama", dict(vocab_size=TOK.vocab_size, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1,
                                      d_ff=32, max_seq_len=2048)).eval()
    preds = R.predict(model, TOK, ss)
    for s, p in zip(ss, preds):
        ids = torch.as_tensor(TOK.encode(s.text))[None]
        n_new = s.meta["max_new_tokens"]
        assert p == TOK.decode(model.generate(ids, n_new, temperature=0.0, use_cache=False)[0, ids.size(1):])
    assert ss[0].meta["max_new_tokens"] == BB.MAX_NEW_TOKENS != ss[1].meta["max_new_tokens"]
    assert 0.0 <= L.score_task(ss, preds) <= 100.0
