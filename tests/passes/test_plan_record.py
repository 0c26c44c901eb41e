"""The plan record (passes/plan_record.py): immutable, one writer per field, one serialiser."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import spyre_rules
from spyre_rules.passes import plan_record as P

PACKAGE = Path(spyre_rules.__file__).parent


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts)


def _writer_calls() -> dict[str, set[str]]:
    """writer method (or the record's constructor) -> modules that call it."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "plan_record.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if name == "open" and getattr(fn, "value", None) is not None \
                    and getattr(fn.value, "id", None) != "OpPlanRecord":
                continue  # os.open, Path.open: not the record's constructor
            if name in ("OpPlanRecord", "Decision", "LoopRecord") and not isinstance(fn, ast.Name):
                continue  # e.g. lang's ast.Decision
            if name in P.WRITER_METHODS or name in P.CONSTRUCTORS or \
                    name in ("OpPlanRecord", "Decision", "LoopRecord"):
                found.setdefault(name, set()).add(_module_name(path))
    return found


def test_every_field_is_declared_with_its_one_writer():
    fields = [f.name for f in dataclasses.fields(P.OpPlanRecord)]
    assert fields == list(P.FIELD_WRITERS)
    written = [f for fs in P.WRITER_METHODS.values() for f in fs]
    assert sorted(written) == sorted(fields)  # each field by exactly one writer method


def test_each_writer_method_is_called_only_by_the_module_that_owns_its_fields():
    calls = _writer_calls()
    for method, fields in P.WRITER_METHODS.items():
        owners = {P.FIELD_WRITERS[f] for f in fields}
        assert calls.get(method, set()) == owners, method
    for method, caller in P.CONSTRUCTORS.items():
        assert calls.get(method, set()) == {caller}, method
    # records are built only through `open` / `copied_as`; decisions only by the decision writer
    assert "OpPlanRecord" not in calls
    assert calls["Decision"] == {P.FIELD_WRITERS["decision"]}  # host steps: open_host_step
    assert calls["LoopRecord"] == {P.FIELD_WRITERS["loop"]}


def test_records_are_immutable():
    record = P.OpPlanRecord.open("buf0", "buf0 (add)", "pointwise")
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.decision = P.Decision("plan")  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.decision.reason = "x"  # type: ignore[misc]
    placed = record.with_scratchpad({"lx": 0, "size_bytes": 64})
    assert record.scratchpad is P.UNSET and placed.scratchpad == {"lx": 0, "size_bytes": 64}


def test_the_serialiser_leaves_out_what_no_writer_said_in_plan_json_order():
    record = P.OpPlanRecord.open("buf0", "buf0 (add)", "pointwise")
    assert record.as_dict() == {"op": "buf0", "description": "buf0 (add)", "kind": "pointwise",
                                "decision": "no plan", "rule_trace": []}
    record = record.with_layout({"dtype": "float16"}).with_decision(P.Decision(
        decision="plan", source="automatic", levels=((1, 5),), own_plan=((1, 5),), hint_ids=(10000,),
        reason="output span overflow", rule="grouping.new_run", rule_message=None))
    record = record.with_loop(P.LoopRecord((0,), (5,), ((1,),), ((),), "writes full buffer"))
    out = record.as_dict()
    assert list(out) == ["op", "description", "kind", "decision", "rule_trace", "source", "levels",
                         "own_plan", "hint_ids", "reason", "rule", "rule_message", "loop", "layout"]
    assert (out["levels"], out["own_plan"], out["hint_ids"], out["rule_message"]) == (
        [[1, 5]], [[1, 5]], [10000], None)
    assert out["loop"] == {"loop_group_id": [0], "loop_count": [5], "loop_tiled_dims": [[1]],
                           "loop_tiled_reduction_dims": [[]], "propagation": "writes full buffer"}
    copy = record.copied_as("buf1", "buf1 (copy of the buf0 tile into a full buffer)", "copy")
    assert (copy.op, copy.kind, copy.decision.rule_trace, copy.decision.levels) == (
        "buf1", "copy", (), ((1, 5),))
