"""The coarse-tiling pipeline pass: user-hint groups + automatic span-overflow groups.

One pre-scheduling pass, ``coarse_tiling_pass(graph)``, placed right after the hint
pass ``assign_dim_hints`` by the composition root (``backend/pass_lists.py``;
docs/layout_model.md §5.1 "Pass wiring"):

1. with ``config.coarse_tiling`` off it only records why every op has no plan;
2. user-hint groups: ``hints_to_coarse_tile_groups`` -- taken *before* the engine
   stamps its synthetic hints, so only user hints count;
3. automatic groups, unless ``config.ignore_span_overflow_hints`` or
   ``config.ignore_wsr_hints``: the rule engine's grouping decision
   (``decide_groups``), whose synthetic hints this pass stamps
   (``hints.apply_automatic_hints``).  The rules pass ops that carry user
   ``dim_hints`` (rules/grouping.rules ``user_hinted``), so user hints win per op;
   that is the rules' decision alone -- a policy that also tiles a user-hinted op
   automatically is refused, never silently resolved;
4. all groups sorted by the position of their first op, then applied by
   ``tile_groups(graph, groups)`` (coarse_tile + insert_tiling_propagation; owned
   by ``spyre_rules.passes.tiling_propagation``).

Every ComputedBuffer's plan record (``graph_state(graph).plan``, written to
``plan.json`` in the dump dir, in execution order; ``passes/plan_record.py``) gets
its :class:`Decision` from :func:`record_decisions`:
``decision`` ("plan" / "no plan" / "user hint"), ``source`` ("automatic" / "user
hint" / None), ``levels`` -- ``[[host_dim, tiles], ...]`` the op's loop really runs
(a conforming op runs the open run's split, not ``own_plan``), ``own_plan`` (the
planner's plan for the op alone), ``hint_ids``, ``reason``, ``rule`` and
``rule_message`` (the rule that decided) and ``rule_trace`` (every rule that fired,
planner then grouping).  ``tile_groups`` adds ``loop`` and the scratchpad planner
``scratchpad``.

An ``Unsupported`` from the planner or the grouping (e.g. "Cannot auto-tile buf0:
it reads already auto-tiled producer(s) ['buf1'] ...") is recorded (every op's own
decision plus ``graph_error``; with a dump dir the pre-scheduling seam writes that
plan.json at once, since no code follows) and becomes ``UnsupportedGraph`` with the engine's message unchanged: the backend then raises it under
``fallback='error'`` or warns with it and runs the graph eagerly under
``fallback='eager'`` (backend/compile.py) -- never a silent fallback.

Importing this module registers nothing: ``backend/pass_lists.py`` places the pass.
The scratchpad planner (``passes/scratchpad.py``) runs inside this pass, after
tiling, because it sizes per-tile buffers (docs/layout_model.md §5.9).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch._inductor.virtualized import V

from spyre_rules import config
from spyre_rules.engine.records import NO_PLAN, TileGroup
from spyre_rules.errors import Unsupported
from spyre_rules.hints import apply_automatic_hints, hints_to_coarse_tile_groups
from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.ir.graph_state import graph_state
from spyre_rules.passes.host_boundaries import split_groups_at_host_steps, spyre_operations
from spyre_rules.passes.plan_record import Decision

__all__ = [
    "AUTO",
    "USER",
    "automatic_tiling_enabled",
    "collect_groups",
    "coarse_tiling_pass",
    "record_decisions",
    "run_pipeline",
    "sort_groups",
    "untiled_hinted_ops",
]

#: ``source`` of a group in plan records.
USER = "user hint"
AUTO = "automatic"

Group = TileGroup  # engine/records.py: the one representation of a group


def automatic_tiling_enabled() -> bool:
    """Automatic span-overflow tiling runs only when neither switch suppresses it."""
    return bool(config.coarse_tiling) and not (
        config.ignore_span_overflow_hints or config.ignore_wsr_hints
    )


def _off_reason() -> str:
    """Which configuration switch turned automatic tiling off (a fact, for plan.json)."""
    if not config.coarse_tiling:
        return "coarse tiling is off (config.coarse_tiling)"
    if config.ignore_span_overflow_hints:
        return "automatic span-overflow tiling is off (config.ignore_span_overflow_hints)"
    return "automatic span-overflow tiling is off (config.ignore_wsr_hints)"


def sort_groups(operations: Sequence[Any], groups: list[Group]) -> list[Group]:
    """Groups ordered by the graph position of their first op (stable)."""
    position = {id(op): i for i, op in enumerate(operations)}
    return sorted(groups, key=lambda g: min(position[id(op)] for op in g[0]))


def _levels_of(op: Any, hint_ids: list[int]) -> tuple[tuple[int | None, int], ...]:
    """``((host_dim, split), ...)`` the op runs, per level (host dim None: loop-invariant)."""
    by_id = {h.hint_id: h for h in getattr(op, "dim_hints", None) or []}
    return tuple((by_id[i].host_dim, int(by_id[i].split_count)) for i in hint_ids if i in by_id)


def record_decisions(
    graph: Any, user_groups: list[Group], outcome: Any | None,
    untiled_hinted: Sequence[Any] = (),
) -> None:
    """Write each op's decision, levels, reason, deciding rule and trace to its plan record.

    ``outcome`` is the engine's ``GroupingOutcome`` (None: automatic tiling off).
    ``untiled_hinted``: ops inside user hint blocks that no level tiles (so in no
    group: see :func:`untiled_hinted_ops`).
    """
    plan = graph_state(graph).plan
    ops_by_name = {op.get_name(): op for op in graph.operations}
    for g, (ops, levels) in enumerate(user_groups):
        ids = [int(level[0]) for level in levels]
        for op in ops:
            record = plan.get(op.get_name())
            if record is None:
                continue
            plan[op.get_name()] = record.with_decision(Decision(
                decision=USER,
                source=USER,
                levels=_levels_of(op, ids),
                reason=f"user spyre_hint group {g} (hint ids {ids})",
                rule=None,
                rule_message=None,
            ))
    user_ops = {op.get_name() for ops, _ in user_groups for op in ops}
    for op in untiled_hinted:
        if op.get_name() in plan:
            plan[op.get_name()] = plan[op.get_name()].with_decision(_untiled_hint_decision(op))
            user_ops.add(op.get_name())
    auto_group: dict[str, list[int]] = {}
    if outcome is not None:
        for ops, levels in outcome.groups:
            ids = [int(level[0]) for level in levels]
            for op in ops:
                auto_group[op.get_name()] = ids
    for name, record in list(plan.items()):
        if name in user_ops:
            continue
        if outcome is None:
            plan[name] = record.with_decision(Decision(
                decision=NO_PLAN, source=None, levels=(), reason=_off_reason(),
                rule=None, rule_message=None))
            continue
        plan[name] = record.with_decision(_auto_decision(ops_by_name[name], outcome, auto_group.get(name)))


def _untiled_hint_decision(op: Any) -> Decision:
    """An op inside hint blocks none of whose levels tiles it: it runs once, in no loop."""
    names = sorted({n for h in op.dim_hints for n in h.dim_names})
    return Decision(
        decision=USER,
        source=USER,
        levels=(),
        reason=(f"in spyre_hint block(s) on {names} but has no dim of those names: not "
                "tiled, runs once outside the loop"),
        rule=None,
        rule_message=None,
    )


def _auto_decision(op: Any, outcome: Any, hint_ids: list[int] | None) -> Decision:
    """One op's record from the engine: the planner's decision, then the grouping step.

    ``rule`` names the rule that decided what the op runs: the grouping rule for a
    tiled op (start / join / conform / refine / single), else the planner's last step
    (eligibility skip, no candidate, ...) or, when the planner was never asked,
    the grouping rule that passed the op.
    """
    name = op.get_name()
    decision = outcome.decisions.get(name)
    step = outcome.actions.get(name)
    trace = list(decision.trace) if decision is not None else []
    if step is not None:
        trace.append(step)
    if hint_ids is not None:
        decider, reason = step, decision.reason
    elif decision is not None and decision.trace:
        decider, reason = decision.trace[-1], decision.reason
    else:
        decider, reason = step, step.message if step is not None else None
    return Decision(
        decision=decision.decision if decision is not None else NO_PLAN,
        source=AUTO if hint_ids is not None else None,
        levels=_levels_of(op, hint_ids) if hint_ids is not None else (),
        own_plan=(tuple(decision.plan.splits)
                  if decision is not None and decision.plan is not None else None),
        hint_ids=tuple(hint_ids or ()),
        reason=reason,
        rule=f"{decider.section}.{decider.rule}" if decider is not None else None,
        rule_message=decider.message if decider is not None else None,
        rule_trace=tuple(s.recorded() for s in trace),
    )


def _record_refusal(graph: Any, message: str) -> None:
    """The graph is refused: record every op's own decision (``plan_graph`` never
    raises; "unsupported" carries the planner's message) plus ``graph_error``.  No
    code will be generated for this graph, so the pre-scheduling seam writes these
    records to the dump dir at once (``backend/pre_scheduling.py``)."""
    from spyre_rules.engine import plan_graph

    with V.set_graph_handler(graph):
        decisions = {d.op: d for d in plan_graph(spyre_operations(graph))}
    state = graph_state(graph)
    for name, record in list(state.plan.items()):
        d = decisions.get(name)
        if d is not None:
            last = d.trace[-1] if d.trace else None
            record = record.with_decision(Decision(
                decision=d.decision,
                levels=tuple(d.plan.splits) if d.plan is not None else (),
                reason=d.reason,
                rule=f"{last.section}.{last.rule}" if last is not None else None,
                rule_message=last.message if last is not None else None,
                rule_trace=tuple(s.recorded() for s in d.trace),
            ))
        state.plan[name] = record.with_graph_error(message)


def untiled_hinted_ops(operations: Sequence[Any], user_groups: list[Group]) -> list[Any]:
    """Ops carrying user ``dim_hints`` that are in no user group: no level tiles them."""
    grouped = {id(op) for ops, _ in user_groups for op in ops}
    return [op for op in operations if getattr(op, "dim_hints", None) and id(op) not in grouped]


def _check_user_hints_won(user_groups: list[Group], untiled: Sequence[Any], outcome: Any) -> None:
    """Whether user hints win over automatic plans is the rules' decision
    (rules/grouping.rules ``user_hinted``): an op the rules tiled automatically must
    carry no user hints.  Python does not pick a winner; a policy that tiles a
    user-hinted op is refused, naming the rule."""
    hinted = {op.get_name() for ops, _ in user_groups for op in ops} | {op.get_name() for op in untiled}
    for group in outcome.groups:
        for op in group.ops:
            if op.get_name() in hinted:
                step = outcome.actions.get(op.get_name())
                rule = f"{step.section}.{step.rule}" if step is not None else "(no rule)"
                raise Unsupported(
                    f"Cannot tile {op.get_name()}: it carries user spyre_hint dims, and grouping rule "
                    f"`{rule}` also tiles it automatically; the rules must decide that manual hints "
                    "win (rules/grouping.rules `user_hinted`)")


def collect_groups(graph: Any) -> list[Group]:
    """All coarse-tile groups of the graph, sorted; records every op's decision.

    Raises ``UnsupportedGraph`` (the engine's message) when the planner or the
    grouping refuses the graph.
    """
    operations = spyre_operations(graph)  # host steps are never tiled
    user_groups = hints_to_coarse_tile_groups(operations)
    untiled = untiled_hinted_ops(operations, user_groups)  # user hints only: none stamped yet
    outcome = None
    if automatic_tiling_enabled():
        from spyre_rules.engine import decide_groups

        try:
            with V.set_graph_handler(graph):
                outcome = decide_groups(operations, graph_operations=graph.operations)
            _check_user_hints_won(user_groups, untiled, outcome)
        except Unsupported as err:
            _record_refusal(graph, str(err))
            if isinstance(err, UnsupportedGraph):
                raise
            raise UnsupportedGraph(str(err)) from err
        hoist_operations(graph, outcome.hoisted)
        operations = spyre_operations(graph)
        apply_automatic_hints(operations, outcome)
    record_decisions(graph, user_groups, outcome, untiled)
    auto_groups = outcome.groups if outcome is not None else []
    groups = sort_groups(operations, list(user_groups) + list(auto_groups))
    return split_groups_at_host_steps(graph, groups)


def _records_in_graph_order(graph: Any) -> None:
    """plan.json lists ops in execution order (tiling inserts copy ops mid-graph)."""
    plan = graph_state(graph).plan
    order = [op.get_name() for op in graph.operations if op.get_name() in plan]
    listed = set(order)
    rest = [name for name in plan if name not in listed]
    reordered = {name: plan[name] for name in order + rest}
    plan.clear()
    plan.update(reordered)


def hoist_operations(graph: Any, hoisted: dict[str, str]) -> None:
    """Move each op the grouping hoisted right before the op it runs before (the
    first member of the run it is independent of, never itself hoisted), keeping the
    hoisted ops' order.  The grouping checked that each reads nothing written
    between the two (``engine/grouping.py``, ``independent``).  One pass."""
    if not hoisted:
        return
    by_name = {op.get_name(): op for op in graph.operations}
    before: dict[str, list[Any]] = {}
    for name, anchor in hoisted.items():
        before.setdefault(anchor, []).append(by_name[name])
    order: list[Any] = []
    for op in graph.operations:
        if op.get_name() not in hoisted:
            order.extend(before.get(op.get_name(), ()))
            order.append(op)
    graph.operations[:] = order


def coarse_tiling_pass(graph: Any) -> None:
    """The pre-scheduling pass: :func:`run_pipeline`.

    ``capture_operations`` skips it (``backend/pass_lists.py``): a capture returns
    the ops as the planners see them (user hints stamped, nothing tiled, no
    synthetic hints); callers run :func:`run_pipeline` on the captured graph themselves.
    """
    run_pipeline(graph)


def run_pipeline(graph: Any) -> None:
    """Collect and apply every coarse-tile group, then plan the scratchpad (module doc)."""
    if not config.coarse_tiling:
        record_decisions(graph, [], None)
        return
    groups = collect_groups(graph)
    if groups:
        from spyre_rules.passes.tiling_propagation import tile_groups

        tile_groups(graph, groups)
        _records_in_graph_order(graph)
    from spyre_rules.passes.scratchpad import scratchpad_planning

    scratchpad_planning(graph)

