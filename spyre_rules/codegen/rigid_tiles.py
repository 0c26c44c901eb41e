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

The proof works on the difference
``D = sum_d (coord_d(shifted) - coord_d) * device_stride_d - sum_l i_l * stride_l``
with one symbol per loop level: sympy cancels it to 0 in the common case (a dim
that is not the stick dim moves linearly); otherwise the exact enumerating
verifier (``facts.verifier``) evaluates it over every iteration tuple and the
tile's symbols it involves.  Only a space too large to enumerate (more than
``MAX_POINTS``) is refused unproven.
"""

from __future__ import annotations

import itertools
from typing import Any

import sympy

from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.codegen.loops import (
    arg_level_strides,
    arg_moves,
    device_strides,
    level_steps,
    shifted_symbols,
)
from spyre_rules.errors import VerifierError
from spyre_rules.facts.verifier import verify_spans
from spyre_rules.program.op_spec import OpSpec, TensorArg, element_bytes

__all__ = ["MAX_POINTS", "TileTranslationError", "check_rigid_tiles"]

MAX_POINTS = 2**24
WITNESS_TUPLES = 256  # iteration tuples searched for the one an error message names


class TileTranslationError(UnsupportedGraph):
    """A tiled op's tiles are not rigid translations of its first tile (names op, dim, reason)."""


def _iteration_symbols(depth: int) -> list[sympy.Symbol]:
    return [sympy.Symbol(f"loop_i{l}", integer=True, nonnegative=True) for l in range(depth)]


def _is_zero(expr: sympy.Expr, ranges: dict[Any, int]) -> bool:
    """Whether ``expr`` is 0 at every point of ``ranges`` (exact enumeration)."""
    expr = sympy.expand(expr)
    if expr == 0:
        return True
    if not expr.free_symbols:
        return False
    report = verify_spans([1], [expr], ranges, 1, max_points=MAX_POINTS)
    return report.dims[0].min_coord == report.dims[0].max_coord == 0


def _varies(expr: sympy.Expr, ranges: dict[Any, int]) -> bool:
    expr = sympy.expand(expr)
    if not expr.free_symbols:
        return False
    report = verify_spans([1], [expr], ranges, 1, max_points=MAX_POINTS)
    return report.dims[0].min_coord != report.dims[0].max_coord


class _Arg:
    """One moving TensorArg of ``spec`` inside ``depth`` levels with ``counts``."""

    def __init__(self, spec: OpSpec, arg: TensorArg, counts: list[int]) -> None:
        self.spec = spec
        self.arg = arg
        self.counts = counts
        self.levels = level_steps(spec, len(counts))
        width = element_bytes(arg.device_dtype)
        self.strides = [s // width for s in arg_level_strides(spec, arg, len(counts))]
        self.tile = {**{s: int(r) for s, (r, _) in spec.iteration_space.items()},
                     **arg.indirect_ranges()}
        self.iters = _iteration_symbols(len(counts))

    def ranges(self, active: list[int]) -> dict[Any, int]:
        out = dict(self.tile)
        out.update({self.iters[l]: self.counts[l] for l in active})
        return out

    def deltas(self, active: list[int]) -> list[sympy.Expr]:
        iters = tuple(self.iters[l] if l in active else 0 for l in range(len(self.counts)))
        shift = shifted_symbols(self.spec, iters)
        return [c.xreplace(shift) - c for c in self.arg.device_coordinates]

    def difference(self, active: list[int]) -> sympy.Expr:
        """Exact element offset of the shifted tile minus the affine offset."""
        d_strides = device_strides(self.arg.device_size)
        moved = sum((d * s for d, s in zip(self.deltas(active), d_strides)), sympy.Integer(0))
        return moved - sum(self.iters[l] * self.strides[l] for l in active)

    def rigid(self, active: list[int]) -> bool:
        return _is_zero(self.difference(active), self.ranges(active))


def _elements(n: int) -> str:
    return f"{n} element" if n == 1 else f"{n} elements"


def _witness(item: _Arg, active: list[int]) -> tuple[int, ...] | None:
    """The first iteration tuple (over ``active`` levels) whose tile is misplaced."""
    for n, it in enumerate(itertools.product(*(range(item.counts[l]) for l in active))):
        if n >= WITNESS_TUPLES:
            return None
        values = dict(zip([item.iters[l] for l in active], it))
        if not _is_zero(item.difference(active).xreplace(values), item.tile):
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
        if _varies(delta.xreplace(values), item.tile):
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
    iterates (for the message)."""
    levels = level_steps(spec, len(counts)) if counts else []
    if not any(levels):
        return
    _check_index_values(spec, {s for level in levels for s in level}, what, dims)
    for arg in spec.args:
        if not arg_moves(arg):
            continue
        item = _Arg(spec, arg, [int(c) for c in counts])
        tiled = [l for l in range(len(counts)) if item.levels[l]]
        try:
            for active in [[l] for l in tiled] + ([tiled] if len(tiled) > 1 else []):
                if not item.rigid(active):
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
