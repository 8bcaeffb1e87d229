"""The package's shape, read from its source with `ast` (nothing is imported).

- No import cycle among nblib's modules, and no module importing one that imports it back
  (every import counts, top-level or inside a function).
- nblib modules import each other at module top: an import inside a function hides a loop.
- The layers keep their order: the run store never imports the trainer or the runner, the
  trainer never imports the runner, and models, data and metrics never import anything that
  trains, evaluates or draws.
- The packages keep the order of `LAYERS` (nblib/__init__.py's table): a package imports only
  packages in rows above its own, and the top level stays small enough to read as the book's
  table of contents.
- The notebooks call the library and plot: no fit or metric of `ANALYSIS_CALLS` and no model
  call (`model_calls_in_loops`) inside a loop, and no torch import.
"""

import ast
from pathlib import Path

import pytest

import subproc

PKG = Path(__file__).resolve().parents[1] / "nblib"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str) -> list[tuple[str, bool]]:
    """(nblib module imported, whether the import is at module top) for every import."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), filename=str(path))
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, node, path.name == "__init__.py")
            # `from nblib import grid` imports the submodule nblib.lccp.grid
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in MODULES and "." in t:  # `import nblib.models.llama.Llama` -> the module
                t = t.rsplit(".", 1)[0]
            if t in MODULES and t != module:
                out.append((t, id(node) in top))
    return out


GRAPH = {m: sorted({t for t, _ in imports_of(m)}) for m in MODULES}


def _cycles(graph: dict) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_parser_sees_the_package():
    assert {"nblib.store.runstore", "nblib.training.runner", "nblib.training.train", "nblib.models.engine"} <= set(MODULES)
    assert "nblib.store.runstore" in GRAPH["nblib.training.runner"] and "nblib.training.train" in GRAPH["nblib.training.runner"]


def test_cycle_finder_finds_a_planted_cycle():
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert _cycles({"a": ["b"], "b": []}) == []


def test_no_import_cycles():
    assert _cycles(GRAPH) == []


def test_no_module_imports_one_that_imports_it_back():
    back = [(a, b) for a, targets in GRAPH.items() for b in targets if a in GRAPH[b]]
    assert back == []


def test_nblib_imports_are_at_module_top():
    lazy = [(m, t) for m in MODULES for t, at_top in imports_of(m) if not at_top]
    assert lazy == []


def _reaches(src: str, dst: str) -> bool:
    seen, todo = set(), [src]
    while todo:
        m = todo.pop()
        if m == dst:
            return True
        if m not in seen:
            seen.add(m)
            todo += GRAPH[m]
    return False


@pytest.mark.parametrize("lower, upper", [
    ("nblib.store.runstore", "nblib.training.train"), ("nblib.store.runstore", "nblib.training.runner"), ("nblib.training.train", "nblib.training.runner"),
    ("nblib.models", "nblib.store.runstore"), ("nblib.data", "nblib.store.runstore"), ("nblib.metrics", "nblib.store.runstore"),
    ("nblib.lccp.scaling", "nblib.store.runstore"), ("nblib.lccp.grid", "nblib.training.runner"), ("nblib.lccp.evaluation", "nblib.lccp.experiments"),
    ("nblib.store.runstore", "nblib.chapters.figures"),
])
def test_layers_point_down(lower, upper):
    assert not _reaches(lower, upper), f"{lower} imports {upper}, a layer above it"


# The package order, lowest row first (the table in nblib/__init__.py). A package may import
# its own modules and the packages of rows above it; never a package of its own row or below.
# budgets sits below data: a budget file names a corpus and a tokenizer, so budgets read data
# (budgets.budget_file checks their specs, budgets.own_data retrains the BPE), while data reads
# no budget (it imports only store and cli). The chapters' content sits above the probes, whose
# ladders several parts read, and below the book runner, which writes the scorecard page and
# checks the figures from it. errors.py joined cli.py (UserError beside the error path that prints
# it), so the top level stays at 16 entries with chapters/ added.
LAYERS = [("stats",), ("models",), ("cli",), ("store",), ("data",), ("budgets",), ("export",),
          ("metrics", "evals"), ("training",), ("lccp", "gemma"), ("probes",), ("chapters",), ("book",)]


def package_of(module: str) -> str:
    """`nblib.lccp.scaling.fit` -> `lccp`; `nblib.budgets` -> `budgets`; `nblib` -> ``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layering_violations(graph: dict, layers=LAYERS) -> list[tuple[str, str]]:
    """(importer, imported) pairs whose packages break the order of `layers`. The package
    root `nblib` is left out: it holds only `__version__` and installs the old names."""
    rank = {p: i for i, row in enumerate(layers) for p in row}
    bad = []
    for m, targets in graph.items():
        src = package_of(m)
        for t in targets:
            dst = package_of(t)
            if src and dst and src != dst and rank[dst] >= rank[src]:
                bad.append((m, t))
    return sorted(bad)


def test_every_package_has_a_layer():
    entries = {p.stem for p in PKG.iterdir() if (p.suffix == ".py" or (p / "__init__.py").exists())} - {"__init__"}
    assert entries == {p for row in LAYERS for p in row}


def test_top_level_is_small():
    entries = [p.name for p in PKG.iterdir() if p.name != "__pycache__"]
    assert len(entries) <= 16, sorted(entries)


def test_packages_import_only_rows_above_them():
    assert layering_violations(GRAPH) == []


@pytest.mark.parametrize("planted", [("nblib.store.runstore", "nblib.training.train"),  # store -> training: up
                                     ("nblib.lccp.grid", "nblib.gemma.pair"),            # siblings
                                     ("nblib.models.llama", "nblib.data")])               # models -> data: up
def test_layering_check_finds_a_planted_violation(planted):
    graph = {m: list(t) for m, t in GRAPH.items()}
    graph[planted[0]].append(planted[1])
    assert layering_violations(graph) == [planted]


# The book runner: run, time, build, check, plan and report (issue 67). What the chapters say
# and draw lives in nblib.chapters, budget files in nblib.budgets, the probe CLIs in nblib.probes.
RUNNER = {"__init__", "__main__", "build", "chapter", "executed", "html", "nbval_runs", "plan", "reader", "run_report", "summary",
          "toc"}


def test_the_book_package_is_the_runner_only():
    files = {p.stem: p for p in (PKG / "book").glob("*.py")}
    assert set(files) == RUNNER, sorted(set(files) ^ RUNNER)
    assert not [p for p in (PKG / "book").iterdir() if p.is_dir() and p.name != "__pycache__"]
    lines = sum(len(p.read_text().splitlines()) for p in files.values())
    assert lines < 2200, f"nblib/book holds {lines} lines"


def test_the_root_imports_only_the_cli():
    assert GRAPH["nblib"] == ["nblib.cli"]


@pytest.mark.parametrize("package", sorted(m for m, p in MODULES.items() if p.name == "__init__.py" and m != "nblib"))
def test_each_package_states_its_job_and_imports(package):
    doc = ast.get_docstring(ast.parse(MODULES[package].read_text())) or ""
    assert doc.strip(), f"{package} has no docstring"
    if package.count(".") == 1:  # the top-level packages say what they may import
        assert "may import" in doc.lower() or "imports no" in doc.lower(), package


# ---------------------------------------------------------------------------------------
# notebooks: narrative, calls and plots; the analysis lives in nblib
# ---------------------------------------------------------------------------------------
NOTEBOOKS = sorted((PKG.parent / "notebooks").glob("[0-9][0-9]_*.py"))
# fits, evaluations and metrics: a loop over these belongs in nblib (scaling.variant_ablation, ...)
ANALYSIS_CALLS = {"holdout_eval", "holdout_evals", "fit_law", "fit_additive_law", "fit_fixed_model_law", "bootstrap",
                  "fit_varpro", "lins_ccc", "r2_log", "mape_log", "ape_log", "position_loss", "copy_gain",
                  "evaluate", "long_ppl", "short_ppl", "merge"}


def _called_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def analysis_in_loops(source: str) -> list[str]:
    """Names of fit/metric calls made inside a for loop or a comprehension."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.For, ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp)):
            found += [_called_name(c) for c in ast.walk(node)
                      if isinstance(c, ast.Call) and _called_name(c) in ANALYSIS_CALLS]
    return found


def test_loop_detector_flags_a_fit_loop():
    assert analysis_in_loops("for v in VARIANTS:\n    r = scaling.holdout_eval(t, a, b, law=v)\n") == ["holdout_eval"]
    assert analysis_in_loops("x = {k: lins_ccc(a, b) for k in ks}\n") == ["lins_ccc"]
    assert analysis_in_loops("r = scaling.holdout_eval(t, a, b)\nfor x in r:\n    ax.plot(x)\n") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebooks_hold_no_fit_or_metric_loops(path):
    assert analysis_in_loops(path.read_text()) == []


# The general rule: a notebook calls the library and plots; it never loops over model calls,
# and it never imports torch (so it computes no tensors and enters no torch.no_grad of its
# own). A model is what a call named `load_model` or `*_model(s)` returns (`run.load_model`,
# `pair.pair_models`, `extension.extension_models`, `build_model`, ...), a name bound to one,
# an entry of one (`models["A"]`), a container holding one, or `.eval()` of one; a loop
# variable over `.items()` / `.values()` of models (or over models themselves) is one too.
# Inside a loop body or a comprehension's element, a call that loads or builds a model, calls
# a model or a method of one (`m(x)`, `m.generate(...)`), or hands a model to a function
# (`page_nll(m, docs)`, `head_ablation(m, heads)`) is a model call; so is `map` over models.
# What a loop header or a comprehension's first iterable evaluates once is not in the loop
# (`for k, v in f(models).items()` calls f once). The fits and statistics of the list above
# involve no model, so that list stays.
RETURNS_MODELS = ("load_model",)
MODEL_METHODS_RETURNING_MODELS = {"eval", "train", "to", "float", "double", "half", "cpu", "cuda"}
ITERATION_WRAPPERS = {"enumerate", "zip", "sorted", "reversed", "list", "tuple"}
CONTAINER_METHODS = {"items", "values", "keys", "get"}  # of a dict of models: no model runs


def _returns_models(call: ast.Call) -> bool:
    name = _called_name(call)
    return name in RETURNS_MODELS or name.endswith(("_model", "_models"))


def _is_model(node, models: set) -> bool:
    """Whether the expression is a model, or a container or entry of models (see above)."""
    if isinstance(node, ast.Name):
        return node.id in models
    if isinstance(node, ast.Call):
        f = node.func
        return _returns_models(node) or (isinstance(f, ast.Attribute) and f.attr in MODEL_METHODS_RETURNING_MODELS
                                         and _is_model(f.value, models))
    if isinstance(node, (ast.Subscript, ast.Starred)):
        return _is_model(node.value, models)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_model(e, models) for e in node.elts)
    if isinstance(node, ast.Dict):
        return any(_is_model(v, models) for v in node.values)
    if isinstance(node, ast.IfExp):
        return _is_model(node.body, models) or _is_model(node.orelse, models)
    return False


def _names_in(target) -> set:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _bound_models(target, it, models: set) -> set:
    """The names of a loop's `target` that iterating over `it` binds to models: the values of
    `models.items()` (not the keys), every name for `.values()` or models themselves, and
    through enumerate, zip, sorted, list, ... element by element."""
    call = it if isinstance(it, ast.Call) else None
    method = call.func.attr if call and isinstance(call.func, ast.Attribute) else None
    wrapper = call.func.id if call and isinstance(call.func, ast.Name) else None
    two = isinstance(target, ast.Tuple) and len(target.elts) == 2
    if method in ("items", "values") and _is_model(call.func.value, models):
        return _names_in(target.elts[1] if method == "items" and two else target)
    if wrapper == "enumerate" and call.args:
        return _bound_models(target.elts[1], call.args[0], models) if two else _bound_models(target, call.args[0], models)
    if wrapper == "zip":
        if isinstance(target, ast.Tuple) and len(target.elts) == len(call.args):
            return set().union(*(_bound_models(t, a, models) for t, a in zip(target.elts, call.args)))
        return _names_in(target) if any(_bound_models(target, a, models) for a in call.args) else set()
    if wrapper in ITERATION_WRAPPERS and call.args:
        return _bound_models(target, call.args[0], models)
    return _names_in(target) if _is_model(it, models) else set()


def _yields_models(it, models: set) -> bool:
    """Whether iterating over `it` gives models (or tuples holding them)."""
    return bool(_bound_models(ast.Name(id="_"), it, models))


def model_names(tree: ast.AST) -> set:
    """Every name the notebook binds to a model (assignments and loop variables), to a fixpoint."""
    models: set = set()
    while True:
        before = len(models)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and _is_model(node.value, models):
                for t in node.targets:
                    models |= _names_in(t)
            elif isinstance(node, ast.AnnAssign) and node.value is not None and _is_model(node.value, models):
                models |= _names_in(node.target)
            elif isinstance(node, (ast.For, ast.comprehension)):
                models |= _bound_models(node.target, node.iter, models)
        if len(models) == before:
            return models


def _loop_bodies(tree: ast.AST):
    """(loop node, the parts of it that run once per iteration)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.For):
            yield node, [*node.body, *node.orelse]
        elif isinstance(node, ast.While):
            yield node, [node.test, *node.body, *node.orelse]
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for i, gen in enumerate(node.generators):
                parts += [*gen.ifs, *([gen.iter] if i else [])]
            yield node, parts


def model_calls_in_loops(source: str) -> list[str]:
    """"line N: what" for every model call inside a loop or comprehension of `source`, and
    every `map` over models (the rule above)."""
    tree = ast.parse(source)
    models = model_names(tree)
    found = []
    for loop, parts in _loop_bodies(tree):
        for part in parts:
            for c in ast.walk(part):
                if not isinstance(c, ast.Call):
                    continue
                f = c.func
                if _returns_models(c):
                    what = f"loads or builds a model ({_called_name(c)})"
                elif _is_model(f, models) or (isinstance(f, ast.Attribute) and f.attr not in CONTAINER_METHODS
                                              and _is_model(f.value, models)):
                    what = f"calls a model ({ast.unparse(f)})"
                elif any(_is_model(a, models) for a in [*c.args, *(k.value for k in c.keywords)]):
                    what = f"hands a model to {_called_name(c) or ast.unparse(f)}"
                else:
                    continue
                found.append(f"line {c.lineno}: a loop from line {loop.lineno} {what}")
    for c in ast.walk(tree):
        if isinstance(c, ast.Call) and _called_name(c) == "map" and any(_yields_models(a, models) for a in c.args[1:]):
            found.append(f"line {c.lineno}: map over models")
    return sorted(set(found), key=lambda s: int(s.split()[1].rstrip(":")))


def torch_imports(source: str) -> list[int]:
    """Lines of `source` that import torch or one of its modules."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        if any(n == "torch" or n.startswith("torch.") for n in names):
            lines.append(node.lineno)
    return lines


# Planted cases: measurement loops of the kind that belongs in nblib (flagged), and notebook
# code that is not (clean)
PAIR = "models = pair.pair_models(runs)\n"
FLAGGED = {
    "a dict comprehension over models": PAIR + "final = {k: pair.heldout_loss(m, w) for k, m in models.items()}\n",
    "a method of the model in a loop": PAIR + "for k, m in models.items():\n    print(m.generate(x, 8))\n",
    "a model loaded per checkpoint": "for c in ft.checkpoints():\n    v = X.page_nll(ft.load_model(c.step), docs)\n",
    "a model loaded per run in a comprehension": "nll = {k: X.page_nll(r.load_model(), d) for k, r in ladder.items()}\n",
    "an enumerate over models": PAIR + "for row, (k, m) in enumerate(models.items()):\n    p = M.attention_probs(m, x)\n",
    "a model bound before the loop": 'B = runs["B"].load_model()\n'
                                     "for k, r in picks.items():\n    q = P.qk_pre_rope(B, text, r.layer)\n",
    "a model called directly": PAIR + 'A, B = models["A"], models["B"]\nfor x in xs:\n    out.append(A(x))\n',
    "models inside a literal": 'm = {"A": run.load_model(), "B": b}\nfor name, mm in m.items():\n    acc.append(f(mm, p))\n',
    "a model handed to a context manager": PAIR + "for k, m in models.items():\n"
                                                  "    with M.head_ablation(m, heads):\n        y = g()\n",
    "models built in a loop": "for fam, (p, f) in families.items():\n"
                              "    for n, m in X.breakdown_models(p, f, (4,)).items():\n        pass\n",
    "a while loop": PAIR + "while t < 3:\n    t += X.page_nll(models['A'], d).mean()\n",
    "map over models": PAIR + "out = list(map(score, models.values()))\n",
}
CLEAN = {
    "a library call per model, outside any loop": PAIR + "nll = X.page_nlls(models, docs)\n",
    "plotting the results": "nll = X.page_nlls(models, docs)\nfor name, v in nll.items():\n    ax.plot(v.mean(0), label=name)\n",
    "relabelling models, no call": PAIR + "t = table({NAMES[k]: m for k, m in models.items()})\n",
    "the keys of models are no models": PAIR + "labels = {k: label(k) for k, m in models.items()}\n",
    "attributes of a model": 'B = runs["B"].load_model()\ng = [i for i, w in enumerate(B.layer_windows) if w is None]\n',
    "a call in the loop header runs once": PAIR + "for k, c in copy_curves(models, 8).items():\n    ax.plot(c)\n",
    "counting parameters": 'n = sum(p.numel() for p in runs["A"].load_model().parameters())\n',
}


@pytest.mark.parametrize("case", FLAGGED)
def test_model_loop_rule_flags_a_planted_loop(case):
    assert model_calls_in_loops(FLAGGED[case]) != []


@pytest.mark.parametrize("case", CLEAN)
def test_model_loop_rule_passes_library_calls_and_plots(case):
    assert model_calls_in_loops(CLEAN[case]) == []


def test_torch_import_finder():
    assert torch_imports("import torch\nimport torch.nn as nn\nfrom torch import nn\nimport numpy\n") == [1, 2, 3]
    assert torch_imports("import torchvision\nfrom nblib import torch_free\n") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebooks_never_loop_over_model_calls(path):
    assert model_calls_in_loops(path.read_text()) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebooks_never_import_torch(path):
    assert torch_imports(path.read_text()) == []


# ---------------------------------------------------------------------------------------
# the first layout's names still work (nblib.cli.MOVED_MODULES)
# ---------------------------------------------------------------------------------------
OLD_COMMANDS = [("nblib.train", "nblib.training.train"), ("nblib.merge", "nblib.lccp.merge"),
                ("nblib.scaling", "nblib.lccp.scaling"), ("nblib.monitor", "nblib.lccp.monitor"),
                ("nblib.book.design_probe", "nblib.probes.design_probe"),
                ("nblib.book.design_needles", "nblib.probes.design_needles"),
                ("nblib.book.scorecard", "nblib.chapters.claims.scorecard")]

# `python -m OLD --help` for every old command, in one interpreter: runpy.run_module is what `-m`
# calls (its module lookup goes through the finder that maps the old name), and one process
# instead of seven saves six Python starts.
_RUN_OLD = """
import contextlib, io, json, runpy, sys, warnings
out = {}
for old in sys.argv[1:]:
    so, se = io.StringIO(), io.StringIO()
    sys.argv = [old, "--help"]
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se), warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda m, c, f, l, file=None, line=None: print(f"{c.__name__}: {m}", file=sys.stderr)
        try:
            runpy.run_module(old, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = e.code
    out[old] = [code, so.getvalue(), se.getvalue()]
print(json.dumps(out))
"""


def test_old_commands_still_run_and_name_the_new_one():
    import json
    import sys
    r = subproc.run([sys.executable, "-c", _RUN_OLD, *[old for old, _ in OLD_COMMANDS]],
                    capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for old, new in OLD_COMMANDS:
        code, stdout, stderr = got[old]
        assert code in (0, None), (old, stderr)
        assert "usage:" in stdout, (old, stdout)
        assert f"{old} moved to {new}" in stderr, (old, stderr)


def _moved_modules() -> dict:
    """nblib.cli.MOVED_MODULES, read from its source (collecting the tests imports nothing)."""
    tree = ast.parse(MODULES["nblib.cli"].read_text())
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "MOVED_MODULES")
    return ast.literal_eval(node.value)


def test_moved_name_maps_old_names_and_their_submodules():
    from nblib.cli import MOVED_MODULES, moved_name
    assert MOVED_MODULES == _moved_modules()
    assert moved_name("nblib.scaling.fit") == "nblib.lccp.scaling.fit" and moved_name("nblib.data") is None
    assert moved_name("nblib.book.chapters") == "nblib.book.toc" and moved_name("nblib.book.chapter") is None


@pytest.mark.parametrize("old, new", sorted(_moved_modules().items()))
def test_each_old_name_imports_as_its_new_module(old, new):
    import importlib
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert importlib.import_module(old) is importlib.import_module(new)
    assert importlib.import_module(new).__spec__.name == new  # the alias did not rename it
