"""Where host steps bound the tiling passes (docs/architecture.md, "Host steps").

A host step (an op run on the host, ``backend/host_steps.py``) is listed in
``graph_state(graph).host_steps``.  The tiling passes see only the other ops,
and a coarse-tile group never contains a host call: it is cut wherever a host
step sits between its ops.
"""

from __future__ import annotations

from typing import Any

from torch._inductor import ir

from spyre_rules.engine.records import TileGroup
from spyre_rules.facts.op_kind import ordered_read_names as read_names
from spyre_rules.ir.graph_state import graph_state

__all__ = ["read_names", "split_groups_at_host_steps", "spyre_operations"]


def spyre_operations(graph: Any) -> list[Any]:
    """The ops the tiling passes see: everything but host steps."""
    host = graph_state(graph).host_steps
    return [op for op in graph.operations if op.get_name() not in host]


def split_groups_at_host_steps(graph: Any, groups: list[Any]) -> list[Any]:
    """Cut every coarse-tile group where a host step sits between its ops: a counted
    loop never contains a host call.  Each piece keeps the group's levels."""
    state = graph_state(graph)
    if not state.host_steps:
        return groups
    position = {id(op): i for i, op in enumerate(graph.operations)}
    host_positions = sorted(position[id(op)] for op in graph.operations
                            if op.get_name() in state.host_steps)
    out = []
    for ops, levels in groups:
        ordered = sorted(ops, key=lambda op: position[id(op)])
        pieces: list[list[Any]] = [[]]
        for prev, op in zip([None, *ordered], ordered):
            if prev is not None:
                between = [p for p in host_positions if position[id(prev)] < p < position[id(op)]]
                if between:
                    pieces.append([])
                    names = [graph.operations[p].get_name() for p in between]
                    for member in ordered:
                        record = state.plan.get(member.get_name())
                        if record is not None:
                            seen = list(record.split_at_host_steps or ())
                            state.plan[member.get_name()] = record.with_split_at_host_steps(
                                seen + [n for n in names if n not in seen])
            pieces[-1].append(op)
        out.extend(TileGroup(piece, levels) for piece in pieces)
    return out
