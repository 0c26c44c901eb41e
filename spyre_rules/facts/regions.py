"""A concatenation's region op, measured through the concatenation it writes.

``torch.cat`` (and a constant pad) lowers to a ConcatKernel whose inputs are
*region ops*: each stores its result straight into its window of the
concatenation's buffer (a NonOwningLayout view; its store index is relative to
the region, the window's storage offset is the view's).  Coarse tiling keeps
that: a tiled region writes tile ``t`` of its window into the whole
concatenation, no per-tile buffer (``passes/coarse_tile.py`` ``_check_region``,
docs/layout_model.md §5.10).  So the facts of a region op are those of a write
into the concatenation's FixedTiledLayout at the window's offset, and its
per-tile output view is that write over one tile's ranges.

A tile of a region lines up with a tile of the concatenation only along a dim
the region spans whole (``spans_concatenation_whole``); along the concatenated
dim the regions are of other sizes, and policy refuses that split
(rules/planner.rules ``concat_dims_whole``).
"""

from __future__ import annotations

from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep

from spyre_rules.errors import CoordinateError
from spyre_rules.facts.in_place import in_place_target
from spyre_rules.facts.per_tile import CannotRebuild, OutputView, access_coords
from spyre_rules.facts.records import as_int, tiling_key
from spyre_rules.facts.stick_layout import dtype_info
from spyre_rules.facts.tiled_layout import FixedTiledLayout
from spyre_rules.facts.tile_extent import tile_extent

__all__ = ["effective_layout", "region_output_view", "region_start", "region_target",
           "region_write", "spans_concatenation_whole"]


def region_target(op: Any) -> tuple[Any, int] | None:
    """``(concatenation buffer, storage offset of op's window)``, or None when op writes
    no region of a ConcatKernel with a FixedTiledLayout and a static offset."""
    layout = getattr(op, "layout", None)
    if not isinstance(layout, ir.NonOwningLayout):
        return None
    concat = getattr(getattr(layout.view, "data", None), "data", None)
    if not isinstance(concat, ir.ConcatKernel) or not isinstance(concat.layout, FixedTiledLayout):
        return None
    offset = as_int(layout.view.get_layout().offset)
    return None if offset is None else (concat, offset)


def effective_layout(op: Any) -> Any:
    """The layout op's stores land in: the concatenation's for a region op, the target's
    for an in-place write (``facts.in_place``), else its own."""
    found = region_target(op)
    if found is not None:
        return found[0].layout
    target = in_place_target(op)
    return getattr(op, "layout", None) if target is None else target.get_layout()


def region_write(op: Any, write: MemoryDep | None) -> MemoryDep | None:
    """op's write as an index into its concatenation's buffer (the window's offset added)."""
    found = region_target(op)
    if found is None or write is None or not found[1]:
        return write
    return MemoryDep(write.name, write.index + found[1], write.var_names, write.size)


def spans_concatenation_whole(op: Any, dim: int) -> bool:
    """Whether op's output host dim ``dim`` is as long as the concatenation's (True for an
    op that writes no region)."""
    found = region_target(op)
    if found is None:
        return True
    ranges = list(getattr(getattr(op, "data", None), "ranges", None) or ())
    full = list(found[0].layout.size)
    if not 0 <= dim < len(ranges) or len(ranges) != len(full):
        return False
    return as_int(ranges[dim]) is not None and as_int(ranges[dim]) == as_int(full[dim])


def region_start(op: Any, dim: int) -> int | None:
    """Where op's window starts along host dim ``dim`` of its concatenation (0 for an op
    that writes no region); None when that is not static.

    The window's storage offset is one position of the concatenation's host strides,
    read off from the largest stride down; the window must fit inside the
    concatenation from there, else None (no position of it explains the offset)."""
    found = region_target(op)
    if found is None:
        return 0
    concat, offset = found
    sizes = [as_int(s) for s in concat.layout.size]
    strides = [as_int(s) for s in concat.layout.stride]
    ranges = [as_int(r) for r in getattr(getattr(op, "data", None), "ranges", None) or ()]
    if None in sizes or None in strides or None in ranges or len(ranges) != len(sizes) \
            or not 0 <= dim < len(sizes):
        return None
    start, rest = [0] * len(sizes), offset
    for d in sorted(range(len(sizes)), key=lambda d: -strides[d]):
        if strides[d] > 0 and sizes[d] > 1:
            start[d], rest = divmod(rest, strides[d])
    if rest or any(start[d] + ranges[d] > sizes[d] for d in range(len(sizes))):
        return None
    return start[dim]


def region_output_view(layout: FixedTiledLayout, write: MemoryDep, position_vars: list[Any],
                       ranges: list[Any], tiling: Any) -> OutputView | CannotRebuild:
    """One tile's write into the concatenation: its layout, the per-tile ranges.

    The coordinates are measured over tile 0's ranges, so every tiled symbol must move
    each coordinate by a constant from one tile to the next (then every tile spans
    what tile 0 does); a write that does not is refused, never measured at tile 0 only.
    """
    key = tiling_key(tiling)
    sizes = [as_int(r) for r in ranges]
    per_tile = {sym: as_int(r) for sym, r in write.ranges.items()}
    if None in sizes or None in per_tile.values():
        return CannotRebuild(f"ranges {ranges} of a region write are not static")
    steps: dict[Any, int] = {}
    for dim, k in key:
        var = position_vars[dim] if dim < len(position_vars) else None
        if not isinstance(var, sympy.Symbol) or var not in per_tile:
            return CannotRebuild(f"host dim {dim} of the region write has no loop variable")
        tile = tile_extent(sizes[dim], k)
        if tile is None or per_tile[var] != sizes[dim]:
            return CannotRebuild(f"split {k} leaves an empty tile of host dim {dim} of size {sizes[dim]}")
        sizes[dim] = tile
        per_tile[var] = tile
        steps[var] = per_tile[var]
    try:
        stl, coords = access_coords(layout, write.index, per_tile)
    except CoordinateError as exc:
        return CannotRebuild(f"region write coordinates: {exc}")
    for sym, step in steps.items():
        for coord in coords:
            if (sympy.sympify(coord).subs(sym, sym + step) - coord).free_symbols:
                return CannotRebuild(f"a later tile of the region write moves {coord} unlike tile 0")
    return OutputView(
        tiling=key, host_size=tuple(sizes), host_stride=tuple(as_int(s) for s in layout.stride),
        device_layout=stl, index=sympy.sympify(write.index), ranges=tuple(per_tile.items()),
        coords=tuple(coords), itemsize=dtype_info(layout.dtype).itemsize, rebuilt=False,
    )
