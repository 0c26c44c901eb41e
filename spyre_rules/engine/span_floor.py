"""The least span a split combination leaves on a read: combinations that cannot fit.

A read coordinate its loop symbols drive affinely (``d1``, ``256*d0 + 3``, ``2*d0 + d1``:
grouped attention's query heads, kv head and head within it) takes, in a tile, exactly
``1 + sum(|coeff| * (T - 1))`` values (max - min + 1), ``T`` the tile's extent along each
symbol's dim, and one step of it moves the address over the whole inner extent of the
buffer's layout (a read keeps the buffer's layout whatever the tiling:
``facts/per_tile.tile_access_coords``).  So under a combination it spans at least that
many values times ``inner_elems * itemsize`` bytes (when more than one value: one value
only picks a base address), and validation's ``input_reads_fit`` / ``gathered_reads_fit``
refuse every combination where that floor is over the limit, whatever the other dims
do.  The search skips such a combination without validating it, and it does not
count against ``max_combos``: it could never be the plan, so skipping it changes
no plan, only which combinations the budget reaches (Mamba2's chunk scan at 32768
tokens needs 543 combinations in cost order, 539 of them cheaper ones that split its
heads too little for the restickified operand it reads, one head 16 MiB).

Per dim, a count that leaves a floored read over the limit even with every other dim
at one value per tile is below the floor in every combination (``viable_counts``):
the search drops it from the dim's counts before forming the combinations, and a dim
left with one count (grouped attention's heads, 256 KiB a head at a 64 KiB limit: one
head per tile) is fixed, not searched (the ``open_dims`` of the search guards).

The floor is a necessary condition only: an accepted combination is validated (and
span-verified) as any other.
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

__all__ = ["ReadFloor", "below_floor", "read_floors", "viable_counts"]

#: candidate sources that measure a read (the op's own write is rebuilt per tile:
#: its inner extent shrinks with the tile, so it has no such floor)
_READ_SOURCES = ("input:", "reduction:", "gathered:")


class ReadFloor(NamedTuple):
    """A read coordinate ``sum(coeff * symbol)`` (plus a constant) whose symbols walk the
    host dims of ``terms`` (``(dim, extent, coeff)`` each); one value of it covers
    ``step_bytes``."""

    terms: tuple[tuple[int, int, int], ...]
    step_bytes: int

    def values(self, split: dict[int, int]) -> int | None:
        """The values the coordinate takes in the largest tile of ``split`` (a dim not in
        it whole): ``1 + sum(|coeff| * (tile - 1))``, exact for an affine coordinate of
        independent symbols (max - min + 1, as validation measures); None if a tile is
        unknown."""
        from spyre_rules.facts.tile_extent import tile_extent

        values = 1
        for dim, extent, coeff in self.terms:
            tile = tile_extent(extent, int(split.get(dim, 1)))
            if tile is None:
                return None
            values += abs(coeff) * (tile - 1)
        return values


def _affine_coefficients(coord: Any) -> dict[str, int] | None:
    """``{symbol name: integer coefficient}`` of a coordinate affine in its symbols (every
    term one symbol to the first power), else None."""
    import sympy

    names = sorted(str(s) for s in (getattr(coord, "symbols", ()) or ()))
    if not names:
        return None
    local = {n: sympy.Symbol(n, integer=True) for n in names}
    try:
        expr = sympy.sympify(str(coord.expr), locals=local)
    except (sympy.SympifyError, TypeError, SyntaxError):
        return None
    syms = [local[n] for n in names]
    if expr.free_symbols != set(syms):
        return None
    try:
        poly = sympy.Poly(expr, *syms)
    except sympy.PolynomialError:
        return None
    if poly.total_degree() != 1 or not all(c.is_integer for c in poly.coeffs()):
        return None
    coeffs = {}
    for sym in syms:
        monomial = tuple(1 if s is sym else 0 for s in syms)
        coeffs[str(sym)] = int(poly.coeff_monomial(monomial))
    if any(c == 0 for c in coeffs.values()) or any(
            sum(m) > 1 for m in poly.monoms()):
        return None
    return coeffs


def read_floors(found: Iterable[tuple[str, Any]], extent_of: Any,
                dim_of: Any = None) -> list[ReadFloor]:
    """The floors of the candidates ``found`` that measure a read coordinate its symbols
    drive affinely; ``extent_of(dim)``: the dim's static extent (None: no floor);
    ``dim_of(symbol)``: the host dim (output or reduction split dim) a symbol walks
    (None: unknown, no floor).  Without ``dim_of`` only coordinates of one symbol have
    a floor, on the candidate's own host dim."""
    floors: set[ReadFloor] = set()
    for _, cand in found:
        coord = getattr(cand, "coord", None)
        source = str(getattr(cand, "source", ""))
        if coord is None or coord.is_stick or not source.startswith(_READ_SOURCES):
            continue
        if not (coord.span_elems and coord.inner_elems and coord.span_bytes):
            continue
        coeffs = _affine_coefficients(coord)
        if coeffs is None or (dim_of is None and len(coeffs) != 1):
            continue
        terms = []
        for name, coeff in sorted(coeffs.items()):
            dim = cand.host_dim if dim_of is None else dim_of(name)
            extent = None if dim is None else extent_of(dim)
            if extent is None:
                break
            terms.append((int(dim), int(extent), coeff))
        else:
            if len({d for d, _, _ in terms}) != len(terms):
                continue  # two symbols on one dim: not independent
            itemsize = coord.span_bytes // (coord.span_elems * coord.inner_elems)
            if itemsize < 1:
                continue
            floors.add(ReadFloor(tuple(sorted(terms)), coord.inner_elems * itemsize))
    return sorted(floors)


def below_floor(floors: list[ReadFloor], dims: list[int], counts: list[int], limit: int) -> bool:
    """True if the combination (``counts`` aligned with ``dims``; a dim not in it is
    whole) leaves some floored read over ``limit`` bytes: it cannot validate."""
    split = dict(zip(dims, counts))
    for floor in floors:
        values = floor.values(split)
        # one value only picks a base address: it spans nothing (as validation measures)
        if values is not None and values > 1 and values * floor.step_bytes > limit:
            return True
    return False


def viable_counts(floors: list[ReadFloor], dim: int, counts: list[int], limit: int) -> list[int]:
    """The counts of ``dim`` that leave every floored read within ``limit`` with every
    other dim split to one value per tile (the least any combination can leave): a count
    outside them is below a floor in every combination."""
    return [k for k in counts if not _below_alone(floors, dim, k, limit)]


def _below_alone(floors: list[ReadFloor], dim: int, count: int, limit: int) -> bool:
    for floor in floors:
        if not any(d == dim for d, _, _ in floor.terms):
            continue
        # every other symbol at one value: only this dim's term counts
        split = {d: e for d, e, _ in floor.terms}
        split[dim] = count
        values = floor.values(split)
        if values is not None and values > 1 and values * floor.step_bytes > limit:
            return True
    return False
