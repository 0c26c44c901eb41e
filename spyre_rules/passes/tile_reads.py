"""Reads of a per-tile buffer inside its loop: re-indexed from the full layout, proven exact.

After ``coarse_tile`` a loop-internal op ``P`` writes one tile into a per-tile
buffer (``per_tile_fixed``; its strides follow the full buffer's memory order).
A reader ``R`` in the same loop loads ``P`` through Inductor's lazy indexing:
a direct load indexes with ``P``'s current (per-tile) layout, but a view --
``y.t()``, a slice, a ``ReinterpretView`` -- carries the strides of the *full*
buffer, and a restickified copy is read with the index of the buffer it copies.
One rule serves all of them: while ``R``'s body is traced, every per-tile
buffer of the loop shows its full layout, so every load of it arrives as an
index into the full buffer; that index is decomposed into full-buffer host
coordinates and rebuilt with the per-tile strides (Inductor's
``ModularIndexing`` per dim, simplified with the loop ranges).

That is exact only if, in every iteration, ``R`` reads inside the tile ``P``
wrote in that iteration.  :func:`reindex_loop_reads` proves it at compile time
from the full-buffer index ``I`` of each load over ``R``'s per-tile ranges:

* **in the tile**: every host coordinate of ``I`` stays in ``[0, tile size)``
  (coordinate at the origin plus its span, ``facts.spans``);
* **moves with the tile**: one iteration of loop level ``l`` shifts ``R``'s
  tiled loop variables by their tile step; ``I`` must then move by exactly the
  step ``P``'s tile moves in the full buffer (zero where ``P`` is not tiled by
  ``l``).  ``I`` not affine in those variables cannot be proven and is refused.

A read that fails either is refused with a ``CoarseTileError`` naming the
reader, the buffer, the dim or level and the reason -- it would read another
iteration's tile, or past the tile; nothing runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep, RecordLoadStore, index_vars_no_squeeze
from torch._inductor.virtualized import V
from torch.utils._sympy.functions import ModularIndexing

from spyre_rules.errors import CoordinateError
from spyre_rules.facts.coordinates import host_coordinates, to_plain_sympy
from spyre_rules.ir.ir_edit import drop_caches, set_frozen
from spyre_rules.ir.loop_stamp import loop_stamp, loop_tiled_dims, loop_tiled_reduction_dims
from spyre_rules.passes.coarse_tile import CoarseTileError
from spyre_rules.spans import coordinate_span_elems

__all__ = ["TileBuffer", "reindex_loop_reads"]


@dataclasses.dataclass(frozen=True)
class TileBuffer:
    """A per-tile buffer of a loop: its producer and full layout, its tile geometry."""

    op: Any
    full_layout: Any  # the pre-tiling FixedTiledLayout (full size and strides)
    tile_size: tuple[int, ...]
    tile_stride: tuple[int, ...]
    #: tile_index's results by (index, ranges): Inductor traces every reader's body many
    #: times (read/write extraction when the scheduler builds its nodes, the symbols of its
    #: graph partition, our own proofs), each trace asking the same few indices again, and
    #: simplifying them with the ranges was a sixth of Kimi-Linear's automatic compile
    _memo: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.op.get_name()

    @property
    def full_size(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.full_layout.size)

    @property
    def full_stride(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.full_layout.stride)

    def level_shift(self, level: int) -> int:
        """Elements of the full buffer one iteration of ``level`` moves the tile by."""
        return sum(_step(self.op, level, d, self.tile_size[d]) * self.full_stride[d]
                   for d in loop_tiled_dims(self.op)[level])

    def tile_index(self, index: sympy.Expr, ranges: dict[Any, int] | None) -> sympy.Expr:
        """The per-tile index of full-buffer ``index`` (exact; simplified given ranges)."""
        key = (index, None if ranges is None else frozenset(ranges.items()))
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._tile_index(index, ranges)
        return found

    def _tile_index(self, index: sympy.Expr, ranges: dict[Any, int] | None) -> sympy.Expr:
        new: sympy.Expr = sympy.Integer(0)
        for size, full, tile in zip(self.full_size, self.full_stride, self.tile_stride):
            if size > 1:
                new = new + ModularIndexing(index, full, size) * tile
        if ranges is not None and new.free_symbols <= set(ranges):
            new = V.graph.sizevars.simplify_with_ranges(new, ranges)
        return new


def _step(op: Any, level: int, position: int, tile: int, reduction: bool = False) -> int:
    """Elements one iteration of ``level`` moves ``op``'s dim ``position`` (0: not tiled).

    The tile of the innermost level tiling the dim, times the counts of the
    levels inside ``level`` that tile it again.  ``reduction``: ``position`` is a
    reduction dim (``loop_tiled_reduction_dims``).
    """
    stamp = loop_stamp(op)
    levels = stamp.tiled_reduction_dims if reduction else stamp.tiled_dims
    if position not in levels[level]:
        return 0
    step = tile
    for inner in range(level + 1, stamp.depth):
        if position in levels[inner]:
            step *= int(stamp.counts[inner])
    return step


def _sizes(op: Any) -> list[list[int]]:
    data = op.data
    sizes = [[int(r) for r in data.ranges]]
    if isinstance(data, ir.Reduction):
        sizes.append([int(r) for r in data.reduction_ranges])
    return sizes


@contextmanager
def _full_layouts(tiles: dict[str, TileBuffer], reader: Any) -> Iterator[dict[str, Any]]:
    """The per-tile buffers ``tiles`` show their full layout (not the reader's own);
    yields the layouts they had, by buffer name."""
    swapped = [t for t in tiles.values() if t.op is not reader]
    saved = [t.op.layout for t in swapped]
    for t in swapped:
        t.op.layout = t.full_layout
    try:
        yield {t.name: layout for t, layout in zip(swapped, saved)}
    finally:
        for t, layout in zip(swapped, saved):
            t.op.layout = layout


@contextmanager
def _own_layout(saved: dict[str, Any], reader: Any) -> Iterator[None]:
    """Inside :func:`_full_layouts` of a whole loop (``saved``: what it yielded): the
    reader's own buffer shows its per-tile layout again, as
    ``_full_layouts(tiles, reader)`` leaves it -- in O(1), not a swap of every tile."""
    own = saved.get(reader.get_name())
    if own is None:
        yield
        return
    full = reader.layout
    reader.layout = own
    try:
        yield
    finally:
        reader.layout = full


def _reachable_tiles(reader: Any, tiles: dict[str, TileBuffer]) -> dict[str, TileBuffer]:
    """The per-tile buffers whose layout a trace of ``reader`` can read: the ones it
    reads, and the ones those read (a load renamed to a copy -- a restickified copy,
    ``ir_edit.RenameLoads`` -- indexes with the layout of the buffer it copies).
    :func:`reindex_loop_reads` checks that this subset gives the loads every tile
    gives, and falls back to every tile when it does not."""
    names = list(reader.get_read_names())
    for name in list(names):
        buf = V.graph.try_get_buffer(name)
        if isinstance(buf, ir.ComputedBuffer):
            names.extend(buf.get_read_names())
    return {name: tiles[name] for name in dict.fromkeys(names)
            if name in tiles and tiles[name].op is not reader}


class _TileLoads(V.WrapperHandler):  # type: ignore[name-defined]
    """Loads of per-tile buffers, indexed into the full buffer, rebuilt per tile."""

    def __init__(self, inner: Any, tiles: dict[str, TileBuffer], ranges: dict[Any, int] | None):
        super().__init__(inner)
        self._tiles = tiles
        self._ranges = ranges

    def load(self, name: str, index: Any) -> Any:
        tile = self._tiles.get(name)
        if tile is not None:
            index = tile.tile_index(index, self._ranges)
        return self._inner.load(name, index)


def _arg_ranges(op: Any, args: tuple[Any, ...]) -> dict[Any, int] | None:
    """Loop variable -> per-tile range of a traced body's arguments (None: not plain)."""
    flat = [a for group in args for a in group]
    sizes = [s for group in _sizes(op) for s in group]
    if len(flat) != len(sizes):
        return None
    ranges = {}
    for arg, size in zip(flat, sizes):
        if isinstance(arg, sympy.Symbol):
            ranges[arg] = size
        elif not (isinstance(arg, sympy.Integer) and int(arg) == 0):
            return None
    return ranges


def _wrap(reader: Any, tiles: dict[str, TileBuffer]) -> None:
    data = reader.data
    fn = data.inner_fn

    def inner_fn(*args: Any) -> Any:
        handler = _TileLoads(V.get_ops_handler(), tiles, _arg_ranges(reader, args))
        with _full_layouts(tiles, reader), V.set_ops_handler(handler):
            return fn(*args)

    set_frozen(data, "inner_fn", inner_fn)
    drop_caches(reader)


@dataclasses.dataclass(frozen=True)
class _Trace:
    """What one trace of a reader's body recorded: its loads as indices over fresh
    variables (one per dim, size-1 dims included, so every tiled dim has its
    variable), those variables per argument and their per-tile ranges."""

    reads: tuple[Any, ...]
    index_exprs: tuple[Any, ...]
    args: list[list[Any]]
    ranges: dict[Any, int]

    def loads_of(self, tiles: dict[str, TileBuffer]) -> list[MemoryDep]:
        return [dep for dep in self.reads if isinstance(dep, MemoryDep) and dep.name in tiles]

    def same_accesses(self, other: "_Trace") -> bool:
        return self.reads == other.reads and self.index_exprs == other.index_exprs


def _trace(reader: Any) -> _Trace:
    """Trace the reader's body as the per-tile buffers' layouts are set now."""
    args, var_ranges = index_vars_no_squeeze(*_sizes(reader), prefix="t")
    recorder = RecordLoadStore(var_ranges, normalize=False)
    with V.set_ops_handler(recorder):
        reader.data.inner_fn(*args)
    inner = recorder.parent_handler
    return _Trace(tuple(inner._reads), tuple(inner._index_exprs), args,
                  {k: int(v) for k, v in var_ranges.items()})


def _refuse(reader: Any, tile: TileBuffer, index: Any, why: str) -> CoarseTileError:
    return CoarseTileError(
        f"coarse_tile: {reader.get_name()} reads {tile.name} inside their loop at index {index} "
        f"of {tile.name}'s full buffer (host size {list(tile.full_size)}, per tile "
        f"{list(tile.tile_size)}; t<i> walks dim i of one {reader.get_name()} tile): {why}"
    )


def _check_in_tile(reader: Any, tile: TileBuffer, index: Any, ranges: dict) -> None:
    try:
        coords = host_coordinates(tile.full_size, tile.full_stride, index, ranges)
    except CoordinateError as exc:
        raise _refuse(reader, tile, index, f"its coordinates cannot be derived ({exc})") from None
    origin = {s: 0 for s in ranges}
    for dim, (coord, size) in enumerate(zip(coords, tile.tile_size)):
        span = coordinate_span_elems(coord, ranges)
        low = sympy.sympify(sympy.sympify(coord).xreplace(origin))
        if span is None or not low.is_Integer:
            raise _refuse(reader, tile, index, f"host dim {dim} ({coord}) cannot be bounded")
        if int(low) < 0 or int(low) + span > size:
            raise _refuse(
                reader, tile, index,
                f"host dim {dim} ({coord}) takes values {int(low)}..{int(low) + span - 1} over "
                f"one tile of {reader.get_name()}, outside the {size} the tile holds",
            )


def _check_moves_with_tile(reader: Any, tile: TileBuffer, index: Any, args: list) -> None:
    flat = [a for group in args for a in group]
    sizes = [s for group in _sizes(reader) for s in group]
    plain = sympy.sympify(to_plain_sympy(index))
    n_out = len(args[0])
    reduction_levels = loop_tiled_reduction_dims(reader)
    for level, tiled in enumerate(loop_tiled_dims(reader)):
        shift = {flat[p]: flat[p] + _step(reader, level, p, sizes[p]) for p in tiled}
        shift.update({flat[n_out + r]: flat[n_out + r] + _step(reader, level, r,
                                                               sizes[n_out + r], True)
                      for r in reduction_levels[level]})
        moved = sympy.sympify(sympy.expand(plain.xreplace(shift) - plain))
        expected = tile.level_shift(level)
        if not moved.is_Integer:
            raise _refuse(
                reader, tile, index,
                f"one iteration of loop level {level} moves the read by {moved}, not by a "
                f"constant; it cannot be proven to follow the tile",
            )
        if int(moved) != expected:
            raise _refuse(
                reader, tile, index,
                f"one iteration of loop level {level} moves the read by {int(moved)} elements "
                f"but the tile by {expected}: the read would reach another iteration's tile",
            )


def reindex_loop_reads(loops: dict[Any, list[Any]], tiles_of: dict[Any, dict[str, TileBuffer]]) -> None:
    """Check, then re-index, every in-loop read of a per-tile buffer (module docstring).

    ``loops``: top-level loop id -> its ops; ``tiles_of``: loop id -> its per-tile
    buffers by name.  Everything is checked before the first reader is changed.

    Linear in the ops of a loop: a reader is traced with every per-tile buffer of
    its loop showing its full layout but its own, yet the layouts are swapped once
    per loop, not once per reader; and a re-indexed reader swaps, each time its body
    is traced later, only the buffers it can reach (:func:`_reachable_tiles`) --
    once a trace with just those swapped recorded exactly the accesses of the trace
    with every one swapped; otherwise it swaps every one, as the check did.
    """
    readers = []
    for top, ops in loops.items():
        tiles = tiles_of.get(top) or {}
        if not tiles:
            continue
        in_loop = [reader for reader in ops if isinstance(reader, ir.ComputedBuffer)
                   and any(name in tiles for name in reader.get_read_names())]
        if not in_loop:
            continue
        reachable: dict[str, tuple[dict[str, TileBuffer], _Trace | None]] = {}
        for reader in in_loop:
            subset = _reachable_tiles(reader, tiles)
            try:
                with _full_layouts(subset, reader):
                    alone = _trace(reader)
            except Exception:  # noqa: BLE001 - then it swaps every tile, as the check does
                alone = None
            reachable[reader.get_name()] = (subset, alone)
        with _full_layouts(tiles, None) as saved:
            for reader in in_loop:
                with _own_layout(saved, reader):
                    found = _trace(reader)
                for dep in found.loads_of(tiles):
                    _check_in_tile(reader, tiles[dep.name], dep.index, found.ranges)
                    _check_moves_with_tile(reader, tiles[dep.name], dep.index, found.args)
                subset, alone = reachable[reader.get_name()]
                exact = alone is not None and alone.same_accesses(found)
                readers.append((reader, subset if exact else tiles))
    for reader, tiles in readers:
        _wrap(reader, tiles)
