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

When ``u`` is narrower than a stick of the output, that remedy pads every stick of
the output (4 heads of fp32: 8 times its bytes) and the chain after it cannot tile;
the read, a broadcast far smaller than the output, is restickified instead onto
another output variable (``broadcast_read_restickify``; backend/restickify.py
inserts the copy) and the op keeps its layout.
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

__all__ = ["broadcast_read_restickify", "cuts_sticks_of", "fitting_tiles", "host_dim_of", "stick_vars",
           "restuck_for_broadcast_read", "restuck_off_a_wide_read"]


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
               restuck: set[str]) -> tuple[MemoryDep, sympy.Symbol, MemoryDep] | None:
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
            return write, u, dep
        if v not in dep.index.free_symbols and _cuts_read_sticks(
                write, u, layout.dtype.itemsize, read_layout.device_layout.device_size[-1]):
            return write, u, dep
    return None


def _narrower_than_a_stick(write: MemoryDep, u: sympy.Symbol, layout: Any) -> bool:
    return int(write.ranges[u]) < layout.device_layout.elems_per_stick


def _restickify_dim(read_layout: Any, dep: MemoryDep, u: sympy.Symbol,
                    out_vars: set[sympy.Symbol]) -> int | None:
    """The read's innermost host dim (smallest stride) of size > 1 that one output
    variable other than ``u`` walks, or None."""
    try:
        coords = host_coordinates(read_layout.size, read_layout.stride,
                                  dep.index - read_layout.offset, dep.ranges)
    except CoordinateError:
        return None
    found = [d for d, c in enumerate(coords)
             if int(read_layout.size[d]) > 1 and len(c.free_symbols & out_vars) == 1
             and u not in c.free_symbols]
    return min(found, key=lambda d: int(read_layout.stride[d]), default=None)


def _write_host_coords(layout: Any, write: MemoryDep) -> tuple[list[int], list[int], list | None]:
    """Host size, strides and the host coordinate of each dim ``write`` stores to (None
    when the index does not decompose)."""
    size = [int(s) for s in layout.size]
    stride = [int(s) for s in layout.stride]
    try:
        return size, stride, host_coordinates(layout.size, layout.stride,
                                              write.index - layout.offset, write.ranges)
    except CoordinateError:
        return size, stride, None


def restuck_for_broadcast_read(op: ir.ComputedBuffer, layout: Any, layouts: dict[str, Any],
                               restuck: set[str]) -> FixedTiledLayout | None:
    """``layout`` with its device layout stuck on ``u``'s host dim (host size and
    strides kept, as a restickify's copy), or None to keep ``layout``."""
    if config.ignore_span_overflow_hints:
        return None  # the layout only serves the tiles automatic tiling would cut
    found = _stick_var(op, layout, layouts, restuck)
    if found is None or _read_to_restickify(found, layout, layouts, restuck) is not None:
        return None  # none, or broadcast_read_restickify's case
    write, u, _ = found
    size, stride, coords = _write_host_coords(layout, write)
    if coords is None:
        return None
    dims = [d for d, c in enumerate(coords) if u in c.free_symbols]
    if len(dims) != 1 or int(layout.offset) != 0:
        return None
    return FixedTiledLayout(
        layout.device, layout.dtype, list(layout.size), list(layout.stride),
        device_layout=restickify_layout(size, stride, layout.dtype, dims[0]),
    )


def fitting_tiles(op: ir.ComputedBuffer, layouts: dict[str, Any],
                  reads: list[Any] | None = None) -> dict[sympy.Symbol, int]:
    """The loop variables of ``op`` that alone drive an outer device dim of one of its
    floating reads spanning more than the limit over the variable's whole range, each
    with the most values of it a tile may hold for every such read to fit (automatic
    tiling must split it at least that finely, whatever else it splits: a read keeps
    its buffer's layout, one step of that dim covers everything inside it).  ``reads``:
    the reads to measure (default: all), those read as they are laid out (a read the
    restickify pass copies onto another stick is read through another layout)."""
    fitting: dict[sympy.Symbol, int] = {}
    for dep in op.get_read_writes().reads if reads is None else reads:
        read_layout = layouts.get(dep.name)
        if not isinstance(dep, MemoryDep) or read_layout is None \
                or not read_layout.dtype.is_floating_point:
            continue
        try:
            coords = access_coordinates(read_layout.device_layout, read_layout.size,
                                        read_layout.stride, read_layout.offset, dep.index,
                                        dep.ranges)
            device_size = [int(n) for n in read_layout.device_layout.device_size]
        except (CoordinateError, TypeError):
            continue
        for dim, coord in enumerate(coords[:-1]):
            if coord not in dep.ranges:
                continue
            step = read_layout.dtype.itemsize
            for n in device_size[dim + 1:]:
                step *= n
            if int(dep.ranges[coord]) * step > config.max_span_bytes:
                tile = config.max_span_bytes // step
                fitting[coord] = min(fitting.get(coord, tile), tile)
    return fitting


def cuts_sticks_of(fitting: dict[sympy.Symbol, int], var: sympy.Symbol, extent: int,
                   stick_elems: int) -> bool:
    """A tile of ``var`` small enough for ``op``'s reads (``fitting_tiles``) holds fewer
    values than a stick of a buffer stuck on ``var``: such a split would cut its sticks."""
    return var in fitting and fitting[var] < min(stick_elems, extent)


def restuck_off_a_wide_read(op: ir.ComputedBuffer, layout: Any,
                            layouts: dict[str, Any]) -> FixedTiledLayout | None:
    """``layout`` stuck on another host dim when its stick variable must be split finer than
    a stick, or None to keep it.

    The default stick is the last host dim of size above 1 (backend/layouts.py), whatever
    the strides.  xLSTM's head norm takes the mean of ``h.transpose(1, 2)`` over the head
    dim: its output ``[1, L, H, 1]`` is stuck on the heads (8 of a stick's 32 slots), and it
    reads ``h`` with the heads outermost, 16 KiB a head.  At 64 KiB the read needs the heads
    split in two, which cuts the output's one stick of heads (``output_sticks_whole``): no
    split is legal.  Stuck on the output dim with the smallest host stride instead (its
    positions), the heads are an outer device dim of the output too and split freely.  Host
    shape and strides are kept (the restickify's layout), as for a broadcast read."""
    if config.ignore_span_overflow_hints:
        return None  # the layout only serves the tiles automatic tiling would cut
    writes = [d for d in op.get_read_writes().writes if isinstance(d, MemoryDep)]
    if len(writes) != 1 or int(layout.offset) != 0:
        return None
    write = writes[0]
    out = _device_vars(layout, write)
    if not out or len(out[-1]) != 1:
        return None
    (v,) = out[-1]
    if not isinstance(op.data, ir.Reduction) or op.data.reduction_type == "batchmatmul" \
            or v not in write.ranges:
        return None
    # a reduction's read stuck on v or a reduction variable is read as it is laid out
    # (restickify.py); a pointwise op's read that involves v is stuck on v or copied onto
    # it: no outer dim of it is v alone
    all_reads = [dep for dep in op.get_read_writes().reads if isinstance(dep, MemoryDep)]
    reduction_vars = set().union(*(set(dep.ranges) for dep in all_reads)) - set(write.ranges)
    reads = [dep for dep in all_reads if dep.name in layouts
             and (_device_vars(layouts[dep.name], dep) or [set()])[-1] <= reduction_vars | {v}]
    if not cuts_sticks_of(fitting_tiles(op, layouts, reads), v, int(write.ranges[v]),
                          int(layout.device_layout.device_size[-1])):
        return None
    size, stride, coords = _write_host_coords(layout, write)
    if coords is None:
        return None
    others = [d for d, c in enumerate(coords)
              if size[d] > 1 and c.free_symbols and v not in c.free_symbols]
    if not others:
        return None
    dim = min(others, key=lambda d: (stride[d], -d))
    return FixedTiledLayout(
        layout.device, layout.dtype, list(layout.size), list(layout.stride),
        device_layout=restickify_layout(size, stride, layout.dtype, dim),
    )


def broadcast_read_restickify(op: ir.ComputedBuffer, layout: Any, layouts: dict[str, Any],
                              restuck: set[str]) -> tuple[str, int] | None:
    """``(buffer, host dim)``: the broadcast read to restickify onto that dim, when the
    read's stick variable ``u`` is narrower than a stick of ``op``'s output.  Stuck on
    ``u`` (``restuck_for_broadcast_read``), the output would pad every stick (4 heads
    of fp32: 8 times its bytes, GatedDeltaNet's ``value * beta``); the read is a
    broadcast, far smaller than the output, so it is the read that moves its stick,
    onto another variable of the output: ``op`` keeps its own layout and splits ``u``
    without cutting the read's sticks."""
    if config.ignore_span_overflow_hints:
        return None
    found = _stick_var(op, layout, layouts, restuck)
    return None if found is None else _read_to_restickify(found, layout, layouts, restuck)


def _read_to_restickify(found: tuple[MemoryDep, sympy.Symbol, MemoryDep], layout: Any,
                        layouts: dict[str, Any], restuck: set[str]) -> tuple[str, int] | None:
    """None keeps Mamba2's remedy: a chain already stuck on ``u``, a ``u`` a stick wide,
    or a read with no other output variable to stick on."""
    write, u, dep = found
    if dep.name in restuck or not _narrower_than_a_stick(write, u, layout):
        return None
    dim = _restickify_dim(layouts[dep.name], dep, u, set(write.ranges))
    return None if dim is None else (dep.name, dim)


def stick_vars(layout: Any, dep: MemoryDep) -> set[sympy.Symbol] | None:
    """Loop variables in the stick coordinate of ``dep`` (None: not derivable)."""
    try:
        coords = access_coordinates(
            layout.device_layout, layout.size, layout.stride, layout.offset, dep.index, dep.ranges
        )
    except CoordinateError:
        return None
    return set(coords[-1].free_symbols) & set(dep.ranges)


def host_dim_of(layout: Any, dep: MemoryDep, var: sympy.Symbol) -> int | None:
    """The one host dim of ``layout`` whose coordinate ``var`` moves in ``dep`` (None: no
    such dim, several, or not derivable)."""
    try:
        coords = host_coordinates(layout.size, layout.stride, dep.index - layout.offset,
                                  dep.ranges)
    except CoordinateError:
        return None
    dims = [d for d, c in enumerate(coords) if var in c.free_symbols]
    return dims[0] if len(dims) == 1 else None
