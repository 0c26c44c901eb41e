"""The engine decides and never writes the IR; groups have one typed representation."""

from __future__ import annotations

import torch

from spyre_rules import config
from spyre_rules.engine import decide_groups, plan_graph
from spyre_rules.engine.records import AutoHint, GroupLevel, TileGroup

from helpers import capture

ON = dict(max_span_bytes=8192, ignore_span_overflow_hints=False)


def _conform(a):
    c = a.half()
    d = c * 2
    return c, d


def _attributes(op):
    """Every attribute of the op, its loops and its layout, by identity and value."""
    out = {}
    for where, obj in (("op", op), ("data", op.data), ("layout", op.layout)):
        for name, value in vars(obj).items():
            out[(where, name)] = (id(value), list(value) if isinstance(value, list) else value)
    return out


def test_planning_and_grouping_change_no_attribute_of_any_op():
    ops = capture("reads_only", _conform, torch.randn(1, 20, 16, 64))
    before = [_attributes(op) for op in ops]
    with config.patch(**ON):
        plan_graph(ops)
        outcome = decide_groups(ops)
    assert [_attributes(op) for op in ops] == before
    assert all(getattr(op, "dim_hints", None) is None for op in ops)
    # ... and the decision is all there: the groups and the hints to stamp
    (group,) = outcome.groups
    assert isinstance(group, TileGroup) and isinstance(group.levels[0], GroupLevel)
    assert ([op.get_name() for op in group.ops], group.levels) == (
        ["buf0", "buf1"], [GroupLevel(10000, 10, False)])
    (hint,) = outcome.hints["buf1"]
    assert isinstance(hint, AutoHint)
    assert (hint.hint_id, hint.host_dim, hint.split, str(hint.loop_var)) == (10000, 1, 10, "d0")


def test_the_engine_defines_no_writer_of_dim_hints():
    """Only the hint passes write ``dim_hints``: the user's (hints/assign.py), the
    automatic groups' (hints/automatic.py), and a policy test's user-hint edit."""
    import ast
    from pathlib import Path

    import spyre_rules

    root = Path(spyre_rules.__file__).parent
    writers = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(t, ast.Attribute) and t.attr == "dim_hints" for t in targets):
                writers.add(str(path.relative_to(root)))
    assert writers == {"hints/assign.py", "hints/automatic.py", "commands/policy_runner.py"}
