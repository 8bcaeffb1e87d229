"""requirements.txt is the one dependency list: environment.yml and pyproject.toml use it."""

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def requirement_names(path):
    names = []
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.append(re.split(r"[<>=!~\[ ]", line)[0].lower())
    return names


def test_torch_is_pinned_for_cpu():
    lines = [l.split("#")[0].strip() for l in (REPO / "requirements.txt").read_text().splitlines()]
    assert "torch==2.13.0" in lines


def test_design_card_packages_are_listed():
    names = requirement_names(REPO / "requirements.txt")
    for pkg in ("torch", "jupyterlab", "jupytext", "papermill", "matplotlib", "seaborn", "scipy", "safetensors",
                "nbval"):
        assert pkg in names, pkg


def test_environment_yml_installs_requirements_txt():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = [d for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert pip and "-r requirements.txt" in pip[0]["pip"]
    conda_names = [re.split(r"[<>=! ]", d)[0] for d in env["dependencies"] if isinstance(d, str)]
    # nothing the requirements list also pins may be installed by conda instead
    assert not set(conda_names) & set(requirement_names(REPO / "requirements.txt")) - {"pip"}
    assert "python" in conda_names and "nodejs" in conda_names


def test_pyproject_reads_requirements_txt():
    text = (REPO / "pyproject.toml").read_text()
    assert 'dynamic = ["dependencies"]' in text
    assert re.search(r'dependencies\s*=\s*\{\s*file\s*=\s*\["requirements.txt"\]', text)
