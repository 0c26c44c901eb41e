"""Compile-time proof that every access of every OpSpec stays inside its tensor's allocation.

The span check (``codegen/span_check``) bounds how far an access moves; the rigid-tile
proof (``codegen/rigid_tiles``) that each tile is a translation of the first.  Neither
says where an access lands: a peeled corner tile that kept a whole tile's range
(issue 40, ``a @ a.T`` at (127, 64)) passed both and stored one row past its
buffer, caught only when the executor ran it.  This module proves, for every
TensorArg of every OpSpec of a kernel (LoopSpecs as written, before any unrolling),
what the executor checks at run time (``executor/access.py``), for every iteration:

1. every device coordinate lies in ``[0, device_size[d])``, over the op's whole
   iteration space (every symbol over ``[0, range)``: the union of all cores' shares;
   an indirect symbol over the dim it indexes) and, for a moving arg, over every
   iteration's shifted space (each tiled symbol ``s + i * step`` over the loops' real
   iterations): a tile past the end of a device dim whose bytes still lie inside the
   allocation (row 127 of a 127-row stick column is row 0 of the next) addresses
   another element of the same tensor;
2. the bytes it touches lie in its allocation: ``allocation + [lo, hi]`` of the
   element offset ``sum_d coord_d * device_stride_d`` (each coordinate's value
   range, ``facts/value_range``) plus the loop offset over the loops' real
   iterations ``first .. first + count - 1`` (``codegen.loops.arg_level_strides``,
   the stride the executor applies), inside ``[allocation, allocation +
   size_in_bytes)`` narrowed to the arg's ``segment`` and to the buffer's segment in
   the graph's memory map (a tensor's bytes are its own, whatever its TensorArg says).

The bound is analytic (interval arithmetic, no enumeration), so it costs the same at
any size.  An access it cannot prove is a compile error (:class:`AllocationBoundsError`,
not an Unsupported: no fallback runs a program the compiler cannot show to be safe)
naming the kernel, the op, the tensor and the byte range against the allocation.

A masked load (``"masks"``: padding, concatenation) reads only where its masks hold
and the executor exempts the other lanes; its coordinates are bounded over the
whole space like any access.  No program of the test suite or of the fuzz campaigns
relies on a mask to keep a load in bounds; one that does is refused here until the
proof learns its masks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from spyre_rules.codegen.loops import arg_level_strides, arg_moves, device_strides, level_steps
from spyre_rules.errors import SpyreRulesError, VerifierError
from spyre_rules.facts.translation import TileMotion
from spyre_rules.facts.value_range import value_range
from spyre_rules.program.op_spec import LoopSpec, OpSpec, TensorArg, element_bytes, output_name

__all__ = ["AccessBound", "AllocationBoundsError", "access_bounds", "prove_in_allocation"]


class AllocationBoundsError(SpyreRulesError):
    """A generated access cannot be proven inside its tensor's allocation (names the
    kernel, op, tensor, its byte range and the allocation)."""


@dataclasses.dataclass(frozen=True)
class AccessBound:
    """Where one TensorArg of one OpSpec lands over every iteration."""

    kernel: str
    op: str
    kind: str
    tensor: str
    access: str
    #: bytes ``[low, end)`` the access may touch (None: no bound could be shown)
    low: int | None
    end: int | None
    #: the bytes it may touch: ``[allocation_start, allocation_end)``
    allocation_start: int
    allocation_end: int
    #: why it is not proven ("" when it is)
    problem: str = ""

    @property
    def proven(self) -> bool:
        return not self.problem

    def message(self) -> str:
        where = "" if self.low is None else f"touches bytes [{self.low}, {self.end}), "
        return (
            f"spyre_rules allocation check: kernel {self.kernel}, op {self.op} ({self.kind}): "
            f"{self.access} of tensor {self.tensor} {where}not proven inside its allocation "
            f"[{self.allocation_start}, {self.allocation_end}): {self.problem}"
        )


def _allowed(arg: TensorArg, key: str, segments: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    start = int(arg.allocation[key])
    end = start + arg.size_in_bytes
    if arg.segment is not None:  # one unrolled tile of a buffer: the buffer's bytes
        start, end = max(start, int(arg.segment[0])), min(end, int(arg.segment[1]))
    if key == "hbm" and arg.name in segments:
        seg = segments[arg.name]
        start, end = max(start, int(seg[0])), min(end, int(seg[1]))
    return start, end


def _shift_range(spec: OpSpec, arg: TensorArg, levels: list[range]) -> tuple[int, int]:
    """Least and greatest loop offset (bytes) over the loops' real iterations."""
    low = high = 0
    for stride, iterations in zip(arg_level_strides(spec, arg, len(levels)), levels):
        ends = (iterations[0] * stride, iterations[-1] * stride)
        low, high = low + min(ends), high + max(ends)
    return low, high


def _shifted_box(spec: OpSpec, arg: TensorArg, box: dict[Any, tuple[int, int]],
                 levels: list[range]) -> dict[Any, tuple[int, int]]:
    """``box`` widened by every iteration's shift of the tiled symbols (a moving arg)."""
    if not levels or not arg_moves(arg):
        return box
    out = dict(box)
    for steps, iterations in zip(level_steps(spec, len(levels)), levels):
        for sym, step in steps.items():
            ends = (iterations[0] * int(step), iterations[-1] * int(step))
            lo, hi = out[sym]
            out[sym] = (lo + min(ends), hi + max(ends))
    return out


def _rigid(spec: OpSpec, arg: TensorArg, levels: list[range]) -> bool:
    """Whether every tile of ``arg`` over iterations ``0 .. stop - 1`` of each level is a
    rigid translation of the first (the proof ``codegen/rigid_tiles`` applies, redone here
    so this check does not lean on another's verdict)."""
    space = {**{s: int(r) for s, (r, _) in spec.iteration_space.items()}, **arg.indirect_ranges()}
    try:
        motion = TileMotion(arg.device_coordinates, arg.device_size, space,
                            level_steps(spec, len(levels)), [r.stop for r in levels])
        return motion.first_misplaced() is None
    except (VerifierError, TypeError, ValueError):
        return False


def _bound_arg(kernel: str, spec: OpSpec, arg: TensorArg, levels: list[range],
               segments: Mapping[str, tuple[int, int]]) -> AccessBound:
    access = "indirect read" if arg.indirect else ("read" if arg.is_input else "write")
    fields = dict(kernel=kernel, op=output_name(spec), kind=spec.op,
                  tensor=arg.name or f"arg{arg.arg_index}", access=access)
    key = next((k for k in ("hbm", "lx") if k in arg.allocation), None)
    if key is None:
        return AccessBound(**fields, low=None, end=None, allocation_start=0, allocation_end=0,
                           problem=f"it has no HBM or LX allocation ({arg.allocation})")
    start, end = _allowed(arg, key, segments)
    box = {s: (0, int(r) - 1) for s, (r, _) in spec.iteration_space.items()}
    box.update({s: (0, n - 1) for s, n in arg.indirect_ranges().items()})
    moved = _shifted_box(spec, arg, box, levels)
    sizes = [int(s) for s in arg.device_size]
    low = high = moved_low = moved_high = 0
    problems = []
    for d, (coord, stride) in enumerate(zip(arg.device_coordinates, device_strides(sizes))):
        found, every = value_range(coord, box), value_range(coord, moved)
        if found is None or every is None:
            return AccessBound(**fields, low=None, end=None, allocation_start=start,
                               allocation_end=end,
                               problem=f"device coordinate {d} ({coord}) has no sound bound")
        if every[0] < 0 or every[1] >= sizes[d]:
            over = "" if moved is box else " over every iteration"
            problems.append(f"device coordinate {d} ({coord}) takes values in "
                            f"[{every[0]}, {every[1]}]{over}, outside [0, {sizes[d]})")
        low, high = low + found[0] * stride, high + found[1] * stride
        moved_low, moved_high = moved_low + every[0] * stride, moved_high + every[1] * stride
    width = element_bytes(arg.device_dtype)
    shift_low, shift_high = _shift_range(spec, arg, levels)
    base = int(arg.allocation[key])
    touched = (base + low * width + shift_low, base + (high + 1) * width + shift_high)
    moved_touched = (base + moved_low * width, base + (moved_high + 1) * width)
    if moved is not box and (moved_touched[0] > touched[0] or moved_touched[1] < touched[1]) \
            and _rigid(spec, arg, levels):
        # Tile i's bytes are then also the element offsets of the coordinates at the shifted
        # symbols: a second sound bound.  Interval arithmetic loses differently on each (a
        # wrapped coordinate such as ``Mod(c0 + 16*c4, 64)`` is bounded by its modulus over
        # the first tile, and then shifted again), so the access lies in their intersection.
        touched = (max(touched[0], moved_touched[0]), min(touched[1], moved_touched[1]))
    if touched[0] < start or touched[1] > end:
        problems.append(f"it reaches {max(start - touched[0], touched[1] - end, 0)} bytes "
                        f"{'below' if touched[0] < start else 'past'} it")
    problem = "; ".join(problems)
    return AccessBound(**fields, low=touched[0], end=touched[1], allocation_start=start,
                       allocation_end=end, problem=problem)


def access_bounds(kernel: str, items: list[Any],
                  segments: Mapping[str, tuple[int, int]] | None = None) -> list[AccessBound]:
    """The bound of every TensorArg of every OpSpec of one kernel, in program order;
    ``segments``: the graph's HBM segments by tensor name (``[start, end)``)."""
    out: list[AccessBound] = []

    def walk(body: list[Any], levels: list[range]) -> None:
        for item in body:
            if isinstance(item, LoopSpec):
                first = int(item.first)
                walk(item.body, [*levels, range(first, first + int(item.count))])
            else:
                out.extend(_bound_arg(kernel, item, arg, levels, segments or {})
                           for arg in item.args)

    walk(items, [])
    return out


def prove_in_allocation(kernel: str, items: list[Any],
                        segments: Mapping[str, tuple[int, int]] | None = None) -> list[AccessBound]:
    """:func:`access_bounds`, raising :class:`AllocationBoundsError` listing every access
    not proven inside its allocation."""
    bounds = access_bounds(kernel, items, segments)
    failed = [b.message() for b in bounds if not b.proven]
    if failed:
        raise AllocationBoundsError("\n".join(failed))
    return bounds
