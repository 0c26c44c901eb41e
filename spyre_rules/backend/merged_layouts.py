"""Lay a concatenation out as the view its readers walk (docs/layout_model.md §1.3).

``torch.stack([a, b], dim=d + 1).flatten(d, d + 1)`` (``associative_scan``'s
interleave, which Mamba's selective scan runs ``log2(seq)`` times) lowers to a
ConcatKernel of ``[n, 2, ...]`` read flat as ``[2n, ...]``.  Its generic layout
puts the pair dim outermost on the device and ``n`` just outside the stick, so
the reader's tiles along the flat dim are no rigid translations of the first
(one element apart they jump between the halves) and any tile keeping a pair
whole spans both halves.  Such a buffer gets the generic layout of the view in
which no access walks across a dim boundary (``facts.merged_view``); host size
and strides are kept.

Only concatenations: their regions write tiles straight into the whole buffer, so
its layout is never rebuilt per tile (a per-tile resize maps device dims to host
dims by size, which a merged device dim has not).  Only when automatic tiling is
on: the layout serves the tiles it would cut, as the broadcast stick choice does.
"""

from __future__ import annotations

from typing import Any

from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep

from spyre_rules import config
from spyre_rules.facts.merged_view import merged_view
from spyre_rules.facts.stick_layout import generic_stick_layout
from spyre_rules.facts.tiled_layout import FixedTiledLayout
from spyre_rules.ir.graph_state import RulesGraphState
from spyre_rules.ir.ir_edit import drop_caches

__all__ = ["accesses_by_buffer", "lay_out_merged_views"]


#: a buffer whose accesses cannot be listed (a dependency that is no MemoryDep)
_UNLISTED = None


def accesses_by_buffer(graph: Any, regions: dict[str, str]) -> dict[str, Any] | None:
    """``(index, ranges)`` of every region write into and every read of each buffer, in op
    order (``_UNLISTED`` for a buffer one of whose accesses is no MemoryDep); None when an
    op cannot be described at all (then no buffer's accesses are known).

    One pass over the ops: Inductor recomputes ``get_read_writes`` on every call (it traces
    the op's body), and asking every op once per concatenation was quadratic in the graph
    (Kimi-Linear's hundreds of concatenations, one per constant pad: most of its compile).
    A reader's indices go through the host strides, which a merged layout keeps, so laying
    out one concatenation changes no other's accesses.
    """
    found: dict[str, Any] = {}
    for op in graph.operations:
        if isinstance(op, ir.ConcatKernel):
            continue
        try:
            rw = op.get_read_writes()
        except Exception:  # noqa: BLE001  (an op Inductor cannot describe: keep the host view)
            return None
        deps = list(rw.reads)
        region = regions.get(op.get_name())
        if region is not None:
            deps += [(region, d) for d in rw.writes]
        for dep in deps:
            name, dep = dep if isinstance(dep, tuple) else (dep.name, dep)
            if found.get(name, ()) is _UNLISTED:
                continue
            if not isinstance(dep, MemoryDep):
                found[name] = _UNLISTED
                continue
            found.setdefault(name, []).append((dep.index, dep.ranges))
    return found


def lay_out_merged_views(graph: Any, state: RulesGraphState) -> None:
    """Give every concatenation whose readers walk merged host dims the generic layout
    of that merged view (``state.layouts`` entries sharing its layout follow)."""
    if config.ignore_span_overflow_hints:
        return
    by_buffer: dict[str, Any] | None = None
    for op in graph.operations:
        layout = getattr(op, "layout", None)
        if not isinstance(op, ir.ConcatKernel) or not isinstance(layout, FixedTiledLayout) \
                or int(layout.offset) != 0:
            continue
        if by_buffer is None:
            by_buffer = accesses_by_buffer(graph, state.regions)
            if by_buffer is None:
                return
        accesses = by_buffer.get(op.get_name())
        if not accesses:
            continue
        view = merged_view([int(s) for s in layout.size], [int(s) for s in layout.stride],
                           accesses)
        if view is None:
            continue
        merged = FixedTiledLayout(
            layout.device, layout.dtype, list(layout.size), list(layout.stride),
            device_layout=generic_stick_layout(view[0], view[1], layout.dtype),
        )
        op.layout = merged
        drop_caches(op)
        for key, value in list(state.layouts.items()):
            if value is layout:
                state.layouts[key] = merged
