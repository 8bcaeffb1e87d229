"""nblib.probes: one module and one entry point per probe, records in one folder with a
manifest per file, configs built through the grid with the run hashes the old scripts gave,
and benchmarks/ holding only speed benchmarks, run as modules."""

import argparse
import ast
import dataclasses
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import subproc
from nblib import probes
from nblib.probes import results

ROOT = Path(__file__).resolve().parents[1]
PROBE_DIR = ROOT / "nblib" / "probes"
BENCH = ROOT / "benchmarks"


def _source(module: str) -> str:
    return (ROOT / (module.replace(".", "/") + ".py")).read_text()


def _tree(module: str) -> ast.Module:
    return ast.parse(_source(module))


def _records_of(module: str) -> tuple:
    """The RECORDS tuple a probe module declares (read with ast, nothing imported)."""
    for node in _tree(module).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "RECORDS" for t in node.targets):
            return ast.literal_eval(node.value)
    return ()


# ---------------------------------------------------------------------------------------
# the package and its entry point
# ---------------------------------------------------------------------------------------
def test_every_probe_module_is_registered():
    # design_probe and design_needles run a probe on a budget file; they are no probes themselves
    on_disk = {p.stem for p in PROBE_DIR.glob("*.py")} - {"__init__", "__main__", "results", "configs",
                                                           "design_probe", "design_needles"}
    assert on_disk == set(probes.PROBES)
    assert all(m == f"nblib.probes.{n}" for n, m in probes.PROBES.items())


@pytest.mark.parametrize("name", sorted(probes.PROBES))
def test_each_probe_has_a_docstring_a_main_and_its_records(name):
    tree = _tree(probes.PROBES[name])
    doc = ast.get_docstring(tree) or ""
    assert "chapter" in doc, f"{name}: the docstring names no chapter"
    assert any(s in doc for s in ("LCCP paper", "Gemma blog")), f"{name}: the docstring cites no source"
    assert f"python -m nblib.probes {name}" in doc, f"{name}: the docstring shows no command"
    mains = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    assert mains and [a.arg for a in mains[0].args.args] == ["argv"], name
    assert _records_of(probes.PROBES[name]), f"{name} declares no RECORDS"


def test_the_entry_point_lists_every_probe():
    r = subproc.run([sys.executable, "-m", "nblib.probes"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    listed = [line.split()[0] for line in r.stdout.splitlines() if line.startswith("  ")]
    assert listed == list(probes.PROBES)


def test_an_unknown_probe_is_refused_naming_the_allowed_ones():
    r = subproc.run([sys.executable, "-m", "nblib.probes", "toy_lccp_lr_probe"], capture_output=True, text=True,
                    cwd=ROOT, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert "'toy_lccp_lr_probe'" in r.stderr and all(n in r.stderr for n in probes.PROBES)


@pytest.mark.parametrize("name", sorted(probes.PROBES))
def test_each_probe_answers_help(name, capsys):
    from nblib.probes.__main__ import main
    with pytest.raises(SystemExit) as e:
        main([name, "--help"])
    assert e.value.code == 0
    assert f"usage: python -m nblib.probes {name}" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------
# the records: one folder, every file written by a module that names it, with a manifest
# ---------------------------------------------------------------------------------------
RECORD_FILES = results.record_files(results.RESULTS)
WRITER = {f: m for m in probes.PROBES.values() for f in _records_of(m)}


def test_the_records_live_in_one_folder():
    assert results.RESULTS == ROOT / "data" / "probes" and RECORD_FILES
    assert not any(p.suffix in (".jsonl", ".csv") for p in BENCH.rglob("*")), "probe records left in benchmarks/"


@pytest.mark.parametrize("path", RECORD_FILES, ids=[p.name for p in RECORD_FILES])
def test_each_record_file_has_a_writer_and_a_manifest_that_covers_it(path):
    assert path.name in WRITER, f"{path.name}: no probe declares it in RECORDS"
    assert f'"{path.name}"' in _source(WRITER[path.name])
    m = json.loads(results.manifest_path(path).read_text())
    assert m["file"] == path.name and m["writer"] == WRITER[path.name]
    text = path.read_text()
    if path.suffix == ".csv":
        n, key = len(pd.read_csv(path)), "rows"
    else:
        n, key = sum(1 for line in text.splitlines() if line.strip()), "lines"
        assert all(json.loads(line) for line in text.splitlines() if line.strip())
    # an entry without rows changed columns, not rows (its note says which)
    assert all(w.get(key) or w.get("note") for w in m["writes"]), f"{path.name}: a write names neither {key} nor a note"
    spans = sorted(tuple(w[key]) for w in m["writes"] if w.get(key))
    covered = [i for a, b in spans for i in range(a, b + 1)]
    assert covered == list(range(1, n + 1)), f"{path.name}: the manifest's writes cover {spans} of {n} {key}"
    for w in m["writes"]:  # a commit from before manifests, or a command with its provenance
        assert ("commit" in w and "script" in w) or {"command", "code", "time", "machine"} <= set(w), w


def test_records_reads_each_file_as_its_reader_did():
    for path in RECORD_FILES:
        got = probes.records(path.stem)
        want = pd.read_csv(path) if path.suffix == ".csv" else pd.read_json(path, lines=True)
        pd.testing.assert_frame_equal(got, want)
    with pytest.raises(FileNotFoundError, match="toy_lccp_lr_probe.jsonl"):
        probes.records("no_such_probe")


BENCH_RESULTS = sorted(p for p in (BENCH / "results").iterdir() if not p.name.endswith(".manifest.json"))


@pytest.mark.parametrize("path", BENCH_RESULTS, ids=[p.name for p in BENCH_RESULTS])
def test_each_benchmark_result_is_named_by_its_script_and_has_a_manifest(path):
    manifests = [json.loads(m.read_text()) for m in (BENCH / "results").glob("*.manifest.json")]
    mine = [m for m in manifests if path.name in m["files"]]
    assert len(mine) == 1, f"{path.name}: in {len(mine)} manifests"
    writer = mine[0]["writer"]
    src = _source(writer)  # the script names the file, or hands its stem to benchmarks.write_results
    assert writer.startswith("benchmarks.") and (f'"{path.name}"' in src
                                                 or f'write_results("{path.name.split(".")[0]}"' in src)
    assert path.stem.split(".")[0] in (writer.split(".")[1], writer.split(".")[1] + "_tiny")  # named after its script


def test_benchmarks_hold_only_the_speed_benchmarks_and_the_gpu_check():
    scripts = {p.stem for p in BENCH.glob("*.py")} - {"__init__"}
    assert scripts == {"bench_decode", "bench_ensemble", "bench_evals", "bench_fit", "bench_longppl", "bench_make_test",
                       "bench_train", "gpu_check"}


def _path_edits(tree: ast.AST) -> list[int]:
    """Lines that touch sys.path or add a site directory."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", "") == "sys":
            out.append(node.lineno)
        if isinstance(node, ast.Attribute) and node.attr == "addsitedir":
            out.append(node.lineno)
    return out


def test_the_path_check_finds_a_planted_edit():
    assert _path_edits(ast.parse("import sys\nsys.path.insert(0, 'x')\n")) == [2]
    assert _path_edits(ast.parse("import site\nsite.addsitedir('x')\n")) == [2]
    assert _path_edits(ast.parse("import os\nos.path.join('a')\n")) == []


@pytest.mark.parametrize("path", sorted([*BENCH.glob("*.py"), *PROBE_DIR.glob("*.py")]),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_script_edits_sys_path(path):
    assert _path_edits(ast.parse(path.read_text())) == []


def test_no_probe_builds_a_run_config_by_hand():
    for path in PROBE_DIR.glob("*.py"):
        calls = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)
                 and "RunConfig" in ast.unparse(n.func)]
        assert calls == [], f"{path.name} builds a RunConfig by hand: {[ast.unparse(c) for c in calls]}"


def test_no_mention_of_the_old_script_paths():
    old = ("python benchmarks/", "benchmarks/toy_", "benchmarks/pair_probe", "benchmarks/cpu_kernel",
           "benchmarks/results/toy_", "benchmarks/results/pair_probe")
    files = [ROOT / "README.md", ROOT / "Makefile", *(ROOT / "notebooks").glob("*.py"), *BENCH.glob("*.py"),
             *PROBE_DIR.glob("*.py"), *(ROOT / "tests").glob("*.py")]
    # a probe's docstring may say which script it was
    texts = {f: re.sub(r"was\s+benchmarks/\w+\.py", "", f.read_text()) for f in files if f.name != "test_probes.py"}
    assert [(f.name, s) for f, t in texts.items() for s in old if s in t] == []


# ---------------------------------------------------------------------------------------
# writing: atomic, appended, with provenance
# ---------------------------------------------------------------------------------------
def test_append_record_writes_lines_and_a_manifest_entry_per_write(tmp_path):
    out = tmp_path / "x.jsonl"
    results.append_record(out, {"b": 1, "a": 2}, module="nblib.probes.lccp_lr", argv=["--scales", "S1"])
    results.append_records(out, [{"a": 3}, {"a": 4}], module="nblib.probes.lccp_lr", argv=["--out", "a b"])
    assert out.read_text().splitlines() == ['{"a": 2, "b": 1}', '{"a": 3}', '{"a": 4}']
    assert probes.records(out)["a"].tolist() == [2, 3, 4]
    m = results.read_manifest(out)
    assert m["file"] == "x.jsonl" and m["writer"] == "nblib.probes.lccp_lr"
    assert [w["lines"] for w in m["writes"]] == [[1, 1], [2, 3]]
    assert m["writes"][1]["command"] == "python -m nblib.probes lccp_lr --out 'a b'"
    w = m["writes"][0]
    assert len(w["code"]["git"]) == 40 and w["machine"]["cpus"] >= 1 and w["time"].endswith("Z")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.jsonl", "x.jsonl.manifest.json"]  # no leftovers


def test_one_command_appending_record_by_record_is_one_manifest_entry(tmp_path):
    out = tmp_path / "x.jsonl"
    for a in range(3):  # a probe writing each needle's record as it finishes
        results.append_record(out, {"a": a}, module="nblib.probes.lccp_lr", argv=["--scales", "S1"])
    results.append_record(out, {"a": 3}, module="nblib.probes.lccp_lr", argv=["--scales", "S2"])
    results.append_record(out, {"a": 4}, module="nblib.probes.lccp_lr", argv=["--scales", "S1"])
    m = results.read_manifest(out)
    assert [(w["lines"], w["command"].split()[-1]) for w in m["writes"]] == [([1, 3], "S1"), ([4, 4], "S2"),
                                                                           ([5, 5], "S1")]
    assert m["writes"][0]["until"] >= m["writes"][0]["time"] and "until" not in m["writes"][1]


def test_record_path_resolves_bare_names_into_the_folder(tmp_path):
    assert results.record_path("toy_lccp_lr_probe") == results.RESULTS / "toy_lccp_lr_probe.jsonl"
    assert results.record_path("toy_grid_ladder") == results.RESULTS / "toy_grid_ladder.csv"
    assert results.record_path("toy_smear_ablation.jsonl") == results.RESULTS / "toy_smear_ablation.jsonl"
    assert results.record_path(tmp_path / "y.jsonl") == tmp_path / "y.jsonl"


# ---------------------------------------------------------------------------------------
# configs: through the grid, with the hashes the old scripts recorded
# ---------------------------------------------------------------------------------------
def _lr_batch_args(r: dict) -> argparse.Namespace:
    return argparse.Namespace(d=r["d"], layers=r["layers"], heads=r["heads"], kv=r["kv"], ff=0, seq_len=r["seq_len"],
                              tokens=r["tokens"], at=[0.5, 1.0], warmup=40, seed=r.get("seed", 0),
                              tokenizer="bpe:stdlib-1024", copy_fraction=r.get("copy_fraction", 0.0),
                              variant=r.get("variant", "plain"))


@pytest.mark.parametrize("name", ["toy_lr_batch_probe", "toy_smear_ablation", "toy_grid_shapes"])
def test_lr_batch_configs_have_the_run_hashes_their_records_name(name):
    """The records were written by benchmarks/toy_lr_batch_probe.py with the hash of the run it
    trained: the grid-built config of the same settings has that hash."""
    from nblib.data import get_tokenizer
    from nblib.probes.lr_batch import probe_config
    tok = get_tokenizer("bpe:stdlib-1024")
    for line in results.record_path(name).read_text().splitlines():
        r = json.loads(line)
        assert probe_config(_lr_batch_args(r), r["batch"], r["lr"], tok).hash == r["run"], r["name"]


def test_lccp_copy_configs_have_the_run_hashes_their_records_name():
    from nblib.data import get_tokenizer
    from nblib.probes import lccp_copy
    tok = get_tokenizer("bpe:stdlib-1024")
    for r in probes.records("toy_lccp_copy_probe").to_dict("records"):
        argv = ["--parent-d", str(r["d"]), "--parent-layers", str(r["layers"]), "--seq-len", str(r["short_seq_len"]),
                "--batch", str(r["batch"]), "--rope-base", str(r["rope_base"]), "--parent-lr", str(r["lr"] * 10)]
        if isinstance(r.get("variant"), str):  # the 2-layer smeared-key rungs: one KV head, batch 32, 2M tokens
            argv += ["--parent-heads", str(int(r["heads"])), "--parent-variant", r["variant"], "--parent-seed",
                     str(int(r["parent_seed"])), "--parent-kv", "1", "--parent-batch", "32",
                     "--parent-tokens", "2000000", "--parent-at", "0.25", "0.5", "0.75", "1"]
        a = lccp_copy.parser().parse_args(argv)
        parent = lccp_copy.parent_config(a, tok)
        assert (parent.hash, lccp_copy.lccp_config(a, parent).hash) == (r["parent_run"], r["run"]), r["name"]


def test_default_configs_keep_the_old_scripts_hashes():
    """Hashes of the configs benchmarks/toy_design_probe.py, toy_lr_batch_probe.py and
    toy_lccp_copy_probe.py built with their default arguments (at commit 953f527)."""
    from nblib.data import get_tokenizer
    from nblib.probes import design, lccp_copy, lr_batch
    tok = get_tokenizer("bpe:stdlib-1024")
    short, long = design.probe_configs(design.parser().parse_args(["--name", "x"]), tok)
    assert (short.hash, long.hash) == ("4a0aff1a65f67bb9", "1b9f9d512b493bff")
    assert long.init == {"run": short.hash, "step": short.total_steps, "mode": "weights", "rope_base": 5e5}
    assert long.ckpt_every_tokens is None and short.meta == long.meta == {}
    a = lr_batch.parser().parse_args([])
    assert [lr_batch.probe_config(a, b, lr, tok).hash for b in a.batches for lr in a.lrs] == [
        "161f899523a9c9e3", "6e0987211bb0fa56", "84296c03d4af4d25", "d35f64eb2cce292e"]
    a = lccp_copy.parser().parse_args([])
    parent = lccp_copy.parent_config(a, tok)
    cfg = lccp_copy.lccp_config(a, parent)
    assert (parent.hash, cfg.hash) == ("3708a0183074ea7a", "d1651074054f5395")
    assert cfg.ckpt_steps == (122, 244) and cfg.total_steps == 488  # at 250K and 500K tokens; 1M the end


def test_lccp_lr_trajectory_is_the_grid_trajectory_with_the_lr_and_base_changed():
    """A second construction, the old script's: the grid's trajectory with its schedule's LR and
    its init's RoPE base replaced."""
    from nblib.budgets import get_budget
    from nblib.lccp import grid
    from nblib.probes.lccp_lr import trajectory_config
    for b in (get_budget("toy"), get_budget("toy").with_model("S2", n_heads=2, head_size=32), get_budget("smoke")):
        for scale in ("S1", "S2", "S5"):
            for frac, rope in ((0.1, None), (0.03, 5e5), (0.05, 5e7)):
                base = grid.lccp_constant(b, scale, b.ds_multiples[-1], b.dl_multiples[-1], 0)
                want = dataclasses.replace(base, schedule={**base.schedule, "lr": b.scale(scale).lr * frac},
                                           init=base.init if rope is None else {**base.init, "rope_base": rope})
                got = trajectory_config(b, scale, b.ds_multiples[-1], frac, rope)
                assert got.hash == want.hash and got.label.startswith(base.label + " LCCP-LR probe")


def test_pair_probe_is_the_pair_run_with_the_levers_laid_over():
    """A second construction, the old script's: the pair config as a dict, levers set, read back."""
    from nblib.budgets import get_budget
    from nblib.gemma.pair import pair_configs
    from nblib.probes import pair
    from nblib.store.runstore import RunConfig
    b = get_budget("toy")
    L = b.pair.seq_len
    for argv in (["--model", "A"], ["--model", "A", "--steps", "1200", "--lr", "2e-2"],
                 ["--model", "B", "--copy", "0.05"], ["--model", "B", "--rope-base", "2500"]):
        a = pair.parser().parse_args(["--name", "n", *argv])
        base = pair_configs(b)[a.model].to_dict()
        steps = a.steps or base["n_tokens"] // (base["batch_size"] * L)
        if a.rope_base:
            base["model"] = {**base["model"], "rope_local_base": a.rope_base, "rope_global_base": a.rope_base}
        data = {**base["data"], **({"copy_fraction": a.copy, "copy_len": [16, L // 2]} if a.copy else {})}
        want = RunConfig.from_dict({**base, "data": data, "n_tokens": steps * base["batch_size"] * L,
                                    "schedule": {**base["schedule"], **({"lr": a.lr} if a.lr else {})},
                                    "label": f"probe {a.name}", "ckpt_every_tokens": None})
        assert pair.probe_config(a, b).to_dict() == want.to_dict()


# ---------------------------------------------------------------------------------------
# the grid ladder: a design's row from chapters 3-4's tables
# ---------------------------------------------------------------------------------------
def test_grid_ladder_reproduces_the_committed_grid_row_from_the_committed_figures():
    """Row FIGURES_ROW (the book's grid, built fresh on the host the committed figures come from)
    was written from the committed figures, with the Last4 <= Raw share chapter 4 printed;
    recomputed now, the measures are the row's."""
    from nblib.probes.grid_ladder import DIGITS, FIGURES_ROW, LAST4_LE_RAW, design_measures
    from nblib.chapters.appendix.grid_ladder_findings import GRID_TARGETS
    f = probes.records("toy_grid_ladder").set_index("design").loc[FIGURES_ROW]
    got = design_measures(ROOT / "figures", last4_le_raw=float(f[LAST4_LE_RAW]))
    assert set(GRID_TARGETS) <= set(got)
    for k, v in got.items():
        assert v == pytest.approx(float(f[k]), abs=0.5 * 10 ** -DIGITS[k]), k


def test_grid_ladder_reads_last4_share_from_chapter4_output_and_appends_a_row(tmp_path):
    from nblib.chapters.appendix.grid_ladder_findings import grid_ladder_table
    from nblib.probes import grid_ladder
    build = tmp_path / "build"
    for chapter, table in (("03_scaling_law", "fig03_r2_intervals.csv"), ("04_constant_last4", "fig04b_ccc.csv")):
        (build / "figures" / chapter).mkdir(parents=True)
        (build / "figures" / chapter / table).write_text((ROOT / "figures" / chapter / table).read_text())
    (build / "figures" / "03_scaling_law" / "runs_linear_decay.csv").write_text(
        "scale,longppl\nS3,20.0\nS4,8.0\nS4,5.0\nS4,4.0\nS5,3.0\n")  # S4 spans log(8) - log(4)
    (build / "logs").mkdir()
    share = 0.15277
    (build / "logs" / "04_constant_last4.log").write_text(
        f"- Constant-Last4 ≤ Constant-Raw in LongPPL on {share:.1%} of the 72 S1-S4 trajectory points (by scale: S1 0%).\n")
    out = tmp_path / "ladder.csv"
    out.write_text((results.RESULTS / "toy_grid_ladder.csv").read_text())
    (build / "figures" / "04_constant_last4" / "s5_trajectory.csv").write_text(
        "dl,protocol,longppl,shortppl\n10.0,Last4,9.0,3.0\n10.0,Raw,9.5,3.0\n30.0,Last4,7.0,2.5\n"
        "30.0,Raw,7.2,2.5\n120.0,Last4,6.0,2.0\n120.0,Raw,6.3,2.0\n")
    before = pd.read_csv(out)["design"].tolist()
    argv = ["--figures", str(build / "figures"), "--design", "X", "--change", "as F, on AVX2", "--measured",
            "chapters 3-4, fresh store", "--code", "c96e526", "--out", str(out), "--out-s5", str(tmp_path / "s5.jsonl"),
            "--part1-minutes", "55.04"]
    assert grid_ladder.main(argv) == 0
    ladder = grid_ladder_table(pd.read_csv(out)).set_index("design")
    assert list(ladder.index) == before + ["X"]
    assert ladder.loc["X", "Last4 <= Raw (% of S1-S4 points)"] == 15.3
    r2 = pd.read_csv(build / "figures" / "03_scaling_law" / "fig03_r2_intervals.csv")["R²"].iloc[0]
    assert ladder.loc["X", "S1-S3 -> S4 R²"] == round(r2, 3) and ladder.loc["X", "code"] == "c96e526"
    # the S5 trajectory: Last4 falls monotonically (rho -1), its values at 30 and 120, and its points recorded
    assert ladder.loc["X", "S5 Last4 rho(Dl, LongPPL)"] == -1.0 and ladder.loc["X", "Part 1 min"] == 55.0
    assert ladder.loc["X", "S5 Last4 LongPPL at 30"] == 7.0 and ladder.loc["X", "S5 Last4 LongPPL at 120"] == 6.0
    assert ladder.loc["X", "S4 LD log-LongPPL range"] == round(np.log(2), 3)
    s5 = pd.read_json(tmp_path / "s5.jsonl", lines=True)
    assert set(s5.design) == {"X"} and len(s5) == 6
    assert results.read_manifest(out)["writes"][-1]["rows"] == [len(before) + 1] * 2
    with pytest.raises(SystemExit, match="already"):
        grid_ladder.main(argv)


def _ladder(rows):
    from nblib.probes.grid_ladder import R2
    return pd.DataFrame([{"design": d, R2["S1-S3 → S4"]: s4, R2["S1-S4 → S5"]: s5} for d, s4, s5 in rows])


def test_grid_ladder_book_grid_rows_are_a_design_its_numbered_reruns_and_the_rows_named_for_it():
    from nblib.probes.grid_ladder import BOOK_GRID_ALSO, BOOK_GRID_DESIGN, book_grid_rows
    t = _ladder([("F", .899, .921), ("F2", .888, .907), ("F2b", .1, .1), ("G", .684, .916), ("F3", .874, .895),
                 ("V", .891, .971), ("V2", .9, .97), ("Vb", .886, .970), ("Vb2", .88, .97), ("Vc", .94, .998)])
    assert list(book_grid_rows(t, "F")["design"]) == ["F", "F2", "F3"]
    assert list(book_grid_rows(t, "V")["design"]) == ["V", "V2"]
    assert list(book_grid_rows(t, "Vb")["design"]) == ["Vb", "Vb2"]
    # Vb2 (Vb in fp32 under AVX2) is Vc's grid in fp32 too: it counts for the book's grid
    assert BOOK_GRID_DESIGN == "Vc" and BOOK_GRID_ALSO == {"Vc": ("Vb2",)}
    assert list(book_grid_rows(t)["design"]) == ["Vb2", "Vc"]


def test_host_spread_findings_name_the_range_of_each_split():
    from nblib.chapters.part1.law_findings import host_spread_findings
    text = host_spread_findings(_ladder([("F", .899, .921), ("F2", .888, .907), ("K", .427, .734), ("F3", .874, .895)]),
                                "F")
    # F's rows are not in grid_ladder.RAN_ON, so what varied between them is not claimed
    assert "run 3 times (rows F, F2, F3 of the design ladder, appendix A; what varied: runs (what varied is not " \
        "recorded))" in text
    vc = host_spread_findings(_ladder([("Vb2", .857, .986), ("Vc", .940, .998)]), "Vc")
    assert "what varied: precision and instruction set, one host" in vc and "hosts" not in vc
    assert "0.874 to 0.899 for S1-S3 → S4 and 0.895 to 0.921 for S1-S4 → S5" in text
    assert host_spread_findings(_ladder([("K", .4, .7)])) == ""
    assert "rows V, V2 of" in host_spread_findings(_ladder([("F", .9, .9), ("V", .891, .971), ("V2", .88, .96)]), "V")
