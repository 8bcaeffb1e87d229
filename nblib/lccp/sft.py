"""Long-context SFT (LCCP paper §5.3, App. A.3-A.4, Table 10, App. C.3): the example mixture,
built offline from the project's corpus, and the SFT runs as run-store configs.

    built = build_sft_mixture(budget)                    # cached file + sha256 + what went in
    cfg = sft_config(budget, "S5", lccp_run.config, step, seed=0, n_tokens=default_sft_tokens(budget, "S5"))
    cfgs = sft_configs(budget, "S5", lccp_run.config, step, n_tokens)   # the paper's three data seeds

What follows the paper:
- One fixed mixture for every starting checkpoint (App. A.4: "The SFT mixture is fixed across
  all evaluated initializations"); a run's data seed changes only the order in which the
  examples are drawn and packed (App. C.3: "three SFT models using different data seeds").
- Task families and their sampling mass from Table 10: history-based QA 11.52%, multi-hop
  reasoning 2.24%, structured retrieval 4.84%, additional long-context reasoning 21.40%; the
  remaining 60.00% is general instruction following (§A.3: "a mixture of general
  instruction-following examples and high-quality long-context question-answering data").
  Shares are of examples, split evenly over the families of a category.
- Loss on the answers only, examples packed into sequences of the LCCP context with
  span-based attention (doc isolation), a linear-decay LR (App. A.3), over-long examples
  filtered rather than cut (App. A.4). The stream is nblib.data.sft.SFTPackedStream.

What is ours (offline analogues; the paper's data is not public):
- history-based QA: RULER's qa_1 (one fact among distractor documents) and `line_after`
  (which line follows a quoted line of a corpus excerpt: a question about earlier context);
- multi-hop: RULER's qa_2 (two-hop) and `assign_chain` (a chain of assignments hidden in
  corpus text: which value does the last name hold);
- structured retrieval: RULER's niah_multikey_2 (key-value needles) and `kv_lookup` (a table
  of records, one key asked);
- long-context reasoning: RULER's vt (variable tracking);
- general instruction following: `repeat_line` and `last_word` on corpus lines (short).
  Prompts are the task templates themselves (RULER's, answer prefix included, so the format
  is the one RULER evaluates), with no chat template: the toy models have no chat tokens.
- Haystacks and excerpts come from the corpus' TRAIN split (evaluations use the held-out
  split), and RULER prompts are drawn with seeds far from the evaluation's (seed 0).
- Lengths: RULER families at lengths halving down from the context (as many levels as the
  template fits), the compact families at log-uniform lengths up to the context.
- The SFT LR is the LCCP LR (lr_4K / 10) decaying linearly to a tenth, no warmup, and the
  batch half the scale's LCCP batch (App. C.3: 4.20B tokens in 4,000 steps of 32 x 32,768
  at S5, whose LCCP batch is 64); Table 8's values are not in the paper's text.

More families plug in through `register_family`; a sized generator of ruler.Sample objects
(make_task's signature) becomes one with `samples_family`. The offline LongBench / GraphWalks /
LongReason / BABILong generators (nblib.evals.long_benchmarks) are NOT in the mixture: they are
what the SFT models are evaluated on (§5.3, Fig. 8b), and the paper's SFT data are other task
families (Table 10). To add one anyway, register it with default=False and name it:

    register_family(samples_family("longreason", "long_reasoning",
        lambda tok, L, n, seed, hay: long_benchmarks.make_task("longreason", tok, L, n, seed, hay),
        default=False))
    build_sft_mixture(budget, families=[*default_families(), "longreason"])
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from nblib.budgets import PAPER_N, Budget
from nblib.data import cache_dir, corpus_identity, file_sha256, get_corpus, get_tokenizer
from nblib.data.sft import SFTExamples, read_sft_file, read_sft_info, resolve_sft_path, write_sft_file
from nblib.evals import ruler as R
from nblib.store.runstore import RunConfig

# Table 10: configured sampling mass (%) of the long-context task families; general
# instruction following is the rest of the mixture.
TABLE10 = {"history_qa": 11.52, "multi_hop": 2.24, "structured_retrieval": 4.84, "long_reasoning": 21.40}
CATEGORY_WEIGHTS = {**TABLE10, "general_instruction": round(100.0 - sum(TABLE10.values()), 2)}
PAPER_SFT_TOKENS = 2.10e9  # §5.3: the long-context SFT budget at S5
PAPER_SFT_SEEDS = (0, 1, 2)  # §5.3, App. C.3: three data seeds per starting checkpoint
SFT_EXAMPLES = {"smoke": 48, "toy": 1200, "full": 20_000}  # examples in the mixture file
MIN_SFT_SEQ_LEN = 256  # below this no instruction template fits (smoke's LCCP context is 64 bytes)
GENERATOR_VERSION = 1  # bump when a generator changes: it renames the cached files
_SEED_BASE = 7_100_000  # generation seeds, far from the evaluation's RULER seed 0
_N_LEVELS = 4  # RULER families: lengths L, L/2, L/4, L/8 (those the template fits)
_TEXT_DOCS = 1000  # train-split documents the generators draw from
_HAYSTACK_DOCS = 64  # of which sized sample generators get these (RULER builds its key words from all it gets)


@dataclass(frozen=True)
class BuildContext:
    """What every family generator sees: the tokenizer, the packed length (an example may
    hold at most seq_len + 1 tokens with its EOS) and the train-split texts."""

    tokenizer: object
    seq_len: int
    texts: tuple

    @property
    def max_example(self) -> int:
        """Prompt + answer tokens an example may have (the EOS takes the last place)."""
        return self.seq_len

    def n_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text))


# a family generator: (context, n, seed) -> up to n (prompt text, answer text) pairs
Generator = Callable[[BuildContext, int, int], list]


@dataclass(frozen=True)
class Family:
    """One task family of the SFT mixture: its Table 10 category and its generator."""

    name: str
    category: str
    generate: Generator
    source: str = ""
    default: bool = True  # in the mixture unless families are named; False: only when named


FAMILIES: dict[str, Family] = {}


class FamilyDoesNotFit(ValueError):
    """A family that cannot make an example within the packed length."""


def register_family(family: Family) -> Family:
    """Add (or replace) a family of the SFT mixture (LCCP paper Table 10's task families)."""
    if family.category not in CATEGORY_WEIGHTS:
        raise ValueError(f"category={family.category!r} is not allowed; allowed: {', '.join(CATEGORY_WEIGHTS)}")
    FAMILIES[family.name] = family
    return family


# ---------------------------------------------------------------------------------------
# families from ruler.Sample generators (RULER, and later LongBench-like ones)
# ---------------------------------------------------------------------------------------
def sample_to_pair(sample) -> tuple[str, str]:
    """A ruler.Sample as an SFT (prompt, answer) pair (§5.3): the prompt is what the model reads
    at evaluation (template + answer prefix), the answer the references joined by ', '."""
    prefix = getattr(sample, "answer_prefix", "")
    prompt = sample.prompt + prefix
    answers = [str(a) for a in (sample.answers if isinstance(sample.answers, (list, tuple)) else [sample.answers])]
    sep = "" if prompt[-1:].isspace() else " "
    return prompt, sep + ", ".join(answers)


def length_levels(seq_len: int, reserve: int, n_levels: int = _N_LEVELS) -> list[int]:
    """Prompt lengths for a sized generator: the context minus `reserve` answer tokens, halved
    n_levels - 1 times (App. A.4's long examples and shorter ones), at least 32 tokens."""
    top = seq_len - reserve
    return [top >> k for k in range(n_levels) if (top >> k) >= 32]


def samples_family(name: str, category: str, make: Callable, reserve: int = 32, source: str = "",
                   default: bool = True, to_pair: Callable = sample_to_pair) -> Family:
    """A Table 10 family from a sized sample generator `make(tokenizer, length, n, seed, haystack) ->
    list[ruler.Sample]` (ruler.make_task's signature, task bound): lengths from
    `length_levels`, the smallest levels dropped while the template does not fit (a
    ValueError from `make`), the examples spread evenly over the levels that fit. `to_pair`
    turns a sample into (prompt, answer): `sample_to_pair` joins every reference, which suits
    tasks that ask for all of them (RULER's), not tasks whose references are alternatives."""
    def generate(ctx: BuildContext, n: int, seed: int) -> list:
        levels = sorted(length_levels(ctx.seq_len, reserve))
        hay = list(ctx.texts[:_HAYSTACK_DOCS])
        fits = []
        for i, L in enumerate(levels):  # templates fit every length above the first that fits
            try:
                make(ctx.tokenizer, L, 1, _SEED_BASE + 997, hay)
                fits = levels[i:]
                break
            except ValueError:
                continue
        if not fits:
            raise FamilyDoesNotFit(f"its template does not fit {levels[-1] if levels else 0} tokens")
        out = []
        for j, L in enumerate(fits):
            k = n // len(fits) + (j < n % len(fits))
            try:
                out += [to_pair(s) for s in make(ctx.tokenizer, L, k, _SEED_BASE + seed, hay)] if k else []
            except ValueError:  # this length cannot be met (e.g. too little haystack): the others still count
                continue
        return out
    return Family(name, category, generate, source, default)


def _ruler(task: str):
    return lambda tokenizer, length, n, seed, haystack: R.make_task(task, tokenizer, length, n, seed=seed,
                                                                  haystack=haystack)


# ---------------------------------------------------------------------------------------
# compact families from the corpus
# ---------------------------------------------------------------------------------------
_TAG = {"line_after": 1, "assign_chain": 2, "kv_lookup": 3, "repeat_line": 4, "last_word": 5}


def _target(rng, lo: int, hi: int) -> int:
    """A total length log-uniform in [lo, hi] (examples spread up to the context)."""
    lo = max(1, min(lo, hi))
    return int(round(np.exp(rng.uniform(np.log(lo), np.log(hi)))))


def _excerpt(ctx: BuildContext, rng, budget: int, max_line_chars: int = 160) -> list[str]:
    """Consecutive non-empty lines of train-split text, from a random document and line on
    (continuing into the next documents), about `budget` tokens in all."""
    out, used = [], 0
    d = int(rng.integers(len(ctx.texts)))
    lines = ctx.texts[d].split("\n")
    at = int(rng.integers(len(lines)))
    for _ in range(len(ctx.texts)):
        chunk = [ln.rstrip() for ln in lines[at:] if ln.strip() and len(ln) <= max_line_chars]
        for j in range(0, len(chunk), 32):  # tokenize 32 lines at a time: excerpts are short
            part = chunk[j:j + 32]
            for ln, c in zip(part, map(len, ctx.tokenizer.encode_batch(part))):
                if used + c + 1 > budget:
                    return out
                out.append(ln)
                used += c + 1
        d, at = (d + 1) % len(ctx.texts), 0
        lines = ctx.texts[d].split("\n")
    return out


def _fits(ctx: BuildContext, prompt: str, answer: str) -> bool:
    return ctx.n_tokens(prompt) + ctx.n_tokens(answer) <= ctx.max_example


def _shrink(ctx, build, lines: list) -> tuple | None:
    """build(lines) -> (prompt, answer) | None; drop tail lines until the pair fits."""
    while lines:
        pair = build(lines)
        if pair is None:
            return None
        if _fits(ctx, *pair):
            return pair
        lines = lines[: max(0, len(lines) - max(1, len(lines) // 8))]
    return None


def _attempts(ctx, n, seed, tag, one) -> list:
    rng = np.random.default_rng([_SEED_BASE, seed, tag])
    out = []
    for _ in range(20 * n + 20):
        if len(out) >= n:
            break
        pair = one(rng)
        if pair is not None:
            out.append(pair)
    return out


def line_after(ctx: BuildContext, n: int, seed: int) -> list:
    """History-based QA analogue (Table 10): an excerpt, then "which line follows <a line
    quoted from it>?"; the answer is the next line (the quoted line occurs once)."""
    def one(rng):
        lines = _excerpt(ctx, rng, _target(rng, 48, ctx.max_example) - 24)
        u = float(rng.random())

        def build(ls):
            counts = Counter(ln.strip() for ln in ls)
            cand = [j for j in range(len(ls) - 1) if counts[ls[j].strip()] == 1 and len(ls[j + 1].strip()) <= 80]
            if not cand:
                return None
            j = cand[int(u * len(cand))]
            body = "\n".join(ls)
            return (f"{body}\n\nQuestion: which line comes right after the line \"{ls[j].strip()}\"?\nAnswer:",
                    " " + ls[j + 1].strip())
        return _shrink(ctx, build, lines) if len(lines) >= 2 else None
    return _attempts(ctx, n, seed, _TAG["line_after"], one)


def _name(rng, k: int = 5) -> str:
    return "".join(chr(97 + int(c)) for c in rng.integers(0, 26, k))


def assign_chain(ctx: BuildContext, n: int, seed: int) -> list:
    """Multi-hop analogue (Table 10): a chain `a = 41207`, `b = a`, `c = b` spread in order
    through corpus text; "what value does c hold?" needs every hop."""
    def one(rng):
        hops = int(rng.integers(2, 4))
        names = [_name(rng) for _ in range(hops + 1)]
        value = str(int(rng.integers(10_000, 100_000)))
        chain = [f"{names[0]} = {value}"] + [f"{names[i]} = {names[i - 1]}" for i in range(1, hops + 1)]
        filler = _excerpt(ctx, rng, max(0, _target(rng, 48, ctx.max_example) - 24 - 6 * len(chain)))
        slots = np.sort(rng.integers(0, len(filler) + 1, len(chain)))

        def build(ls):  # chain line k goes before filler line slots[k] (or at the end), in order
            body, k = [], 0
            for i in range(len(ls) + 1):
                while k < len(chain) and min(int(slots[k]), len(ls)) == i:
                    body.append(chain[k])
                    k += 1
                if i < len(ls):
                    body.append(ls[i])
            text = "\n".join(body)
            return f"{text}\n\nQuestion: what value does {names[-1]} hold?\nAnswer:", " " + value
        pair = _shrink(ctx, build, filler) if filler else build([])
        return pair if pair is not None and _fits(ctx, *pair) else None
    return _attempts(ctx, n, seed, _TAG["assign_chain"], one)


def kv_lookup(ctx: BuildContext, n: int, seed: int) -> list:
    """Structured-retrieval analogue (Table 10): a table of `key: value` records; "what is the
    value of <key>?" asks one of them."""
    def one(rng):
        budget = _target(rng, 40, ctx.max_example) - 20
        per = max(1, ctx.n_tokens("abcdef: 12345\n"))
        k = max(2, budget // per)
        keys = list(dict.fromkeys(_name(rng, 6) for _ in range(k)))
        vals = [str(int(rng.integers(10_000, 100_000))) for _ in keys]
        q = int(rng.integers(len(keys)))

        def build(rows):
            body = "\n".join(f"{a}: {b}" for a, b in rows)
            return f"Records:\n{body}\n\nQuestion: what is the value of {keys[q]}?\nAnswer:", " " + vals[q]
        rows = list(zip(keys, vals))
        while len(rows) >= 2:
            pair = build(rows)
            if _fits(ctx, *pair):
                return pair
            drop = [i for i in range(len(rows)) if rows[i][0] != keys[q]][-max(1, len(rows) // 8):]
            rows = [r for i, r in enumerate(rows) if i not in set(drop)]
        return None
    return _attempts(ctx, n, seed, _TAG["kv_lookup"], one)


def _short_line(ctx, rng):
    lines = _excerpt(ctx, rng, 96, max_line_chars=100)
    lines = [ln.strip() for ln in lines if len(ln.strip()) >= 8]
    return lines[int(rng.integers(len(lines)))] if lines else None


def repeat_line(ctx: BuildContext, n: int, seed: int) -> list:
    """General instruction following (Table 10's non-long-context share): repeat a line."""
    def one(rng):
        line = _short_line(ctx, rng)
        pair = (f"Repeat the following line exactly.\n{line}\nAnswer:", " " + line) if line else None
        return pair if pair and _fits(ctx, *pair) else None
    return _attempts(ctx, n, seed, _TAG["repeat_line"], one)


def last_word(ctx: BuildContext, n: int, seed: int) -> list:
    """General instruction following: name the last whitespace-separated word of a line."""
    def one(rng):
        line = _short_line(ctx, rng)
        if not line:
            return None
        pair = (f"What is the last word of the following line?\n{line}\nAnswer:", " " + line.split()[-1])
        return pair if pair and _fits(ctx, *pair) else None
    return _attempts(ctx, n, seed, _TAG["last_word"], one)


for _f in (
    samples_family("qa_1", "history_qa", _ruler("qa_1"), 16, "RULER qa_1 (nblib.evals.ruler)"),
    Family("line_after", "history_qa", line_after, "corpus excerpt, next-line question"),
    samples_family("qa_2", "multi_hop", _ruler("qa_2"), 16, "RULER qa_2 (nblib.evals.ruler)"),
    Family("assign_chain", "multi_hop", assign_chain, "assignment chain in corpus text"),
    samples_family("niah_multikey_2", "structured_retrieval", _ruler("niah_multikey_2"), 24,
                   "RULER niah_multikey_2 (nblib.evals.ruler)"),
    Family("kv_lookup", "structured_retrieval", kv_lookup, "synthetic key-value records"),
    samples_family("vt", "long_reasoning", _ruler("vt"), 32, "RULER vt (nblib.evals.ruler)"),
    Family("repeat_line", "general_instruction", repeat_line, "corpus lines"),
    Family("last_word", "general_instruction", last_word, "corpus lines"),
):
    register_family(_f)


def default_families() -> list[str]:
    """The families of the default mixture (Table 10's analogues), in registry order."""
    return [f for f, fam in FAMILIES.items() if fam.default]


# ---------------------------------------------------------------------------------------
# the mixture file
# ---------------------------------------------------------------------------------------
def sft_seq_len(budget: Budget) -> int:
    """Packed SFT length: the LCCP context (App. A.4: 32,768 tokens), at least MIN_SFT_SEQ_LEN."""
    return max(budget.long_seq_len, MIN_SFT_SEQ_LEN)


def quotas(n: int, weights: dict) -> dict:
    """Examples per category or family: integer counts summing to n, proportional to the
    weights (Table 10's sampling mass; largest remainder, ties by order)."""
    keys = list(weights)
    w = np.array([weights[k] for k in keys], dtype=float)
    q = n * w / w.sum()
    c = np.floor(q).astype(int)
    order = sorted(range(len(keys)), key=lambda i: (-(q[i] - c[i]), i))
    for i in order[: n - int(c.sum())]:
        c[i] += 1
    return {k: int(v) for k, v in zip(keys, c)}


@dataclass(frozen=True)
class SFTMixture:
    """A built SFT mixture file: where it is, its sha256 and how it was made."""

    path: Path
    rel: str  # the run config's data["sft_file"]: relative to the data cache folder
    sha256: str
    seq_len: int
    info: dict


def _train_texts(budget: Budget, seed: int) -> tuple:
    docs = [d.text for d in get_corpus(budget.corpus).split("train") if d.text.strip()]
    if not docs:
        raise ValueError(f"corpus {budget.corpus!r} has no train-split text to build the SFT mixture from")
    if len(docs) > _TEXT_DOCS:
        pick = np.sort(np.random.default_rng([_SEED_BASE, seed]).choice(len(docs), _TEXT_DOCS, replace=False))
        docs = [docs[int(i)] for i in pick]
    return tuple(docs)


def build_sft_mixture(budget: Budget, n_examples: int | None = None, seed: int = 0, families=None,
                      seq_len: int | None = None, root=None) -> SFTMixture:
    """The long-context SFT mixture of a budget (LCCP paper App. A.4, Table 10), built once and
    cached as `<data cache>/sft/<budget>-<key>.safetensors` (the key hashes every input).

    `n_examples` (default SFT_EXAMPLES[budget]) are split over Table 10's categories by their
    mass and evenly over each category's families; a family whose template does not fit the
    packed length is skipped and its category's mass goes to the others (a category with no
    family that fits is dropped, the rest renormalised); both are recorded in `info`.
    Examples longer than the packed length are filtered (App. A.4). `seed` is the mixture's
    own seed: the paper keeps one mixture fixed, and the runs' data seeds only reorder it."""
    names = list(families) if families is not None else default_families()
    unknown = [f for f in names if f not in FAMILIES]
    if unknown:
        raise ValueError(f"families {unknown} are not registered; allowed: {', '.join(FAMILIES)}")
    n = SFT_EXAMPLES[budget.name] if n_examples is None else int(n_examples)
    if n < 1:
        raise ValueError(f"n_examples={n_examples!r} is not allowed; allowed: an int >= 1")
    T = int(seq_len or sft_seq_len(budget))
    tok = get_tokenizer(budget.tokenizer)
    ident = {"v": GENERATOR_VERSION, "budget": budget.name, "corpus": corpus_identity(budget.corpus),
             "tokenizer": tok.tokenizer_id, "seq_len": T, "n": n, "seed": seed, "families": sorted(names),
             "weights": CATEGORY_WEIGHTS}
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    rel = f"sft/{budget.name}-{key}.safetensors"
    root = Path(root) if root is not None else cache_dir()
    path = resolve_sft_path(rel, root)
    info = read_sft_info(path)  # the header only; an unreadable file is rebuilt
    if info.get("identity") == ident:
        return SFTMixture(path, rel, file_sha256(path), T, info)
    ctx = BuildContext(tok, T, _train_texts(budget, seed))
    examples, info = _generate(ctx, names, n, seed)
    info = {**info, "identity": ident, "budget": budget.name}
    ex = _tokenize(ctx, examples, names, info, str(path))
    sha = write_sft_file(path, ex)
    return SFTMixture(path, rel, sha, T, ex.info)


def _generate(ctx: BuildContext, names: list, n: int, seed: int) -> tuple[list, dict]:
    """(family, prompt, answer) triples and what happened: probes which families fit, then
    fills each family's quota."""
    skipped, fits = {}, []
    for name in names:
        try:
            got = FAMILIES[name].generate(ctx, 1, seed + 10_000)  # probe with a seed of its own
        except FamilyDoesNotFit as e:
            skipped[name] = str(e)
            continue
        if not got:
            skipped[name] = f"no example fits {ctx.seq_len} tokens"
            continue
        fits.append(name)
    cats = {c: [f for f in fits if FAMILIES[f].category == c] for c in CATEGORY_WEIGHTS}
    live = {c: CATEGORY_WEIGHTS[c] for c, fs in cats.items() if fs}
    if not live:
        raise ValueError(f"no SFT family fits a packed length of {ctx.seq_len} tokens: {skipped}")
    per_cat = quotas(n, live)
    out = []
    for c, k in per_cat.items():
        for f, m in quotas(k, {f: 1.0 for f in cats[c]}).items():
            if m:
                out += [(f, p, a) for p, a in FAMILIES[f].generate(ctx, m, seed)]
    info = {"requested": n, "seq_len": ctx.seq_len, "seed": seed, "skipped": skipped,
            "dropped_categories": sorted(set(CATEGORY_WEIGHTS) - set(live)),
            "category_weights": {c: w / sum(live.values()) for c, w in live.items()}}
    return out, info


def _tokenize(ctx: BuildContext, triples: list, names: list, info: dict, name: str) -> SFTExamples:
    tok = ctx.tokenizer
    prompts = tok.encode_batch([p for _, p, _ in triples])
    answers = tok.encode_batch([a for _, _, a in triples])
    fam_index = {f: i for i, f in enumerate(names)}
    keep = [i for i in range(len(triples)) if len(prompts[i]) and len(answers[i])
            and len(prompts[i]) + len(answers[i]) + 1 <= ctx.seq_len + 1]
    counts = Counter(triples[i][0] for i in keep)
    info = {**info, "n_examples": len(keep), "filtered_too_long": len(triples) - len(keep),
            "per_family": {f: counts.get(f, 0) for f in names}, "categories": {f: FAMILIES[f].category for f in names}}
    if not keep:
        raise ValueError(f"every generated SFT example is longer than {ctx.seq_len} tokens")
    return SFTExamples.from_pairs([(prompts[i], answers[i]) for i in keep], tok.eos_id, tok.vocab_size,
                                  tok.tokenizer_id, [fam_index[triples[i][0]] for i in keep], names, info, name)


def mixture_summary(mixture: SFTMixture | SFTExamples) -> pd.DataFrame:
    """Per family of a built mixture (Table 10's analogue): category, examples, share of
    examples, mean / max length in tokens, and the share of tokens that are supervised."""
    ex = mixture if isinstance(mixture, SFTExamples) else read_sft_file(mixture.path, mixture.sha256)
    rows = []
    for i, f in enumerate(ex.families):
        m = ex.family == i
        if not m.any():
            continue
        L = ex.lengths[m]
        rows.append({"family": f, "category": FAMILIES[f].category if f in FAMILIES else "?",
                     "paper_mass": CATEGORY_WEIGHTS.get(FAMILIES[f].category) if f in FAMILIES else None,
                     "examples": int(m.sum()), "share": float(m.mean()), "mean_len": float(L.mean()),
                     "max_len": int(L.max()), "supervised": float(ex.answer_len[m].sum() / L.sum())})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------
# the runs
# ---------------------------------------------------------------------------------------
def default_sft_tokens(budget: Budget, scale: str) -> int:
    """The SFT budget as a multiple of N: §5.3's 2.10B tokens at S5 (N = 821.15M, 2.56N), scaled
    like every other token multiple of the budget (`multiple_scale`)."""
    mult = PAPER_SFT_TOKENS / PAPER_N["S5"] * budget.multiple_scale
    return budget.n_tokens(scale, mult)


def sft_data_config(budget: Budget, mixture: SFTMixture) -> dict:
    """The SFT stream of a run config: packed examples, doc isolation (App. A.3, span-based attention)."""
    return {"corpus": budget.corpus, "corpus_id": corpus_identity(budget.corpus), "tokenizer": budget.tokenizer,
            "split": "train", "stream": "sft", "seq_len": mixture.seq_len, "doc_isolation": True,
            "sft_file": mixture.rel, "sft_sha256": mixture.sha256}


def sft_config(budget: Budget, scale: str, parent_run_config: RunConfig, step: int, seed: int, n_tokens: int,
               mixture: SFTMixture | None = None, average_steps=None) -> RunConfig:
    """Long-context SFT of checkpoint `step` of a run (LCCP paper §5.3, App. A.3): its weights
    (and the RoPE base it was trained with) in a fresh optimizer, the fixed mixture
    (`build_sft_mixture`, built here when not given) in the order of data seed `seed`,
    linear decay from the LCCP LR to a tenth of it over `n_tokens`, no warmup.
    `average_steps` (ending at `step`) starts from their uniform average instead: a
    Constant-Last4 starting point (§5.3 fine-tunes both Raw and Last4)."""
    if not (isinstance(seed, int) and seed >= 0):
        raise ValueError(f"seed={seed!r} is not allowed; allowed: an int >= 0")
    parent = parent_run_config
    if parent.meta.get("scale", scale) != scale or parent.budget != budget.name:
        raise ValueError(f"the parent run {parent.hash} is {parent.budget} {parent.meta.get('scale')}, not "
                         f"{budget.name} {scale}: SFT takes its LR and batch from the parent's scale")
    mixture = mixture or build_sft_mixture(budget)
    spec = budget.scale(scale)
    rope = (parent.init or {}).get("rope_base")
    label = parent.label or parent.hash
    return RunConfig(
        model=dict(parent.model), data=sft_data_config(budget, mixture),
        schedule={"kind": "linear_decay", "lr": budget.lccp_lr(scale), "final_lr_frac": 0.1},
        n_tokens=int(n_tokens), batch_size=max(1, spec.batch_long // 2), seed=seed, budget=budget.name,
        precision=budget.run_precision,
        init={"run": parent.hash, "step": int(step), "mode": "weights", "rope_base": rope,
              **({"average_steps": [int(s) for s in average_steps]} if average_steps else {})},
        label=f"{scale} SFT <- {label} @{step}{' Last4' if average_steps else ''} data seed={seed}",
        meta={"scale": scale, "stage": "sft", "parent": parent.hash, "parent_step": int(step), "data_seed": seed,
              **{k: parent.meta[k] for k in ("ds_mult", "dl_mult") if k in parent.meta}})


def sft_configs(budget: Budget, scale: str, parent_run_config: RunConfig, step: int, n_tokens: int,
                seeds=PAPER_SFT_SEEDS, average_steps=None) -> list[RunConfig]:
    """The SFT runs of one starting checkpoint, one per data seed (§5.3: three seeds, the
    shaded min-max range of Fig. 8b); one mixture file for all of them."""
    mixture = build_sft_mixture(budget)
    return [sft_config(budget, scale, parent_run_config, step, s, n_tokens, mixture, average_steps) for s in seeds]


__all__ = ["CATEGORY_WEIGHTS", "FAMILIES", "PAPER_SFT_SEEDS", "TABLE10", "BuildContext", "Family", "FamilyDoesNotFit",
           "SFTMixture", "build_sft_mixture", "default_families", "default_sft_tokens", "mixture_summary",
           "register_family", "sample_to_pair", "samples_family", "sft_config", "sft_configs", "sft_data_config",
           "sft_seq_len"]
