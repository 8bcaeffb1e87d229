"""RULER's single needles written as code (nblib.evals.code_niah): determinism, sizes, the
needle as a whole line at the span the metadata gives, depths, and two independent readers:
a regex that reads the assignment back scores 100, a reader that answers nothing scores 0."""

import re

import numpy as np
import pytest

from nblib.data import get_corpus, get_tokenizer
from nblib.evals import code_niah as C
from nblib.evals import ruler as R

TOK = get_tokenizer("bpe:stdlib-1024")
HAY = [d.text for d in get_corpus("python-stdlib").split("eval")[:30]]


@pytest.fixture(scope="module")
def samples():
    return {t: C.make_task(t, TOK, 384, 6, seed=1, haystack=HAY) for t in C.TASKS}


def test_same_seed_same_samples_other_seed_others(samples):
    for t in C.TASKS:
        assert [s.text for s in C.make_task(t, TOK, 384, 6, seed=1, haystack=HAY)] == [s.text for s in samples[t]]
        assert [s.text for s in C.make_task(t, TOK, 384, 6, seed=2, haystack=HAY)] != [s.text for s in samples[t]]


def test_sizes_within_one_percent_in_the_models_tokens(samples):
    for ss in samples.values():
        for s in ss:
            n = len(TOK.encode(s.text))
            assert n == s.n_tokens and 0.99 * 384 <= n <= 384


def test_needle_is_a_whole_line_at_its_span_and_the_prefix_repeats_its_left_side(samples):
    for t, ss in samples.items():
        for s in ss:
            (a, b), = s.needles
            line = s.prompt[a:b]
            assert s.prompt[a - 1] == "\n" and s.prompt[b] == "\n", (t, line)
            assert line.startswith(s.answer_prefix) and s.answers[0] in line[len(s.answer_prefix):]
            assert s.prompt.count(s.answer_prefix) == 1  # the key is asked once and hidden once
            if t == "niah_single_3_code":
                assert line.endswith(f"'{s.answers[0]}'")  # a UUID is a string literal
            else:
                assert re.fullmatch(r"\d{7}", s.answers[0])


def test_depth_runs_from_start_to_end(samples):
    for t, ss in samples.items():
        body_start = [len(C.HEADER.format(noun=s.meta["kind"][:-1])) for s in ss]
        rel = [(s.needles[0][0] - h) / (len(s.prompt) - h) for s, h in zip(ss, body_start)]
        assert np.all(np.diff(rel) > 0), (t, rel)
        assert rel[0] < 0.05 and rel[-1] > 0.85
        assert [s.depth for s in ss] == pytest.approx(np.linspace(0, 1, 6))


def test_a_reader_of_the_assignment_scores_100_and_an_empty_answer_0(samples):
    for t, ss in samples.items():
        preds = []
        for s in ss:
            m = re.search(re.escape(s.answer_prefix) + r" '?([0-9a-f-]+)'?\n", s.prompt)
            preds.append(" " + m.group(1))
        assert R.score_task(ss, preds) == 100.0
        assert R.score_task(ss, [""] * len(ss)) == 0.0


def test_noise_haystack_is_the_noise_lines_only():
    s = C.make_task("niah_single_1_code", TOK, 256, 1, haystack=HAY)[0]
    body = s.prompt[len(C.HEADER.format(noun="number")):s.prompt.index("\n# What")]
    lines = [ln for ln in body.split("\n") if ln and not ln.startswith("magic_number_")]
    assert set(lines[:-1]) <= set(C.NOISE_CODE.splitlines())  # the last one may be cut


def test_whole_line_needles_keep_sentence_needles_unchanged():
    hay = "a = 1\nb = 2\nc = 3\n"
    text, spans = R._insert(hay, [(0.6, "x = 9\n")], boundary=C.LINE_START)
    assert text == "a = 1\nb = 2\nx = 9\nc = 3\n" and text[slice(*spans[0])] == "x = 9"
    text, spans = R._insert("One. Two. Three.", [(0.5, "Needle.")])
    assert text[slice(*spans[0])] == "Needle." and "Needle. " in text


def test_bad_input_names_the_value():
    with pytest.raises(ValueError, match="task='niah_single_2'"):
        C.make_task("niah_single_2", TOK, 256, 1, haystack=HAY)
    with pytest.raises(ValueError, match="length=16"):
        C.make_task("niah_single_2_code", TOK, 16, 1, haystack=HAY)
    with pytest.raises(ValueError, match="too short"):
        C.make_task("niah_single_2_code", TOK, 40, 1, haystack=HAY)
