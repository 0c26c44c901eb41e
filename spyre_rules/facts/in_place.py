"""An in-place write (``index_put_``, ``index_copy_``, ``scatter_`` into a KV cache),
measured through the buffer it writes.

Inductor lowers such a write to a ComputedBuffer whose ``MutationLayoutSHOULDREMOVE``
names its target; its store index is the target's, with the indexed coordinate an
*indirect symbol* (``tmpN``: a value loaded from the index tensor, bounded by the
indexed extent; ``facts.gathered``).  On the program the op stores straight into the
target's segment (backend/in_place.py), so its facts are those of that write: the
target's FixedTiledLayout, and the write's ranges with each indirect symbol over the
whole dim it indexes (any row may be written, so that is its sound span).  A tile of
the write keeps the target whole, like a concatenation's region (``facts.regions``):
tile ``t`` writes its slab of the target in place, never a per-tile copy.

Along a dim the op's ranges cover whole and its write addresses by the loop symbol
alone (batch, heads, head_dim of a cache write) tile ``t`` of the op is tile ``t``
of the target; along the indexed dim it is not (``spans_in_place_target_whole``;
rules/planner.rules ``in_place_dims_whole``).
"""

from __future__ import annotations

from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep, is_indirect

from spyre_rules.errors import CoordinateError
from spyre_rules.facts.coordinates import host_coordinates
from spyre_rules.facts.gathered import indirect_ranges
from spyre_rules.facts.records import as_int
from spyre_rules.facts.tiled_layout import FixedTiledLayout

__all__ = ["in_place_target", "in_place_write", "spans_in_place_target_whole"]


def in_place_target(op: Any) -> Any | None:
    """The buffer ``op`` writes in place, when it has a FixedTiledLayout (None: op
    writes its own buffer, or its target has no stick layout to measure)."""
    layout = getattr(op, "layout", None)
    if not isinstance(layout, ir.MutationLayoutSHOULDREMOVE):
        return None
    try:
        target = layout.get_buffer()
        found = target.get_layout()
    except Exception:  # noqa: BLE001 - a target Inductor cannot name has nothing to measure
        return None
    return target if isinstance(found, FixedTiledLayout) else None


def in_place_write(op: Any, write: MemoryDep | None, read_writes: Any) -> MemoryDep | None:
    """``op``'s write with each indirect symbol's bound added to its ranges (None when
    a bound is not recorded: an unmeasured write is no write to plan)."""
    if write is None or in_place_target(op) is None:
        return write
    if not any(is_indirect(s.name) for s in write.index.free_symbols):
        return write
    bounds = indirect_ranges(write.index, read_writes)
    if bounds is None:
        return None
    names = tuple(write.var_names) + tuple(bounds)
    sizes = tuple(write.size) + tuple(sympy.Integer(n) for n in bounds.values())
    return MemoryDep(write.name, write.index, names, sizes)


def spans_in_place_target_whole(op: Any, dim: int, write: MemoryDep | None,
                                position_vars: list[Any] | None) -> bool:
    """Whether ``op``'s host dim ``dim`` is as long as its target's and the write's
    host coordinate ``dim`` of the target is that dim's loop symbol alone (True for an
    op that writes nothing in place)."""
    target = in_place_target(op)
    if target is None:
        return True
    ranges = list(getattr(getattr(op, "data", None), "ranges", None) or ())
    layout = target.get_layout()
    size = [as_int(s) for s in layout.size]
    if write is None or position_vars is None or not 0 <= dim < len(ranges) \
            or len(ranges) != len(size) or dim >= len(position_vars):
        return False
    if as_int(ranges[dim]) is None or as_int(ranges[dim]) != size[dim]:
        return False
    var = position_vars[dim]
    try:
        coords = host_coordinates(layout.size, layout.stride, write.index, write.ranges)
    except (CoordinateError, AttributeError, TypeError):
        return False
    if not isinstance(var, sympy.Symbol):
        return size[dim] == 1
    return dim < len(coords) and sympy.sympify(coords[dim]) == var
