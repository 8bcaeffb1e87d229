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
    ("nblib.store.runstore", "nblib.book.figures"),
])
def test_layers_point_down(lower, upper):
    assert not _reaches(lower, upper), f"{lower} imports {upper}, a layer above it"


# The package order, lowest row first (the table in nblib/__init__.py). A package may import
# its own modules and the packages of rows above it; never a package of its own row or below.
LAYERS = [("errors", "stats"), ("models",), ("cli",), ("store",), ("budgets",), ("data",), ("export",),
          ("metrics", "evals"), ("training",), ("lccp", "gemma"), ("book",)]


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
    assert len(entries) <= 15, sorted(entries)


def test_packages_import_only_rows_above_them():
    assert layering_violations(GRAPH) == []


@pytest.mark.parametrize("planted", [("nblib.store.runstore", "nblib.training.train"),  # store -> training: up
                                     ("nblib.lccp.grid", "nblib.gemma.pair"),            # siblings
                                     ("nblib.models.llama", "nblib.data")])               # models -> data: up
def test_layering_check_finds_a_planted_violation(planted):
    graph = {m: list(t) for m, t in GRAPH.items()}
    graph[planted[0]].append(planted[1])
    assert layering_violations(graph) == [planted]


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


# ---------------------------------------------------------------------------------------
# the first layout's names still work (nblib.cli.MOVED_MODULES)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("old, new", [("nblib.train", "nblib.training.train"), ("nblib.merge", "nblib.lccp.merge"),
                                      ("nblib.scaling", "nblib.lccp.scaling"), ("nblib.monitor", "nblib.lccp.monitor")])
def test_old_commands_still_run_and_name_the_new_one(old, new):
    import subprocess
    import sys
    r = subproc.run([sys.executable, "-m", old, "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "usage:" in r.stdout
    assert f"{old} moved to {new}" in r.stderr


def test_old_import_names_give_the_same_module():
    import importlib
    import warnings
    from nblib.cli import MOVED_MODULES, moved_name
    assert moved_name("nblib.scaling.fit") == "nblib.lccp.scaling.fit" and moved_name("nblib.data") is None
    for old, new in MOVED_MODULES.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            assert importlib.import_module(old) is importlib.import_module(new)
        assert importlib.import_module(new).__spec__.name == new  # the alias did not rename it
