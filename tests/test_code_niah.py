"""RULER's single needles written as code (nblib.evals.code_niah): determinism, sizes, the
needle as a whole line at the span the metadata gives, depths, and two independent readers:
a regex that reads the assignment back scores 100, a reader that answers nothing scores 0."""

import re

import numpy as np
import pytest
import torch

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


# ------------------------------------------------------------------ the levers of chapter 5's ladder
@pytest.fixture(scope="module")
def lever_samples():
    return {(t, hf, kf): C.make_task(t, TOK, 384, 4, seed=1, haystack=HAY, haystack_form=hf, key_form=kf)
            for t in C.TASKS for hf in ("comments", "prose") for kf in C.KEY_FORMS} | {
        (t, "code", "word"): C.make_task(t, TOK, 384, 4, seed=1, haystack=HAY, key_form="word") for t in C.TASKS}


def _body(s):
    """The haystack lines of a sample: between the header and the question, needle left out."""
    (a, b), = s.needles
    start, end = s.prompt.index("\n") + 1, s.prompt.index("\n# What is the magic")
    return (s.prompt[start:a] + s.prompt[b + 1:end]).split("\n")


def test_levers_keep_rulers_sizing_depths_and_scoring(lever_samples):
    for (t, hf, kf), ss in lever_samples.items():
        assert all(0.99 * 384 <= len(TOK.encode(s.text)) == s.n_tokens <= 384 for s in ss), (t, hf, kf)
        assert [s.depth for s in ss] == pytest.approx(np.linspace(0, 1, 4))
        assert all(s.prompt.count(s.answer_prefix) == 1 for s in ss)  # asked once, hidden once
        preds = [" " + re.search(re.escape(s.answer_prefix) + r" '?([0-9a-f-]+)'?\n", s.prompt).group(1) for s in ss]
        assert R.score_task(ss, preds) == 100.0 and R.score_task(ss, [""] * len(ss)) == 0.0


def test_comment_haystacks_are_comments_and_prose_has_no_other_assignment(lever_samples):
    for (t, hf, kf), ss in lever_samples.items():
        for s in ss:
            lines = _body(s)
            if hf in ("comments", "prose"):
                cut = [ln for ln in lines if ln][-1]  # the haystack's last line may be cut short
                assert all(ln == "" or ln.startswith("# ") or (ln == cut and "# ".startswith(ln[:2]))
                           for ln in lines), (t, hf)
            if hf == "prose":
                assert not any("=" in ln for ln in lines) and s.prompt.count("=") == 1, (t, kf)
            if t == "niah_single_1_code" and hf != "code":  # RULER's own noise sentences, the last one may be cut
                noise = {f"# {x.strip()}." for x in R.NOISE.split(".") if x.strip()}
                assert all(any(n.startswith(ln) for n in noise) for ln in lines if ln), (hf, kf)


def test_word_keys_are_one_token_and_assigned_only_in_the_needle(lever_samples):
    for (t, hf, kf), ss in lever_samples.items():
        if kf != "word":
            continue
        for s in ss:
            key = s.meta["keys"][0]
            assert s.answer_prefix == f"{key} =" and len(TOK.encode(key)) == 1 and key.isidentifier()
            assert not re.search(rf"{key}\s*=", "\n".join(_body(s)))


def test_lever_defaults_and_bad_forms():
    default = C.make_task("niah_single_2_code", TOK, 256, 2, haystack=HAY)
    assert [s.text for s in C.make_task("niah_single_2_code", TOK, 256, 2, haystack=HAY, haystack_form="code",
                                        key_form="magic")] == [s.text for s in default]
    assert "haystack_form" not in default[0].meta  # the default samples (and their caches) are unchanged
    with pytest.raises(ValueError, match="haystack_form='essay'"):
        C.make_task("niah_single_2_code", TOK, 256, 1, haystack=HAY, haystack_form="essay")
    with pytest.raises(ValueError, match="key_form='uuid'"):
        C.make_task("niah_single_2_code", TOK, 256, 1, haystack=HAY, key_form="uuid")


# ------------------------------------------------------------------ values sized to the model, and the control
@pytest.fixture(scope="module")
def short_samples():
    return {t: C.make_task(t, TOK, 384, 4, seed=1, haystack=HAY, value_form="short") for t in C.TASKS}


def test_short_values_are_at_most_two_pieces_and_stop_generation_two_tokens_after(short_samples):
    numbers = set(C.short_numbers(TOK))
    assert numbers and all(10 <= n < 1000 and len(TOK.encode(f" {n}")) <= 2 for n in numbers)
    for t, ss in short_samples.items():
        assert all(0.99 * 384 <= len(TOK.encode(s.text)) == s.n_tokens <= 384 for s in ss), t
        for s in ss:
            value, = s.answers
            (a, b), = s.needles
            literal = s.prompt[a:b][len(s.answer_prefix) + 1:]
            assert len(TOK.encode(f" {value}")) <= C.SHORT_PIECES
            assert s.meta["stop_after_tokens"] == len(TOK.encode(f" {literal}")) + C.STOP_SLACK
            if t == "niah_single_3_code":  # an identifier the haystack never contains, as a string
                assert literal == repr(value) and value.isidentifier()
                assert not re.search(rf"\b{value}\b", s.prompt[:a] + s.prompt[b:])
            else:
                assert int(value) in numbers and literal == value


def test_short_values_leave_the_default_samples_alone():
    for t in C.TASKS:
        ruler = C.make_task(t, TOK, 256, 2, haystack=HAY)
        assert [s.text for s in C.make_task(t, TOK, 256, 2, haystack=HAY, value_form="ruler")] == [s.text for s in ruler]
        assert "stop_after_tokens" not in ruler[0].meta
    with pytest.raises(ValueError, match="value_form='tiny'"):
        C.make_task("niah_single_2_code", TOK, 256, 1, haystack=HAY, value_form="tiny")


def test_byte_tokens_get_the_fewest_pieces_they_allow():
    byte = get_tokenizer("byte")
    assert C.short_numbers(byte) == list(range(10, 100))  # " 42" is 3 bytes; no 2-byte number has 2 digits
    s = C.make_task("niah_single_1_code", byte, 600, 1, haystack=HAY, value_form="short")[0]
    assert len(s.answers[0]) == 2


def test_the_control_is_the_prompt_without_its_needle_line(short_samples):
    for ss in short_samples.values():
        for s in ss:
            c = C.without_needle(s)
            (a, b), = s.needles
            assert c.prompt == s.prompt[:a] + s.prompt[b + 1:] and s.prompt[b] == "\n"
            assert c.answer_prefix == s.answer_prefix and c.answers == s.answers and c.needles == []
            assert s.answer_prefix not in c.prompt  # the key's assignment is gone with its line


class _Recorder:
    """A model behind `generate_text` that records how many tokens it was asked for."""

    def __init__(self):
        self.asked = []

    def generate_text(self, text, n):
        self.asked.append(n)
        return ""


def test_generation_stops_after_the_short_value(short_samples):
    ss = short_samples["niah_single_2_code"]
    m = _Recorder()
    R.predict(m, TOK, ss, 32)
    assert m.asked == [min(32, s.meta["stop_after_tokens"]) for s in ss] and max(m.asked) <= 4
    R.predict(m, TOK, C.make_task("niah_single_2_code", TOK, 256, 1, haystack=HAY), 32)
    assert m.asked[-1] == 32  # RULER's values: the caller's cap


class _Copier(torch.nn.Module):
    """An exact induction oracle, independent of any trained model: at each of the last
    `tail` positions it predicts the token that followed the longest earlier match (up to 8
    tokens) of the context's suffix, and is uniform where nothing matches."""

    def __init__(self, vocab, tail=16):
        super().__init__()
        self.vocab, self.tail = vocab, tail

    def forward(self, ids):
        seq = ids[0].tolist()
        logits = torch.zeros(1, len(seq), self.vocab)
        for t in range(max(0, len(seq) - self.tail), len(seq)):
            for n in range(min(8, t + 1), 0, -1):
                suffix = seq[t - n + 1:t + 1]
                hits = [j for j in range(n - 1, t) if seq[j - n + 1:j + 1] == suffix]
                if hits:
                    logits[0, t, seq[hits[-1] + 1]] = 30.0
                    break
        return logits, None

    def generate(self, ids, n_new, temperature=0.0):
        for _ in range(n_new):
            logits, _ = self(ids)
            ids = torch.cat([ids, logits[:, -1:].argmax(-1)], dim=1)
        return ids


def test_needle_measures_of_an_exact_copier_against_its_control(short_samples):
    m = C.needle_measures(_Copier(TOK.vocab_size), TOK, short_samples["niah_single_2_code"], 32)
    assert m["score"] == 100.0 and m["piece_hit"] == 1.0 and m["first_hit"] == 1.0 and m["whole_hit"] == 1.0
    assert m["control_score"] < 50.0  # without the needle line the prefix never occurred: no copy to make
    # with the needle every value piece gets all the mass (a logit margin of 30): gain = -logp without it
    for s in short_samples["niah_single_2_code"]:
        lp = C.needle_logprobs(_Copier(TOK.vocab_size), TOK, s)
        assert lp["with"] > -1e-6 and lp["piece_hit"] == 1.0
    assert m["needle_gain"] > 0


@pytest.mark.parametrize("value_form", ["short", "ruler"])
def test_retrieval_scores_every_piece_of_the_value(value_form):
    """Fig. 18's retrieval score is over the value's own pieces: they decode to the value (a
    BPE writes " 434" as " 4" + "34", and the leading-space piece holds the first digit), and
    each of them holds some of its characters."""
    from nblib.metrics.attention_maps import needle_value_tokens
    for t in C.TASKS:
        for s in C.make_task(t, TOK, 384, 4, seed=2, haystack=HAY, value_form=value_form):
            ids, needle_tok, value_tok = needle_value_tokens(TOK, s)
            value, = s.answers
            assert value_tok and set(value_tok) <= set(needle_tok)
            assert value_tok == list(range(value_tok[0], value_tok[-1] + 1))
            assert value in TOK.decode(ids[value_tok])
            for drop in (value_tok[1:], value_tok[:-1]):  # every piece carries some of the value
                assert value not in TOK.decode(ids[drop]) if drop else True
