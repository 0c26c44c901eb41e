"""The distribution ships every subpackage and the bundled grammar/rules."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_subpackage_is_listed():
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "spyre_rules").rglob("__init__.py")
    }
    missing = on_disk - listed
    assert not missing, f"add to pyproject [tool.setuptools] packages: {sorted(missing)}"


def test_distribution_metadata():
    project = _pyproject()["project"]
    assert project["name"] == "spyre-rules"
    assert project["requires-python"] == ">=3.11"
    assert "torch==2.13.0" in project["dependencies"]
    assert {"sympy", "lark==1.3.1", "numpy"} <= set(project["dependencies"])
    assert {"pytest", "syrupy", "hypothesis"} <= set(project["optional-dependencies"]["test"])
    assert project["scripts"]["spyre-rules"] == "spyre_rules.cli:main"
    assert project["entry-points"]["torch_dynamo_backends"]["spyre_rules"] == (
        "spyre_rules.backend:spyre_rules_backend"
    )


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = "python3 -m pip install -e '.[test]' && python3 -m pytest -q -n auto"
    assert command in readme
    assert command in ci


def test_bundled_resources_resolve():
    from spyre_rules import resources

    assert resources.rules_dir() == ROOT / "rules"
    assert resources.grammar_file().parent == ROOT / "grammar"
