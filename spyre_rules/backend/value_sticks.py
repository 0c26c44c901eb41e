"""Read a small broadcast value through a copy that gives each value a stick of its own.

An op must split an output variable ``u`` finer than a stick when its own write is
too wide otherwise (``stick_choice.fitting_tiles`` of the write).  A read stuck on
``u`` then has its sticks cut, and the usual remedies move that read's stick onto
another host dim another variable walks (restickify.py ``_off_a_cut_stick``,
``stick_choice.broadcast_read_restickify``).  A read with no such dim has nowhere to
move its stick: gpt_oss's attention sinks ``[H]``, one value per head, broadcast over
the rows into the last column of ``cat([scores, sinks], -1)``.  One stick holds every
head's sink, while one head of the concatenation is already 80 KiB at 128 tokens
(``[1, 4, 128, 129]`` fp32), so the region writing the sinks must split the heads one
by one: no split was legal.

Such a read goes through an exact copy laid out with one value per stick (the generic
layout's sparse form, docs/layout_model.md §1.3: the stick device dim has no host
stride, every value sits at position 0 of its own stick).  No host dim is then inside
the stick, and a tile of ``u`` reads whole sticks whatever it holds.  The copy costs a
stick per value; whether it is taken is policy (``value_per_stick``,
rules/layout_choice.rules: only under automatic tiling, and only a copy that fits the span
limit whole).
"""

from __future__ import annotations

from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep

from spyre_rules.backend.layout_choice import take
from spyre_rules.backend.stick_choice import cuts_sticks_of, fitting_tiles
from spyre_rules.errors import CoordinateError, LayoutError
from spyre_rules.facts.coordinates import host_coordinates
from spyre_rules.facts.stick_layout import BYTES_IN_STICK, generic_stick_layout
from spyre_rules.facts.tiled_layout import FixedTiledLayout

__all__ = ["value_per_stick_copies"]


def _no_other_walked_dim(layout: Any, dep: MemoryDep, u: sympy.Symbol) -> bool:
    """Every host dim of size > 1 of the read is driven by ``u`` alone (none to move
    the stick onto)."""
    try:
        coords = host_coordinates(layout.size, layout.stride, dep.index - layout.offset,
                                  dep.ranges)
    except CoordinateError:
        return False
    walked = [set(c.free_symbols) & set(dep.ranges) for d, c in enumerate(coords)
              if int(layout.size[d]) > 1]
    return bool(walked) and all(w == {u} for w in walked)


def _sparse(layout: Any) -> FixedTiledLayout | None:
    try:
        size = [int(n) for n in layout.size]
        stride = [int(n) for n in layout.stride]
        if int(layout.offset) != 0:
            return None
        device_layout = generic_stick_layout(size, stride, layout.dtype,
                                             list(range(len(size))) + [-1])
    except (TypeError, LayoutError):
        return None
    return FixedTiledLayout(layout.device, layout.dtype, [sympy.Integer(n) for n in size],
                            [sympy.Integer(n) for n in stride], device_layout=device_layout)


def value_per_stick_copies(op: ir.ComputedBuffer, layouts: dict[str, Any],
                           reads: list[tuple[MemoryDep, set[sympy.Symbol]]],
                           write: MemoryDep, out_vars: set[sympy.Symbol],
                           v: sympy.Symbol | None) -> dict[str, FixedTiledLayout]:
    """Buffer -> one-value-a-stick layout for each read in ``reads`` (read as laid out,
    with its stick variables) stuck on an output variable ``u`` other than the output's
    stick ``v`` (None: no variable moves the write's stick) that ``op``'s write must
    split finer than a stick of the read, when no other host dim of the read is walked
    and the policy takes the copy (told its bytes whole)."""
    if isinstance(op.data, ir.Reduction):
        return {}
    fitting = fitting_tiles(op, layouts, [write])
    found: dict[str, FixedTiledLayout] = {}
    for dep, sticks in reads:
        layout = layouts.get(dep.name)
        if layout is None or not layout.dtype.is_floating_point or len(sticks) != 1:
            continue
        (u,) = sticks
        if u == v or u not in out_vars or u not in dep.ranges or v in dep.index.free_symbols:
            continue
        elems = int(layout.device_layout.elems_per_stick)
        if not cuts_sticks_of(fitting, u, int(dep.ranges[u]), elems) \
                or not _no_other_walked_dim(layout, dep, u):
            continue
        sparse = _sparse(layout)
        if sparse is None:
            continue
        sticks_needed = 1
        for n in sparse.device_layout.device_size[:-1]:
            sticks_needed *= int(n)
        if take(op, "value_per_stick", dep.name, sticks_needed * BYTES_IN_STICK):
            found[dep.name] = sparse
    return found
