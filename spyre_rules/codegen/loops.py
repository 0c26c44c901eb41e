"""Address math of counted loops -- the ONE place codegen and executor share.

A TensorArg of an OpSpec inside ``LoopSpec``s *moves* unless it is
``per_tile_fixed`` (a loop-internal / loop-invariant per-tile buffer) or lives in
LX (``allocation['lx']``): at iteration ``i_l`` of loop level ``l`` the executor
adds ``sum_l i_l * level_byte_strides[l]`` to the arg's base address.

``tiled_byte_stride(arg, symbols, ranges)``: the byte offset one iteration of a
level moves the arg = the address of the element at ``sym = T_sym`` (each tiled
symbol of the level at its per-tile range, all other symbols 0) minus the address
at all-zero (layout_model §5.8):
``sum_d (coord_d(T) - coord_d(0)) * prod(device_size[d+1:]) * element_bytes``.
That is the stride ``bundle.mlir``'s affine maps print, the offset the executor
applies, and the shift ``unroll_loop_specs`` bakes into each copy (design rule
§7.6: the affine stride *is* the per-iteration executor offset).  The executor
cross-checks once per program that this affine offset equals the exact shifted
coordinates (``sym -> sym + i*T``); a tile that is not a whole number of sticks
along the stick dim, say, fails there with the op and tensor named.

``OpSpec.tiled_symbols`` is innermost level first; ``level_symbols`` returns them
outermost first for a loop nest of a given depth (missing levels: not tiled).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import sympy

from spyre_rules.codegen.op_spec import LoopSpec, OpSpec, TensorArg, element_bytes

__all__ = [
    "arg_level_strides",
    "arg_moves",
    "byte_address",
    "level_symbols",
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


def tiled_byte_stride(arg: TensorArg, symbols: list[Any], ranges: dict[Any, Any]) -> int:
    """Bytes ``arg`` moves per iteration of a level tiling ``symbols`` (see module doc)."""
    if not arg_moves(arg) or not symbols:
        return 0
    point = {s: int(ranges[s]) for s in symbols}
    return byte_address(arg, point) - byte_address(arg, {})


def level_symbols(spec: OpSpec, depth: int) -> list[list[Any]]:
    """The op's tiled symbols per enclosing level, outermost first (``depth`` levels)."""
    inner_first = list(spec.tiled_symbols)[:depth]
    inner_first += [[] for _ in range(depth - len(inner_first))]
    return list(reversed(inner_first))


def spec_ranges(spec: OpSpec) -> dict[Any, Any]:
    return {s: r for s, (r, _) in spec.iteration_space.items()}


def arg_level_strides(spec: OpSpec, arg: TensorArg, depth: int) -> list[int]:
    """Byte stride of ``arg`` per enclosing loop level, outermost first."""
    ranges = spec_ranges(spec)
    return [tiled_byte_stride(arg, syms, ranges) for syms in level_symbols(spec, depth)]


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
            if delta > 0 and all(size[o] == 1 for o in range(d)):
                size[d] = delta
    return size


def _shift(spec: OpSpec, i: int) -> OpSpec:
    ranges = spec_ranges(spec)
    level = list(spec.tiled_symbols[0]) if spec.tiled_symbols else []
    new = copy.copy(spec)
    new.tiled_symbols = [list(x) for x in spec.tiled_symbols[1:]]
    new.args = []
    for arg in spec.args:
        moved = copy.copy(arg)
        moved.allocation = dict(arg.allocation)
        stride = tiled_byte_stride(arg, level, ranges)
        if stride:
            key = next(k for k in ("pool", "hbm", "lx") if k in moved.allocation)
            moved.allocation[key] = int(moved.allocation[key]) + i * stride
            moved.device_size = _tile_device_size(arg, level, ranges)
        new.args.append(moved)
    return new


def unroll_loop_specs(items: list[Any]) -> list[OpSpec]:
    """Flatten every LoopSpec into ``count`` shifted copies (innermost loops first)."""
    out: list[OpSpec] = []
    for item in items:
        if not isinstance(item, LoopSpec):
            out.append(item)
            continue
        if not getattr(item.count, "is_Integer", isinstance(item.count, int)):
            raise ValueError(f"cannot unroll a loop with symbolic count {item.count}")
        body = unroll_loop_specs(item.body)
        for i in range(int(item.count)):
            out.extend(_shift(spec, i) for spec in body)
    return out
