"""``span_overflow_groups(operations)``: planned ops -> coarse-tile groups.

The semantics of the ``grouping`` section (docs/rules_language.md §6.6,
layout_model §5.1): ops are visited in graph order with at most one open run
of Pointwise ops sharing one tile loop; the first rule that fires decides
``pass`` / ``join`` / ``conform`` / ``start`` / ``single`` / ``reject``.  Every
condition and message is in ``rules/grouping.rules``; this module only keeps
the run, allocates hint ids and stamps the hints.

Closing a run (or a ``single`` op) makes a group shaped like a user-hint group,
``([ops], [(hint_id, sympy.Integer(split), False), ...])``, and stamps each
member with one synthetic ``DimHint`` per level (``dim_names`` =
``["_span_overflow"]``, the member's loop variable of that host dim), so
``spyre_rules.coarse_tile`` consumes them exactly like user hints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import sympy

from spyre_rules.errors import Unsupported
from spyre_rules.engine.api import evaluator, graph_scope, _require_graph
from spyre_rules.engine.compile import Lazy
from spyre_rules.engine.planner import Evaluator, plan_record
from spyre_rules.engine.records import OpDecision, TraceStep
from spyre_rules.engine.values import Level, Run, Tiling
from spyre_rules.facts import op_facts as facts

__all__ = ["HINT_ID_BASE", "GroupingOutcome", "group_operations", "span_overflow_groups"]

#: First synthetic hint id (seed 000 "_SPAN_OVERFLOW_HINT_ID = 10000"): an id
#: convention shared with coarse tiling, kept clear of user hint ids -- not policy.
HINT_ID_BASE = 10000

Group = tuple[list[Any], list[tuple[int, sympy.Integer, bool]]]


@dataclasses.dataclass
class GroupingOutcome:
    groups: list[Group]
    actions: dict[str, TraceStep]        # op name -> the grouping rule that decided
    decisions: dict[str, OpDecision]     # op name -> planner decision (ops whose plan was read)


class _Grouper:
    def __init__(self, ev: Evaluator, hinted: frozenset) -> None:
        self.ev = ev
        self.hinted = hinted
        self.auto_tiled: set[str] = set()
        self.run_ops: list[Any] = []
        self.run_rules: list[str] = []  # the grouping rule that put each run member in
        self.run_levels: list[Level] = []
        self.groups: list[Group] = []
        self.next_id = HINT_ID_BASE
        self.decisions: dict[str, OpDecision] = {}
        # The values rules see, rebuilt only when the run or the closed groups change:
        # most visits change neither, and rebuilding them per visit made grouping
        # quadratic in the length of a run / the number of auto-tiled ops.
        self._run: Run | None = None
        self._auto_tiled: frozenset | None = None

    def run_value(self) -> Run:
        if self._run is None:
            self._run = Run(bool(self.run_ops), frozenset(op.get_name() for op in self.run_ops),
                            list(self.run_levels),
                            Tiling.of((lv.host_dim, lv.split) for lv in self.run_levels))
        return self._run

    def auto_tiled_value(self) -> frozenset:
        if self._auto_tiled is None:
            self._auto_tiled = frozenset(self.auto_tiled)
        return self._auto_tiled

    def set_run(self, ops: list[Any], levels: list[Level], rules: list[str]) -> None:
        self.run_ops, self.run_levels, self.run_rules = ops, levels, rules
        self._run = None

    def extend_run(self, op: Any, rule: str) -> None:
        self.run_ops.append(op)
        self.run_rules.append(rule)
        self._run = None

    def plan_of(self, op: Any) -> Any:
        decision = self.ev.decide(op)
        self.decisions[op.get_name()] = decision
        if decision.error is not None:
            raise decision.error
        return None if decision.plan is None else plan_record(decision.plan)

    def close(self, ops: list[Any], levels: list[Level], rules: list[str]) -> None:
        if not ops:
            return
        # The verifier has the last word on every member's split before any hint is stamped.
        tile = Tiling.of((lv.host_dim, lv.split) for lv in levels)
        for op, rule in zip(ops, rules):
            self.ev.veto(op, tile, f"grouping rule `{rule}`")
        ids = list(range(self.next_id, self.next_id + len(levels)))
        self.next_id += len(levels)
        for op in ops:
            op.dim_hints = _hints(op, levels, ids)
            self.auto_tiled.add(op.get_name())
        self._auto_tiled = None
        self.groups.append((list(ops), [(i, sympy.Integer(lv.split), lv.is_reduction)
                                        for i, lv in zip(ids, levels)]))

    def close_run(self) -> None:
        ops, levels, rules = self.run_ops, self.run_levels, self.run_rules
        if ops:
            self.set_run([], [], [])
        self.close(ops, levels, rules)

    def visit(self, op: Any) -> TraceStep:
        plan_cell: dict[str, Any] = {}

        def plan() -> Any:
            if "plan" not in plan_cell:
                plan_cell["plan"] = self.plan_of(op)
            return plan_cell["plan"]

        env = self.ev.env(op=op, plan=Lazy(plan), run=self.run_value(),
                          auto_tiled_producers=self.auto_tiled_value(),
                          hinted_producers=self.hinted)
        fired = self.ev.first_match(self.ev.program.grouping, env, op)
        if fired is None:
            self.close_run()
            return TraceStep("grouping", "(no rule)", "pass", None, {"op": op})
        rule, message = fired
        action = rule.action
        step = self.ev.trace[-1]
        if action == "reject":
            raise Unsupported(message or rule.name)
        if action == "pass":
            self.close_run()
        elif action == "conform":
            if not self.run_ops:
                raise Unsupported(f"grouping rule `{rule.name}` conforms {op.get_name()} to a run, "
                                  "but no run is open")
            self.extend_run(op, rule.name)
        elif action in ("join", "start", "single"):
            own = plan()
            if own is None:
                raise Unsupported(f"grouping rule `{rule.name}` decided `{action}` for "
                                  f"{op.get_name()}, which has no plan")
            if action == "join":
                if own.levels != self.run_levels:
                    raise Unsupported(f"grouping rule `{rule.name}` joins {op.get_name()} to a run "
                                      f"with another split ({own.tiling!r} vs {self.run_value().tiling!r})")
                self.extend_run(op, rule.name)
            elif action == "start":
                self.close_run()
                self.set_run([op], list(own.levels), [rule.name])
            else:
                self.close_run()
                self.close([op], list(own.levels), [rule.name])
        return step


def _hints(op: Any, levels: list[Level], ids: list[int]) -> list[Any]:
    """One synthetic DimHint per level: the op's loop variable of that host dim."""
    from spyre_rules.ir.dim_hint import DimHint

    snapshot = facts.op_facts(op)
    positions = snapshot.position_vars or []
    by_split_dim = {d: s for s, d in snapshot.reduction_dims.items()}
    hints = []
    for level, hint_id in zip(levels, ids):
        host_dim = level.host_dim
        if level.is_reduction:  # split dim rank + r: the DimHint indexes reduction_ranges
            var = by_split_dim.get(level.host_dim)
            host_dim = level.host_dim - len(positions)
        else:
            var = positions[level.host_dim] if level.host_dim < len(positions) else None
        if not isinstance(var, sympy.Symbol):
            raise Unsupported(f"Cannot auto-tile {op.get_name()}: host dim {level.host_dim} has no "
                              "loop variable of its own to tile")
        hints.append(DimHint(dim_names=list(facts.AUTO_HINT_DIM_NAMES), split_count=level.split,
                             loop_var=var, is_reduction=level.is_reduction, hint_id=hint_id,
                             host_dim=host_dim))
    return hints


def group_operations(operations: Sequence[Any], max_cores: int | None = None,
                     trace: list[TraceStep] | None = None) -> GroupingOutcome:
    """Run the grouping section over ``operations`` (graph order); see the module doc.

    ``trace``, when given, receives every step the grouping evaluator records
    (grouping rules, ``conforms``, the planner decisions it reads), also when
    grouping raises Unsupported: ``spyre-rules test`` reads it for coverage."""
    ev = evaluator(max_cores)
    if trace is not None:
        ev.trace = trace
    hinted = frozenset(op.get_name() for op in operations
                       if facts.is_computed_buffer(op) and facts.has_user_hints(op))
    grouper = _Grouper(ev, hinted)
    actions: dict[str, TraceStep] = {}
    with graph_scope(operations) as graph_of:
        for op in operations:
            with graph_of(op):
                _require_graph(op)
                actions[op.get_name()] = grouper.visit(op)
        grouper.close_run()
    return GroupingOutcome(grouper.groups, actions, grouper.decisions)


def span_overflow_groups(operations: Sequence[Any], max_cores: int | None = None) -> list[Group]:
    """Coarse-tile groups for automatic span-overflow tiling (seed 000 adapter)."""
    return group_operations(operations, max_cores).groups
