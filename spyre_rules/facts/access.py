"""Facts about what an op reads and writes: its loop symbols and access coordinates.

Each is a ``@fact`` (``spyre_rules.facts.registry``) answered from the op's
cached snapshot (``spyre_rules.facts.op_cache``), which memoises the costly
measurements per tiling and read; the facts themselves keep no cache.
"""

from __future__ import annotations

from typing import Any

import sympy

from spyre_rules.facts.op_cache import op_facts
from spyre_rules.facts.records import Coord, HostCoord, Read
from spyre_rules.facts.registry import Op, Sym, Tiling, fact

__all__ = ["full_output_coords", "has_output_coords", "has_unmeasured_indirect_reads",
           "indirect_reads", "input_reads", "output_coords", "output_dim",
           "output_symbols", "read_coords", "read_host_coords", "read_host_tile_extent",
           "reduction_symbols", "tiles_translate"]


def _symbol_named(mapping: Any, sym: Any) -> Any:
    """The key of ``mapping`` that is ``sym`` (a Symbol or its name), or None."""
    if sym in mapping:
        return sym
    name = sym.name if isinstance(sym, sympy.Symbol) else str(sym)
    for key in mapping:
        if getattr(key, "name", None) == name:
            return key
    return None


# --------------------------------------------------------------------------- symbols


@fact
def output_symbols(op: Op) -> frozenset[Sym]:
    return op_facts(op).output_symbols


@fact
def output_dim(op: Op, s: Sym) -> int | None:
    dims = op_facts(op).symbol_dims
    key = _symbol_named(dims, s)
    return None if key is None else dims[key]


@fact
def reduction_symbols(op: Op) -> frozenset[Sym]:
    return op_facts(op).reduction_symbols


# --------------------------------------------------------------------------- coordinates


@fact
def output_coords(op: Op, tile: Tiling) -> list[Coord]:
    return op_facts(op).output_coords(tile)


@fact
def has_output_coords(op: Op, tile: Tiling) -> bool:
    return bool(op_facts(op).output_view(tile))


@fact
def full_output_coords(op: Op, tile: Tiling) -> list[Coord]:
    return op_facts(op).full_output_coords(tile)


@fact
def tiles_translate(op: Op, tile: Tiling) -> bool:
    return op_facts(op).tiles_translate(tile)


@fact
def input_reads(op: Op) -> list[Read]:
    return op_facts(op).input_reads()


@fact
def indirect_reads(op: Op) -> list[Read]:
    return list(op_facts(op).indirect_reads()[0])


@fact
def has_unmeasured_indirect_reads(op: Op) -> bool:
    return op_facts(op).indirect_reads()[1]


@fact
def read_coords(op: Op, read: Read, tile: Tiling) -> list[Coord]:
    return op_facts(op).read_coords(read, tile)


@fact
def read_host_coords(op: Op, read: Read) -> list[HostCoord]:
    return op_facts(op).read_host_coords(read)


@fact
def read_host_tile_extent(op: Op, read: Read, host_dim: int, dim: int, k: int) -> int | None:
    """Values input host dim ``host_dim`` of ``read`` spans (``hi - lo + 1`` of a sound
    interval) over the first of ``k`` tiles (``tile_extent``) of op's split dim ``dim``,
    every other loop symbol over its whole range.  A read whose host coordinate is the
    split symbol alone spans the tile; one whose coordinate merges it with others (a
    reshape of ``[tokens, heads, 256]`` read as ``[tokens * heads * 2, 128]`` rows: the
    row's parity picks the half of the stick dim) spans what the tile reaches.  When one
    split symbol moves the coordinate by a constant step from one tile to the next, the
    tile claims that step instead: a strided read (cohere's rotary ``x[..., 1::2]`` of
    ``[tokens, heads * 32]``, coordinate ``32 h + 2 i + 1``) reaches ``32 t - 1`` values of
    a tile of ``t`` heads but its tiles start whole sticks apart.  Unknown when the
    coordinate cannot be derived or bounded."""
    from spyre_rules.errors import CoordinateError
    from spyre_rules.facts.coordinates import host_coordinates
    from spyre_rules.facts.tile_extent import tile_extent
    from spyre_rules.facts.value_range import value_range

    facts = op_facts(op)
    dep = facts.dep_of(read)
    layout = read.layout
    try:
        coord = host_coordinates(layout.size, layout.stride, dep.index, dep.ranges)[int(host_dim)]
        box = {s: (0, int(r) - 1) for s, r in dep.ranges.items()}
    except (CoordinateError, AttributeError, TypeError, IndexError):
        return None
    steps = {}
    for sym, split_dim in facts.split_dims.items():
        if split_dim == int(dim) and sym in box:
            tile = tile_extent(box[sym][1] + 1, int(k))
            if tile is None:
                return None
            box[sym] = (0, tile - 1)
            steps[sym] = tile
    if len(steps) == 1 and coord.free_symbols & set(steps):
        step = sympy.expand(coord.subs({s: s + t for s, t in steps.items()}) - coord)
        if step.is_Integer and int(step) > 0:
            return int(step)
    found = value_range(coord, box)
    return None if found is None else found[1] - found[0] + 1
