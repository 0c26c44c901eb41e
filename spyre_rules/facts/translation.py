"""Whether every tile of a loop nest is a rigid translation of its first tile.

A counted loop addresses a moving access, at iteration ``(i_0, ...)`` of its
levels, as its iteration-0 address plus ``sum_l i_l * stride_l`` elements, where
``stride_l`` is the element offset of the point at which each symbol of level
``l`` sits at its per-iteration step (every other symbol at 0) -- the affine
stride codegen prints and the executor applies (``codegen.loops``).  That means
what the tiling means only if shifting the tiled symbols
(``sym -> sym + sum_l i_l * step_l``) moves every element of the tile by exactly
that offset: the difference

    D = sum_d (coord_d(shifted) - coord_d) * device_stride_d - sum_l i_l * stride_l

is 0 at every point of the tile and every iteration tuple.  A partial stick (16
fp32 elements of a 32-element stick per tile) or a wrapping coordinate
(``Mod(c0, 3)`` under tiles of 2 rows) breaks it.

This module is the ONE definition of that condition: codegen proves it on the
program it emits (``codegen.rigid_tiles``, refusing with the reason) and the
planner asks it of a split before accepting it (the ``tiles_translate`` fact),
so an automatic plan never reaches a refusal in codegen.

sympy cancels ``D`` to 0 in the common case; otherwise the exact enumerating
verifier (``facts.verifier``) evaluates it over every point.  A space larger
than ``MAX_POINTS`` raises ``VerifierError`` (unproven: callers refuse).
No torch IR and no policy: sympy, the layout model and the verifier.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import sympy

from spyre_rules.errors import CoordinateError, VerifierError
from spyre_rules.facts.coordinates import to_plain_sympy
from spyre_rules.facts.memo import structural
from spyre_rules.facts.per_tile import access_coords
from spyre_rules.facts.records import as_int
from spyre_rules.facts.stick_layout import SpyreTensorLayout
from spyre_rules.facts.tile_extent import tile_extent
from spyre_rules.facts.verifier import verify_spans

__all__ = ["MAX_POINTS", "TileMotion", "first_untranslated", "iteration_symbols", "is_zero", "loop_steps",
           "varies"]

MAX_POINTS = 2**24


def iteration_symbols(depth: int) -> list[sympy.Symbol]:
    return [sympy.Symbol(f"loop_i{l}", integer=True, nonnegative=True) for l in range(depth)]


def is_zero(expr: sympy.Expr, ranges: Mapping[Any, int]) -> bool:
    """Whether ``expr`` is 0 at every point of ``ranges`` (exact enumeration)."""
    expr = sympy.expand(expr)
    if expr == 0:
        return True
    if not expr.free_symbols:
        return False
    report = verify_spans([1], [expr], dict(ranges), 1, max_points=MAX_POINTS)
    return report.dims[0].min_coord == report.dims[0].max_coord == 0


def varies(expr: sympy.Expr, ranges: Mapping[Any, int]) -> bool:
    """Whether ``expr`` takes more than one value over ``ranges``."""
    expr = sympy.expand(expr)
    if not expr.free_symbols:
        return False
    report = verify_spans([1], [expr], dict(ranges), 1, max_points=MAX_POINTS)
    return report.dims[0].min_coord != report.dims[0].max_coord


def _device_strides(size: Sequence[int]) -> list[int]:
    return [math.prod(int(s) for s in size[d + 1:]) for d in range(len(size))]


def _offset(coords: Sequence[sympy.Expr], strides: Sequence[int], point: Mapping[Any, int]) -> int:
    """Element offset of the access at ``point`` (every symbol not in it at 0)."""
    total = 0
    for coord, stride in zip(coords, strides):
        coord = sympy.sympify(coord)
        subs = {s: point.get(s, 0) for s in coord.free_symbols}
        total += int(coord.xreplace(subs)) * stride
    return total


class TileMotion:
    """How one access moves from tile to tile of a loop nest.

    ``coords``: its device coordinates over the loop-wide ranges of the tiled
    symbols; ``device_size``: the device sizes they index; ``tile``: every
    symbol's per-tile range; ``levels``: per loop level, outermost first,
    ``{symbol: elements per iteration}``; ``counts``: the iterations per level.
    """

    def __init__(self, coords: Sequence[sympy.Expr], device_size: Sequence[int],
                 tile: Mapping[Any, int], levels: Sequence[Mapping[Any, int]],
                 counts: Sequence[int]) -> None:
        self.coords = [sympy.sympify(c) for c in coords]
        self.device_strides = _device_strides(device_size)
        self.tile = {s: int(r) for s, r in tile.items()}
        self.levels = [dict(level) for level in levels]
        self.counts = [int(c) for c in counts]
        self.iters = iteration_symbols(len(self.counts))
        base = _offset(self.coords, self.device_strides, {})
        self.strides = [
            _offset(self.coords, self.device_strides, level) - base if level else 0
            for level in self.levels
        ]

    @property
    def tiled_levels(self) -> list[int]:
        return [l for l, level in enumerate(self.levels) if level]

    def ranges(self, active: Sequence[int]) -> dict[Any, int]:
        out = dict(self.tile)
        out.update({self.iters[l]: self.counts[l] for l in active})
        return out

    def deltas(self, active: Sequence[int]) -> list[sympy.Expr]:
        """Per device coordinate: its value on the shifted tile minus on the first."""
        shift: dict[Any, Any] = {}
        for l in active:
            for sym, step in self.levels[l].items():
                shift[sym] = shift.get(sym, 0) + self.iters[l] * step
        moved = {sym: sym + offset for sym, offset in shift.items()}
        return [c.xreplace(moved) - c for c in self.coords]

    def difference(self, active: Sequence[int]) -> sympy.Expr:
        """Exact element offset of the shifted tile minus the affine offset."""
        moved = sum((d * s for d, s in zip(self.deltas(active), self.device_strides)),
                    sympy.Integer(0))
        return moved - sum(self.iters[l] * self.strides[l] for l in active)

    def rigid(self, active: Sequence[int]) -> bool:
        return is_zero(self.difference(active), self.ranges(active))

    def checked_level_sets(self) -> list[list[int]]:
        """Each tiled level alone, then all of them together (their offsets add)."""
        tiled = self.tiled_levels
        return [[l] for l in tiled] + ([tiled] if len(tiled) > 1 else [])

    def first_misplaced(self) -> list[int] | None:
        """The first level set whose tiles are not rigid translations, or None."""
        for active in self.checked_level_sets():
            if not self.rigid(active):
                return active
        return None



def loop_steps(symbol_dims: Mapping[Any, int], ranges: Mapping[Any, int],
               levels: Sequence[Mapping[int, int]]) -> tuple[dict[Any, int], list[dict[Any, int]]] | None:
    """Per-tile extents and per-level steps of the symbols of a loop nest.

    ``levels``: per level, outermost first, ``{output host dim: count}``.  A symbol
    driving dim ``d`` walks ``R / prod(counts of d)`` per tile and advances, per
    iteration of level ``l``, that extent times the counts of the deeper levels on
    ``d`` (nested levels on one dim).  None when the counts do not divide ``R``
    (one level on ``d`` may leave a shorter last tile: ``tile_extent``).
    """
    tile = dict(ranges)
    steps: list[dict[Any, int]] = [{} for _ in levels]
    for sym, dim in symbol_dims.items():
        if sym not in ranges:
            continue
        counts = [int(level.get(dim, 1)) for level in levels]
        total = math.prod(counts)
        if total == 1:
            continue
        # one level on the dim may leave a shorter last tile (tile_extent); nested
        # levels on one dim divide it exactly
        single = sum(count > 1 for count in counts) == 1
        extent = tile_extent(ranges[sym], total) if single else (
            None if ranges[sym] % total else ranges[sym] // total)
        if extent is None:
            return None
        tile[sym] = extent
        for l, count in enumerate(counts):
            if count > 1:
                steps[l][sym] = extent * math.prod(counts[l + 1:])
    return tile, steps


def first_untranslated(
    accesses: Sequence[tuple[str, Any, Any, Mapping[Any, Any]]],
    symbol_dims: Mapping[Any, int],
    levels: Sequence[Mapping[int, int]],
) -> str | None:
    """The name of the first access ``(name, layout, index, ranges)`` to a FULL buffer
    whose tiles under the loop nest ``levels`` (see :func:`loop_steps`) are not
    rigid translations of the first, or None when every one is.

    Coordinates are derived over the full ranges, as codegen derives them over the
    loop-wide extent; each tiled symbol then walks its per-tile range.  Not
    guessed: an access whose counts do not divide, whose coordinates cannot be
    derived or whose space is too large to enumerate is reported.
    """
    dims = tuple(symbol_dims.items())
    nest = tuple(tuple(sorted(level.items())) for level in levels)
    for name, access_layout, index, ranges in accesses:
        stl = getattr(access_layout, "device_layout", None)
        if isinstance(stl, SpyreTensorLayout) and all(
                hasattr(access_layout, a) for a in ("size", "stride", "offset")):
            # memoised on values: ops making the same access are proven once
            view = (stl, tuple(access_layout.size), tuple(access_layout.stride),
                    access_layout.offset)
            try:
                ok = _translates_by_value(view, index, tuple(ranges.items()), dims, nest)
            except TypeError:  # an unhashable index: prove it directly
                ok = _translates(access_layout, index, ranges, symbol_dims, levels)
        else:
            ok = _translates(access_layout, index, ranges, symbol_dims, levels)
        if not ok:
            return name
    return None


@structural()
def _translates_by_value(view: tuple, index: Any, range_items: tuple, dims: tuple,
                         nest: tuple) -> bool:
    stl, size, stride, offset = view
    return _translates(_HostView(stl, size, stride, offset), index, dict(range_items),
                       dict(dims), [dict(level) for level in nest])


class _HostView:
    """What ``access_coords`` reads of a layout, rebuilt from memoised values."""

    def __init__(self, device_layout: Any, size: tuple, stride: tuple, offset: Any) -> None:
        self.device_layout, self.size, self.stride, self.offset = device_layout, size, stride, offset


def _translates(access_layout: Any, index: Any, ranges: Mapping[Any, Any],
                symbol_dims: Mapping[Any, int], levels: Sequence[Mapping[int, int]]) -> bool:
    """Whether one access's tiles under ``levels`` are rigid translations of the first."""
    counts = [max([int(c) for c in level.values()] or [1]) for level in levels]
    full = {s: as_int(r) for s, r in ranges.items()}
    if any(r is None for r in full.values()):
        return False
    planned = loop_steps(symbol_dims, full, levels)
    if planned is None:
        return False
    tile, steps = planned
    if not any(steps):
        return True
    try:
        stl, coords = access_coords(access_layout, index, full)
        motion = TileMotion([to_plain_sympy(c) for c in coords], stl.device_size, tile,
                            steps, counts)
        return motion.first_misplaced() is None
    except (CoordinateError, VerifierError, TypeError, ValueError):
        return False
