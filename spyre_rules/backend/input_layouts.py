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

A gathered read (an indirect coordinate: any index may pick any row of that host dim)
cannot take the staged layout: with the gathered dim outside the finely split one, one
tile spans every row of it whatever the split.  gpt_oss's experts weight ``[E, K, N]``
(``grouped_mm``, backend/grouped_mm.py, the expert gathered through each row's group)
staged as ``[E, N/eps, K, eps]`` spans the whole weight (512 KiB at the sweep's tiny sizes)
and the product was refused at 64 KiB.  Such an input is stuck on the finely split dim
instead, the gathered dim just outside the stick (``[N, K/eps, E, eps]``, the layout
Mixtral's ``[E, N, K]`` weight has generically): a tile of whole sticks of K spans one
stick of every expert per N row, and N splits as any outer dim.
"""

from __future__ import annotations

from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep

from spyre_rules.backend.stick_choice import fitting_tiles
from spyre_rules.errors import CoordinateError, LayoutError
from spyre_rules.facts.coordinates import access_coordinates, host_coordinates
from spyre_rules.facts.gathered import indirect_ranges
from spyre_rules.facts.read_writes import read_writes
from spyre_rules.facts.restickify_facts import staged_restickify_layout
from spyre_rules.facts.stick_layout import SpyreTensorLayout, generic_stick_layout, within_stick_host_dim
from spyre_rules.facts.tiled_layout import FixedTiledLayout
from spyre_rules.ir.graph_state import RulesGraphState

__all__ = ["relayout_finely_split_inputs", "relayout_gathered_inputs"]


def _stick_var(layout: Any, dep: MemoryDep) -> sympy.Symbol | None:
    try:
        coords = access_coordinates(layout.device_layout, layout.size, layout.stride,
                                    layout.offset, dep.index, dep.ranges)
    except CoordinateError:
        return None
    found = set(coords[-1].free_symbols) & set(dep.ranges)
    return next(iter(found)) if len(found) == 1 else None


def _finely_split(op: ir.ComputedBuffer, state: RulesGraphState) -> dict[str, sympy.Symbol]:
    """The graph inputs ``op`` reads with a variable ``u`` alone on an outer device dim
    that a tile must hold fewer values of than a stick of another read stuck on ``u``."""
    reads = [d for d in op.get_read_writes().reads
             if isinstance(d, MemoryDep) and d.name in state.layouts]
    found: dict[str, sympy.Symbol] = {}
    for dep in reads:
        if dep.name not in state.host_inputs:
            continue
        for u, tile in fitting_tiles(op, state.layouts, [dep]).items():
            for other in reads:
                layout = state.layouts[other.name]
                stick = int(layout.device_layout.device_size[-1])
                if other.name != dep.name and _stick_var(layout, other) == u \
                        and tile < min(stick, int(dep.ranges[u])):
                    found[dep.name] = u
    return found


def _gathered_dims(op: ir.ComputedBuffer, layout: Any, dep: MemoryDep) -> list[int] | None:
    """Host dims of ``dep`` whose coordinate holds an indirect symbol (any index may pick
    any row); None when an indirect symbol has no static bound to place it by."""
    if not dep.is_indirect():
        return []
    recorded = read_writes(op)  # Inductor's own records keep no indirect symbol's bound
    same = [d for d in recorded.reads if isinstance(d, MemoryDep) and d.name == dep.name
            and d.index == dep.index]
    bounds = indirect_ranges(dep.index, recorded) if same else None
    if bounds is None:
        return None
    coords = host_coordinates(layout.size, layout.stride, dep.index - layout.offset,
                              {**dict(dep.ranges), **bounds})
    return [d for d, c in enumerate(coords) if set(c.free_symbols) & set(bounds)]


def _layout_for(size: list[int], stride: list[int], dtype: Any, gathered: list[int] | None,
                stick: int, split: int) -> SpyreTensorLayout | None:
    """The staged layout (``split`` just outside the stick), or for a read gathered on
    one host dim: stuck on ``split`` with the gathered dim just outside the stick."""
    if gathered == []:
        return staged_restickify_layout(size, stride, dtype, stick, split)
    if gathered is None or len(gathered) != 1 or gathered[0] == split:
        return None
    order = [gathered[0]] + [d for d in range(len(size)) if d not in (gathered[0], split)]
    return generic_stick_layout(size, stride, dtype, order + [split])


def _input_buffer(graph: Any, name: str) -> Any:
    node = graph.graph_inputs.get(name)
    while isinstance(node, (ir.StorageBox, ir.TensorBox)):
        node = node.data
    return node


def _relayout_inputs_of(graph: Any, op: ir.ComputedBuffer, state: RulesGraphState,
                        gathered_only: bool) -> None:
    for name, u in _finely_split(op, state).items():
        if name in state.relaid_inputs:
            continue
        layout = state.layouts[name]
        dep = next(d for d in op.get_read_writes().reads
                   if isinstance(d, MemoryDep) and d.name == name)
        if gathered_only and not dep.is_indirect():
            continue
        try:
            size, stride = [int(s) for s in layout.size], [int(s) for s in layout.stride]
            coords = host_coordinates(layout.size, layout.stride, dep.index - layout.offset,
                                      dep.ranges)
            dims = [d for d, c in enumerate(coords) if u in c.free_symbols]
            stick = within_stick_host_dim(size, stride, layout.device_layout)
            if len(dims) != 1 or stick is None or dims[0] == stick:
                continue
            device = _layout_for(size, stride, layout.dtype, _gathered_dims(op, layout, dep),
                                 stick, dims[0])
        except (CoordinateError, LayoutError, TypeError, ValueError):
            continue
        if device is None:
            continue
        new = FixedTiledLayout(layout.device, layout.dtype, list(layout.size),
                               list(layout.stride), device_layout=device)
        state.layouts[name] = new
        buf = _input_buffer(graph, name)
        if isinstance(buf, ir.Buffer):
            buf.layout = new
        state.relaid_inputs.add(name)


def relayout_gathered_inputs(graph: Any, op: ir.ComputedBuffer, state: RulesGraphState) -> None:
    """Before ``op``'s own layout is chosen (backend/layouts.py): its gathered graph-input
    reads that it must split finely, stuck on that dim (``_layout_for``), so that the
    choice of ``op``'s stick (``stick_choice.restuck_off_a_wide_read``) sees the layout
    they are read through: gpt_oss's grouped product then sticks on its rows as
    Mixtral's does, and splits rows, columns and depth."""
    _relayout_inputs_of(graph, op, state, gathered_only=True)


def relayout_finely_split_inputs(graph: Any, state: RulesGraphState) -> None:
    """Give each graph input a reader must split finer than a stick of another read
    (``_finely_split``) its staged layout: that dim just outside the stick."""
    for op in graph.operations:
        if isinstance(op, ir.ComputedBuffer):
            _relayout_inputs_of(graph, op, state, gathered_only=False)
