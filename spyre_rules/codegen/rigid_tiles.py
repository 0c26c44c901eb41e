"""Compile-time proof that every tile of a counted loop is a rigid translation of the first.

A moving TensorArg is addressed, at iteration ``(i_0, ...)`` of its enclosing
levels, as its iteration-0 address plus ``sum_l i_l * stride_l`` bytes
(``codegen.loops``).  That means what the tiling means only when shifting the
tiled symbols (``sym -> sym + sum_l i_l * step_l``) moves every element of the
tile by exactly that offset.  Otherwise the compact program addresses the wrong
elements and an unrolled copy silently computes the wrong values: a tile that
covers part of a stick (16 fp32 elements of a 32-element stick), or a tiled dim
whose device coordinate wraps.  Such a tiling cannot be expressed by the layout,
so it is refused here, before anything runs, naming the op, the tensor, the dim
and the device dim that does not shift uniformly.  So is an op that computes a
value from a tiled index (``index_expr``: an iota, a ``tril`` mask): every tile
runs the same program from index 0, and would compute tile 0's values.

The condition and its proof are ``facts.translation`` (one definition, which
the planner's ``tiles_translate`` fact asks of a split before accepting it);
this module applies it to every moving TensorArg of an emitted OpSpec and
words the refusal.  Only a space too large to enumerate is refused unproven.
"""

from __future__ import annotations

import itertools
from typing import Any

import sympy

from spyre_rules.codegen.loops import arg_moves, level_steps
from spyre_rules.errors import VerifierError
from spyre_rules.facts.translation import MAX_POINTS, TileMotion, is_zero, varies
from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.program.op_spec import OpSpec, TensorArg

__all__ = ["MAX_POINTS", "TileTranslationError", "check_rigid_tiles"]

WITNESS_TUPLES = 256  # iteration tuples searched for the one an error message names


class TileTranslationError(UnsupportedGraph):
    """A tiled op's tiles are not rigid translations of its first tile (names op, dim, reason)."""


class _Arg(TileMotion):
    """One moving TensorArg of ``spec`` inside levels with ``counts``."""

    def __init__(self, spec: OpSpec, arg: TensorArg, counts: list[int]) -> None:
        super().__init__(arg.device_coordinates, arg.device_size,
                         {**{s: int(r) for s, (r, _) in spec.iteration_space.items()},
                          **arg.indirect_ranges()},
                         level_steps(spec, len(counts)), counts)
        self.arg = arg


def _elements(n: int) -> str:
    return f"{n} element" if n == 1 else f"{n} elements"


def _witness(item: _Arg, active: list[int]) -> tuple[int, ...] | None:
    """The first iteration tuple (over ``active`` levels) whose tile is misplaced."""
    for n, it in enumerate(itertools.product(*(range(item.counts[l]) for l in active))):
        if n >= WITNESS_TUPLES:
            return None
        values = dict(zip([item.iters[l] for l in active], it))
        if not is_zero(item.difference(active).xreplace(values), item.tile):
            return it
    return None


def _reason(item: _Arg, active: list[int]) -> str:
    stick = item.arg.device_dtype.elems_per_stick
    in_stick = item.arg.device_coordinates[-1].free_symbols
    for l in active:
        for sym, step in item.levels[l].items():
            if sym in in_stick and step % stick:
                return (
                    f"the tiled dim runs along the stick dim and {_elements(step)} per "
                    f"iteration is not a whole number of {stick}-element sticks"
                )
    it = _witness(item, active)
    if it is None:
        return "its per-iteration offset is not a constant stride"
    values = dict(zip([item.iters[l] for l in active], it))
    for d, delta in enumerate(item.deltas(active)):
        if varies(delta.xreplace(values), item.tile):
            return (
                f"at iteration {list(it)} device dim {d} (coordinate "
                f"{item.arg.device_coordinates[d]}) does not move by the same amount at every "
                "element of the tile"
            )
    return (
        f"at iteration {list(it)} the tile does not start where the constant per-iteration "
        f"stride {[item.strides[l] for l in active]} (elements) puts it"
    )


def _dims_text(levels: list[dict[Any, int]], active: list[int], dims: dict[Any, int],
               tile: dict[Any, int]) -> str:
    parts = []
    for l in active:
        for sym, step in levels[l].items():
            parts.append(
                f"dim {dims.get(sym, sym)} (per-tile extent {tile[sym]}, {_elements(step)} "
                f"per iteration of level {l})"
            )
    return ", ".join(parts)


def _check_index_values(spec: OpSpec, tiled: set[Any], what: str, dims: dict[Any, int]) -> None:
    """Every tile runs the same program with its symbols starting at 0, so a value
    computed from a tiled symbol (an iota, a triangle or padding mask) would restart
    on every tile; the compact loop cannot pass the tile's offset into it."""
    for entry in spec.op_info.get("program", ()):
        if entry.get("op") != "index_expr":
            continue
        used = sorted(sympy.sympify(entry["expr"]).free_symbols & tiled, key=str)
        if used:
            names = ", ".join(f"dim {dims.get(s, s)}" for s in used)
            raise TileTranslationError(
                f"{what}: coarse tiling cannot tile {names}: the op computes a value from "
                f"its index along it ({entry['expr']}, e.g. an iota or a mask), which would "
                "restart at 0 on every tile; leave that dim untiled"
            )


def check_rigid_tiles(spec: OpSpec, counts: list[int], what: str, dims: dict[Any, int]) -> None:
    """Refuse ``spec`` (inside levels with ``counts``, outermost first) unless every
    moving arg's tiles are rigid translations of the first and no computed value
    depends on a tiled index.  ``dims`` maps each tiled symbol to the host dim it
    iterates (for the message).  The proof covers iterations ``0 .. count - 1`` of
    each level: a loop starting at ``LoopSpec.first`` (a peeled tile) is proven with
    ``first + count``, whose iterations include its own."""
    levels = level_steps(spec, len(counts)) if counts else []
    if not any(levels):
        return
    _check_index_values(spec, {s for level in levels for s in level}, what, dims)
    for arg in spec.args:
        if not arg_moves(arg):
            continue
        item = _Arg(spec, arg, [int(c) for c in counts])
        try:
            active = item.first_misplaced()
            if active is not None:
                raise TileTranslationError(
                    f"{what}: coarse tiling cannot address the tiles of tensor {arg.name} "
                    f"along {_dims_text(item.levels, active, dims, item.tile)}: they are "
                    f"not rigid translations of the first tile: {_reason(item, active)}; "
                    "choose a split whose tiles the layout can express"
                )
        except VerifierError as exc:
            raise TileTranslationError(
                f"{what}: coarse tiling cannot prove that the tiles of tensor {arg.name} are "
                f"rigid translations of the first tile: {exc}"
            ) from None
