"""The plan before any work (nblib.book.plan): every missing input at once, the compute per
chapter counted the way the grid builds its runs, and chapters at `full` stopping in their
setup cell with that list."""

import dataclasses
import subprocess
import sys

import papermill as pm
import pytest

import subproc

from nblib.book import plan as P
from nblib.budgets import SCALES, get_budget
from nblib.gemma import pair
from nblib.lccp import experiments, grid
from nblib.store.provenance import REPO_ROOT

FULL = get_budget("full")
pytestmark = pytest.mark.skipif(not P.missing_inputs(FULL), reason="this machine has the full budget's inputs")


def _trained_tokens(configs) -> int:
    """Tokens a set of run configs trains itself: a run that continues its parent's training
    state ("continue", the WSD decays) trains only the steps past the branch point."""
    total = 0
    for c in configs:
        start = c.init["step"] if c.init and c.init["mode"] == "continue" else 0
        total += (c.total_steps - start) * c.tokens_per_step
    return total


def _plan_cli(args, capsys) -> tuple[int, str]:
    """`python -m nblib.book.plan args` in this process (the entry point is run_cli(P.main);
    test_a_bad_value_in_a_process runs one real process)."""
    from nblib.cli import run_cli

    capsys.readouterr()
    code = run_cli(P.main, args)
    return code, capsys.readouterr().out


def test_full_lists_every_missing_input_at_once(capsys):
    names = [i.name for i in P.missing_inputs(FULL)]
    assert names == ["LCCP corpus", "tokenizer", "LongPPL reference model", "pair corpus", "pair tokenizer"]
    code, out = _plan_cli(["--budget", "full"], capsys)
    assert code == 2
    assert "5 input(s) of budget 'full' are missing" in out
    for i in P.inputs(FULL):
        assert str(i.path) in out and i.how in out
    assert "03_scaling_law" in out and "GPUs torch sees" in out


def test_chapter_selection_lists_only_its_inputs():
    assert [i.name for i in P.missing_inputs(FULL, ["06_models_ab"])] == ["pair corpus", "pair tokenizer"]
    with pytest.raises(P.MissingInputsError, match="LongPPL reference model") as e:
        P.require_inputs(FULL, "03_scaling_law")
    assert "pair corpus" not in str(e.value)


def test_toy_has_everything_and_prints_its_compute(capsys):
    code, out = _plan_cli(["--budget", "toy"], capsys)
    assert code == 0, out
    assert "Nothing is missing." in out and "MISSING" not in out
    # a CPU user gets minutes on these cores, Part 1 and the whole book, not GPU-hours
    assert "CPU time on" in out and "Part 1 (chapters 1-5)" in out and "whole book" in out
    assert "GPU-hours" not in out


def test_cpu_minutes_are_each_runs_flops_over_its_benchmarked_rate():
    """A second computation: the GPU table's FLOPs of every run over the rate of the benchmark row
    nearest its N in its stage, spread over the cores."""
    b = get_budget("toy")
    bench = {"rows": [{"scale": "S1", "stage": "short", "n_params_non_emb": 1e5, "gflops_muon": 10.0},
                      {"scale": "S5", "stage": "short", "n_params_non_emb": 4e5, "gflops_muon": 20.0},
                      {"scale": "S1", "stage": "long", "n_params_non_emb": 1e5, "gflops_muon": 5.0}]}
    cpu = P.cpu_table(b, bench, cores=2)
    gpu = P.compute_table(b)
    assert list(cpu.run) == list(gpu.run)
    n = {r["what"]: r for r in P.run_list(b)}
    for (_, c), (_, g) in zip(cpu.iterrows(), gpu.iterrows()):
        long = n[c.run]["seq_len"] > b.short_seq_len
        rate = 5e9 if long else (10e9 if "S1" in c.run or "S2" in c.run else 20e9)
        if not long and "S3" in c.run:  # S3's N lies between the two short rows: the nearer in log N
            continue
        assert c["core-hours"] == pytest.approx(g["FLOPs"] / rate / 3600, rel=1e-9), c.run
        assert c["training wall min"] == pytest.approx(c["core-hours"] * 60 / 2)
    with pytest.raises(ValueError, match="cores=0"):
        P.cpu_table(b, bench, cores=0)


@pytest.mark.parametrize("args, says", [(["--budget", "huge"], "budget='huge'"), (["--mfu", "2"], "mfu=2.0"),
                                        (["--chapters", "11_nope"], "chapter '11_nope'")])
def test_bad_values_are_named(args, says, capsys):
    """In this process, through the entry point `python -m nblib.book.plan` runs (run_cli over
    main); the real process is test_a_bad_value_in_a_process."""
    from nblib.cli import run_cli
    capsys.readouterr()
    assert run_cli(P.main, args) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_a_bad_value_in_a_process():
    r = subproc.run([sys.executable, "-m", "nblib.book.plan", "--budget", "huge"], capture_output=True, text=True,
                    cwd=REPO_ROOT, timeout=300)
    assert r.returncode == 2 and "budget='huge'" in r.stderr and "Traceback" not in r.stderr


def test_compute_counts_the_runs_the_grid_builds():
    """A second count of the tokens, from the configs the chapters train (toy builds them)."""
    b = get_budget("toy")
    rows = P.run_list(b)
    per = {}
    for r in rows:
        per[r["chapter"]] = per.get(r["chapter"], 0) + r["tokens"]
    assert per["02_setup"] == _trained_tokens([grid.reference_config(b)])
    assert per["03_scaling_law"] == _trained_tokens(grid.linear_decay_grid(b, SCALES))
    assert per["04_constant_last4"] == _trained_tokens(experiments.constant_configs(b))
    assert per["06_models_ab"] == _trained_tokens(pair.part2_configs(b))
    p = b.pair
    assert per["09_yarn"] == 3 * p.finetune_steps * p.batch_size * p.seq_len  # two fine-tunes and their control


def test_the_plan_lists_chapter_6_and_9s_ladders_and_controls():
    """Chapter 6 trains Models A and B, their training-length ladders and the all-global control
    with its ladder (`pair.train_pair`); chapter 9 the YaRN fine-tunes of Model B and of the
    control, and Model B continued with plain RoPE. Every row is the current pair's shape."""
    from nblib.gemma import extension
    from nblib.store.runstore import Run

    b = get_budget("toy")
    rows = [r for r in P.run_list(b) if r["chapter"] in ("06_models_ab", "09_yarn")]
    what = [(r["chapter"], r["what"]) for r in rows]
    n = len(b.pair.length_fractions)
    assert what == [("06_models_ab", "Model A"), ("06_models_ab", "Model B"),
                    ("06_models_ab", f"Model A training-length ladder ({n} shorter budgets)"),
                    ("06_models_ab", f"Model B training-length ladder ({n} shorter budgets)"),
                    ("06_models_ab", "Model B all-global control (100% of the pair's tokens)"),
                    ("06_models_ab", f"Model B all-global control ladder ({n} shorter budgets)"),
                    ("09_yarn", "Model B YaRN x4 fine-tune"),
                    ("09_yarn", "Model B continued with plain RoPE (the fine-tune's control)"),
                    ("09_yarn", "all-global Model B YaRN x4 fine-tune")]
    for r in rows:  # the pair of nblib/budgets/pair.py: 8 layers of width 80 at toy
        shape = b.pair.model_a if r["family"] == "gpt2" else b.pair.model_b
        assert (r["model"]["n_layers"], r["model"]["d_model"]) == (shape["n_layers"], shape["d_model"]) == (8, 80)
    with grid.placeholder_corpus():
        parent = Run(REPO_ROOT, pair.pair_configs(b)["B"])
        ft = extension.finetune_config(b, parent)
        cont = extension.continued_config(b, parent)
    tokens = {r["what"]: r["tokens"] for r in rows}
    assert tokens["Model B YaRN x4 fine-tune"] == ft.total_steps * ft.tokens_per_step
    assert tokens["Model B continued with plain RoPE (the fine-tune's control)"] == cont.total_steps * cont.tokens_per_step
    ladder = pair.ladder_configs(b)
    assert tokens[f"Model A training-length ladder ({n} shorter budgets)"] == _trained_tokens(
        [c for (k, _), c in ladder.items() if k == "A"])
    smoke = [r["what"] for r in P.run_list(get_budget("smoke")) if "all-global control" in r["what"]]
    assert smoke == ["Model B all-global control (75% of the pair's tokens)",
                     "Model B all-global control ladder (2 shorter budgets)"]  # its fractions below 0.75


def test_disk_counts_every_optimizer_state_a_run_keeps():
    """Closed forms. A trunk that later runs branch from keeps its optimizer state in every
    checkpoint (Models A and B: n_checkpoints evenly spaced plus one where each shorter budget
    branches off), so its disk is (4 + 12) bytes a parameter per checkpoint; any other run keeps
    the newest two states (the trainer's KEEP_RESUMABLE); a short stage is its trunk and its WSD
    decays."""
    from nblib.training.train import _ckpt_steps

    b = get_budget("toy")
    p = b.pair
    with grid.placeholder_corpus():
        a = pair.pair_configs(b)["A"]
        short = grid.short_stage(b, "S1")
    rows = P.compute_table(b).set_index("run")
    k = p.n_checkpoints + len(p.length_fractions)
    assert len(_ckpt_steps(a)) == k and P.optimizer_states(a) == k
    n_a = P._model_cost("gpt2", p.model_a, p.seq_len)[1]
    assert rows.loc["Model A", "checkpoint GB"] == pytest.approx((4 + 12) * n_a * k / 1e9, rel=1e-12)
    assert P.optimizer_states(dataclasses.replace(a, keep_optimizer="last")) == 2
    trunk, decays = short.trunk, [c for c in short.all() if c is not short.trunk]
    k_trunk, k_decays = len(_ckpt_steps(trunk)), [len(_ckpt_steps(c)) for c in decays]
    assert trunk.keep_optimizer == "all" and all(c.keep_optimizer == "last" for c in decays) and decays
    n_s1 = P._model_cost("llama", {k: v for k, v in trunk.model.items() if k != "family"}, trunk.seq_len)[1]
    closed = (4 * n_s1 * (k_trunk + sum(k_decays)) + 12 * n_s1 * (k_trunk + sum(min(2, x) for x in k_decays))) / 1e9
    row = rows.loc[[r for r in rows.index if r.startswith("S1 short stage")][0]]
    assert row["checkpoint GB"] == pytest.approx(closed, rel=1e-12)
    assert row["checkpoint GB"] > (4 * n_s1 * (k_trunk + sum(k_decays)) + 12 * n_s1) / 1e9  # the old estimate

def test_gpu_hours_follow_flops_peak_and_mfu():
    t1 = P.compute_table(get_budget("toy"), peak_tflops=100, mfu=0.5)
    t2 = P.compute_table(get_budget("toy"), peak_tflops=200, mfu=0.5)
    assert (t1["GPU-hours"] == t1["FLOPs"] / (100e12 * 0.5) / 3600).all()
    assert ((t1["GPU-hours"] / t2["GPU-hours"]) - 2).abs().max() < 1e-12


@pytest.mark.parametrize("chapter, lists, not_lists", [
    ("03_scaling_law", ["LCCP corpus", "tokenizer", "LongPPL reference model"], ["pair corpus"]),
    ("06_models_ab", ["pair corpus", "pair tokenizer"], ["LCCP corpus"]),
])
def test_a_full_chapter_stops_in_its_setup_cell_with_the_list(tmp_path, chapter, lists, not_lists):
    out = tmp_path / f"{chapter}.ipynb"
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(REPO_ROOT / "notebooks" / f"{chapter}.ipynb"), str(out),
                            parameters={"budget": "full", "run_root": str(tmp_path / "runs")},
                            kernel_name="python3", cwd=str(REPO_ROOT), progress_bar=False)
    assert e.value.ename == "MissingInputsError"
    for name in lists:
        assert f"- {name}:" in e.value.evalue
    for name in not_lists:
        assert f"- {name}:" not in e.value.evalue
    # the failing cell is the first one after the parameters: nothing ran before the check
    import nbformat
    nb = nbformat.read(out, 4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    failed = [i for i, c in enumerate(code) if any(o.get("output_type") == "error" for o in c.get("outputs", []))]
    tags = [c.metadata.get("tags", []) for c in code]
    first_work = next(i for i, t in enumerate(tags) if "parameters" not in t and "injected-parameters" not in t)
    assert failed == [first_work]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
