"""Give every graph input, constant and ComputedBuffer a FixedTiledLayout.

Stick choice (docs/layout_model.md §1.3): the stick is the last host dim (the generic
layout, ``dim_order = None``).  Only when the last host dim has size 1 (e.g. a
``keepdim`` reduction output ``[M, 1]``) do we follow the reference's
``_compute_dim_order`` shape instead: the stick is the last dim of size > 1,
preceded by the other non-unit dims in order and then the unit dims.  A stick
on a size-1 dim would put one element in each 64-element stick.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._inductor import ir

from spyre_rules.backend.concat import region_bases, region_offset
from spyre_rules.backend.gathered_sticks import gathered_read_layouts
from spyre_rules.backend.in_place import in_place_target
from spyre_rules.backend.input_layouts import relayout_gathered_inputs
from spyre_rules.backend.merged_layouts import lay_out_merged_views
from spyre_rules.backend.outer_order import reordered_output
from spyre_rules.backend.row_major_layouts import lay_out_rows_outermost
from spyre_rules.backend.stick_choice import (
    broadcast_read_restickify,
    restuck_for_broadcast_read,
    restuck_off_a_wide_read,
)
from spyre_rules.backend.support import is_opaque_input, static_ints
from spyre_rules.errors import LayoutError
from spyre_rules.facts.tiled_layout import FixedTiledLayout, fixed_tiled_layout
from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.ir.graph_state import RulesGraphState
from spyre_rules.ir.ir_edit import drop_caches, op_description
from spyre_rules.passes.pipeline import automatic_tiling_enabled

__all__ = ["assign_layouts", "choose_dim_order", "tiled_layout_for"]


def choose_dim_order(size: list[int]) -> list[int] | None:
    """Host dims outermost first, stick last; None = the generic (identity) order."""
    if not size or size[-1] != 1:
        return None
    non_unit = [d for d, s in enumerate(size) if s != 1]
    if not non_unit:
        return None
    stick = non_unit[-1]
    units = [d for d, s in enumerate(size) if s == 1]
    return [d for d in non_unit if d != stick] + units + [stick]


def tiled_layout_for(node: Any, layout: Any, what: str) -> FixedTiledLayout:
    size = static_ints(layout.size, "size", node)
    stride = static_ints(layout.stride, "stride", node)
    offset = static_ints([layout.offset], "offset", node)[0]
    try:
        return fixed_tiled_layout(
            layout.device, layout.dtype, size, stride, offset, choose_dim_order(size)
        )
    except LayoutError as exc:
        raise UnsupportedGraph(f"{what}: no Spyre stick layout: {exc}") from None


def _input_buffer(value: ir.TensorBox) -> Any:
    node = value.data
    while isinstance(node, (ir.StorageBox, ir.TensorBox)):
        node = node.data
    return node


def assign_layouts(graph: Any, state: RulesGraphState) -> None:
    for name, value in graph.graph_inputs.items():
        if is_opaque_input(value):
            continue  # a process group: no device copy (backend/support.py)
        buf = _input_buffer(value)
        layout = tiled_layout_for(buf, buf.get_layout(), f"graph input {name}")
        if isinstance(buf, ir.Buffer):
            buf.layout = layout
        state.layouts[name] = layout
        state.host_inputs.append(name)
    for name, tensor in graph.constants.items():
        fixed = ir.FixedLayout(
            torch.device("cpu"), tensor.dtype, list(tensor.size()), list(tensor.stride())
        )
        state.layouts[name] = tiled_layout_for(name, fixed, f"constant {name}")
        state.host_inputs.append(name)
    for op in graph.operations:
        if isinstance(op, ir.ConcatKernel):
            layout = tiled_layout_for(op, op.layout, op_description(op))
            op.layout = layout
            state.layouts[op.get_name()] = layout
    state.regions = region_bases(graph)
    restrided: set[str] = set()
    for op in graph.operations:
        if not isinstance(op, ir.ComputedBuffer):
            continue
        target = in_place_target(op)
        if target is not None:
            # Writes its target in place (backend/in_place.py): the target's layout
            # and allocation; its MutationLayout stays (Inductor indexes through it).
            state.in_place[op.get_name()] = target
            state.layouts[op.get_name()] = state.layouts[target]
            continue
        base = state.regions.get(op.get_name())
        if base is not None:
            # Its NonOwningLayout stays (Inductor indexes the store through it);
            # its accesses use the concatenation's layout and allocation.
            state.layouts[op.get_name()] = state.layouts[base]
            state.region_offsets[op.get_name()] = static_ints(
                [region_offset(op)], "region offset", op)[0]
            continue
        if not isinstance(op.layout, ir.FixedLayout):
            op.freeze_layout()
        # the layouts op reads through: its gathered reads it splits finely, stuck on
        # that dim (gathered_sticks.py; a graph input laid out so, a computed buffer
        # read through a copy that restickify.py inserts), before its own stick is chosen
        reads = state.layouts
        if automatic_tiling_enabled():
            relayout_gathered_inputs(graph, op, state)  # input_layouts.py
            copies = gathered_read_layouts(op, state.layouts,
                                           lambda name: name not in state.host_inputs)
            if copies:
                state.gathered_restickifies[op.get_name()] = copies
                reads = {**state.layouts, **copies}
        layout = tiled_layout_for(op, op.layout, op_description(op))
        # stick_choice.py: stuck on the variable its big broadcast read is stuck on
        restuck = restuck_for_broadcast_read(op, layout, reads, restrided)
        if restuck is not None:
            layout = restuck
            restrided.add(op.get_name())
        else:
            layout = restuck_off_a_wide_read(op, layout, reads) or layout
            moved = broadcast_read_restickify(op, layout, reads, restrided)
            if moved is not None:
                state.broadcast_restickifies[op.get_name()] = dict([moved])
            else:
                # outer_order.py: its write's finely split dim just outside its stick
                layout = reordered_output(op, layout, reads) or layout
        op.layout = layout
        drop_caches(op)
        state.layouts[op.get_name()] = layout
    # merged_layouts.py: a concatenation read through a flattening view
    lay_out_merged_views(graph, state)
    # row_major_layouts.py: a buffer read across its stick into its outermost dim
    lay_out_rows_outermost(graph, state)
    state.host_outputs = _host_visible_outputs(graph)


def _host_visible_outputs(graph: Any) -> set[str]:
    """Buffers the wrapper hands back to the caller (directly or through a view)."""
    names: set[str] = set()
    for out in graph.graph_outputs:
        node = out
        while isinstance(node, (ir.TensorBox, ir.StorageBox, ir.BaseView)):
            node = node.data
        if isinstance(node, ir.Buffer):
            names.add(node.get_name())
    return names
