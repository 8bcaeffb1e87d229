"""`python -m benchmarks.gpu_check`: the tiny run passes every check and writes every section, its dry run
lists the full scales without allocating, planted faults make it exit non-zero, and its pieces
(peak table, token comparison, out-of-memory report) behave."""

import importlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import subproc
import torch

ROOT = Path(__file__).resolve().parents[1]
MODULE = "benchmarks.gpu_check"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def run(*args, timeout=300):
    return subproc.run([sys.executable, "-m", MODULE, *args], capture_output=True, text=True, env=ENV,
                          cwd=ROOT, timeout=timeout)


@pytest.fixture(scope="module")
def gc():
    return importlib.import_module(MODULE)


def test_tiny_run_writes_every_section(tmp_path):
    out = tmp_path / "tiny.json"
    r = run("--tiny", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(out.read_text())
    assert res["mode"] == "tiny" and res["ok"] is True and all(res["checks"].values())
    manifest = json.loads((tmp_path / "tiny.manifest.json").read_text())
    assert manifest["files"] == ["tiny.json"] and manifest["writer"] == MODULE
    assert manifest["writes"][0]["command"].startswith(f"python -m {MODULE} --tiny --out ")
    assert res["torch"] == torch.__version__ and res["device"]["name"] and res["wall_s"] > 0
    assert res["peak_tflops"] is None  # CPU: unknown peak, so MFU is null
    assert [t["scale"] for t in res["train"]] == ["S1", "S2", "S3", "S4", "S5"]
    for t in res["train"]:
        assert t["fits"] and t["micro_batch"] == 1 and t["loss_finite"] and t["mfu"] is None
        assert t["tok_s"] > 0 and math.isfinite(t["tok_s"]) and t["tok_s_global_batch"] > 0
        assert t["train_flops_per_token"] > 0 and t["n_params_non_emb"] > 0 and t["steps_timed"] == 2
    lp = res["longppl"]
    assert lp["finite"] and math.isfinite(lp["long_ppl"]) and math.isfinite(lp["short_ppl"])
    assert lp["n_long"] > 0 and lp["n_short"] > 0 and lp["annotate_tok_s"] > 0 and lp["evaluate_tok_s"] > 0
    assert [d["model"] for d in res["decode"]] == ["A", "B"]
    for d in res["decode"]:
        assert d["match"] is True and d["first_mismatch"] is None
        assert d["tok_s_cache"] > 0 and d["tok_s_no_cache"] > 0
    b = res["decode"][1]
    assert b["prompt"] < b["window"] < b["prompt"] + b["new_tokens"]  # generation crosses B's window
    assert "checks: all passed" in r.stdout and "S5" in r.stdout


# The refusal, the dry run and the planted faults call `main` in this process (its exit status is main's return
# value); only the runs that train start a process of their own, as a user's command does.
def test_tiny_refuses_to_overwrite_the_real_result(gc, capsys):
    code = gc.main(["--tiny", "--out", str(ROOT / "benchmarks" / "results" / "gpu_check.json"), "--only", "decode"])
    assert code == 2 and "overwrite" in capsys.readouterr().err


def test_dry_run_lists_full_scales_without_allocating(gc, capsys):
    code = gc.main(["--dry-run", "--peak-tflops", "989"])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line[:2] in ("S1", "S2", "S3", "S4",
                                                                                      "S5")}
    assert list(rows) == ["S1", "S2", "S3", "S4", "S5"]
    n = {s: int(v[1].replace(",", "")) for s, v in rows.items()}
    paper = {"S1": 31.47e6, "S2": 60.84e6, "S3": 104.42e6, "S4": 245.42e6, "S5": 821.15e6}
    assert all(abs(n[s] / paper[s] - 1) < 0.01 for s in n)  # the full shapes, within 1% of Table 1's N
    flops = [float(v[3]) for v in rows.values()]
    assert flops == sorted(flops) and flops[0] > 1e9  # FLOPs/token at 32K grow with the scale
    assert "32768 tokens" in out and "989 TFLOP/s" in out


def test_planted_faults_exit_nonzero(gc, tmp_path, capsys):
    out = tmp_path / "bad.json"
    code = gc.main(["--tiny", "--out", str(out), "--only", "train,decode", "--scales", "S1",
                    "--plant", "decode-mismatch", "--plant", "nonfinite-loss"])
    printed = capsys.readouterr().out
    assert code == 1, printed
    res = json.loads(out.read_text())
    assert res["ok"] is False and res["planted_faults"] == ["decode-mismatch", "nonfinite-loss"]
    assert res["checks"] == {"train_S1_loss_finite": False, "decode_A_match": False, "decode_B_match": False}
    assert all(d["first_mismatch"] == 0 and "top2_gap_at_mismatch" in d for d in res["decode"])
    assert "FAILED" in printed


def test_peak_table(gc):
    assert gc.peak_for("NVIDIA H200")[0] == 989e12
    assert gc.peak_for("NVIDIA H20")[0] == 148e12
    assert gc.peak_for("NVIDIA H100 80GB HBM3")[0] == 989e12
    assert gc.peak_for("NVIDIA H100 PCIe")[0] == 756e12
    assert gc.peak_for("NVIDIA A100-SXM4-80GB")[0] == 312e12
    assert gc.peak_for("NVIDIA L40S")[0] == 362e12 and gc.peak_for("NVIDIA L4")[0] == 121e12
    assert gc.peak_for("Some Future Accelerator") == (None, None)


def test_compare_tokens(gc):
    a = torch.tensor([[5, 6, 1, 2, 3]])
    assert gc.compare_tokens(a, a.clone(), 2) == {"match": True, "first_mismatch": None}
    assert gc.compare_tokens(a, torch.tensor([[5, 6, 1, 9, 3]]), 2) == {"match": False, "first_mismatch": 1}
    assert gc.compare_tokens(a, torch.tensor([[0, 0, 1, 2, 3]]), 2)["match"]  # the prompt is not compared
    assert not gc.compare_tokens(a, a[:, :4], 2)["match"]


def test_out_of_memory_is_reported_not_raised(gc, monkeypatch):
    def no_memory(cfg):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 GiB")

    monkeypatch.setattr(gc, "build_model_from_config", no_memory)
    row = gc.train_scale(gc.get_budget("full"), "S5", "long", torch.device("cpu"), 0, 1, 989e12)
    assert row["fits"] is False and row["tok_s"] is None and row["micro_batch"] == 1
    assert "does not fit at micro-batch 1" in row["note"] and row["n_params_non_emb"] > 8e8
