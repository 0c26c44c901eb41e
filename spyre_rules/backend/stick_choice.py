"""Put an op's stick on the variable its big broadcast read is stuck on.

The default stick is the output's last host dim (backend/layouts.py).  A
pointwise op that broadcasts a read stuck on another output variable ``u`` --
Mamba2's ``segment_sum`` expands A of (b, c, l, h), stuck on the heads, to
(b, h, c, l, s) -- is then stuck on ``s`` with ``u`` outermost.  When the
output is over the span limit, a tile written into it may hold so few ``u``
values that it cuts the read's sticks (at 32768 tokens: 32 MiB per head, at most
8 heads per tile, 32 heads per stick of A), and a restickify of that output onto
``u`` (what the chunk scan's ``G * L.permute(...)`` then needs, its stick on the
heads) reads ``u`` outermost with a stride no tile can span.  Such an op keeps its
host shape and strides but gets the device layout a restickify onto ``u``'s dim
would write (``u`` the stick): its tiles split anything but ``u``'s sticks.  Ops
reading it with ``u`` outermost in their own default layout (the cumsum over it,
the masks, the exp) follow, so the chain stays stuck on ``u``
(docs/layout_model.md §1.3).
"""

from __future__ import annotations

from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep

from spyre_rules import config
from spyre_rules.errors import CoordinateError
from spyre_rules.facts.coordinates import access_coordinates, host_coordinates
from spyre_rules.facts.stick_layout import restickify_layout
from spyre_rules.facts.tiled_layout import FixedTiledLayout

__all__ = ["restuck_for_broadcast_read"]


def _device_vars(layout: Any, dep: MemoryDep) -> list[set[sympy.Symbol]] | None:
    try:
        coords = access_coordinates(
            layout.device_layout, layout.size, layout.stride, layout.offset, dep.index, dep.ranges
        )
    except CoordinateError:
        return None
    return [set(c.free_symbols) & set(dep.ranges) for c in coords]


def _cuts_read_sticks(write: MemoryDep, u: sympy.Symbol, itemsize: int, stick_elems: int) -> bool:
    """A tile of ``u`` small enough for the output to fit cuts a stick of the read."""
    total = itemsize
    for r in write.ranges.values():
        total *= int(r)
    if total <= config.max_span_bytes:
        return False
    extent = int(write.ranges[u])
    fitting_tile = config.max_span_bytes * extent // total
    return fitting_tile < min(stick_elems, extent)


def _stick_var(op: ir.ComputedBuffer, layout: Any, layouts: dict[str, Any],
               restuck: set[str]) -> tuple[MemoryDep, sympy.Symbol] | None:
    rw = op.get_read_writes()
    writes = [d for d in rw.writes if isinstance(d, MemoryDep)]
    if len(writes) != 1:
        return None
    write = writes[0]
    out = _device_vars(layout, write)
    if not out or len(out[-1]) != 1:
        return None
    (v,) = out[-1]
    outer = next((vs for vs in out[:-1] if vs), set())
    if len(outer) != 1:
        return None
    (u,) = outer
    for dep in rw.reads:
        read_layout = layouts.get(dep.name)
        if not isinstance(dep, MemoryDep) or read_layout is None \
                or not read_layout.dtype.is_floating_point:
            # an integer read is an index (an embedding's token ids), not a broadcast value
            continue
        sticks = _device_vars(read_layout, dep)
        if not sticks or sticks[-1] != {u} or u == v:
            continue
        if dep.name in restuck:
            return write, u
        if v not in dep.index.free_symbols and _cuts_read_sticks(
                write, u, layout.dtype.itemsize, read_layout.device_layout.device_size[-1]):
            return write, u
    return None


def restuck_for_broadcast_read(op: ir.ComputedBuffer, layout: Any, layouts: dict[str, Any],
                               restuck: set[str]) -> FixedTiledLayout | None:
    """``layout`` with its device layout stuck on ``u``'s host dim (host size and
    strides kept, as a restickify's copy), or None to keep ``layout``."""
    if config.ignore_span_overflow_hints:
        return None  # the layout only serves the tiles automatic tiling would cut
    found = _stick_var(op, layout, layouts, restuck)
    if found is None:
        return None
    write, u = found
    size = [int(s) for s in layout.size]
    stride = [int(s) for s in layout.stride]
    try:
        coords = host_coordinates(layout.size, layout.stride, write.index - layout.offset,
                                  write.ranges)
    except CoordinateError:
        return None
    dims = [d for d, c in enumerate(coords) if u in c.free_symbols]
    if len(dims) != 1 or int(layout.offset) != 0:
        return None
    return FixedTiledLayout(
        layout.device, layout.dtype, list(layout.size), list(layout.stride),
        device_layout=restickify_layout(size, stride, layout.dtype, dims[0]),
    )
