"""`python -m nblib.export`: a run's checkpoint or merge as a Hugging Face folder that
transformers loads to the same logits (1e-5) and whose tokenizer gives the same ids.

Four tiny runs trained through the run store: Llama on bytes (checkpoints at steps 3 and 6),
GPT-2 on the pinned BPE "stdlib-1024", a YaRN-scaled Gemma 3 (sliding window 8 < the
sequence), and an LCCP stage of the Llama run with its RoPE base changed to 5e5 (ABF).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import subproc
import torch
from safetensors.torch import load_file, save_file

from nblib import cli
from nblib import export as E
from nblib.data import get_corpus, get_tokenizer
from nblib.lccp import merge as M
from nblib.store.checkpoint import CKPT_DIR, step_dirname
from nblib.store.runstore import RunConfig, RunStore
from nblib.training.runner import get_or_run

tf = pytest.importorskip("transformers")

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
BYTE = {"corpus": "python-stdlib", "tokenizer": "byte", "split": "train", "stream": "packed", "seq_len": 32}
BPE = {**BYTE, "tokenizer": "bpe:stdlib-1024"}
LLAMA = {"family": "llama", "vocab_size": 257, "d_model": 16, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1,
         "d_ff": 32, "max_seq_len": 64}
GPT2 = {"family": "gpt2", "vocab_size": 1024, "d_model": 16, "n_layers": 2, "n_heads": 2, "max_seq_len": 64}
GEMMA3_YARN = {"family": "gemma3", "vocab_size": 257, "d_model": 16, "n_layers": 2, "n_heads": 2, "n_kv_heads": 1,
               "head_dim": 8, "d_ff": 32, "max_seq_len": 64, "window": 8, "global_every": 2,
               "rope_global_base": 1e6, "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_seq_len": 16}}
SAMPLE = ("import os\n\ndef main(argv):\n    \"\"\"Grüße, naïve café ✓ — 日本語 🙂\"\"\"\n"
          "\treturn {k: v for k, v in os.environ.items()}  # <|endoftext|> stays text\r\n")
MEASURED = {}  # family -> max |logit difference|, printed at the end (pytest -s)


def config(model, data, steps=6, every=None, **kw) -> RunConfig:
    return RunConfig(model=dict(model), data=dict(data), schedule={"kind": "constant", "lr": 1e-2, "warmup_steps": 2},
                     n_tokens=32 * 4 * steps, batch_size=4, budget="smoke",
                     ckpt_every_tokens=None if every is None else 32 * 4 * every, **kw)


def small_bpe_data(folder: Path) -> dict:
    """BPE data for a 4-step run: the pinned "stdlib-1024" tokenizer over the stdlib corpus's first
    64 files (a jsonl corpus). The whole corpus would be tokenized first: 27 CPU-s of this module's
    setup, for 512 training tokens; the export does not depend on what the run read."""
    path = folder / "stdlib-64.jsonl"
    path.write_text("".join(json.dumps({"id": d.id, "text": d.text}) + "\n"
                            for d in get_corpus(BYTE["corpus"]).docs[:64]))
    return {**BPE, "corpus": f"jsonl:{path}"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    store = RunStore(tmp_path_factory.mktemp("store"))
    llama = get_or_run(store, config(LLAMA, BYTE, steps=6, every=3), progress=False)
    out = {
        "llama": llama,
        "gpt2": get_or_run(store, config(GPT2, small_bpe_data(tmp_path_factory.mktemp("corpus")), steps=4),
                           progress=False),
        "gemma3": get_or_run(store, config(GEMMA3_YARN, BYTE, steps=4), progress=False),
        "lccp": get_or_run(store, config(LLAMA, BYTE, steps=3, init={"run": llama.hash, "step": 6, "mode": "weights",
                                                                        "rope_base": 5e5}), progress=False),
    }
    yield out
    torch.set_num_threads(old)
    if MEASURED:
        print("\nmax |logit difference| nblib vs transformers: "
              + ", ".join(f"{k} {v:.2e}" for k, v in MEASURED.items()))


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory):
    """Each run's final weights exported once (through the CLI's main, in this process)."""
    root = tmp_path_factory.mktemp("hf")
    for name, run in runs.items():
        assert call(E.main, [str(run.path), str(root / name)]) == 0
    return root


def call(main, argv) -> int:
    try:
        return cli.run_cli(main, argv)
    except SystemExit as e:  # argparse's usage errors
        return e.code


def sample_ids(run, n=None) -> torch.Tensor:
    ids = get_tokenizer(run.config.data["tokenizer"]).encode(SAMPLE * 3)
    n = n or run.config.model["max_seq_len"]
    return torch.as_tensor(ids[:2 * n]).view(2, n)


def max_logit_diff(model, out: Path, idx) -> float:
    hf = tf.AutoModelForCausalLM.from_pretrained(out).eval()
    with torch.no_grad():
        return (model(idx)[0] - hf(idx).logits).abs().max().item()


def assert_user_error(code, err, *needles):
    assert code == 2, err
    assert "Traceback" not in err
    lines = [x for x in err.splitlines() if x.startswith("error: ")]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def no_leftovers(folder: Path):
    return [p.name for p in folder.iterdir() if ".export-" in p.name] == []


# ------------------------------------------------------------------------------ (a) logits

@pytest.mark.parametrize("name, cls", [("llama", "LlamaForCausalLM"), ("gpt2", "GPT2LMHeadModel"),
                                       ("gemma3", "Gemma3ForCausalLM"), ("lccp", "LlamaForCausalLM")])
def test_export_reproduces_the_logits(runs, exported, name, cls):
    out = exported / name
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
            "special_tokens_map.json", "nblib_export.json"} <= {p.name for p in out.iterdir()}
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == [cls]
    record = json.loads((out / "nblib_export.json").read_text())
    assert record["run"] == runs[name].hash and record["step"] == runs[name].config.total_steps
    model = runs[name].load_model()
    diff = max_logit_diff(model, out, sample_ids(runs[name]))
    MEASURED[name] = diff
    assert diff <= 1e-5, diff
    assert oct(os.stat(out / "model.safetensors").st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    u = os.umask(0)
    os.umask(u)
    return u


# ------------------------------------------------------------------------------ (f) RoPE: ABF base, YaRN

def test_lccp_rope_base_and_yarn_reach_the_config(runs, exported):
    lccp = json.loads((exported / "lccp" / "config.json").read_text())
    assert lccp["rope_parameters"] == {"rope_type": "default", "rope_theta": 5e5}
    gemma = json.loads((exported / "gemma3" / "config.json").read_text())["rope_parameters"]
    assert gemma["full_attention"]["rope_theta"] == 1e6 and gemma["sliding_attention"]["rope_theta"] == 1e4
    for p in gemma.values():
        assert p["rope_type"] == "yarn" and p["factor"] == 4.0 and p["original_max_position_embeddings"] == 16
    # the checks have teeth: without the ABF base the same weights give other logits
    model = runs["lccp"].load_model()
    model.set_rope_base(1e4)
    assert max_logit_diff(model, exported / "lccp", sample_ids(runs["lccp"])) > 1e-4


# ------------------------------------------------------------------------------ (b) tokenizers

@pytest.mark.parametrize("name", ["llama", "gpt2"])  # "byte" and "bpe:stdlib-1024"
def test_exported_tokenizer_gives_nblib_ids(runs, exported, name):
    tok = get_tokenizer(runs[name].config.data["tokenizer"])
    hf = tf.AutoTokenizer.from_pretrained(exported / name)
    want = tok.encode(SAMPLE).tolist()
    assert hf.encode(SAMPLE) == want  # no BOS or other special tokens added
    assert hf(SAMPLE)["input_ids"] == want
    assert hf.encode(SAMPLE, add_special_tokens=False) == want
    assert hf.eos_token_id == tok.eos_id and hf.decode(want) == tok.decode(want) == SAMPLE
    assert json.loads((exported / name / "generation_config.json").read_text())["eos_token_id"] == tok.eos_id
    # read back by nblib itself ("hf:<path>"), the exported tokenizer is the same tokenizer
    again = get_tokenizer(f"hf:{exported / name / 'tokenizer.json'}")
    assert (again.vocab_size, again.eos_id) == (tok.vocab_size, tok.eos_id)
    assert again.encode(SAMPLE).tolist() == want


def test_byte_tokenizer_covers_every_byte(exported):
    hf = tf.AutoTokenizer.from_pretrained(exported / "llama")
    assert [hf.convert_tokens_to_ids(E.bytes_to_unicode()[b]) for b in range(256)] == list(range(256))
    assert len(hf) == 257 and hf.convert_ids_to_tokens(256) == "<|endoftext|>"


# ------------------------------------------------------------------------------ (c) --step, (d) --merged

def test_step_exports_that_checkpoint(runs, exported, tmp_path):
    run = runs["llama"]
    assert call(E.main, [str(run.path), str(tmp_path / "s3"), "--step", "3"]) == 0
    idx = sample_ids(run)
    assert max_logit_diff(run.load_model(3), tmp_path / "s3", idx) <= 1e-5
    assert max_logit_diff(run.load_model("final"), tmp_path / "s3", idx) > 1e-3  # not the final weights
    assert json.loads((tmp_path / "s3" / "nblib_export.json").read_text())["step"] == 3


def test_merged_exports_the_merge(runs, tmp_path):
    run = runs["llama"]
    ckpts = [str(run.checkpoint(s).path) for s in (3, 6)]
    merged = tmp_path / "last2.safetensors"
    assert call(M.main, ["--method", "lastM", "--m", "2", *ckpts, "-o", str(merged)]) == 0
    assert call(E.main, [str(run.path), str(tmp_path / "m"), "--merged", str(merged)]) == 0
    model = run.load_model(state_dict=load_file(str(merged)))
    idx = sample_ids(run)
    MEASURED["llama lastM merge"] = max_logit_diff(model, tmp_path / "m", idx)
    assert MEASURED["llama lastM merge"] <= 1e-5
    assert max_logit_diff(run.load_model("final"), tmp_path / "m", idx) > 1e-4  # a merge, not step 6
    record = json.loads((tmp_path / "m" / "nblib_export.json").read_text())
    assert record["merged"] == str(merged.resolve()) and "step" not in record


# ------------------------------------------------------------------------------ (e) errors

def test_errors_are_one_line(runs, tmp_path, capsys):
    run = runs["llama"]

    def check(argv, *needles):
        capsys.readouterr()
        code = call(E.main, argv)
        assert_user_error(code, capsys.readouterr().err, *needles)

    (tmp_path / "plain").mkdir()
    check([str(tmp_path / "plain"), str(tmp_path / "o")], "has no config.json", "allowed: a run folder")
    check([str(tmp_path / "nowhere"), str(tmp_path / "o")], "is not a folder")
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    check([str(tmp_path / "hf"), str(tmp_path / "o")], "is not a run configuration")
    check([str(run.path), str(tmp_path / "o"), "--step", "5"], "--step 5", "allowed steps: 3, 6")

    good = load_file(str(run.checkpoint(6).path / "model.safetensors"))
    bad = dict(good)
    bad["embed.weight"] = bad["embed.weight"][:-1].contiguous()
    bad.pop("norm.weight")
    save_file(bad, str(tmp_path / "bad.safetensors"))
    check([str(run.path), str(tmp_path / "o"), "--merged", str(tmp_path / "bad.safetensors")],
          "does not match run", "missing [norm.weight]", "wrong shape [embed.weight (256, 16) (run: (257, 16))]")
    (tmp_path / "trunc.safetensors").write_bytes((run.checkpoint(6).path / "model.safetensors").read_bytes()[:100])
    check([str(run.path), str(tmp_path / "o"), "--merged", str(tmp_path / "trunc.safetensors")], "trunc.safetensors")
    check([str(run.path), str(tmp_path / "o"), "--merged", str(tmp_path / "none.safetensors")], "is not a file")

    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    check([str(run.path), str(full)], "exists and is not empty", "--force")
    assert (full / "keep.txt").read_text() == "mine"
    check([str(run.path), str(run.path.parent), "--force"], "which is being exported")
    assert not (tmp_path / "o").exists() and no_leftovers(tmp_path)
    assert call(E.main, [str(run.path), str(full), "--force"]) == 0  # --force replaces it
    assert not (full / "keep.txt").exists() and (full / "model.safetensors").exists() and no_leftovers(tmp_path)
    (tmp_path / "empty").mkdir()
    assert call(E.main, [str(run.path), str(tmp_path / "empty")]) == 0  # an empty folder is fine


def test_unknown_family_and_corrupt_checkpoint_are_refused(runs, tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(runs["llama"].path, copy, ignore=shutil.ignore_patterns("LOCK*"))
    cfg = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**cfg, "model": {**cfg["model"], "family": "mamba"}}))
    capsys.readouterr()
    assert_user_error(call(E.main, [str(copy), str(tmp_path / "o")]), capsys.readouterr().err,
                      "model.family='mamba'", "allowed: llama, gpt2, gemma3")
    (copy / "config.json").write_text(json.dumps(cfg))  # a renamed run folder exports fine
    assert call(E.main, [str(copy), str(tmp_path / "ok"), "--step", "3"]) == 0

    weights = copy / CKPT_DIR / step_dirname(6) / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF  # same size, other bytes: only the sha256 sees it
    weights.write_bytes(bytes(data))
    capsys.readouterr()
    assert_user_error(call(E.main, [str(copy), str(tmp_path / "o")]), capsys.readouterr().err, "sha256")
    weights.write_bytes(bytes(data[:-10]))  # truncated: skipped by the listing, still named as corrupt
    capsys.readouterr()
    assert_user_error(call(E.main, [str(copy), str(tmp_path / "o")]), capsys.readouterr().err,
                      "step_00000006", "expected")
    assert not (tmp_path / "o").exists() and no_leftovers(tmp_path)


def test_the_command_line(runs, tmp_path, capsys):
    """`python -m nblib.export` itself: exit 0 and a pointer to the next step; then exit 2 and
    one line (in this process, through the same run_cli)."""
    run = runs["gemma3"]
    p = subproc.run([sys.executable, "-m", "nblib.export", str(run.path), str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=300, env=ENV, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert "Gemma3ForCausalLM" in p.stdout and "from_pretrained" in p.stdout
    capsys.readouterr()
    assert_user_error(call(E.main, [str(run.path), str(tmp_path / "o")]), capsys.readouterr().err, "not empty")
    assert "AutoModelForCausalLM" in E.__doc__ and "lm_eval" in E.__doc__ and "vllm" in E.__doc__


# ------------------------------------------------------------------------------ (g) Model B's layer layout

GEMMA3_B = {"family": "gemma3", "vocab_size": 257, "d_model": 16, "n_layers": 8, "n_heads": 4, "n_kv_heads": 1,
            "head_dim": 4, "d_ff": 32, "max_seq_len": 64, "window": 8}
PATTERNS = {"blog": ({**GEMMA3_B, "layer_pattern": "blog"}, [0, 4]),  # the Gemma blog's G L L L (layers 0, 4, 8 of 12)
            "hf": ({**GEMMA3_B, "layer_pattern": "hf"}, [3, 7]),  # transformers' L L L G
            "blog, linear PI on the global layers": ({**GEMMA3_B, "layer_pattern": "blog",
                                                      "rope_scaling": {"type": "linear", "factor": 4.0},
                                                      "rope_scaling_layers": "global"}, [0, 4])}


@pytest.fixture(scope="module")
def pattern_exports(tmp_path_factory):
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    store = RunStore(tmp_path_factory.mktemp("patterns"))
    root = tmp_path_factory.mktemp("hf_patterns")
    out = {}
    for name, (model, _) in PATTERNS.items():
        run = get_or_run(store, config(model, BYTE, steps=3), progress=False)
        folder = root / name.replace(" ", "_").replace(",", "")
        E.export(run.path, folder)
        out[name] = (run, folder)
    yield out
    torch.set_num_threads(old)


@pytest.mark.parametrize("name", list(PATTERNS))
def test_either_layer_pattern_round_trips_through_the_export(pattern_exports, name):
    run, folder = pattern_exports[name]
    want = PATTERNS[name][1]
    cfg = json.loads((folder / "config.json").read_text())
    assert [i for i, t in enumerate(cfg["layer_types"]) if t == "full_attention"] == want
    model = run.load_model()
    assert model.config.global_layers == want
    back = E.load_exported(folder)  # nblib reads its own export back
    assert back.layer_windows == model.layer_windows and back.config.layer_pattern == model.config.layer_pattern
    assert back.config.rope_scaling == model.config.rope_scaling
    assert back.config.rope_scaling_layers == model.config.rope_scaling_layers
    idx = sample_ids(run)
    with torch.no_grad():
        assert torch.equal(back(idx)[0], model(idx)[0])
    assert max_logit_diff(model, folder, idx) <= 1e-5  # and transformers reads the same layout
    # the layout has teeth: the other pattern, same weights, gives other logits past the window
    other = "hf" if model.config.layer_pattern == "blog" else "blog"
    swapped = E.build_model("gemma3", {**{k: v for k, v in run.config.model.items() if k != "family"},
                                       "layer_pattern": other})
    swapped.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert not torch.allclose(swapped.eval()(idx)[0], model(idx)[0], atol=1e-4)


def test_load_exported_refuses_other_architectures(exported):
    with pytest.raises(ValueError, match="Gemma3ForCausalLM"):
        E.load_exported(exported / "gpt2")
