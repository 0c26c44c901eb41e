"""The README documents the whole fact vocabulary of the bundled prelude."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _prelude_facts() -> list[str]:
    text = (ROOT / "rules" / "prelude.rules").read_text()
    return [m.group(1).strip() for m in re.finditer(r"^fact\s+([^;]+);", text, re.M)]


def test_every_prelude_fact_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    facts = _prelude_facts()
    assert len(facts) > 20
    missing = [sig for sig in facts if f"`{sig}`" not in readme]
    assert not missing, f"README fact table is missing: {missing}"


def test_readme_quick_start_is_two_commands():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line for line in quick.strip().splitlines() if line.strip()]
    assert len(commands) == 2
    assert commands[1] == "python3 -m pip install -e '.[test]' && python3 -m pytest -q -n auto"


def _support_matrix() -> dict[str, tuple[str, str]]:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Support matrix", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("case", "---"):
            rows[cells[0]] = (cells[1], cells[2])
    return rows


def test_support_matrix_has_the_reduction_level_rows():
    rows = _support_matrix()
    supported = {case: yes for case, (yes, _) in rows.items()}
    for case in (
        "Reduction-controlled spans (a sum's reduced axis, a matmul's k)",
        "Output and reduction levels in one plan",
        "Reduction / BMM consumer of an open run, producer-consumer fusion (LM-head restickify "
        "+ BMM; LayerNorm / RMSNorm on an auto-tiled residual add)",
        "argmax / argmin / welford (var, std, `var_mean`, LayerNorm statistics) over a tiled "
        "reduction dim",
        "Scalar/full reduction (`x.sum()`, `x.amax()`, `x.mean()`, `x.argmax()`, `x.var()` of a "
        "whole tensor)",
    ):
        assert supported.get(case) == "Yes", case
    assert supported["Symbolic layout metadata"] == "No"


def test_support_matrix_names_the_reductions_the_policy_splits():
    """The reductions the row lists are those `reduction_combines` (rules/planner.rules) lets
    a reduction level split; a policy edit that changes the set must change the row."""
    rules = (ROOT / "rules" / "planner.rules").read_text()
    rule = rules.split("require reduction_combines:", 1)[1].split("because", 1)[0]
    kinds = re.findall(r'"(\w+)"', rule.split("kind in {", 1)[1].split("}", 1)[0])
    row = _support_matrix()["Reduction-controlled spans (a sum's reduced axis, a matmul's k)"][1]
    listed = row.rsplit(")", 1)[1].strip("; ")
    assert listed == ("sum, matmul, max, min, any, argmax, argmin, welford, softmax_values; "
                      "prod over integers only")
    assert [k.replace("batchmatmul", "matmul").replace("welford_reduce", "welford") for k in kinds] \
        == ["sum", "matmul", "max", "min", "any", "argmax", "argmin", "welford", "softmax_values"]
    assert 'kind == "prod" and output_dtype(op) in {"int32", "int64", "bool"}' in rule


def _ignored_by_git(names: list[str]) -> set[str]:
    """The folders among ``names`` that the repository's .gitignore ignores: what a
    command leaves behind (``spyre-rules demo``'s ./spyre_rules_out, build output) is
    not part of the layout.  Outside a git checkout nothing is known to be ignored."""
    try:
        done = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--", *names],
                              capture_output=True, text=True, check=False)
    except OSError:
        return set()
    if done.returncode not in (0, 1):  # 1: none ignored; 128: not a git checkout
        return set()
    return set(done.stdout.split())


def test_repository_layout_names_every_folder():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Repository layout", 1)[1].split("```", 2)[1]
    named = {line.split()[0] for line in block.splitlines() if line.strip()}
    folders = [f"{p.name}/" for p in ROOT.iterdir()
               if p.is_dir() and not p.name.startswith((".", "__")) and p.name not in ("build", "dist")
               and not p.name.endswith(".egg-info")]
    top = set(folders) - _ignored_by_git(folders)
    package = {f"{p.name}/" for p in (ROOT / "spyre_rules").iterdir()
               if p.is_dir() and not p.name.startswith("__")}
    assert top - named == set() and package - named == set()
    assert {n for n in named if n.endswith("/")} <= top | package
