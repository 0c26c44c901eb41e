"""Lay a graph input out with a dim just outside its stick when a reader must split it finely.

The generic layout keeps a ``[E, K, N]`` input stuck on N with K outermost and E just
outside the stick (docs/layout_model.md §1.3): one step of K covers every expert.
Llama 4's experts multiply tokens grouped by expert ``[E, T, K]`` by such a weight
(``bmm``): at the sweep's tiny sizes one K row of the weight is 4 KiB, so at 64 KiB a tile
may hold 16 K values, while the tokens are stuck on K with 32 values a stick: every split
of K that fits the weight cuts the tokens' sticks (``input_sticks_whole``) and the product
was refused.  Under automatic tiling such an input gets the layout a staged restickify's
intermediate has (``staged_restickify_layout``): the same stick, the finely split dim just
outside it, so one step of it is one stick, and its other dims (the experts, N's sticks)
outside both, split as any outer dim.  A graph input is copied into its device layout
when the program is called, so this costs no copy in the program; the host tensor and
its strides are unchanged.  Only graph inputs: an intermediate's layout is its writer's.

A gathered read (an indirect coordinate) cannot take the staged layout: with the gathered
dim outside the finely split one, every tile spans every row of it.  Such an input is
laid out by ``relayout_gathered_inputs`` before its reader's own stick is chosen, stuck
on the finely split dim with the gathered dim just outside the stick
(backend/gathered_sticks.py: gpt_oss's experts weight).
"""

from __future__ import annotations

from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep

from spyre_rules.backend.gathered_sticks import finely_split, gathered_read_layouts, split_host_dim
from spyre_rules.errors import CoordinateError, LayoutError
from spyre_rules.facts.restickify_facts import staged_restickify_layout
from spyre_rules.facts.stick_layout import within_stick_host_dim
from spyre_rules.facts.tiled_layout import FixedTiledLayout
from spyre_rules.ir.graph_state import RulesGraphState

__all__ = ["relayout_finely_split_inputs", "relayout_gathered_inputs"]


def _finely_split_inputs(op: ir.ComputedBuffer, state: RulesGraphState) -> dict[str, sympy.Symbol]:
    return finely_split(op, state.layouts, lambda dep: dep.name in state.host_inputs)


def _input_buffer(graph: Any, name: str) -> Any:
    node = graph.graph_inputs.get(name)
    while isinstance(node, (ir.StorageBox, ir.TensorBox)):
        node = node.data
    return node


def _set_input_layout(graph: Any, state: RulesGraphState, name: str,
                      new: FixedTiledLayout) -> None:
    state.layouts[name] = new
    buf = _input_buffer(graph, name)
    if isinstance(buf, ir.Buffer):
        buf.layout = new
    state.relaid_inputs.add(name)


def relayout_gathered_inputs(graph: Any, op: ir.ComputedBuffer, state: RulesGraphState) -> None:
    """Before ``op``'s own layout is chosen (backend/layouts.py): its gathered graph-input
    reads that it must split finely, stuck on that dim (``gathered_sticks.gathered_read_layouts``), so that the
    choice of ``op``'s stick (``stick_choice.restuck_off_a_wide_read``) sees the layout
    they are read through: gpt_oss's grouped product then sticks on its rows as
    Mixtral's does, and splits rows, columns and depth."""
    relaid = gathered_read_layouts(op, state.layouts, lambda name: name in state.host_inputs
                                   and name not in state.relaid_inputs)
    for name, new in relaid.items():
        _set_input_layout(graph, state, name, new)


def relayout_finely_split_inputs(graph: Any, state: RulesGraphState) -> None:
    """Give each graph input a reader must split finer than a stick of another read
    (``gathered_sticks.finely_split``) its staged layout: that dim just outside the stick."""
    for op in graph.operations:
        if not isinstance(op, ir.ComputedBuffer):
            continue
        for name, u in _finely_split_inputs(op, state).items():
            layout = state.layouts[name]
            dep = next(d for d in op.get_read_writes().reads
                       if isinstance(d, MemoryDep) and d.name == name)
            if name in state.relaid_inputs or dep.is_indirect():
                continue  # a gathered read: relayout_gathered_inputs
            try:
                split = split_host_dim(layout, dep, u)
                if split is None:
                    continue
                size, stride = [int(s) for s in layout.size], [int(s) for s in layout.stride]
                stick = within_stick_host_dim(size, stride, layout.device_layout)
                device = staged_restickify_layout(size, stride, layout.dtype, stick, split)
            except (CoordinateError, LayoutError, TypeError, ValueError):
                continue
            _set_input_layout(graph, state, name, FixedTiledLayout(
                layout.device, layout.dtype, list(layout.size), list(layout.stride),
                device_layout=device))
