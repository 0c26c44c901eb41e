"""Policy numbers live in rules/, never in Python.

Two scans of the Python sources (their ASTs, so comments and docstrings do not
count):

* the engine (``spyre_rules/engine``, logic modules) may contain no integer
  literal but 0, 1, -1 and 2 (indexing, counting, "no split") -- any other
  number in engine code would be a bound, a cap or a threshold the rules do not
  control.  The only exception is a named module constant listed below with the
  reason it is not policy;
* the facts (``spyre_rules/facts/op_facts.py``, ``per_tile.py``, ``records.py``)
  may not contain any number that limits.rules defines (3, 16, 512, 64, 5 ...),
  except 0, 1 and 2.

And the rules really are the source: changing a bound in a copy of the rules
changes the bound the loaded engine uses.
"""

from __future__ import annotations

import ast
from pathlib import Path

from spyre_rules.engine.policy import get_policy, load_policy

from test_policy_loading import rules_copy

ROOT = Path(__file__).resolve().parents[2] / "spyre_rules"
ENGINE = ROOT / "engine"
FACTS = [ROOT / "facts" / name for name in (
    "op_facts.py", "op_kind.py", "hint_kinds.py", "access.py", "alignment.py", "layout_facts.py",
    "snapshot.py", "op_cache.py", "registry.py", "per_tile.py", "records.py")]
HARMLESS = {0, 1, -1, 2}
# Module constant -> why it is not policy.
NAMED_EXCEPTIONS = {
    "HINT_ID_BASE": "the first synthetic hint id: an id convention shared with coarse tiling "
                    "(docs/layout_model.md §5.1: hint ids from 10000), not a bound on planning",
    "MAX_TILE_COMBOS": "work bound of the span verifier's veto (engine/veto.py), which must not depend "
                       "on rules/; beyond it a sound analytic bound is used, so it never admits a plan",
    "MAX_POINTS": "work bound of the span verifier's veto, as MAX_TILE_COMBOS",
    "LISTED_COUNTS": "how many refused split counts a refusal message spells out (engine/legality.py); "
                     "message length, not a bound on planning",
}
# Example programs are data (shapes and limits of demos), not engine logic.
NOT_LOGIC = {"examples.py"}


def int_literals(path: Path) -> list[tuple[int, int, str | None]]:
    """(value, line, name of the module constant it initialises or None)."""
    tree = ast.parse(path.read_text(), str(path))
    named = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Constant):
            named[id(node.value)] = node.targets[0].id
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            out.append((node.value, node.lineno, named.get(id(node))))
    return out


def test_engine_has_no_policy_numbers():
    files = sorted(p for p in ENGINE.glob("*.py") if p.name not in NOT_LOGIC)
    assert len(files) >= 8
    found = []
    for path in files:
        for value, line, name in int_literals(path):
            if value in HARMLESS or name in NAMED_EXCEPTIONS:
                continue
            found.append(f"{path.name}:{line}: {value}")
    assert found == [], "policy numbers belong in rules/limits.rules:\n" + "\n".join(found)


def _limits_rules_numbers() -> set[int]:
    """The integer constants rules/limits.rules defines for the planner.  Left out: the
    gathered-windows cap, which only the backend reads (backend/gathered_windows.py), and
    collectives.rules' chunk cap; neither is a planning limit, and the facts meet their
    4096 as a cache size."""
    from spyre_rules.lang.driver import check_paths

    consts = check_paths(None).checker.consts
    return {info.value for info in consts.values()
            if info.decl.name.span.file.endswith("limits.rules") and type(info.value) is int
            and info.decl.name.name != "_MAX_GATHER_WINDOWS"}


def test_facts_do_not_hard_code_limits():
    limits = _limits_rules_numbers() - HARMLESS
    assert {3, 16, 512, 16384, 5} <= limits
    found = [f"{path.name}:{line}: {value}" for path in FACTS
             for value, line, _ in int_literals(path) if value in limits]
    assert found == []


def test_the_scan_sees_numbers():
    """The scan is not vacuous: it finds the numbers of a module that has some."""
    values = {v for v, _, _ in int_literals(ENGINE / "examples.py")}
    assert {8192, 65536} <= values


def test_bounds_come_from_the_rules(tmp_path):
    target = rules_copy(tmp_path, {"limits.rules": [
        ("const MAX_TILE_COMBOS = 512;", "const MAX_TILE_COMBOS = 7;"),
        ("const MAX_SPLITS_PER_DIM = 16;", "const MAX_SPLITS_PER_DIM = 9;")]})
    bounds = load_policy([str(target)]).program.search.bounds
    assert bounds["max_combos"] == 7 and bounds["max_splits_per_dim"] == 9
