"""Chapters: paired and in sync, a papermill parameters cell, overrides that really change
the result, and bad parameters that fail at once naming the allowed values."""

import os
import re
from pathlib import Path

import jupytext
import nbformat
import papermill as pm
import pytest

from nblib.book.build import chapters, sync

REPO = Path(__file__).resolve().parent.parent
NB = REPO / "notebooks"
FIRST_WORK = ["01_introduction", "02_setup", "03_scaling_law", "04_constant_last4", "05_downstream"]


def test_chapters_are_named_by_the_papers_sections():
    names = chapters()
    assert names[:5] == FIRST_WORK
    assert len(names) == 12 and all(re.fullmatch(r"\d\d_[a-z0-9_]+", n) for n in names)
    assert names[-2:] == ["11_toy_design", "12_toy_ladders"]  # the appendix: how the toy was designed


def test_ipynb_in_sync_with_py():
    assert sync(check=True) == [], "run `python -m nblib.book sync`"


@pytest.mark.parametrize("name", chapters())
def test_parameters_cell(name):
    nb = jupytext.read(NB / f"{name}.py")
    assert nb.metadata["kernelspec"]["name"] == "python3"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged parameters"
    src = tagged[0].source
    for p in ("budget", "seed", "run_root"):
        assert re.search(rf"^{p} = ", src, re.M), p
    assert re.search(r'^budget = "toy"', src, re.M), "toy is the default budget"
    # papermill reads every assignment's type and help text (`papermill --help-notebook`); a
    # comment it cannot parse (an apostrophe, say) drops that parameter from the help
    found = pm.inspect_notebook(str(NB / f"{name}.ipynb"))
    assigned = re.findall(r"^(\w+) = ", src, re.M)
    assert sorted(found) == sorted(assigned), (name, sorted(set(assigned) - set(found)))


def test_every_chapter_prints_its_wall_time():
    for name in chapters():
        assert "ch.done()" in (NB / f"{name}.py").read_text(), name


@pytest.fixture
def smoke_env(tmp_path, monkeypatch):
    monkeypatch.setenv("NBLIB_RUN_ROOT", str(tmp_path / "runs"))
    monkeypatch.setenv("NBLIB_FIGURES_DIR", str(tmp_path / "figures"))
    return tmp_path


def _outputs(nb) -> str:
    text = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            text.append(o.get("text", "") or o.get("data", {}).get("text/plain", ""))
    return "\n".join(text)


def test_papermill_override_changes_the_result(smoke_env):
    """-p budget smoke must reach the chapter: its tables come from the smoke budget."""
    out = smoke_env / "intro_smoke.ipynb"
    nb = pm.execute_notebook(str(NB / "01_introduction.ipynb"), str(out), parameters={"budget": "smoke"},
                             kernel_name="python3", cwd=str(REPO), progress_bar=False)
    text = _outputs(nb)
    assert "budget=smoke" in text and "smoke N" in text and "toy N" not in text
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and 'budget = "smoke"' in injected[0].source


# Each case starts a kernel (about 5 CPU-s); an unknown scale, refused by the same Chapter call
# before the chapter's own list, is checked in this process below.
@pytest.mark.parametrize("name,param,value,allowed", [
    ("01_introduction", "budget", "huge", "smoke, toy, full"),
    ("04_constant_last4", "scale", "S1", "S3, S4, S5"),
])
def test_bad_parameter_fails_at_once_naming_allowed_values(smoke_env, name, param, value, allowed):
    params = {param: value}
    if param != "budget":
        params["budget"] = "smoke"
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(NB / f"{name}.ipynb"), str(smoke_env / "bad.ipynb"), parameters=params,
                            kernel_name="python3", cwd=str(REPO), progress_bar=False)
    msg = str(e.value)
    assert f"{param}={value!r}" in msg and allowed in msg
    # it failed in the first code cells, before any training
    assert not (smoke_env / "runs").exists() or not any((smoke_env / "runs").iterdir())


def test_an_unknown_scale_is_refused_with_every_scale_named(smoke_env):
    """Chapter 4's parameters cell passes `scale` to `Chapter`, which refuses a scale no budget
    has (naming them all) before the chapter's own list of allowed scales."""
    from nblib.book.chapter import Chapter
    from nblib.budgets import BudgetError

    with pytest.raises(BudgetError, match=r"scale='S9'.*S1, S2, S3, S4, S5"):
        Chapter("04_constant_last4", budget="smoke", scale="S9", allowed_scales=("S3", "S4", "S5"))
    assert "allowed_scales=(\"S3\", \"S4\", \"S5\")" in (NB / "04_constant_last4.py").read_text()
