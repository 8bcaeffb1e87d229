"""RULER offline (nblib.evals.ruler): determinism, sizes, needle placement, depths, scorers,
and an oracle that reads the needles back scoring 100."""

import json
import re
from collections import Counter

import numpy as np
import pytest

from nblib.data import get_corpus, get_tokenizer
from nblib.evals import ruler as R

TOK = get_tokenizer("bpe:stdlib-1024")
HAY = [d.text for d in get_corpus("python-stdlib").split("eval")[:30]]


@pytest.fixture(scope="module")
def samples():
    return {t: R.make_task(t, TOK, 512, 5, seed=1, haystack=HAY) for t in R.TASKS}


def test_generation_is_deterministic_for_a_seed(samples):
    again = R.make_task("niah_multikey_1", TOK, 512, 5, seed=1, haystack=HAY)
    assert [s.text for s in again] == [s.text for s in samples["niah_multikey_1"]]
    other = R.make_task("niah_multikey_1", TOK, 512, 5, seed=2, haystack=HAY)
    assert [s.text for s in other] != [s.text for s in again]


@pytest.mark.parametrize("task", R.TASKS)
def test_every_sample_has_the_requested_length_and_its_answer_where_the_metadata_says(samples, task):
    for s in samples[task]:
        n = len(TOK.encode(s.text))
        assert n == s.n_tokens and abs(n - 512) <= 0.01 * 512, (task, n)
        if task in R.NIAH_TASKS:
            spans = s.needles[: len(s.answers)]  # the asked keys' needles come first
            found = [s.prompt[a:b] for a, b in spans]
            assert all(re.fullmatch(r"One of the special magic \w+ for .+ is: .+\.", f) for f in found)
            assert sorted(f.split(" is: ")[1][:-1] for f in found) == sorted(s.answers)
            assert all(k in s.answer_prefix for k in s.meta["keys"])
        elif task == "vt":
            chain = [s.prompt[a:b] for a, b in s.needles]
            assert chain[0] == f"VAR {s.answers[0]} = {s.meta['value']}."
            assert all(c == f"VAR {s.answers[i]} = VAR {s.answers[i - 1]}." for i, c in enumerate(chain) if i)
        elif task.startswith("qa"):
            assert s.answers[0] in s.prompt[s.needles[-1][0]:s.needles[-1][1]]  # in the gold passage
        elif task == "cwe":
            listing = Counter(re.findall(r"^\d+\. (\w+)$", s.prompt, flags=re.M))
            top = [w for w, _ in listing.most_common(10)]
            assert sorted(top) == sorted(s.answers)
            assert min(listing[w] for w in s.answers) > max([c for w, c in listing.items() if w not in s.answers] or [0])
        elif task == "fwe":
            counts = Counter(s.prompt.split("coded words. ")[1].split("\nQuestion")[0].split(" .... "))
            assert [w for w, _ in counts.most_common(3)] == s.answers


def test_needle_depths_cover_the_range_evenly():
    ss = R.make_task("niah_single_2", TOK, 512, 9, seed=0, haystack=HAY)
    assert np.allclose([s.depth for s in ss], np.linspace(0, 1, 9))
    realised = []
    for s in ss:
        ctx_start = s.prompt.index("afterwards.\n") + len("afterwards.\n")
        ctx_end = s.prompt.index("\nWhat are all the special magic")
        realised.append((s.needles[0][0] - ctx_start) / (ctx_end - ctx_start))
    assert np.all(np.diff(realised) > 0)  # in order of the requested depths
    assert np.abs(np.asarray(realised) - np.linspace(0, 1, 9)).max() < 0.12  # up to a line of code


def test_scorers_agree_with_hand_computed_cases():
    preds = ["the numbers are 123 and 456", "nothing", "456"]
    refs = [["123", "456"], ["789"], ["123", "456"]]
    assert R.string_match_all(preds, refs) == pytest.approx(100 * (1 + 0 + 0.5) / 3)
    assert R.string_match_part(preds, refs) == pytest.approx(100 * (1 + 0 + 1) / 3)
    assert R.string_match_all(["ABC"], [["abc"]]) == 100.0  # case-insensitive
    with pytest.raises(ValueError, match="as many predictions"):
        R.string_match_all(["a"], [])


def oracle(s: R.Sample) -> str:
    """Reads the prompt as a perfect copier would: every value a needle gives an asked key."""
    if s.task in R.NIAH_TASKS:
        vals = [v for k in s.meta["keys"] for v in re.findall(rf"for {re.escape(k)} is: (\S+)\.", s.prompt)]
        return " " + ", ".join(vals)
    if s.task == "vt":
        names, frontier = [], {s.meta["value"]}
        while True:
            new = [n for n, v in re.findall(r"VAR (\w+) = (?:VAR )?(\w+)\.", s.prompt) if v in frontier and n not in names]
            if not new:
                return " ".join(names)
            names += new
            frontier |= set(new)
    if s.task == "cwe":
        return " ".join(w for w, _ in Counter(re.findall(r"^\d+\. (\w+)$", s.prompt, flags=re.M)).most_common(10))
    if s.task == "fwe":
        body = s.prompt.split("coded words. ")[1].split("\nQuestion")[0]
        return " ".join(w for w, _ in Counter(body.split(" .... ")).most_common(3))
    q = s.meta["question"]
    if s.task == "qa_1":
        person, attr = re.search(r"What is the (.+) of (.+)\?", q).group(2, 1)
        return re.search(rf"The {attr} of {person} is (\w+)\.", s.prompt).group(1)
    person = re.search(r"In which country was (.+) born\?", q).group(1)
    city = re.search(rf"{person} was born in (.+?)\.", s.prompt).group(1)
    return re.search(rf"{city} is a city in the country of (\w+)\.", s.prompt).group(1)


@pytest.mark.parametrize("task", R.TASKS)
def test_an_oracle_that_copies_perfectly_scores_100(samples, task):
    ss = samples[task]
    assert R.score_task(ss, [oracle(s) for s in ss]) == 100.0
    assert R.score_task(ss, ["" for _ in ss]) == 0.0


def test_noise_and_needle_haystacks_and_bad_input():
    s = R.make_task("niah_single_1", TOK, 300, 2, haystack=HAY)[0]
    assert "The grass is green." in s.prompt
    s = R.make_task("niah_multikey_3", TOK, 800, 2, haystack=HAY)[0]
    assert s.prompt.count("One of the special magic uuids for") > 3  # distractor needles
    with pytest.raises(ValueError, match="task='niah'"):
        R.make_task("niah", TOK, 256, 1)
    with pytest.raises(ValueError, match="too short"):
        R.make_task("qa_1", TOK, 40, 1, haystack=HAY)
    with pytest.raises(ValueError, match="too short"):  # four keys asked do not fit 256 tokens here
        R.make_task("niah_multiquery", TOK, 256, 1, haystack=HAY)


def test_squad_adapter_reads_local_files(tmp_path):
    squad = {"data": [{"paragraphs": [
        {"context": "Zorvania's capital is Quelth.", "qas": [{"question": "What is the capital of Zorvania?",
                                                             "answers": [{"text": "Quelth"}]}]},
        {"context": "Other text.", "qas": [{"question": "x?", "answers": [], "is_impossible": True}]}]}]}
    p = tmp_path / "squad.json"
    p.write_text(json.dumps(squad))
    items = R.load_squad(p)
    assert items == [{"question": "What is the capital of Zorvania?", "answers": ["Quelth"],
                      "gold": ["Zorvania's capital is Quelth."], "others": ["Other text."]}]
    ss = R.make_task("qa_1", TOK, 200, 2, qa_items=items * 3, haystack=HAY)
    assert all("Quelth" in s.prompt and s.answers == ["Quelth"] for s in ss)


def test_predict_runs_nblib_and_local_hugging_face_models(tmp_path):
    """Greedy predictions through the KV cache for an nblib model, and through
    `generate_text` for a local Hugging Face folder (a tiny random GPT-2 with this tokenizer)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    from nblib.data.bpe import bpe_path
    from nblib.models import build_model

    ss = R.make_task("niah_single_1", TOK, 200, 2, haystack=HAY)
    torch.manual_seed(0)
    ours = build_model("llama", dict(vocab_size=TOK.vocab_size, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1,
                                     d_ff=32, max_seq_len=512)).eval()
    preds = R.predict(ours, TOK, ss, max_new_tokens=4)
    ids = torch.as_tensor(TOK.encode(ss[0].text))[None]
    assert preds[0] == TOK.decode(ours.generate(ids, 4, temperature=0.0, use_cache=False)[0, ids.size(1):])
    hf = GPT2LMHeadModel(GPT2Config(vocab_size=TOK.vocab_size, n_layer=1, n_embd=16, n_head=2, n_positions=512))
    hf.save_pretrained(tmp_path)
    PreTrainedTokenizerFast(tokenizer_file=str(bpe_path("stdlib-1024")), eos_token="<|endoftext|>").save_pretrained(tmp_path)
    out = R.predict(R.HFModel(str(tmp_path)), TOK, ss, max_new_tokens=3)
    assert len(out) == 2 and all(isinstance(o, str) for o in out)
