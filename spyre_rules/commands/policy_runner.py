"""Run one policy test: capture its program, let the engine decide, compare.

The engine is used through its public API only (``plan_graph``,
``explain_op``, ``group_operations`` with ``trace=``); every step it records is
kept for ``--coverage``.  A failure is a list of readable lines: expected vs
actual per op, then the rule trace of that op.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from spyre_rules.commands.policy_files import Edit, GroupExpect, OpExpect, PolicyTest

__all__ = ["HarnessError", "Outcome", "deciding_rule", "run_test"]


class HarnessError(Exception):
    """The test's program cannot be built or captured, or an edit names no op."""


@dataclasses.dataclass
class Outcome:
    test: PolicyTest
    failures: list[str]            # readable lines; empty: passed
    steps: list[Any]               # every TraceStep recorded (planner and grouping)

    @property
    def passed(self) -> bool:
        return not self.failures


_CAPTURED: dict[tuple, Any] = {}   # program key -> captured ops (edit-free programs only)


def _program(test: PolicyTest) -> tuple[Any, list[Any], int | None]:
    """(function, inputs, the example's span limit or None)."""
    from spyre_rules.commands.policy_programs import ProgramError, build_program
    from spyre_rules.engine.examples import EXAMPLES, example_inputs

    if test.example is not None:
        ex = EXAMPLES.get(test.example)
        if ex is None:
            raise HarnessError(f"unknown example {test.example!r}; known: {', '.join(EXAMPLES)}")
        return ex.fn, example_inputs(ex.shapes, ex.dtype, ex.index_inputs), ex.max_span_bytes
    try:
        fn, inputs = build_program(test.program, test.inputs)
    except ProgramError as err:
        raise HarnessError(f"program: {err}") from None
    return fn, inputs, None


def _capture(test: PolicyTest, rules_path: str | None) -> tuple[Any, int | None]:
    """The program's ops as the backend hands them to the planner, captured under the
    test's settings: the seam's edits may depend on them (a gathered read whose rows
    alone overflow the limit is read in windows, backend/gathered_windows.py)."""
    import spyre_rules
    from spyre_rules import config

    fn, inputs, limit = _program(test)
    settings = _settings(test, limit, rules_path)
    key = (test.example, test.program, tuple(test.inputs.items()), tuple(sorted(settings.items())))
    if not test.edits and key in _CAPTURED:
        return _CAPTURED[key]
    try:
        with config.patch(**settings):
            ops = spyre_rules.capture_operations(fn, *inputs)
    except Exception as err:  # noqa: BLE001 - the backend refuses the program: a harness error
        raise HarnessError(f"capturing the program failed: {type(err).__name__}: {err}") from None
    if not test.edits:
        _CAPTURED[key] = (ops, limit)
    return ops, limit


def _apply(edit: Edit, ops: Any, hint_id: int) -> None:
    import sympy
    from torch._inductor import ir

    from spyre_rules.facts import op_facts as facts
    from spyre_rules.facts.tiled_layout import FixedTiledLayout
    from spyre_rules.hints import DimHint

    op = next((o for o in ops if o.get_name() == edit.op), None)
    if op is None:
        raise HarnessError(f"edit {edit.make}: no op {edit.op} (ops: {', '.join(o.get_name() for o in ops)})")
    lay = op.layout
    if edit.make == "plain_layout":
        op.layout = ir.FixedLayout(lay.device, lay.dtype, lay.size, lay.stride)
    elif edit.make == "symbolic_layout":
        owner = op
        if isinstance(lay, ir.MutationLayoutSHOULDREMOVE):  # an in-place write: its target's
            owner = lay.get_buffer()
            lay = owner.layout
        owner.layout = FixedTiledLayout(lay.device, lay.dtype, [sympy.Symbol("s0"), *lay.size[1:]],
                                        lay.stride, device_layout=lay.device_layout)
    elif edit.make == "foreign_strides":
        op.layout = FixedTiledLayout(lay.device, lay.dtype, lay.size, [s * 2 for s in lay.stride],
                                     device_layout=lay.device_layout)
    elif edit.make == "gapped_strides":
        op.layout = FixedTiledLayout(lay.device, lay.dtype, lay.size,
                                     [s if s == 1 else s * 2 for s in lay.stride],
                                     device_layout=lay.device_layout)
    elif edit.make == "opaque_data":
        op.data = ir.Scan.__new__(ir.Scan)
    elif edit.make == "index_value":
        _add_index_value(op)
    elif edit.make == "unmeasured_gather":
        # an op class of its own read_writes: Inductor's answer, no indirect bounds
        op.__class__ = type("UnmeasuredGather", (type(op),),
                            {"get_read_writes": lambda self: ir.ComputedBuffer.get_read_writes(self)})
    else:
        with ops.graph_context(0):
            positions = facts.op_facts(op).position_vars or []
        if not 0 <= edit.host_dim < len(positions):
            raise HarnessError(f"edit user_hint of {edit.op}: no host dim {edit.host_dim}")
        op.dim_hints = [DimHint(["H"], sympy.Integer(edit.split), positions[edit.host_dim], False,
                                hint_id, edit.host_dim)]


def _add_index_value(op: Any) -> None:
    """``value + index`` for a Pointwise op: the real programs that compute a value from
    their index (``torch.arange``, ``tril`` masks) are outside the program subset."""
    import torch
    from torch._inductor import ir
    from torch._inductor.virtualized import ops as vops

    data = op.data
    if not isinstance(data, ir.Pointwise):
        raise HarnessError(f"edit index_value of {op.get_name()}: not a Pointwise op")
    fn = data.inner_fn

    def inner_fn(index: Any) -> Any:
        position = vops.index_expr(sum(index), torch.int64)
        return vops.add(fn(index), vops.to_dtype(position, data.dtype))

    object.__setattr__(data, "inner_fn", inner_fn)
    for obj in (data, op):  # drop Inductor's cache_on_self results of the old body
        for key in [k for k in vars(obj) if k.startswith("__") and k.endswith("_cache")]:
            object.__delattr__(obj, key)


def _settings(test: PolicyTest, example_limit: int | None, rules_path: str | None) -> dict[str, Any]:
    settings: dict[str, Any] = {"ignore_span_overflow_hints": False, "ignore_wsr_hints": False}
    if example_limit is not None:
        settings["max_span_bytes"] = example_limit
    settings.update(test.config)
    settings["rules_path"] = rules_path
    return settings


def deciding_rule(decision: Any) -> str:
    """``section.rule`` of the step that decided: the plan, the skip, or the
    latest step whose message is the Unsupported reason (else the last step)."""
    trace = decision.trace
    if decision.decision == "unsupported":
        for step in reversed(trace):
            if step.message == decision.reason:
                return f"{step.section}.{step.rule}"
    return f"{trace[-1].section}.{trace[-1].rule}" if trace else "(none)"


def _render_decision(decision: Any) -> str:
    if decision is None:
        return "(no such op)"
    if decision.decision == "plan":
        return f"plan {list(decision.plan.splits)}"
    return f"{decision.decision}: {decision.reason}"


def _render_expect(exp: OpExpect) -> str:
    if exp.decision == "plan":
        return f"plan {list(exp.splits)}"
    return f"{exp.decision}: ...{exp.fragment}..." if exp.fragment else exp.decision


def _matches(exp: OpExpect, decision: Any) -> bool:
    if decision is None or decision.decision != exp.decision:
        return False
    if exp.decision == "plan":
        return tuple(decision.plan.splits) == exp.splits
    return not exp.fragment or exp.fragment in (decision.reason or "")


def _render_groups(groups: Any) -> str:
    if not groups:
        return "no automatic groups"
    return "; ".join(f"[{' '.join(g.ops)}] {list(g.splits)}" for g in groups)


class _Check:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def mismatch(self, what: str, expected: str, actual: str, trace: list[Any] | None = None) -> None:
        self.lines.append(f"  {what}:")
        self.lines.append(f"    - expected: {expected}")
        self.lines.append(f"    + actual:   {actual}")
        if trace:
            self.lines.append(f"    trace of {what}:")
            self.lines.extend(f"      {step.text()}" for step in trace)


def run_grouping(ops: Any, steps: list[Any]) -> tuple[list[GroupExpect] | None, dict[str, Any], str | None]:
    """(groups, per-op grouping steps, Unsupported message); the ops are only read.
    The grouping evaluator's steps are appended to ``steps``."""
    from spyre_rules import Unsupported
    from spyre_rules.engine import decide_groups

    trace: list[Any] = []
    try:
        outcome = decide_groups(ops, trace=trace)
        groups = []
        for group in outcome.groups:
            own = {op.get_name(): tuple((int(h.host_dim), int(h.split))
                                        for h in outcome.hints.get(op.get_name(), ())
                                        if h.host_dim is not None)
                   for op in group.ops}
            groups.append(GroupExpect(tuple(op.get_name() for op in group.ops),
                                      own[group.ops[0].get_name()], own))
        return groups, dict(outcome.actions), None
    except Unsupported as err:
        return None, {}, str(err)
    finally:
        steps.extend(trace)


def _check_by_buffer(expected: dict[str, tuple[str, ...]], ops: Any, steps: list[Any],
                     check: _Check, field: str, what: str) -> None:
    """Compare the rules that fired per buffer, as the backend recorded them while
    capturing (``RulesGraphState.<field>``: ``restickify_stages``, ``layout_choices``),
    with the test's expectation (``staged``, ``layout_choices``)."""
    from spyre_rules.ir.graph_state import graph_state

    recorded: dict[str, list[Any]] = {}
    for graph in ops.graphs:
        recorded.update(getattr(graph_state(graph), field))
    for trace in recorded.values():
        steps.extend(trace)
    for name, rules in expected.items():
        trace = recorded.get(name)
        actual = None if trace is None else tuple(f"{s.section}.{s.rule}" for s in trace)
        if actual != rules:
            shown = (f"(no {what} buffer {name}; {what}: {', '.join(recorded) or 'none'})"
                     if actual is None else str(list(actual)))
            check.mismatch(f"{name} {field.replace('_', ' ')}", str(list(rules)), shown, trace)


def run_test(test: PolicyTest, rules_path: str | None) -> Outcome:
    """Run ``test`` against the policy at ``rules_path`` (None: the bundled rules)."""
    from spyre_rules import config
    from spyre_rules.engine import explain_op, plan_graph

    if test.collective is not None:
        from spyre_rules.commands.policy_collectives import run_collective_test

        return Outcome(test, *run_collective_test(test, rules_path, HarnessError))
    ops, example_limit = _capture(test, rules_path)
    for i, edit in enumerate(test.edits):
        _apply(edit, ops, hint_id=i + 1)
    steps: list[Any] = []
    grouping_steps: list[Any] = []
    check = _Check()
    if test.staged is not None:
        _check_by_buffer(test.staged, ops, steps, check, "restickify_stages", "restickified")
    if test.layout_choices is not None:
        _check_by_buffer(test.layout_choices, ops, steps, check, "layout_choices", "asked")
    with config.patch(**_settings(test, example_limit, rules_path)):
        decisions = {d.op: d for d in plan_graph(ops)}
        if test.include_graph_inputs:
            for index, graph in enumerate(ops.graphs):
                with ops.graph_context(index):
                    for name, node in graph.graph_inputs.items():
                        decisions.setdefault(name, explain_op(node))
        for d in decisions.values():
            steps.extend(d.trace)
        needs_grouping = (test.groups is not None or test.grouping_error is not None
                          or any(e.grouping for e in test.ops.values()))
        groups, actions, grouping_error = (run_grouping(ops, grouping_steps) if needs_grouping
                                           else (None, {}, None))
    steps.extend(grouping_steps)
    # what explains a grouping answer: its rules and the legality guards `conforms` met
    grouping_trace = [s for s in grouping_steps if s.section == "grouping"
                      or (s.section == "legality" and s.rule != "splits")]
    for name, exp in test.ops.items():
        d = decisions.get(name)
        if not _matches(exp, d):
            check.mismatch(name, _render_expect(exp), _render_decision(d) if d else
                           f"(no op {name}; ops: {', '.join(decisions)})", d.trace if d else None)
        elif exp.rule is not None and deciding_rule(d) != exp.rule:
            check.mismatch(f"{name} deciding rule", exp.rule, deciding_rule(d), d.trace)
        if exp.grouping is not None:
            step = actions.get(name)
            actual = (step.rule if step is not None else
                      f"(grouping raised Unsupported: {grouping_error})" if grouping_error else "(not visited)")
            if actual != exp.grouping:
                check.mismatch(f"{name} grouping rule", exp.grouping, actual, grouping_trace)
    if test.groups is not None:
        actual = f"Unsupported: {grouping_error}" if grouping_error else _render_groups(groups)
        if grouping_error or list(test.groups) != groups:
            check.mismatch("groups", _render_groups(test.groups), actual, grouping_trace)
    if test.grouping_error is not None:
        if grouping_error is None or test.grouping_error not in grouping_error:
            actual = f"Unsupported: {grouping_error}" if grouping_error else _render_groups(groups)
            check.mismatch("grouping", f"Unsupported: ...{test.grouping_error}...", actual,
                           grouping_trace)
    return Outcome(test, check.lines, steps)
