"""Concatenation: each input op writes its own region of the one output buffer.

On CPU Inductor lowers ``cat`` to a ``ConcatKernel`` (no computation of its own)
whose inputs are realized *into* it: each input becomes a ComputedBuffer with a
``NonOwningLayout``, a strided view of the concatenation's storage at the input's
offset, so its store index is already an index of that storage.  We keep that
shape (docs/layout_model.md, "Concatenation"): the concatenation buffer gets a
Spyre layout and an HBM allocation like any buffer, and each region op is an
OpSpec whose store TensorArg addresses the concatenation buffer, its device
coordinates derived from the store index with the concatenation's layout.  The
regions are disjoint, every TensorArg is an ordinary dense access, and the span
check covers each one.  No copy op is added.

A constant pad is a concatenation too (``pad_decompositions``): ``F.pad(x, (1, 3))``
is ``cat([full(1), x, full(3)], -1)``, one dim at a time, a negative pad a
slice.  Inductor's own pad lowering is one op whose loads of ``x`` sit under a
mask and read at ``index - 1``: an access that leaves the buffer on the masked
lanes, which a Spyre program cannot describe as a dense access.

A ``slice_scatter`` (what functionalization makes of ``key[..., 16:].copy_(k)``,
DeepSeek's keys and xLSTM's state) is a concatenation for the same reason:
Inductor's lowering reads ``src`` under a mask at ``index - start`` on every lane of
the output, out of range (or at a negative offset) where the mask is off.  With
step 1 it is ``cat([input[:start], src, input[end:]], dim)``: the same elements
moved, nothing computed.  A post-grad graph pass (``post_grad.py``) rewrites it;
another step, and a scatter into a graph input written back (left to Inductor's
reinplacing: an in-place write of the slice), stay with Inductor's lowering.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._inductor import ir

__all__ = ["pad_decompositions", "region_base", "region_bases", "region_offset",
           "slice_scatters_as_cat"]

aten = torch.ops.aten


def region_base(op: Any) -> str | None:
    """The buffer an op with a NonOwningLayout writes into (None: it owns its buffer)."""
    layout = getattr(op, "layout", None)
    if not isinstance(layout, ir.NonOwningLayout):
        return None
    return layout.view.get_name()


def region_offset(op: Any) -> Any:
    """Storage offset of the op's region in the concatenation buffer.

    Inductor puts it in the wrapper's ``reinterpret_tensor`` of the region, not
    in the op's store index (which is relative to the region)."""
    return op.layout.view.get_layout().offset


def region_bases(graph: Any) -> dict[str, str]:
    """Region op name -> concatenation buffer name, for every ConcatKernel input."""
    concats = {op.get_name() for op in graph.operations if isinstance(op, ir.ConcatKernel)}
    out = {}
    for op in graph.operations:
        base = region_base(op)
        if base is not None and base in concats:
            out[op.get_name()] = base
    return out


def _constant_pad_as_cat(x: torch.Tensor, pad: list[int], value: Any = 0) -> torch.Tensor:
    out, fresh = x, False
    for i in range(len(pad) // 2):
        d = x.dim() - 1 - i  # pad pairs run from the last dim backwards
        left, right = int(pad[2 * i]), int(pad[2 * i + 1])
        if left < 0:
            out = out.narrow(d, -left, out.shape[d] + left)
            left = 0
        if right < 0:
            out = out.narrow(d, 0, out.shape[d] + right)
            right = 0
        parts = []
        for width, is_left in ((left, True), (right, False)):
            if width:
                shape = list(out.shape)
                shape[d] = width
                fill = torch.full(shape, value, dtype=out.dtype, device=out.device)
                parts.append((is_left, fill))
        if parts:
            pieces = [p for left_side, p in parts if left_side] + [out] + \
                     [p for left_side, p in parts if not left_side]
            out, fresh = torch.cat(pieces, d), True
    # the result never aliases x (a pure crop is a view of it)
    return out if fresh else out.clone()


def pad_decompositions() -> dict[Any, Any]:
    return {aten.constant_pad_nd.default: _constant_pad_as_cat}



def _mutated_input_storages(graph: Any) -> set[Any]:
    """Storages of the graph inputs the graph writes back (``copy_`` into an input)."""
    from torch._inductor.fx_utils import get_node_storage

    inputs = {get_node_storage(n) for n in graph.find_nodes(op="placeholder")} - {None}
    return {get_node_storage(n.args[0])
            for n in graph.find_nodes(op="call_function", target=aten.copy_.default)} & inputs


def _slice_scatter_args(x: Any, src: Any, dim: int = 0, start: Any = None, end: Any = None,
                        step: Any = 1) -> tuple[Any, ...]:
    return x, src, dim, start, end, step


def _step_one_region(node: Any) -> tuple[int, int, int] | None:
    """(dim, first, stop) of a static step-1 ``slice_scatter`` node, else None."""
    x, src, dim, start, end, step = _slice_scatter_args(*node.args, **node.kwargs)
    x, src = x.meta.get("val"), src.meta.get("val")
    if not isinstance(x, torch.Tensor) or not isinstance(src, torch.Tensor) or x.dim() == 0:
        return None
    if step != 1 or not all(isinstance(v, int) for v in (*x.shape, *src.shape)) or \
            not all(v is None or isinstance(v, int) for v in (start, end)):
        return None
    dim = dim % x.dim()
    region = range(x.shape[dim])[slice(start, end)]  # Python's normalisation of start, end
    first, stop = region.start, max(region.start, region.stop)
    if src.dtype != x.dtype or src.shape[dim] != stop - first:
        return None
    return dim, first, stop


def slice_scatters_as_cat(graph: Any) -> bool:
    """Each step-1 ``slice_scatter`` of ``graph`` as a concatenation (module doc); True
    if the graph changed.

    One whose input is a graph input the graph writes back (or a view of one), or
    another scatter kept for that reason, is left to Inductor's reinplacing: a KV
    cache written at a slice stays one in-place write of that slice, not a copy of
    the whole cache."""
    from torch._inductor.fx_passes.reinplace import graph_call_function
    from torch._inductor.fx_utils import get_node_storage

    inputs, kept, changed = _mutated_input_storages(graph), set(), False
    for node in list(graph.find_nodes(op="call_function", target=aten.slice_scatter.default)):
        base = node.args[0]
        region = _step_one_region(node)
        if region is None or base in kept or get_node_storage(base) in inputs:
            kept.add(node)
            continue
        dim, first, stop = region
        size = base.meta["val"].shape[dim]
        with graph.inserting_before(node):
            pieces = []
            for lo, hi in ((0, first), (None, None), (stop, size)):
                if lo is None:
                    pieces.append(node.args[1])
                elif hi > lo:
                    pieces.append(graph_call_function(graph, aten.slice.Tensor, base, dim, lo, hi))
            out = (graph_call_function(graph, aten.cat.default, pieces, dim) if len(pieces) > 1
                   else graph_call_function(graph, aten.clone.default, pieces[0]))
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        changed = True
    return changed
