"""Every command line that takes `--budget` takes `--budget-file` too, through one helper
(nblib.budgets.budget_file: `add_budget_args`, `budget_from_args`): each reads a budget file and
resolves the budget it describes, keeps its default without either flag, and refuses both flags
at once, a missing file or an unknown name in one line that names the value, before any work.
Nothing here trains: each CLI's own parser is called, as its `main` calls it first."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

import subproc

from nblib.budgets import get_budget, get_grid
from nblib.budgets.budget_file import budget_from_args, read_budget_file
from nblib.store.provenance import REPO_ROOT

TOY_FILE = REPO_ROOT / "examples" / "toy-own-data.toml"
F_FILE = REPO_ROOT / "data" / "probes" / "grid_designs" / "F.toml"

# every CLI with a budget: (the arguments it needs besides the budget, its budget without either flag)
CLIS = {
    "nblib.lccp.monitor": (["RUN_DIR"], None),  # plain folders only
    "nblib.probes.erosion": ([], "F"),
    "nblib.probes.trajectory_copy": ([], "F"),
    "nblib.probes.lccp_lr": ([], "F"),
    "nblib.probes.code_needle_levers": ([], "toy"),
    "nblib.probes.protocol_horizon": ([], "toy"),
    "nblib.probes.n_axis": ([], "toy"),
    "nblib.probes.short_seeds": ([], "toy"),
    "nblib.chapters.claims.scorecard": ([], "toy"),
    "benchmarks.bench_train": ([], "toy"),
    "benchmarks.bench_ensemble": ([], "toy"),
    "benchmarks.bench_evals": ([], "toy"),
}
# the book runner and the plan read --budget, --budget-file and --set themselves (plan.budget_source)
OWN_BUDGET_ARGS = {"nblib/book/build.py", "nblib/book/plan.py", "nblib/budgets/budget_file.py"}  # and the helper


def _parse(module: str, *args: str):
    parser = importlib.import_module(module).parser()
    return parser, parser.parse_args([*CLIS[module][0], *args])


def test_every_cli_with_a_budget_is_listed_and_uses_the_helper():
    """Read from the sources (nothing imported): a module that adds `--budget` by hand is the book
    runner's or the plan's; every module that calls `add_budget_args` is in CLIS."""
    helper, by_hand = set(), set()
    for path in [*(REPO_ROOT / "nblib").rglob("*.py"), *(REPO_ROOT / "benchmarks").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name == "add_budget_args":
                    helper.add(path)
                elif name == "add_argument" and any(isinstance(a, ast.Constant) and a.value == "--budget"
                                                    for a in node.args):
                    by_hand.add(str(path.relative_to(REPO_ROOT)))
    assert by_hand == OWN_BUDGET_ARGS
    modules = {".".join(p.relative_to(REPO_ROOT).with_suffix("").parts) for p in helper}
    assert modules - {"nblib.budgets.budget_file"} == set(CLIS)


@pytest.mark.parametrize("module", CLIS)
def test_a_budget_file_gives_its_budget(module):
    parser, a = _parse(module, "--budget-file", str(TOY_FILE))
    b, name = budget_from_args(parser, a)
    assert b == read_budget_file(TOY_FILE).budget
    assert (b.name, b.corpus, b.pair.corpus) == ("toy", "jsonl:/data/my_corpus/train.jsonl",
                                                "jsonl:/data/my_corpus/train.jsonl")
    assert name == str(TOY_FILE)  # what the records name


@pytest.mark.parametrize("module", [m for m, (_, default) in CLIS.items() if default == "F"])
def test_a_grid_probe_reads_grid_f_from_its_file_as_from_its_name(module):
    parser, a = _parse(module, "--budget-file", str(F_FILE))
    assert budget_from_args(parser, a)[0] == get_grid("F") == budget_from_args(parser, _parse(module)[1])[0]


@pytest.mark.parametrize("module", CLIS)
def test_without_either_flag_the_budget_is_the_clis_default(module):
    parser, a = _parse(module)
    default = CLIS[module][1]
    b, name = budget_from_args(parser, a)
    assert b == (None if default is None else get_grid(default) if default == "F" else get_budget(default))
    parser, a = _parse(module, "--budget", "smoke")
    assert budget_from_args(parser, a) == (get_budget("smoke"), "smoke")


@pytest.mark.parametrize("module", CLIS)
@pytest.mark.parametrize("args, says", [
    (["--budget", "toy", "--budget-file", "examples/toy-own-data.toml"],
     "--budget toy and --budget-file examples/toy-own-data.toml are not allowed together"),
    (["--budget-file", "nope/missing.toml"], "nope/missing.toml not found"),
    (["--budget-file", ""], "--budget-file '' is not allowed"),
    (["--budget", "huge"], "budget='huge' is not allowed"),
])
def test_bad_input_is_one_line_naming_the_value(module, args, says, capsys):
    parser, a = _parse(module, *args)
    with pytest.raises(SystemExit) as e:
        budget_from_args(parser, a)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err
    assert err.startswith("error: ") and err.count("\n") == 1 and says in err and "allowed" in err  # nblib.cli's form


def test_the_monitor_refuses_both_flags_on_its_command_line():
    r = subproc.run([sys.executable, "-m", "nblib.lccp.monitor", "no_such_run", "--budget", "toy",
                     "--budget-file", str(TOY_FILE)], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert r.returncode == 2 and "not allowed together" in r.stderr and "Traceback" not in r.stderr


def test_the_monitor_takes_a_budget_file_over_a_run_store_runs_own_budget_only(tmp_path):
    """A run-store run is evaluated at the budget it was trained at: a budget file over another
    base is refused, naming both, before any checkpoint is read."""
    from nblib.lccp import grid, monitor
    from nblib.store.runstore import RunStore

    b = get_budget("smoke")
    with grid.placeholder_corpus():
        cfg = grid.lccp_constant(b, "S1", b.ds_multiples[0], b.dl_multiples[-1], 0)
    store = RunStore(tmp_path)
    run = store.run(cfg)
    run.path.mkdir(parents=True)
    store.write_config(run)
    parser, a = _parse("nblib.lccp.monitor", "--budget-file", str(TOY_FILE))
    budget, _ = budget_from_args(parser, a)
    with pytest.raises(monitor.MonitorError, match=r"base 'toy'\) is not allowed for run .* trained at 'smoke'"):
        monitor.collect(Path(run.path), a, budget)
