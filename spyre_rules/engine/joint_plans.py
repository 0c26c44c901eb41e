"""Joint plans: a product whose one reader shares its loop (issue 40).

A half-precision linear with a bias is a float32 ``batchmatmul`` product and a
pointwise bias add that reads it point for point and rounds (``backend/matmul.py``).
When no split writes the product's tiles into its *full* buffer within the limit
(validation ``full_buffer_write_fits``: (192, 32) x (384, 32)^T + b in fp16 at
32 KiB, whose float32 product can only be cut in 2-stick column tiles), the
product can still run as a per-tile buffer of a loop the bias add shares: nothing
else reads it, and the add reads exactly its tile.  Grouping then plans the
product again with its buffer *loop-local* (``Evaluator.loop_local``: the rules'
``loop_local_output`` / ``loop_local_buffer``, the verifier's ``plan_problems``),
and when the loop closes :func:`check_joint` requires the reader in it with the
same levels, else the product's first refusal stands.  Tiling propagation then
keeps the product loop-internal (read only inside its loop, not an output), so
the code that runs writes and reads only the per-tile buffer the veto measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spyre_rules.errors import Unsupported
from spyre_rules.facts import op_facts as facts
from spyre_rules.facts.op_kind import is_computed_buffer, is_pointwise, read_names

__all__ = ["JointPlan", "check_joint", "point_reader"]


class JointPlan:
    """A product planned loop-local and the one reader that must share its loop."""

    def __init__(self, reader: str, refusal: BaseException) -> None:
        self.reader = reader
        self.refusal = refusal


def _deps_of(op: Any, name: str) -> list[Any] | None:
    """``op``'s reads of buffer ``name`` (None when they cannot be listed)."""
    try:
        return [d for d in op.get_read_writes().reads if d.name == name]
    except Exception:  # noqa: BLE001 - an op whose reads cannot be listed has no point read
        return None


def point_reader(op: Any, graph_ops: Sequence[Any], outputs: frozenset[str]) -> Any | None:
    """The one op that reads ``op``'s buffer, when it reads it point for point: a
    pointwise ComputedBuffer whose every read of it has ``op``'s write index and ranges
    and whose own write has them too (so a tile of its dims is a tile of ``op``'s).
    None when ``op`` is a graph output, mutates a buffer or is mutated, or has no such
    reader.  ``graph_ops``: every op of ``op``'s graph (host steps and extern kernels too)."""
    name = op.get_name()
    if name in outputs or tuple(getattr(op, "get_mutation_names", lambda: ())()):
        return None
    write = facts.op_facts(op).write
    if write is None:
        return None
    readers = [o for o in graph_ops if o is not op and name in read_names(o)]
    if len(readers) != 1 or any(name in tuple(getattr(o, "get_mutation_names", lambda: ())())
                                for o in graph_ops if o is not op):
        return None
    reader = readers[0]
    if not is_computed_buffer(reader) or not is_pointwise(reader):
        return None
    own = facts.op_facts(reader).write
    deps = _deps_of(reader, name)
    if own is None or not deps:
        return None
    same = [own, *deps]
    if any(type(d).__name__ != "MemoryDep" or d.index != write.index
           or dict(d.ranges) != dict(write.ranges) for d in same):
        return None
    return reader


def check_joint(members: Sequence[Any], joint: dict[str, JointPlan]) -> None:
    """Every loop-local product among ``members`` (``(op, levels)`` pairs of one closing
    loop) has its reader in the loop with the same levels; else its refusal stands."""
    levels = {op.get_name(): lv for op, lv in members}
    for op, own in members:
        plan = joint.get(op.get_name())
        if plan is None:
            continue
        theirs = levels.get(plan.reader)
        if theirs is None or own is None or list(theirs) != list(own):
            where = "is not in its loop" if theirs is None else f"runs levels {theirs} in it, not {own}"
            raise Unsupported(f"{plan.refusal} (as a per-tile buffer of a loop shared with its one "
                              f"reader {plan.reader} it would fit, but {plan.reader} {where})")
