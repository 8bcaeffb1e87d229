"""Budget files (nblib.budgets.budget_file, nblib.budgets.own_data): a TOML file over a named budget.

Without one every run hash stays what it was (pinned below); a file with only `base` is the
named budget; an override changes exactly the runs it enters, as the same change made in
code does; a malformed file is one line and exit 2 before any training; the plan lists the
inputs a file leaves missing; the toy's BPE is retrained on a user's corpus and pinned; and
a corpus named in a file gives the runs (so the figures) of the same corpus named in code.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import sysconfig
from dataclasses import replace
from pathlib import Path

import pandas as pd
import papermill as pm
import pytest

import subproc
from grid_runs import LCCP_STAGES, grid_hashes

from nblib.budgets import own_data as O
from nblib.book import plan as P
from nblib.book.chapter import Chapter
from nblib.budgets.budget_file import (BudgetFile, apply_overrides, load_budget_file, parse_set, read_budget_file)
from nblib.budgets import BudgetError, get_budget
from nblib.data import load_corpus, load_tokenizer
from nblib.data.bpe import TOKENIZER_DIR, train_bpe
from nblib.lccp import grid
from nblib.store.provenance import REPO_ROOT, budget_file_record, code_version, set_budget_file
from nblib.store.runstore import RunStore
from nblib.training.runner import get_or_run

EXAMPLES = REPO_ROOT / "examples"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _digest(hashes) -> str:
    return hashlib.sha256(",".join(hashes).encode()).hexdigest()


def _corpus(path: Path, n: int = 200) -> Path:
    """A .jsonl corpus of `n` documents of real text: the interpreter's own standard-library
    sources (outside the repository), one file a document, in name order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [p for p in sorted(root.glob("*.py")) + sorted(root.glob("*/*.py"))
             if "site-packages" not in p.parts and 500 < p.stat().st_size < 30_000][:n]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for p in files:
            text = p.read_text(encoding="utf-8", errors="replace")
            f.write(json.dumps({"id": str(p.relative_to(root)), "text": text}) + "\n")
    return path


# --------------------------------------------------------------------------- hashes

# grid.grid_runs' run hashes at each budget before budget files existed (git 3ba6af2):
# (count, sha256 of the comma-joined hashes, first hash, last hash). A change to a budget's
# own values in nblib/budgets/ changes them on purpose: recompute them then (full: its LCCP
# runs since `lccp_aligned=True`, App. A.4's segments as sequences; smoke and toy: their
# LongPPL reference, the first hash, since it names the two threads it trains at).
PINNED = {
    # smoke: its runs after the short stage in bf16 since toy's are (smoke is toy sized down), and
    # 64 sequences a short-stage step at S4 and S5 (16 before, and still at S1-S3; 4 before
    # that: the same tokens in fewer steps); its reference and the short stages of S3 and S5
    # in bf16 too since design Vc; every run in fp32 again since CPUs without bf16 matmuls
    # (AVX2 only) took twice as long for its emulated autocast
    "smoke": (85, "1765076372273ec991e3f1b912d3c98ce626485eefa38bd9491c6f40a7271c2b", "1260d113f8a06e84",
              "d2eddf94bf8ca8f2"),
    # toy: design V's grid since it became the book's (grid F's is data/probes/grid_designs/F.toml),
    # its runs after the short stage in bf16 (long_precision) since that was adopted (Vb), and its
    # reference and the short stages of S3 and S5 since design Vc
    "toy": (85, "866fe0882db62650a17ee659f2fc268ed76fc02fafacd3dbe390e66787c8a669", "95e9a25cc88492b1",
            "a90ada8a04b53e0e"),
    "full": (200, "c885de240276566011483c22e57de2d731948cfed6f7cd8cb256c2313e7bdbd2", "18c96e39e5ded79d",
             "c4ae9757cd75a745"),
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_without_a_budget_file_every_run_hash_stays(name):
    hashes = grid_hashes(get_budget(name))
    assert (len(hashes), _digest(hashes), hashes[0], hashes[-1]) == PINNED[name]


@pytest.mark.parametrize("name", ["smoke", "toy", "full"])
def test_a_file_with_only_its_base_is_the_named_budget(tmp_path, name):
    f = read_budget_file(_write(tmp_path / "b.toml", f'base = "{name}"\n'))
    assert f.budget is get_budget(name) and f.overrides == {} and f.rows() == []
    assert grid_hashes(f.budget) == grid_hashes(get_budget(name))


def test_a_file_with_only_its_base_keeps_the_real_hashes_too(tmp_path):
    """Not only under the placeholder: the smoke grid and Models A and B, corpus identity included."""
    from nblib.gemma import pair
    b = load_budget_file(_write(tmp_path / "b.toml", 'base = "smoke"\n'))
    named = get_budget("smoke")
    assert [c.hash for st in grid.grid_runs(b) for c in st.configs] == \
        [c.hash for st in grid.grid_runs(named) for c in st.configs]
    assert [c.hash for c in pair.part2_configs(b)] == [c.hash for c in pair.part2_configs(named)]


# Overrides and the same change made in code (dataclasses.replace on the named budget), and
# the grid stages whose runs the change enters (reference, short, linear-decay, constant, trajectory).
SMOKE = get_budget("smoke")
S1 = SMOKE.scale("S1")
CHANGES = [
    ("scales.S1.lr=5e-3", replace(SMOKE, scales={**SMOKE.scales, "S1": replace(S1, lr=5e-3)}), "S1"),
    ("scales.S1.batch_short=8", replace(SMOKE, scales={**SMOKE.scales, "S1": replace(S1, batch_short=8)}), "S1"),
    ("scales.S1.model.d_ff=24",
     replace(SMOKE, scales={**SMOKE.scales, "S1": replace(S1, model={**S1.model, "d_ff": 24})}), "S1"),
    ("lccp_lr_frac=0.05", replace(SMOKE, lccp_lr_frac=0.05), "lccp"),
    ("lccp_aligned=true", replace(SMOKE, lccp_aligned=True), "lccp"),
    ('long_precision="bf16"', replace(SMOKE, long_precision="bf16"), "precision"),
    ('long_precision="bf16" & bf16_short_scales=["S1", "S3", "S5"]',
     replace(SMOKE, long_precision="bf16", bf16_short_scales=("S1", "S3", "S5")), "precision"),
    ('bf16_short_scales=["S1"]', replace(SMOKE, bf16_short_scales=("S1",)), "none"),  # inert in fp32
    ("rope_bases=[1e4, 1e6, 1e7]", replace(SMOKE, rope_bases=(1e4, 1e6, 1e7)), "lccp"),
    ("long_seq_len=32", replace(SMOKE, long_seq_len=32), "long"),
    ("tokenizer=hf:/elsewhere/tokenizer.json", replace(SMOKE, tokenizer="hf:/elsewhere/tokenizer.json"), "all"),
    ("corpus=jsonl:/elsewhere/train.jsonl", replace(SMOKE, corpus="jsonl:/elsewhere/train.jsonl"), "all"),
]


def _entered(stage, scale: str, kind: str, changed=SMOKE) -> bool:
    """Whether a change of `kind` enters the runs of a grid stage (a run config's fields);
    `changed`: the budget after the change."""
    if kind in ("all", "none"):
        return kind == "all"
    if kind == "S1":  # a scale's own field: its runs, not the reference's or other scales'
        return scale == "S1"
    if kind == "lccp":  # LCCP's LR, RoPE base, windows: every LCCP run, no short-stage run, not the reference
        return stage in LCCP_STAGES
    if kind == "precision":  # every run at the long context, and the short stages of bf16_short_scales
        return stage != "short" or scale in changed.bf16_short_scales
    return stage != "short"  # the LCCP context: LCCP runs and the reference (trained at it)


def test_a_short_stage_batch_that_leaves_a_decay_no_step_is_refused_by_name():
    """At smoke, S1's smallest Ds is 11 short-stage steps of 16 sequences: 64 a step leaves it 2,
    and a WSD decay of the last 1/9 of 2 steps trains nothing, so its Linear-Decay runs would find
    no checkpoint to start from. The grid says so when it is built, before any training."""
    b = read_budget_file(None, ["scales.S1.batch_short=64"], base="smoke").budget
    with grid.placeholder_corpus(), pytest.raises(BudgetError, match=r"S1: Ds = .* is 2 short-stage step\(s\) at "
                                                                     r"batch_short=64, too few for its WSD decay"):
        grid.grid_runs(b)


@pytest.mark.parametrize("setting, in_code, kind", CHANGES, ids=[c[0] for c in CHANGES])
def test_an_override_changes_exactly_the_runs_it_enters_as_in_code(setting, in_code, kind):
    b = read_budget_file(None, setting.split(" & "), base="smoke").budget
    assert b == in_code
    with grid.placeholder_corpus():
        ours, code, named = grid.grid_runs(b), grid.grid_runs(in_code), grid.grid_runs(SMOKE)
    assert [c.hash for st in ours for c in st.configs] == [c.hash for st in code for c in st.configs]
    for st, base in zip(ours, named):
        for c, c0 in zip(st.configs, base.configs):
            assert (c.hash != c0.hash) == _entered(st.stage, st.scale, kind, b), (st.what, c.label)


def test_tables_lists_and_sets_merge_and_round_trip(tmp_path):
    path = _write(tmp_path / "b.toml", """base = "toy"
corpus = "jsonl:data/own.jsonl"
ds_multiples = [90, 180]
s5_configs = [[90, 10], [180, 20]]
[scales.S1]
lr = 5e-4
[scales.S1.model]
d_model = 96
[longppl]
n_docs = 10
""")
    f = read_budget_file(path, ["scales.S2.lr=1e-3", "scales.S1.lr=2e-4", "notes=my first try"])
    b, toy = f.budget, get_budget("toy")
    assert b.corpus == f"jsonl:{tmp_path / 'data' / 'own.jsonl'}"  # relative to the file's folder
    assert b.ds_multiples == (90, 180) and b.s5_configs == ((90, 10), (180, 20))
    assert b.scales["S1"].lr == 2e-4 and b.scales["S2"].lr == 1e-3  # --set after the file
    assert b.scales["S1"].model == {**toy.scales["S1"].model, "d_model": 96}  # merged into the base's model
    assert b.scales["S3"] is toy.scales["S3"] and b.longppl == replace(toy.longppl, n_docs=10)
    assert b.notes == "my first try" and b.name == "toy"
    rows = dict((k, (old, new)) for k, old, new in f.rows())
    assert rows["scales.S1.model.d_model"] == (64, 96) and rows["longppl.n_docs"] == (96, 10)
    # the file and its sets written as one file read back to the same Budget
    one = f.for_chapters(tmp_path / "out")
    assert one.path == tmp_path / "out" / "budget.toml" and one.sets == () and one.budget == b
    assert one.sha256 == hashlib.sha256(one.path.read_bytes()).hexdigest() != f.sha256


@pytest.mark.parametrize("text, value", [("a.b=5e-4", {"a": {"b": 5e-4}}), ("n=3", {"n": 3}),
                                         ("x=[90, 180]", {"x": [90, 180]}), ("t=true", {"t": True}),
                                         ("c=jsonl:/d/t.jsonl", {"c": "jsonl:/d/t.jsonl"}), ('s="a b"', {"s": "a b"})])
def test_set_reads_toml_values_else_strings(text, value):
    assert parse_set(text) == value


def test_reference_kind_replaces_and_same_kind_merges():
    toy = get_budget("toy")
    hf = apply_overrides(toy, {"reference": {"kind": "hf", "path": "/models/ref"}})
    assert hf.reference == {"kind": "hf", "path": "/models/ref"}
    more = apply_overrides(toy, {"reference": {"n_tokens": 1000, "copy": {"min_match": 4}}})
    assert more.reference == {**toy.reference, "n_tokens": 1000, "copy": {**toy.reference["copy"], "min_match": 4}}
    with pytest.raises(BudgetError, match="reference of kind 'nblib' needs model"):
        apply_overrides(get_budget("full"), {"reference": {"kind": "nblib", "batch": 4}})


# --------------------------------------------------------------------------- malformed files

PLANTED = [
    ('base = "smoke"\ncorpuz = "jsonl:/x.jsonl"\n', "unknown key 'corpuz' (did you mean 'corpus'?); allowed: "),
    ('base = "smoke"\nn_constant_seeds = "two"\n', 'n_constant_seeds = "two" is not allowed; allowed: an integer'),
    ('base = "smoke"\nds_multiples = [-1.8, 5.4, 9]\n',
     "ds_multiples = [-1.8, 5.4, 9] is not allowed; allowed: a non-empty list of increasing numbers > 0"),
    ('base = "smoke"\nlccp_aligned = "yes"\n', 'lccp_aligned = "yes" is not allowed; allowed: true or false'),
    ('base = "smoke"\nlong_precision = "fp16"\n', 'long_precision = "fp16" is not allowed; allowed: fp32, bf16'),
    ('base = "smoke"\nneedle_value_form = "tiny"\n', 'needle_value_form = "tiny" is not allowed; allowed: ruler, short'),
    ('base = "smoke"\n[scales.S1]\nlr = -1\n', "scales.S1.lr = -1 is not allowed; allowed: a number > 0"),
    ('base = "smoke"\n[scales.S9]\nlr = 1\n', "unknown key 'scales.S9'"),
    ('base = "huge"\n', 'base = "huge" is not allowed; allowed: smoke, toy, full'),
    ('corpus = "jsonl:/x.jsonl"\n', "the key 'base' is missing"),
    ('base = "smoke"\ncorpus = \n', "is not valid TOML"),
    ('base = "smoke"\ns5_configs = [[0.4, 0.2]]\n', "Ds = 0.4 is not one of ds_multiples"),
    ('base = "toy"\nconstant_ckpt_every = 2\n',  # the pool would need checkpoints 1 N apart
     "s4_pool_ckpt_every = 1 is not allowed with constant_ckpt_every = 2 and the largest Dl 30"),
    ('base = "toy"\nconstant_ckpt_every = 2\ns4_pool_ckpt_every = 2\n',  # 24 x 2 reaches back past Dl = 0
     "allowed: a whole multiple of constant_ckpt_every with 24 x s4_pool_ckpt_every < the largest Dl"),
    ('base = "toy"\nlast4_spacing = 1.5\n',  # between the checkpoints the trajectories keep
     "last4_spacing = 1.5 is not allowed with constant_ckpt_every = 1; allowed: a whole multiple"),
    ('base = "toy"\nlast4_spacing = 4\n',  # Dl 10: 10 - 3 x 4 < 0
     "last4_spacing = 4 is not allowed with the smallest Dl 10 (dl_multiples, and chapter 5's first point)"),
    ('base = "toy"\nlast4_spacing = 0\n', "last4_spacing = 0 is not allowed; allowed: a number > 0"),
]


@pytest.mark.parametrize("text, says", PLANTED, ids=[p[1][:30] for p in PLANTED])
def test_a_malformed_file_is_one_error_naming_the_key(tmp_path, text, says):
    path = _write(tmp_path / "bad.toml", text)
    with pytest.raises(BudgetError) as e:
        read_budget_file(path)
    assert says in str(e.value) and str(e.value).startswith(f"budget file {path}") and "\n" not in str(e.value)


# Each message is checked in this process for every planted file above; here each command runs
# as a real process once (a Python start is most of its cost), on a different planted file.
@pytest.mark.parametrize("command, text, says", [(["nblib.book.plan"], *PLANTED[0]),
                                                 (["nblib.book", "run", "--no-build"], *PLANTED[2])],
                         ids=["plan, unknown key", "run, negative multiple"])
def test_commands_print_one_line_and_exit_2_before_any_training(tmp_path, command, text, says):
    path = _write(tmp_path / "bad.toml", text)
    env = {**os.environ, "NBLIB_RUN_ROOT": str(tmp_path / "runs"), "NBLIB_FIGURES_DIR": str(tmp_path / "figures")}
    r = subproc.run([sys.executable, "-m", *command, "--budget-file", str(path), "--out", str(tmp_path / "out")]
                    if command[-1] == "--no-build" else [sys.executable, "-m", *command, "--budget-file", str(path)],
                    capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: budget file") and says in lines[0], r.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()


def test_a_chapter_stops_in_its_setup_cell_on_a_malformed_file(tmp_path):
    path = _write(tmp_path / "bad.toml", PLANTED[2][0])
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(REPO_ROOT / "notebooks" / "01_introduction.ipynb"), str(tmp_path / "out.ipynb"),
                            parameters={"budget_file": str(path), "run_root": str(tmp_path / "runs")},
                            kernel_name="python3", cwd=str(REPO_ROOT), progress_bar=False)
    assert e.value.ename == "BudgetError" and PLANTED[2][1] in e.value.evalue
    assert not (tmp_path / "runs").exists()


# --------------------------------------------------------------------------- the plan

def _plan(argv, capsys, monkeypatch) -> tuple[int, str]:
    """`python -m nblib.book.plan ARGV` run in this process, from the repository: (exit status,
    what it printed). A process of its own would only add torch's start-up (the command's own exit
    path is tested in test_plan.py)."""
    monkeypatch.chdir(REPO_ROOT)
    code = P.main([str(a) for a in argv])
    return code, capsys.readouterr().out


def test_a_missing_corpus_is_in_the_plans_list(tmp_path, capsys, monkeypatch):
    absent = tmp_path / "absent" / "train.jsonl"
    path = _write(tmp_path / "b.toml", f'base = "smoke"\ncorpus = "jsonl:{absent}"\n')
    code, out = _plan(["--budget-file", path], capsys, monkeypatch)
    assert code == 2, out
    assert f"[MISSING] LCCP corpus: {absent}" in out
    assert f"1 input(s) of budget file {path} (base 'smoke') are missing" in out
    assert re.search(rf"^\s+corpus\s+python-stdlib\s+jsonl:{re.escape(str(absent))}$", out, re.M), out
    with pytest.raises(P.MissingInputsError, match="LCCP corpus"):
        P.require_inputs(load_budget_file(path), "03_scaling_law")


def test_full_own_data_lists_only_the_inputs_the_file_leaves_missing(tmp_path, capsys, monkeypatch):
    """The example names all five inputs at its own paths; with three of them pointed (--set)
    at files that exist, the plan lists only the other two, at the file's paths."""
    f = read_budget_file(EXAMPLES / "full-own-data.toml")
    full = get_budget("full")
    missing = P.missing_inputs(f.budget)
    assert [i.name for i in missing] == ["LCCP corpus", "tokenizer", "LongPPL reference model", "pair corpus",
                                         "pair tokenizer"]
    assert not {str(i.path) for i in missing} & {str(i.path) for i in P.inputs(full)}  # the file's, not the base's
    corpus, tok, ref = _corpus(tmp_path / "c.jsonl", 20), tmp_path / "tok.json", tmp_path / "ref"
    shutil.copy(TOKENIZER_DIR / "stdlib-1024.json", tok)
    ref.mkdir()
    _write(ref / "config.json", "{}")
    sets = [f"corpus=jsonl:{corpus}", f"tokenizer=hf:{tok}", f"reference.path={ref}"]
    code, out = _plan(["--budget-file", EXAMPLES / "full-own-data.toml", *[a for s in sets for a in ("--set", s)]],
                      capsys, monkeypatch)
    assert code == 2, out
    assert "2 input(s) of budget file" in out and "- pair corpus:" in out and "- pair tokenizer:" in out
    assert "- LCCP corpus:" not in out and f"[found] LCCP corpus: {corpus}" in out
    assert "expected at /data/fineweb-edu/train.jsonl" in out
    # the vocabulary follows the tokenizer: the compute counts 1,024-entry embeddings
    b = O.own_data(read_budget_file(EXAMPLES / "full-own-data.toml", sets).budget)
    assert {spec.model["vocab_size"] for spec in b.scales.values()} == {load_tokenizer(f"hf:{tok}").vocab_size}


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_every_example_reads(path):
    f = read_budget_file(path)
    assert f.rows() and f.base in path.name.split("-")[0]


def test_a_base_file_chain_merges_in_order_and_a_cycle_is_refused(tmp_path):
    _write(tmp_path / "a.toml", 'base = "smoke"\nn_boot = 11\n[scales.S1]\nlr = 0.5\n[scales.S1.model]\nd_ff = 24\n')
    _write(tmp_path / "b.toml", 'base = "a.toml"\nn_boot = 12\n[scales.S1.model]\nd_model = 16\n')
    f = read_budget_file(tmp_path / "b.toml")
    s1 = f.budget.scale("S1")
    assert f.base == "smoke" and f.budget.n_boot == 12 and s1.lr == 0.5 and (s1.model["d_model"], s1.model["d_ff"]) == (16, 24)
    assert f.sha256 != read_budget_file(tmp_path / "a.toml").sha256
    _write(tmp_path / "a.toml", 'base = "b.toml"\n')
    with pytest.raises(BudgetError, match="comes back to itself"):
        read_budget_file(tmp_path / "b.toml")


def test_no_path_of_a_users_data_is_in_the_library():
    """The examples' paths (where a user keeps their data) appear nowhere in nblib/."""
    paths = {str(v).split(":", 1)[-1] for p in EXAMPLES.glob("*.toml") for _, _, v in read_budget_file(p).rows()
             if isinstance(v, str) and "/" in v}
    paths |= {read_budget_file(p).budget.reference.get("path") for p in EXAMPLES.glob("full-*.toml")}
    assert len(paths) >= 5
    for src in (REPO_ROOT / "nblib").rglob("*.py"):
        text = src.read_text()
        assert not [p for p in paths if p in text], src


# --------------------------------------------------------------------------- toy path, provenance

def test_the_toys_bpe_is_trained_on_the_corpus_pinned_and_reused(tmp_path, monkeypatch):
    spec = f"jsonl:{_corpus(tmp_path / 'c.jsonl', 60)}"
    folder = tmp_path / "runs" / O.TOKENIZER_FOLDER
    path = O.pinned_bpe(spec, 300, folder)
    assert path.parent == folder and path.read_text() == train_bpe(load_corpus(spec), 300)  # a second training
    assert load_tokenizer(f"hf:{path}").vocab_size == 300

    def no_training(*a, **k):
        raise AssertionError("retrained a pinned BPE")
    monkeypatch.setattr(O, "train_bpe", no_training)
    assert O.pinned_bpe(spec, 300, folder) == path
    monkeypatch.undo()
    # a toy budget file with that corpus: the toy's 1,024-entry BPE on it, every vocabulary following
    toy = get_budget("toy")
    b = read_budget_file(_write(tmp_path / "t.toml", f'base = "toy"\ncorpus = "{spec}"\n')).budget
    assert O.retrained_bpe(b) == ["tokenizer"] and P.inputs(b)[1].path is None
    own = O.own_data(b, tmp_path / "runs")
    assert own.tokenizer.startswith(f"hf:{folder}/bpe1024-")
    v = load_tokenizer(own.tokenizer).vocab_size
    assert 258 <= v <= 1024 and {s.model["vocab_size"] for s in own.scales.values()} == {v}
    assert own.reference["model"]["vocab_size"] == v and own.pair == toy.pair  # the pair kept its stdlib corpus
    assert grid_hashes(own) != grid_hashes(toy)


def test_the_record_reaches_every_manifest_and_child_process(tmp_path, monkeypatch):
    monkeypatch.delenv("NBLIB_BUDGET_FILE", raising=False)
    f = read_budget_file(_write(tmp_path / "b.toml", 'base = "smoke"\nn_boot = 6\n'))
    assert "budget_file" not in code_version() and budget_file_record() is None
    set_budget_file(f.record())
    try:
        assert code_version()["budget_file"] == {"path": str(tmp_path / "b.toml"), "sha256": f.sha256, "base": "smoke"}
        r = subproc.run([sys.executable, "-c", "import json; from nblib.store.provenance import code_version; "
                         "print(json.dumps(code_version()['budget_file']))"], capture_output=True, text=True,
                        timeout=120)
        assert json.loads(r.stdout)["sha256"] == hashlib.sha256((tmp_path / "b.toml").read_bytes()).hexdigest()
    finally:
        set_budget_file(None)
    assert "budget_file" not in code_version()


def test_the_run_report_names_the_file_and_its_hash(tmp_path):
    from nblib.book.build import run_report
    f = read_budget_file(_write(tmp_path / "b.toml", 'base = "smoke"\nn_boot = 6\n'), ["scales.S1.lr=0.005"])
    one = f.for_chapters(tmp_path)
    md = run_report([{"chapter": "01_introduction", "status": "ok", "wall_s": 1.0}], "smoke", source=f,
                    chapter_file=one)
    assert f"`{tmp_path / 'b.toml'}` (sha256 `{f.sha256}`), base **smoke**" in md
    assert "`--set scales.S1.lr=0.005`" in md and f"`{one.path}` (sha256 `{one.sha256}`)" in md
    assert "`n_boot` = `6` (base: `4`)" in md and "`scales.S1.lr` = `0.005` (base: `0.01`)" in md
    assert "Budget file" not in run_report([], "smoke")


# --------------------------------------------------------------------------- a chapter from a file

@pytest.mark.slow
def test_a_corpus_named_in_a_file_gives_the_runs_of_the_same_corpus_named_in_code(tmp_path, monkeypatch):
    """The smoke budget with its corpus a .jsonl outside the repository, once from a budget file
    (as a chapter reads it: `Chapter(..., budget_file=...)`) and once set in code (as an edit of
    nblib/budgets/ would): every run of chapters 2-4 has the same hash both ways, so every
    figure computed from them is the same; one trained run is found complete from code and
    nothing is retrained; the file's runs and figures name it. (A chapter run whole from a file
    is the smoke book of a budget file, `make book BUDGET=smoke BUDGET_FILE=...`.)"""
    corpus = _corpus(tmp_path / "own" / "train.jsonl")
    assert REPO_ROOT not in corpus.parents
    path = _write(tmp_path / "own.toml", f'base = "smoke"\ncorpus = "jsonl:{corpus}"\n')
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    runs = tmp_path / "runs"
    monkeypatch.delenv("NBLIB_BUDGET_FILE", raising=False)
    monkeypatch.setenv("NBLIB_FIGURES_DIR", str(tmp_path / "figures"))
    try:
        ch = Chapter("03_scaling_law", budget="smoke", budget_file=str(path), run_root=str(runs))
        in_code = replace(get_budget("smoke"), corpus=f"jsonl:{corpus}")
        from_file = [c.hash for st in grid.grid_runs(ch.budget) for c in st.configs]
        assert from_file == [c.hash for st in grid.grid_runs(in_code) for c in st.configs]
        assert from_file != [c.hash for st in grid.grid_runs(get_budget("smoke")) for c in st.configs]

        run = get_or_run(ch.store, grid.short_stage(ch.budget, "S1").trunk, progress=False)
        files = {p: p.stat().st_mtime_ns for p in runs.rglob("*") if p.is_file()}
        again = get_or_run(RunStore(runs), grid.short_stage(in_code, "S1").trunk, progress=False)
        assert again.hash == run.hash and again.is_complete()
        assert {p: p.stat().st_mtime_ns for p in runs.rglob("*") if p.is_file() and p.name != "LOCK"} == \
            {p: t for p, t in files.items() if p.name != "LOCK"}  # found, not retrained
        assert json.loads((runs / run.hash / "manifest.json").read_text())["code"]["budget_file"]["sha256"] == sha
        ch.save_table(pd.DataFrame({"x": [1]}), "from_the_file", runs=[run])
        entry = json.loads((tmp_path / "figures" / "03_scaling_law" / "manifest.json").read_text())["from_the_file.csv"]
        assert entry["code"]["budget_file"] == {"path": str(path), "sha256": sha, "base": "smoke"}
    finally:
        set_budget_file(None)
    assert isinstance(read_budget_file(path), BudgetFile)


def test_last4_spacing_sets_every_last4_window_and_s5_points_start_past_it(tmp_path):
    from nblib.lccp import experiments

    toy = get_budget("toy")
    assert toy.last4_spacing is None and toy.last4_gap(toy.s5_ckpt_every) == toy.s5_ckpt_every  # the paper's 1N
    wide = read_budget_file(_write(tmp_path / "w.toml", 'base = "toy"\nlast4_spacing = 3\n')).budget
    assert wide.last4_gap(wide.constant_ckpt_every) == wide.last4_gap(wide.s5_ckpt_every) == 3
    every = [round(wide.s5_eval_every * k, 6) for k in range(1, int(wide.s5_trajectory / wide.s5_eval_every) + 1)]
    assert experiments.s5_eval_points(toy) == every
    # a 3N window at 5N would reach back to -4N: the points start at 10N (App. B.1 starts at 20N)
    assert experiments.s5_eval_points(wide) == [t for t in every if t > 9] and experiments.s5_eval_points(wide)[0] == 10
