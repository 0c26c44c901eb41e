"""Whether user hints win over automatic plans is decided by the rules alone."""

from __future__ import annotations

import shutil

import pytest

from spyre_rules import config
from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.engine.policy import clear_policy_cache
from spyre_rules.hints import declare_tensor_dim, name_tensor_dims, spyre_hint
from spyre_rules.resources import rules_dir

from pipeline_helpers import capture_auto, h


def _hinted_and_free(x, y):
    with spyre_hint(slices={"H": 4}):
        a = x + 1
    b = y * 2
    return a, b


def _without(tmp_path, edits):
    target = tmp_path / "rules"
    shutil.copytree(rules_dir(), target)
    for name, old in edits:
        text = (target / name).read_text()
        assert old in text
        (target / name).write_text(text.replace(old, ""))
    return target


def test_a_policy_that_lets_automatic_plans_win_is_refused_naming_the_rule(tmp_path):
    """Without the rules' "manual hints win" the engine tiles the hinted op too; the
    pipeline does not pick a winner in Python, it refuses the graph."""
    declare_tensor_dim("H", 20)
    x, y = h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1)
    name_tensor_dims(x, [None, "H", None, None])
    rules = _without(tmp_path, [
        ("planner.rules", 'skip user_hints\n    when has_user_hints(op)\n'
                          '    because "{op} carries user spyre_hint dims; manual hints win";'),
        ("grouping.rules", 'pass user_hinted\n    when has_user_hints(op)\n'
                           '    because "{op} carries user spyre_hint dims; manual hints win";'),
    ])
    clear_policy_cache()
    try:
        with config.patch(rules_path=str(rules)), pytest.raises(UnsupportedGraph) as info:
            capture_auto(_hinted_and_free, x, y)
    finally:
        clear_policy_cache()
    assert str(info.value) == (
        "Cannot tile buf0: it carries user spyre_hint dims, and grouping rule `grouping.new_run` "
        "also tiles it automatically; the rules must decide that manual hints win "
        "(rules/grouping.rules `user_hinted`)")
