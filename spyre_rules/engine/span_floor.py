"""The least span a split combination leaves on a read: combinations that cannot fit.

A read coordinate driven by one loop symbol, affinely (``d1``, ``256*d0 + 3``), takes
at least as many values in a tile as the tile has elements along that symbol's dim,
and one step of it moves the address over the whole inner extent of the buffer's
layout (a read keeps the buffer's layout whatever the tiling:
``facts/per_tile.tile_access_coords``).  So under a combination whose tile is ``T``
elements long on that dim, the coordinate spans at least ``T * inner_elems *
itemsize`` bytes (when ``T > 1``: one value only picks a base address), and validation's ``input_reads_fit`` / ``gathered_reads_fit``
refuse every combination where that floor is over the limit, whatever the other dims
do.  The search skips such a combination without validating it, and it does not
count against ``max_combos``: it could never be the plan, so skipping it changes
no plan, only which combinations the budget reaches (Mamba2's chunk scan at 32768
tokens needs 543 combinations in cost order, 539 of them cheaper ones that split its
heads too little for the restickified operand it reads, one head 16 MiB).

The floor is a necessary condition only: an accepted combination is validated (and
span-verified) as any other.
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

__all__ = ["ReadFloor", "read_floors", "below_floor"]

#: candidate sources that measure a read (the op's own write is rebuilt per tile:
#: its inner extent shrinks with the tile, so it has no such floor)
_READ_SOURCES = ("input:", "reduction:", "gathered:")


class ReadFloor(NamedTuple):
    """Host dim ``dim`` (extent ``extent``) drives a read coordinate affinely; one value
    of it covers ``step_bytes``."""

    dim: int
    extent: int
    step_bytes: int


def _affine_in_one_symbol(coord: Any) -> bool:
    import sympy

    symbols = list(getattr(coord, "symbols", ()) or ())
    if len(symbols) != 1:
        return False
    name = str(symbols[0])
    try:
        expr = sympy.sympify(str(coord.expr), locals={name: sympy.Symbol(name, integer=True)})
    except (sympy.SympifyError, TypeError, SyntaxError):
        return False
    sym = next((s for s in expr.free_symbols if str(s) == name), None)
    if sym is None or expr.free_symbols != {sym}:
        return False
    try:
        poly = sympy.Poly(expr, sym)
    except sympy.PolynomialError:
        return False
    return poly.degree() == 1 and all(c.is_integer for c in poly.all_coeffs())


def read_floors(found: Iterable[tuple[str, Any]], extent_of: Any) -> list[ReadFloor]:
    """The floors of the candidates ``found`` that measure a read coordinate one symbol
    drives affinely; ``extent_of(dim)``: the dim's static extent (None: no floor)."""
    floors: set[ReadFloor] = set()
    for _, cand in found:
        coord = getattr(cand, "coord", None)
        source = str(getattr(cand, "source", ""))
        if coord is None or coord.is_stick or not source.startswith(_READ_SOURCES):
            continue
        if not (coord.span_elems and coord.inner_elems and coord.span_bytes):
            continue
        if not _affine_in_one_symbol(coord):
            continue
        extent = extent_of(cand.host_dim)
        if extent is None:
            continue
        itemsize = coord.span_bytes // (coord.span_elems * coord.inner_elems)
        if itemsize < 1:
            continue
        floors.add(ReadFloor(int(cand.host_dim), int(extent), coord.inner_elems * itemsize))
    return sorted(floors)


def below_floor(floors: list[ReadFloor], dims: list[int], counts: list[int], limit: int) -> bool:
    """True if the combination (``counts`` aligned with ``dims``; a dim not in it is
    whole) leaves some floored read over ``limit`` bytes: it cannot validate."""
    from spyre_rules.facts.tile_extent import tile_extent

    split = dict(zip(dims, counts))
    for floor in floors:
        tile = tile_extent(floor.extent, int(split.get(floor.dim, 1)))
        # one value only picks a base address: it spans nothing (as validation measures)
        if tile is not None and tile > 1 and tile * floor.step_bytes > limit:
            return True
    return False
