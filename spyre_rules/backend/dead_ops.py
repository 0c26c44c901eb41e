"""Drop the ops nothing reads before anything plans them.

Inductor inlines a ComputedBuffer that reads nothing (a fill: ``torch.full``,
``zeros``, ``arange``) into each of its readers, so the buffer itself is dead and
the Scheduler's dead-node elimination drops it.  Our passes run before the
Scheduler: left in ``graph.operations`` such an op was planned (automatic tiling
gave ``x + torch.full(...)``'s fill a level) and its record went to ``plan.json``,
a plan the program never ran.  The seam therefore removes, as the Scheduler would,
every computed buffer that no live op reads, that is no graph output and that no
op mutates.  A fill inside a ``spyre_hint`` block is not inlined in the first place
(``hinted_fills.py``), so the hint's loop runs it.
"""

from __future__ import annotations

from typing import Any

from torch._inductor import ir

from spyre_rules.facts.op_kind import read_names

__all__ = ["drop_dead_ops"]

_DROPPED_ATTR = "_spyre_rules_dropped_ops"


def _droppable(op: Any, regions: dict[str, str]) -> bool:
    # Only a plain Pointwise/Reduction buffer with its own storage: a region of a
    # concatenation is read through the concatenation's name, others have effects.
    return (
        isinstance(op, ir.ComputedBuffer)
        and isinstance(op.data, (ir.Pointwise, ir.Reduction))
        and not isinstance(op.layout, (ir.NonOwningLayout, ir.MutationLayoutSHOULDREMOVE))
        and op.get_name() not in regions
    )


def drop_dead_ops(graph: Any, regions: dict[str, str]) -> list[str]:
    """Remove dead computed buffers from ``graph.operations``; their names, in graph order."""
    live = set(graph.get_output_names()) | set(graph.mutated_buffers)
    dead: list[Any] = []
    for op in reversed(graph.operations):
        if op.get_name() not in live and _droppable(op, regions):
            dead.append(op)
            continue
        live.update(read_names(op))
    if dead:
        gone = {id(op) for op in dead}
        graph.operations[:] = [op for op in graph.operations if id(op) not in gone]
        graph.removed_operations.update(op.get_operation_name() for op in dead)
        graph.removed_buffers.update(op.get_name() for op in dead)
        _numbering_kept(graph, len(dead))
    return [op.get_name() for op in reversed(dead)]


def _numbering_kept(graph: Any, dropped: int) -> None:
    """Inductor names a new op ``op{len(graph.operations)}``: with ``dropped`` ops gone, an
    op our passes add later (a restickify, a tile copy) took a live op's name (fuzz
    2912:1550, ``(x * 2 - y).permute(1, 0) * 2).var()``: the restickify became a second
    ``op5`` and the Scheduler's ancestors lookup failed).  Later ops are named past every
    op the graph ever had, as GraphLowering.register_operation would have named them."""
    skip = dropped + getattr(graph, _DROPPED_ATTR, 0)
    setattr(graph, _DROPPED_ATTR, skip)

    def register_operation(op: Any) -> str:
        assert op.operation_name is None, f"Operation registered twice: {op}"
        name = graph.qualify_name(f"op{len(graph.operations) + skip}")
        graph.operations.append(op)
        graph.name_to_op[name] = op
        op.operation_name = name
        return name

    graph.register_operation = register_operation
