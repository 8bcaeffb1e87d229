"""The package's shape, read from its source with `ast` (nothing is imported).

- No import cycle among nblib's modules, and no module importing one that imports it back
  (every import counts, top-level or inside a function).
- nblib modules import each other at module top: an import inside a function hides a loop.
- The layers keep their order: the run store never imports the trainer or the runner, the
  trainer never imports the runner, and models, data and metrics never import anything that
  trains, evaluates or draws.
"""

import ast
from pathlib import Path

import pytest

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
            # `from nblib import grid` imports the submodule nblib.grid
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
    assert {"nblib.runstore", "nblib.runner", "nblib.train", "nblib.models.engine"} <= set(MODULES)
    assert "nblib.runstore" in GRAPH["nblib.runner"] and "nblib.train" in GRAPH["nblib.runner"]


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
    ("nblib.runstore", "nblib.train"), ("nblib.runstore", "nblib.runner"), ("nblib.train", "nblib.runner"),
    ("nblib.models", "nblib.runstore"), ("nblib.data", "nblib.runstore"), ("nblib.metrics", "nblib.runstore"),
    ("nblib.scaling", "nblib.runstore"), ("nblib.grid", "nblib.runner"), ("nblib.evaluation", "nblib.experiments"),
    ("nblib.runstore", "nblib.figures"),
])
def test_layers_point_down(lower, upper):
    assert not _reaches(lower, upper), f"{lower} imports {upper}, a layer above it"


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
