"""The accesses a tiled op performs on FULL buffers, for the independent checks.

The verifier's veto (``engine.veto``) and the tests' brute-force oracles measure
the same accesses of an op tiled by a split: the tile's write into the full
output buffer and its input reads.  This module derives them once -- device
coordinates over the full loop ranges, the buffer's device size and itemsize --
and splits the ranges per tile, so the checks differ only in what they measure.

A coordinate driven by a reduction symbol can be dropped from a read
(``zero_reduction``): output-range tiling cannot shrink it
(docs/rules_language.md §6.2).  Measures nothing and decides nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

import sympy

from spyre_rules.facts.coordinates import access_coordinates, device_coordinates
from spyre_rules.facts.op_cache import op_facts
from spyre_rules.facts.regions import effective_layout
from spyre_rules.facts.stick_layout import dtype_info
from spyre_rules.facts.tile_extent import tile_extent

__all__ = ["Access", "full_buffer_write", "input_read_accesses", "tiled_accesses", "tiled_ranges"]


@dataclasses.dataclass(frozen=True)
class Access:
    what: str                 # e.g. "read of buf1"
    device_size: list[int]
    coords: list[sympy.Expr]  # over ``ranges``, the full loop ranges
    itemsize: int
    ranges: dict[Any, int]


def tiled_ranges(ranges: Mapping[Any, Any],
                 per_symbol: Mapping[Any, int]) -> tuple[dict[Any, int], dict[Any, tuple[int, int]]] | None:
    """``(per-tile ranges, steps)`` with ``steps[s] = (per-tile range, tiles)`` for each
    split symbol (the tile extent, ``tile_extent``); None when ``k`` tiles of a
    symbol's range cannot all be non-empty."""
    out, steps = {}, {}
    for s, r in ranges.items():
        r, k = int(r), per_symbol.get(s, 1)
        t = tile_extent(r, k)
        if t is None:
            return None
        out[s] = t
        if k > 1:
            steps[s] = (t, k)
    return out, steps


def full_buffer_write(op: Any, what: str = "tile write into the full output buffer") -> Access | None:
    """The op's write into its full output buffer (None when it cannot be derived)."""
    facts = op_facts(op)
    layout, write = effective_layout(op), facts.write  # a region's: into its concatenation
    if write is None or not hasattr(layout, "device_layout"):
        return None
    coords = device_coordinates(layout.device_layout, write.index, write.ranges)
    return Access(what, [int(s) for s in layout.device_layout.device_size], coords,
                  dtype_info(layout.dtype).itemsize, dict(write.ranges))


def input_read_accesses(op: Any, zero_reduction: bool = True,
                        split_symbols: Collection[Any] = ()) -> list[Access]:
    """Each measurable input read of the op (``facts.snapshot.OpFacts.input_reads``).
    Reduction symbols in ``split_symbols`` (a reduction level's) are measured per
    tile, not dropped."""
    facts = op_facts(op)
    write = facts.write
    out = []
    for read in facts.input_reads():
        dep, rl = facts.dep_of(read), read.layout
        coords = access_coordinates(rl.device_layout, rl.size, rl.stride, rl.offset,
                                    dep.index, dep.ranges)
        if zero_reduction and write is not None:
            reduction_syms = set(dep.ranges) - set(write.ranges) - set(split_symbols)
            coords = [sympy.Integer(0) if c.free_symbols & reduction_syms else c for c in coords]
        out.append(Access(f"read of {read.buffer}", [int(s) for s in rl.device_layout.device_size],
                          coords, dtype_info(rl.dtype).itemsize, dict(dep.ranges)))
    return out


def tiled_accesses(op: Any, per_symbol: Mapping[Any, int], reads: bool,
                   write_what: str = "tile write into the full output buffer",
                   zero_reduction: bool = True,
                   ) -> tuple[list[tuple[Access, dict[Any, int], dict[Any, tuple[int, int]]]], list[str]]:
    """``([(access, per-tile ranges, steps)], problems)``: the full-buffer write, then the
    input reads when ``reads``, each with its ranges split by ``per_symbol``
    (:func:`tiled_ranges`).  A write that cannot be derived or split stops there
    (its problem alone); a read whose split does not divide is a problem."""
    write = full_buffer_write(op, write_what)
    if write is None:
        return [], ["the write into the full output buffer cannot be derived"]
    split = tiled_ranges(write.ranges, per_symbol)
    if split is None:
        return [], ["a split does not divide the range of its loop variable"]
    out, problems = [(write, *split)], []
    for read in (input_read_accesses(op, zero_reduction, split_symbols=per_symbol)
                 if reads else []):
        split = tiled_ranges(read.ranges, per_symbol)
        if split is None:
            problems.append(f"{read.what}: a split does not divide its loop range")
        else:
            out.append((read, *split))
    return out, problems
