"""The per-tile view of an op under a tiling: what the tiled kernel really addresses.

A tiling maps output host dims to split counts (``{1: 5}``: host dim 1 in five
equal tiles).  Coarse tiling then runs the op once per tile over per-tile loop
ranges, writing a per-tile output buffer whose host sizes are divided, whose
host strides are dense in the full buffer's memory order and whose device layout is the original one resized
(docs/layout_model.md §2.2, §4.6, §5.2).  The span facts must describe *that* kernel.

Deliberate difference from the reference (docs/architecture.md "Deliberate
differences" #1, docs/layout_model.md §3.6): the reference validates a tile by shrinking
the output ranges *and* dividing them again inside the span rule, and it maps
the *original* write index (full-tensor strides) onto the per-tile stride_map.
Both under-estimate spans, so it accepts unsafe plans.  Here:

* the per-tile output layout is rebuilt exactly (sizes divided exactly,
  strides dense in the buffer's memory order, ``resize_device_layout`` of the
  original device layout over the dims in that order: ``memory_order.py``);
* the per-tile WRITE index is re-derived: the layout's indexer (what Inductor's
  store uses) over the per-tile host strides, i.e. the index the tiled kernel
  executes;
* coordinates come from that index over the per-tile ranges, and spans are
  measured over those ranges with no further split: each tiled range is divided
  exactly once.

Input reads keep their full buffers, layouts and indices (a tiled kernel reads a
window of the full input); only the ranges of the symbols that drive a tiled
output dim are divided, once, via ``split_by_symbol``.

Nothing here guesses.  When the view cannot be rebuilt (a split that does not
divide, an output whose strides are not a dense permutation, a write index that is not the layout's
indexer, an ambiguous device-layout resize, coordinates that cannot be derived)
the answer is a :class:`CannotRebuild` carrying the reason.

Pure sympy + the layout model: no torch import, so synthetic layouts can be
tested without capturing ops (e.g. docs/layout_model.md §6.4's 2^38-element tensor).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import sympy

from spyre_rules.errors import CoordinateError, LayoutError
from spyre_rules.facts.coordinates import access_coordinates, device_coordinates, to_plain_sympy
from spyre_rules.facts.memo import structural
from spyre_rules.facts.memory_order import memory_order, ordered_dense_strides, resize_in_memory_order
from spyre_rules.facts.records import Coord, TilingKey, as_int as _int, tiling_key
from spyre_rules.facts.spans import coordinate_span_bound
from spyre_rules.facts.tile_extent import tile_extent
from spyre_rules.facts.stick_layout import (
    SpyreTensorLayout,
    dtype_info,
)

__all__ = [
    "CannotRebuild",
    "OutputView",
    "access_coords",
    "tile_access_coords",
    "output_coords",
    "per_tile_layout",
    "per_tile_output",
    "split_by_symbol",
]


@dataclasses.dataclass(frozen=True)
class CannotRebuild:
    """The per-tile view does not exist or cannot be derived; ``reason`` says why.

    Falsy, so ``if view:`` reads naturally; never silently treated as "fits".
    """

    reason: str

    def __bool__(self) -> bool:
        return False


@dataclasses.dataclass(frozen=True)
class OutputView:
    """The output access of one tile: layout, write index, ranges and coordinates.

    ``rebuilt`` is False for the untiled view (the op's own layout and write dep
    are used unchanged -- resizing to the same size is not the identity, docs/layout_model.md §7.8).
    """

    tiling: TilingKey
    host_size: tuple[int, ...]
    host_stride: tuple[int, ...]
    device_layout: SpyreTensorLayout
    index: sympy.Expr
    ranges: tuple[tuple[sympy.Symbol, int], ...]
    coords: tuple[sympy.Expr, ...]
    itemsize: int
    rebuilt: bool

    @property
    def range_map(self) -> dict[sympy.Symbol, int]:
        return dict(self.ranges)

    @property
    def total_bytes(self) -> int:
        return math.prod(self.device_layout.device_size) * self.itemsize


# --------------------------------------------------------------------------- helpers


def _static(values: Sequence[Any], what: str) -> tuple[int, ...] | CannotRebuild:
    out = []
    for v in values:
        iv = _int(v)
        if iv is None:
            return CannotRebuild(f"{what} {list(values)} is not static")
        out.append(iv)
    return tuple(out)


def _check_tiling(key: TilingKey, host_size: Sequence[int]) -> CannotRebuild | None:
    for dim, k in key:
        if not 0 <= dim < len(host_size):
            return CannotRebuild(
                f"tiled host dim {dim} is not a dim of host size {list(host_size)}"
            )
        if tile_extent(host_size[dim], k) is None:
            return CannotRebuild(
                f"split {k} leaves an empty tile of host dim {dim} of size {host_size[dim]}"
            )
    return None


# --------------------------------------------------------------------------- the layout


def per_tile_layout(
    host_size: Sequence[Any],
    host_stride: Sequence[Any],
    device_layout: SpyreTensorLayout,
    tiling: Any,
) -> tuple[tuple[int, ...], tuple[int, ...], SpyreTensorLayout] | CannotRebuild:
    """Per-tile ``(host_size, host_stride, device_layout)`` of a buffer (§4.6, §5.2).

    The per-tile buffer is dense in the full buffer's memory order and its device
    layout is resized over the dims in that order, exactly as coarse tiling builds
    it (``memory_order.py``).  Host strides that are not a dense permutation are
    refused: no per-tile buffer describes one memory order for them.
    """
    size = _static(host_size, "host size")
    if isinstance(size, CannotRebuild):
        return size
    stride = _static(host_stride, "host stride")
    if isinstance(stride, CannotRebuild):
        return stride
    key = tiling_key(tiling)
    bad = _check_tiling(key, size)
    if bad is not None:
        return bad
    if not key:
        return size, stride, device_layout
    order = memory_order(size, stride)
    if order is None:
        return CannotRebuild(
            f"host strides {list(stride)} of size {list(size)} are not a dense permutation; "
            "a per-tile buffer is dense in its buffer's memory order, so its layout would differ"
        )
    new_size = list(size)
    for dim, k in key:
        new_size[dim] = tile_extent(new_size[dim], k)
    try:
        tiled = resize_in_memory_order(device_layout, size, stride, new_size, order)
    except LayoutError as exc:
        return CannotRebuild(f"per-tile device layout reconstruction failed: {exc}")
    return tuple(new_size), ordered_dense_strides(new_size, order), tiled


# --------------------------------------------------------------------------- output side


def _indexer(
    offset: Any, sizes: Sequence[int], strides: Sequence[int], position_vars: Sequence[Any]
) -> sympy.Expr:
    """Inductor's ``FixedLayout.make_indexer``: size-1 dims contribute nothing."""
    index = sympy.sympify(offset)
    for var, n, s in zip(position_vars, sizes, strides):
        if n != 1:
            index = index + sympy.sympify(var) * s
    return index


def per_tile_output(
    *,
    host_size: Sequence[Any],
    host_stride: Sequence[Any],
    offset: Any,
    device_layout: SpyreTensorLayout,
    dtype: Any,
    position_vars: Sequence[Any],
    write_index: Any,
    write_ranges: Mapping[Any, Any],
    tiling: Any,
) -> OutputView | CannotRebuild:
    """Per-tile output view of a write.

    ``position_vars[d]`` is the loop variable of output host dim ``d`` (0 for a
    size-1 dim Inductor squeezed out of the MemoryDep); ``write_index`` and
    ``write_ranges`` are the write MemoryDep's.  With an empty tiling the op's
    own layout and write index are used as they are.  Memoised on the values
    (``facts.memo``): ops writing alike share one view.
    """
    return _per_tile_output(tuple(host_size), tuple(host_stride), offset, device_layout, dtype,
                            tuple(position_vars), write_index, tuple(write_ranges.items()),
                            tiling_key(tiling))


@structural(maxsize=4096)
def _per_tile_output(host_size: tuple, host_stride: tuple, offset: Any,
                     device_layout: SpyreTensorLayout, dtype: Any, position_vars: tuple,
                     write_index: Any, write_range_items: tuple,
                     key: TilingKey) -> OutputView | CannotRebuild:
    write_ranges = dict(write_range_items)
    try:
        itemsize = dtype_info(dtype).itemsize
    except LayoutError as exc:
        return CannotRebuild(str(exc))
    ranges: dict[sympy.Symbol, int] = {}
    for sym, raw in write_ranges.items():
        r = _int(raw)
        if r is None:
            return CannotRebuild(f"range of {sym} is {raw!r}, not an integer")
        ranges[sym] = r
    if not key:
        size = _static(host_size, "host size")
        stride = _static(host_stride, "host stride")
        for got in (size, stride):
            if isinstance(got, CannotRebuild):
                return got
        return _view(key, size, stride, device_layout, write_index, ranges, itemsize, False)

    layout = per_tile_layout(host_size, host_stride, device_layout, key)
    if isinstance(layout, CannotRebuild):
        return layout
    new_size, new_stride, tiled = layout
    size = _static(host_size, "host size")
    stride = _static(host_stride, "host stride")
    if len(position_vars) != len(size):
        return CannotRebuild(
            f"{len(position_vars)} loop variables for a rank-{len(size)} output {list(size)}"
        )
    # The per-tile index is only the kernel's index if the store is the layout's indexer.
    expected = _indexer(offset, size, stride, position_vars)
    try:
        actual = to_plain_sympy(write_index)
    except (sympy.SympifyError, TypeError):
        return CannotRebuild(f"write index {write_index!r} is not a sympy expression")
    if sympy.expand(actual - expected) != 0:
        return CannotRebuild(
            f"write index {write_index} is not the layout's indexer {expected}; "
            "the per-tile write index cannot be re-derived"
        )
    splits = dict(key)
    for dim, var in enumerate(position_vars):
        if not isinstance(var, sympy.Symbol):
            continue  # a squeezed size-1 dim (the tiling check refused splitting it)
        if var not in ranges:
            return CannotRebuild(f"loop variable {var} of host dim {dim} has no write range")
        if ranges[var] != size[dim]:
            return CannotRebuild(
                f"loop variable {var} ranges over {ranges[var]}, host dim {dim} has size {size[dim]}"
            )
        if dim in splits:
            ranges[var] = tile_extent(ranges[var], splits[dim])
    index = _indexer(offset, new_size, new_stride, position_vars)
    return _view(key, new_size, new_stride, tiled, index, ranges, itemsize, True)


def _view(
    key: TilingKey,
    size: tuple[int, ...],
    stride: tuple[int, ...],
    stl: SpyreTensorLayout,
    index: Any,
    ranges: dict[sympy.Symbol, int],
    itemsize: int,
    rebuilt: bool,
) -> OutputView | CannotRebuild:
    try:
        coords = device_coordinates(stl, index, ranges)
    except CoordinateError as exc:
        return CannotRebuild(f"per-tile output coordinates: {exc}")
    return OutputView(
        tiling=key,
        host_size=size,
        host_stride=stride,
        device_layout=stl,
        index=sympy.sympify(index),
        ranges=tuple(ranges.items()),
        coords=tuple(coords),
        itemsize=itemsize,
        rebuilt=rebuilt,
    )


@functools.lru_cache(maxsize=4096)
def _text(coord: sympy.Expr) -> str:
    """``str(coord)``, cached: printing sympy is slow and the same few coordinate
    expressions recur across the ops of a graph and the tilings of one op."""
    return str(coord)


def _loop_symbols(coord: sympy.Expr, ranges: Mapping[sympy.Symbol, int]) -> frozenset:
    return frozenset(s for s in coord.free_symbols if s in ranges)


def output_coords(buffer: str, view: OutputView) -> list[Coord]:
    """Coord records of an output view; spans over its per-tile ranges, no further split.

    ``inner_elems = prod(device_size[dim+1:])``: a write covers whole inner extents
    (docs/layout_model.md §3.2).  Stick and constant coordinates are included
    (marked by ``is_stick`` / empty ``symbols``); which ones matter is policy.
    """
    return _named(buffer, _output_coords(view))


@structural(maxsize=4096)
def _output_coords(view: OutputView) -> tuple[Coord, ...]:
    ranges = view.range_map
    spans = []
    for coord in view.coords:
        bound = coordinate_span_bound(coord, ranges)
        spans.append(None if bound is None else bound.elems)
    return tuple(_coord_records("", view.device_layout, view.coords, spans, ranges,
                                view.itemsize, view.total_bytes))


def _named(buffer: str, records: Sequence[Coord]) -> list[Coord]:
    """Memoised records (measured without a buffer name) as records of ``buffer``."""
    return [_renamed(c, buffer) for c in records]


def _renamed(record: Coord, buffer: str) -> Coord:
    """``dataclasses.replace(record, buffer=buffer)`` without re-running ``__init__``
    (asked per coordinate of every view: ``replace`` was a top cost).  ``Coord`` is a
    frozen dataclass with no ``__post_init__``, so copying its fields is all ``replace`` does."""
    copy = object.__new__(Coord)
    fields = copy.__dict__
    fields.update(record.__dict__)
    fields["buffer"] = buffer
    return copy


def _coord_records(buffer: str, stl: Any, coords: list, spans: list, ranges: Mapping[Any, Any],
                   itemsize: int, total: int) -> list[Coord]:
    """One Coord per device dim; a step of a coordinate covers the whole inner extent."""
    ds = stl.device_size
    out = []
    for d, (coord, span) in enumerate(zip(coords, spans)):
        inner = math.prod(ds[d + 1 :])
        out.append(
            Coord(
                buffer=buffer,
                dim=d,
                is_stick=d == len(ds) - 1,
                expr=_text(coord),
                symbols=_loop_symbols(coord, ranges),
                span_elems=span,
                inner_elems=inner,
                span_bytes=None if span is None else span * inner * itemsize,
                total_bytes=total,
                stick_elems=stl.elems_per_stick,
            )
        )
    return out


# --------------------------------------------------------------------------- input side


def split_by_symbol(symbol_dims: Mapping[Any, int], tiling: Any) -> dict[Any, int]:
    """``{symbol: split}`` for every symbol that drives a tiled output host dim."""
    splits = dict(tiling_key(tiling))
    return {s: splits[d] for s, d in symbol_dims.items() if d in splits}


def _shift_invariant(coord: sympy.Expr, sym: sympy.Symbol, step: int) -> bool:
    """Whether moving ``sym`` by one tile (``step``) moves ``coord`` by a constant.

    Then every tile's values are tile 0's plus a constant, so the span over the
    per-tile range ``[0, step)`` holds for every tile.  ``floor(s/64)`` or
    ``Mod(s, 64)`` with a step that is not a multiple of 64 is not: a later tile
    can straddle one more boundary than tile 0 does.
    """
    return not (coord.subs(sym, sym + step) - coord).free_symbols


def _coord_splits(
    coord: sympy.Expr, ranges: Mapping[Any, Any], splits: Mapping[Any, int]
) -> tuple[dict[Any, int], dict[Any, int]]:
    """``(applied, moving)``: the splits that apply to this coordinate's bound as they
    are (shift-invariant symbols; a split that does not divide, so the bound says
    "unknown"), and the tiled symbols whose shift is not invariant (see _shift_invariant),
    whose tiles are measured one by one."""
    applied, moving = {}, {}
    for sym, k in splits.items():
        if sym not in coord.free_symbols:
            continue
        r = _int(ranges.get(sym))
        t = None if r is None else tile_extent(r, k)
        if t is None or _shift_invariant(coord, sym, t):
            applied[sym] = k
        else:
            moving[sym] = k
    return applied, moving


#: At most this many tile combinations of the non-invariant symbols are measured one by
#: one; beyond it those symbols keep their full range (every tile's values are a subset
#: of it: sound, if loose).  The veto and the span check enumerate tiles the same way.
MAX_TILES_MEASURED = 256


def _split_span(coord: sympy.Expr, ranges: Mapping[Any, Any], splits: Mapping[Any, int]) -> int | None:
    """The largest span of ``coord`` over any one tile.

    A symbol whose shift is not invariant (``floor(h/2)`` of a grouped-query head
    ``h`` split one head per tile) may span more in a later tile than in tile 0, so
    each tile is measured over its own range of ``h``; two heads
    of one group never share a tile of one head, so the span is 1, not the full 2.
    """
    applied, moving = _coord_splits(coord, ranges, splits)
    if not moving or math.prod(moving.values()) > MAX_TILES_MEASURED:
        bound = coordinate_span_bound(coord, ranges, applied)
        return None if bound is None else bound.elems
    every = {**applied, **moving}
    best = 0
    for tiles in itertools.product(*(range(k) for k in moving.values())):
        bound = coordinate_span_bound(coord, ranges, every, dict(zip(moving, tiles)))
        if bound is None:
            return None
        best = max(best, bound.elems)
    return best


def _split_spans(
    coords: Sequence[sympy.Expr], ranges: Mapping[Any, Any], splits: Mapping[Any, int]
) -> list[int | None]:
    return [_split_span(coord, ranges, splits) for coord in coords]


def access_coords(layout: Any, index: Any, ranges: Mapping[Any, Any]) -> tuple[Any, list]:
    """Device coordinates of a buffer access and the device layout they index.

    Given a FixedTiledLayout (host size/stride/offset known), compose host
    coordinates with the layout's forward map (``access_coordinates``): exact
    even for a view that walks several host dims across a padded stick.  A bare
    SpyreTensorLayout has no host view, so §1.4 is applied to the flat index.
    """
    stl = getattr(layout, "device_layout", layout)
    if stl is not layout and all(hasattr(layout, a) for a in ("size", "stride", "offset")):
        return stl, access_coordinates(stl, layout.size, layout.stride, layout.offset, index, ranges)
    return stl, device_coordinates(stl, index, ranges)


def tile_access_coords(
    buffer: str,
    layout: Any,  # FixedTiledLayout (exact for views) or SpyreTensorLayout
    dtype: Any,
    index: Any,
    ranges: Mapping[Any, Any],
    splits: Mapping[Any, int],
    what: str = "access",
) -> list[Coord] | CannotRebuild:
    """Coord records of one tile's access to a FULL buffer: an input read, or the
    write of a tiled op whose output is read outside its loop (coarse tiling's copy
    op, or the op writing the full buffer directly).

    The access keeps the buffer's layout and index; only the tiled symbols' ranges
    shrink, each divided once by ``splits`` (from :func:`split_by_symbol`;
    reduction symbols are never in it).  Tile ``t`` accesses the index at
    ``s + t * R/k``, so a split is applied to a coordinate only if shifting by a
    tile moves the coordinate by a constant (true for every stick-aligned split);
    otherwise that symbol keeps its full range in that coordinate's bound, so the
    bound holds for every tile, not only tile 0 (the reference bounds tile 0).  A
    split that does not divide a symbol's range leaves the spans it touches
    unknown (None), never guessed.

    ``inner_elems = prod(device_size[dim+1:])``: one step of a coordinate moves the
    address over the whole inner extent, whatever the inner coordinates touch (as
    the verifier measures).  Two consequences the reference misses:

    * the full-buffer write of a tiled output differs from its per-tile buffer
      where the tiled host dim is not the outermost device coordinate
      (docs/layout_model.md §6.4: 2^37 vs 2^34 bytes for split (64, 8));
    * the reference's tile-aware input extent (§3.2: ``min(span, size)`` per inner
      coordinate) under-measures a read: for ``x.sum(dim=0)`` on (2, 20, 16, 64)
      split {0: 2, 1: 8} it gives 5,120 B where a tile's read of x spans 40,960 B.
    """
    stl = getattr(layout, "device_layout", layout)
    if isinstance(stl, SpyreTensorLayout) and stl is not layout and all(
            hasattr(layout, a) for a in ("size", "stride", "offset")):
        view: Any = (tuple(layout.size), tuple(layout.stride), layout.offset)
    elif isinstance(stl, SpyreTensorLayout):
        view = None  # a bare stick layout: no host view
    else:
        return _tile_access_records(buffer, layout, dtype, index, ranges, splits, what)
    found = _tile_access_coords(stl, view, dtype, index, tuple(ranges.items()),
                                tuple(splits.items()))
    if isinstance(found, str):
        return CannotRebuild(f"{what} coordinates of {buffer}: {found}")
    if isinstance(found, CannotRebuild):
        return found
    return _named(buffer, found)


def _tile_access_records(buffer: str, layout: Any, dtype: Any, index: Any,
                         ranges: Mapping[Any, Any], splits: Mapping[Any, int],
                         what: str) -> list[Coord] | CannotRebuild:
    """``tile_access_coords`` of a layout that is not a stick layout (not memoised)."""
    try:
        itemsize = dtype_info(dtype).itemsize
    except LayoutError as exc:
        return CannotRebuild(str(exc))
    try:
        stl, coords = access_coords(layout, index, ranges)
    except CoordinateError as exc:
        return CannotRebuild(f"{what} coordinates of {buffer}: {exc}")
    total = math.prod(stl.device_size) * itemsize
    spans = _split_spans(coords, ranges, splits)
    return _coord_records(buffer, stl, coords, spans, ranges, itemsize, total)


@structural(maxsize=4096)
def _tile_access_coords(stl: SpyreTensorLayout, view: tuple | None, dtype: Any, index: Any,
                        range_items: tuple, split_items: tuple) -> Any:
    """``tile_access_coords`` on values (``view``: the host size, stride and offset, None
    for a bare stick layout): the records without a buffer name, a CannotRebuild,
    or the text of a CoordinateError."""
    ranges, splits = dict(range_items), dict(split_items)
    try:
        itemsize = dtype_info(dtype).itemsize
    except LayoutError as exc:
        return CannotRebuild(str(exc))
    try:
        if view is None:
            coords = device_coordinates(stl, index, ranges)
        else:
            coords = access_coordinates(stl, *view, index, ranges)
    except CoordinateError as exc:
        return str(exc)
    total = math.prod(stl.device_size) * itemsize
    spans = _split_spans(coords, ranges, splits)
    return tuple(_coord_records("", stl, coords, spans, ranges, itemsize, total))
