"""Lay a buffer read across its stick into its outermost dim out rows outermost.

qwen3_next's gated norm writes ``[T * H, D]`` and the output projection reads it as
``[T, H * D]``: its reduction variable walks the stick (D) on into the rows.  The
generic layout ``[D/eps, T * H, eps]`` puts the rows inside the stick columns, so no
tile of that variable is a rigid translation of the first and every tile holding
whole rows spans every column (``Cannot auto-tile ... not rigid translations``).  Such
a buffer gets the row-major layout ``[T * H, D/eps, eps]`` (``facts.row_major_sticks``),
where the walk moves along consecutive sticks and the writer's tiles of rows stay
whole rows.  Host size and strides are kept; its readers read it as laid out.

Only ComputedBuffers still in the generic layout (a layout another remedy chose is
kept), never a concatenation's region or an in-place write (they share their target's
layout), and only under automatic tiling: the layout serves the tiles it would cut.
"""

from __future__ import annotations

from typing import Any

from torch._inductor import ir

from spyre_rules.backend.layout_choice import take
from spyre_rules.backend.merged_layouts import accesses_by_buffer
from spyre_rules.errors import LayoutError
from spyre_rules.facts.row_major_sticks import (
    may_read_across_the_stick_into_dim_0,
    reads_across_the_stick_into_dim_0,
    row_major_stick_layout,
)
from spyre_rules.facts.stick_layout import generic_stick_layout
from spyre_rules.facts.tiled_layout import FixedTiledLayout
from spyre_rules.ir.graph_state import RulesGraphState
from spyre_rules.ir.ir_edit import drop_caches

__all__ = ["lay_out_rows_outermost"]


def _generic(layout: FixedTiledLayout) -> bool:
    try:
        return layout.device_layout == generic_stick_layout(
            [int(s) for s in layout.size], [int(s) for s in layout.stride], layout.dtype)
    except (LayoutError, TypeError):
        return False


def lay_out_rows_outermost(graph: Any, state: RulesGraphState) -> None:
    """Give every ComputedBuffer some access walks from its stick into its outermost dim
    the row-major stick layout (``state.layouts`` entries sharing its layout follow), when
    the policy takes the remedy (rules/layout_choice.rules ``row_major``)."""
    by_buffer: dict[str, Any] | None = None
    for op in graph.operations:
        layout = getattr(op, "layout", None)
        name = op.get_name() if isinstance(op, ir.ComputedBuffer) else None
        if name is None or name in state.in_place or name in state.regions \
                or not isinstance(layout, FixedTiledLayout) \
                or state.layouts.get(name) is not layout \
                or not layout.dtype.is_floating_point or int(layout.offset) != 0:
            continue
        size, stride = [int(s) for s in layout.size], [int(s) for s in layout.stride]
        eps = layout.device_layout.elems_per_stick
        # the shape first: listing every op's accesses traces each body once
        if not may_read_across_the_stick_into_dim_0(size, stride, eps) or not _generic(layout):
            continue
        if by_buffer is None:
            by_buffer = accesses_by_buffer(graph, state.regions)
            if by_buffer is None:
                return
        accesses = by_buffer.get(name)
        if not accesses or not reads_across_the_stick_into_dim_0(
                size, stride, eps, accesses):
            continue
        if not take(op, "row_major", name):
            continue
        rows = FixedTiledLayout(layout.device, layout.dtype, list(layout.size),
                                list(layout.stride),
                                device_layout=row_major_stick_layout(size, stride, layout.dtype))
        op.layout = rows
        drop_caches(op)
        for key, value in list(state.layouts.items()):
            if value is layout:
                state.layouts[key] = rows
