"""Address math of counted loops -- the ONE place codegen and executor share.

A TensorArg of an OpSpec inside ``LoopSpec``s *moves* unless it is
``per_tile_fixed`` (a loop-internal / loop-invariant per-tile buffer) or lives in
LX (``allocation['lx']``): at iteration ``i_l`` of loop level ``l`` the executor
adds ``sum_l i_l * level_byte_strides[l]`` to the arg's base address.

``tiled_byte_stride(arg, steps)``: the byte offset one iteration of a level moves
the arg = the address of the element at ``sym = step_sym`` (each tiled symbol of
the level at its per-iteration step, all other symbols 0) minus the address at
all-zero (docs/layout_model.md §5.8):
``sum_d (coord_d(step) - coord_d(0)) * prod(device_size[d+1:]) * element_bytes``.
A symbol's step is its per-tile range, times the counts of deeper levels tiling
the same dim (``OpSpec.tiled_steps``; nested hints on one dim).  That is the
stride ``bundle.mlir``'s affine maps print, the offset the executor applies, and
the shift ``unroll_loop_specs`` bakes into each copy (docs/layout_model.md §5.7: the
affine stride *is* the per-iteration executor offset).  It means what the tiling
means only if every tile is a rigid translation of the first one: exact shifted
coordinates (``shifted_symbols``: ``sym -> sym + sum_l i_l * step_l``) minus the
unshifted ones equal the affine offset everywhere.  ``codegen.rigid_tiles``
proves that at compile time and refuses the program otherwise.

``OpSpec.tiled_symbols`` is innermost level first; ``level_symbols`` and
``level_steps`` return them outermost first for a loop nest of a given depth
(missing levels: not tiled).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import sympy

from spyre_rules.program.op_spec import LoopSpec, OpSpec, TensorArg, element_bytes

__all__ = [
    "arg_level_strides",
    "arg_moves",
    "byte_address",
    "level_steps",
    "level_symbols",
    "shifted_symbols",
    "tiled_byte_stride",
    "unroll_loop_specs",
]


def device_strides(size: list[int]) -> list[int]:
    return [math.prod(int(s) for s in size[d + 1:]) for d in range(len(size))]


def byte_address(arg: TensorArg, point: dict[Any, int]) -> int:
    """Byte offset (from the arg's base) of the element at ``point`` (missing symbols 0)."""
    subs = {s: point.get(s, 0) for c in arg.device_coordinates for s in c.free_symbols}
    offset = 0
    for coord, stride in zip(arg.device_coordinates, device_strides(arg.device_size)):
        offset += int(sympy.sympify(coord).xreplace(subs)) * stride
    return offset * element_bytes(arg.device_dtype)


def arg_moves(arg: TensorArg) -> bool:
    """False for per-tile buffers reused every iteration and LX tensors."""
    return not arg.per_tile_fixed and "lx" not in arg.allocation


def tiled_byte_stride(arg: TensorArg, steps: dict[Any, int]) -> int:
    """Bytes ``arg`` moves per iteration of a level advancing ``steps`` (see module doc)."""
    if not arg_moves(arg) or not steps:
        return 0
    return byte_address(arg, steps) - byte_address(arg, {})


def level_symbols(spec: OpSpec, depth: int) -> list[list[Any]]:
    """The op's tiled symbols per enclosing level, outermost first (``depth`` levels)."""
    return [list(level) for level in level_steps(spec, depth)]


def _inner_first_steps(spec: OpSpec) -> list[dict[Any, int]]:
    ranges = spec_ranges(spec)
    steps = spec.tiled_steps
    if steps is None:
        return [{s: int(ranges[s]) for s in syms} for syms in spec.tiled_symbols]
    return [dict(zip(syms, map(int, row))) for syms, row in zip(spec.tiled_symbols, steps)]


def level_steps(spec: OpSpec, depth: int) -> list[dict[Any, int]]:
    """``{symbol: elements per iteration}`` per enclosing level, outermost first."""
    inner_first = _inner_first_steps(spec)[:depth]
    inner_first += [{} for _ in range(depth - len(inner_first))]
    return list(reversed(inner_first))


def shifted_symbols(spec: OpSpec, iteration: tuple[int, ...]) -> dict[Any, Any]:
    """``{sym: sym + sum_l i_l * step_l}``: the exact shift of the enclosing
    iteration tuple ``iteration`` (outermost first) on the op's tiled symbols."""
    shift: dict[Any, Any] = {}
    for i, steps in zip(iteration, level_steps(spec, len(iteration))):
        for sym, step in steps.items():
            shift[sym] = shift.get(sym, 0) + i * step
    return {sym: sym + offset for sym, offset in shift.items()}


def spec_ranges(spec: OpSpec) -> dict[Any, Any]:
    return {s: r for s, (r, _) in spec.iteration_space.items()}


def arg_level_strides(spec: OpSpec, arg: TensorArg, depth: int) -> list[int]:
    """Byte stride of ``arg`` per enclosing loop level, outermost first."""
    return [tiled_byte_stride(arg, steps) for steps in level_steps(spec, depth)]


# --------------------------------------------------------------------------- unrolling


def _tile_device_size(arg: TensorArg, symbols: list[Any], ranges: dict[Any, Any]) -> list[int]:
    """layout_model §5.8: per tiled non-stick symbol, shrink device dim ``d`` to the
    coordinate delta of one tile, only when every outer device dim has size 1."""
    size = [int(s) for s in arg.device_size]
    stick = arg.device_coordinates[-1].free_symbols
    for sym in symbols:
        if sym in stick:
            continue
        for d, coord in enumerate(arg.device_coordinates[:-1]):
            zero = {s: 0 for s in coord.free_symbols}
            at_t = dict(zero)
            at_t[sym] = int(ranges[sym])
            delta = int(coord.xreplace(at_t)) - int(coord.xreplace(zero))
            if delta > 0 and all(size[o] == 1 for o in range(d)) \
                    and _stays_below(coord, sym, delta, ranges):
                size[d] = min(size[d], delta)
    return size


def _stays_below(coord: Any, sym: Any, delta: int, ranges: dict[Any, Any]) -> bool:
    """Whether one tile's values of ``coord`` lie in ``[0, delta)``, the shrunk dim:
    only when it is affine with non-negative coefficients over symbols with known
    ranges and its smallest value is >= 0 and largest below ``delta``.  A constant
    offset (``c1 + 1``: a cropping pad's read one row on) or another symbol moving it
    (``2*c0 + c1`` with ``c1`` tiled, a merged view) keeps the whole dim."""
    if any(s not in ranges for s in coord.free_symbols):
        return False
    poly = sympy.Poly(coord, *coord.free_symbols) if coord.is_polynomial(*coord.free_symbols) else None
    if poly is None or poly.total_degree() > 1 or any(c < 0 for c in poly.coeffs()):
        return False
    zero = {s: 0 for s in coord.free_symbols}
    top = {s: int(ranges[s]) - 1 for s in coord.free_symbols}
    return int(coord.xreplace(zero)) >= 0 and int(coord.xreplace(top)) < delta


def _shift(spec: OpSpec, i: int) -> OpSpec:
    ranges = spec_ranges(spec)
    steps = _inner_first_steps(spec)
    level = list(steps[0]) if steps else []
    new = copy.copy(spec)
    new.tiled_symbols = [list(x) for x in spec.tiled_symbols[1:]]
    if spec.tiled_steps is not None:
        new.tiled_steps = [list(x) for x in spec.tiled_steps[1:]]
    new.args = []
    for arg in spec.args:
        moved = copy.copy(arg)
        moved.allocation = dict(arg.allocation)
        stride = tiled_byte_stride(arg, steps[0] if steps else {})
        if stride:
            key = next(k for k in ("pool", "hbm", "lx") if k in moved.allocation)
            start = int(moved.allocation[key])
            if moved.segment is None:  # an inner unrolled level already recorded it
                moved.segment = (start, start + arg.size_in_bytes)
            moved.allocation[key] = start + i * stride
            moved.device_size = _tile_device_size(arg, level, ranges)
        new.args.append(moved)
    return new


def unroll_loop_specs(items: list[Any]) -> list[OpSpec]:
    """Flatten every LoopSpec into ``count`` shifted copies (innermost loops first),
    copy ``i`` for each iteration ``first .. first + count - 1`` shifted by ``i * stride``."""
    out: list[OpSpec] = []
    for item in items:
        if not isinstance(item, LoopSpec):
            out.append(item)
            continue
        if not getattr(item.count, "is_Integer", isinstance(item.count, int)):
            raise ValueError(f"cannot unroll a loop with symbolic count {item.count}")
        body = unroll_loop_specs(item.body)
        first = int(item.first)
        for i in range(first, first + int(item.count)):
            out.extend(_shift(spec, i) for spec in body)
    return out
