"""Run a kernel's ``OpSpec | LoopSpec`` tree, and check its affine addressing once.

Each iteration runs the body's OpSpecs with every moving TensorArg shifted by
``sum_l i_l * stride_l`` bytes -- strides from ``codegen.loops.arg_level_strides``,
the same function ``bundle.mlir`` prints (design rule: the affine stride is the
executor's per-iteration offset).  ``per_tile_fixed`` and LX args never move.

``check_affine`` is the cross-check that this compact addressing means what the
tiling means: for every moving arg and every enclosing-loop iteration tuple it
substitutes ``sym -> sym + sum_l i_l * step_l`` (``codegen.loops.shifted_symbols``) into the device coordinates and requires
the exact element offsets to equal the unshifted ones plus the affine offset, on
the whole per-tile iteration space.  Mismatch -> ``LoopAddressError`` naming the
kernel, op, tensor and iteration.  Kernels run it on their first call only; to
bound its cost it visits at most ``CHECK_ITERATIONS`` iteration tuples (all
tuples when fewer, else every level at its first, second and last iteration in
all combinations).  Iterations are the loops' real values: a ``LoopSpec`` with
``first`` runs ``first .. first + count - 1`` (a peeled last tile), and both the
run and the check shift by those values.

The same pass checks every shifted coordinate against its device dim: a run checks
the tile's unshifted coordinates and its bytes against the allocation
(``access.Access``), and a tile shifted past the end of a device dim whose bytes
stay inside the allocation (row 127 of a 127-row stick column is row 0 of the
next) would pass both while addressing another element of the same tensor.  A load
under masks is exempt, as its masked-off lanes are in a run.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import torch

from spyre_rules.codegen.loops import (
    arg_level_strides,
    arg_moves,
    device_strides,
    level_symbols,
    shifted_symbols,
)
from spyre_rules.errors import SpyreRulesError
from spyre_rules.executor.batched_loops import nest, run_batched
from spyre_rules.executor.run_program import bound_program, run_op_spec
from spyre_rules.executor.hbm import DeviceMemory, DeviceMemoryError
from spyre_rules.executor.nan_checks import Deferred
from spyre_rules.program.index_eval import evaluate
from spyre_rules.program.op_spec import LoopSpec, OpSpec, TensorArg, element_bytes

__all__ = ["LoopAddressError", "check_affine", "run_items", "CHECK_ITERATIONS"]

CHECK_ITERATIONS = 64


class LoopAddressError(SpyreRulesError, RuntimeError):
    """A moving tensor's affine loop offset differs from the exact coordinate shift."""


def _walk(items: list[Any], levels: tuple[range, ...]) -> Any:
    """Every OpSpec with the iteration values of its enclosing loops, outermost first."""
    for item in items:
        if isinstance(item, LoopSpec):
            first = int(item.first)
            yield from _walk(item.body, levels + (range(first, first + int(item.count)),))
        else:
            yield item, levels


#: id(OpSpec) -> (spec, depth, the args' coordinates and the tiling, per-arg level
#: strides): the strides are sympy work, the same every iteration; re-derived if the
#: spec's args, tiled symbols or steps change.
_STRIDES: dict[int, tuple[OpSpec, int, tuple, list[list[int]]]] = {}


def _level_strides(spec: OpSpec, depth: int) -> list[list[int]]:
    key = (tuple((id(a), tuple(a.device_coordinates)) for a in spec.args),
           tuple(map(tuple, spec.tiled_symbols)),
           None if spec.tiled_steps is None else tuple(map(tuple, spec.tiled_steps)))
    hit = _STRIDES.get(id(spec))
    if hit is not None and hit[0] is spec and hit[1] == depth and hit[2] == key:
        return hit[3]
    if len(_STRIDES) > 4096:
        _STRIDES.clear()
    strides = [arg_level_strides(spec, arg, depth) for arg in spec.args]
    _STRIDES[id(spec)] = (spec, depth, key, strides)
    return strides


def run_items(items: list[Any], memory: DeviceMemory, where: str,
              lx: DeviceMemory | None = None) -> None:
    """Run a kernel's tree once.  Nothing edits an OpSpec while its kernel runs, so
    each spec is fingerprinted (``compiled``), bound to the run's memories and its
    level strides derived once per kernel run; a later loop iteration only moves
    the program's offsets (``_Program.move``).  The programs are released when the
    run ends, however it ends."""
    bound: dict[tuple[int, int], tuple[OpSpec, Any]] = {}
    deferred = Deferred()
    try:
        _run(items, memory, where, lx, (), {}, {}, bound, deferred)
    finally:
        try:
            deferred.flush()  # the kernel's stores are checked before anyone reads them
        finally:
            for _, program in bound.values():
                program.release()


def _run(items: list[Any], memory: DeviceMemory, where: str, lx: DeviceMemory | None,
         iteration: tuple[int, ...], checked: dict, strides: dict, bound: dict,
         deferred: Deferred) -> None:
    for item in items:
        if isinstance(item, LoopSpec):
            if not iteration:
                batched = run_batched(item, memory, where, lx, checked, deferred, _level_strides)
                # the attempt bound and released the body's programs; one an earlier loop
                # of this run bound (the same OpSpec in two loops) is bound again
                levels, body = nest(item)
                for spec in body:
                    bound.pop((id(spec), len(levels)), None)
                if batched:
                    continue
            first = int(item.first)
            for i in range(first, first + int(item.count)):
                _run(item.body, memory, where, lx, iteration + (i,), checked, strides, bound,
                     deferred)
            continue
        if not iteration:
            run_op_spec(item, memory, where, lx=lx, checked=checked, deferred=deferred)
            continue
        key = (id(item), len(iteration))
        hit = strides.get(key)
        if hit is None or hit[0] is not item:
            hit = strides[key] = (item, _level_strides(item, len(iteration)))
        if len(iteration) == 1:
            i = iteration[0]
            shifts = [i * level[0] for level in hit[1]]
        else:
            shifts = [sum(i * s for i, s in zip(iteration, level)) for level in hit[1]]
        program = bound.get(key)
        if program is not None and program[0] is item:
            program[1].move(shifts)
        else:
            program = bound[key] = (item, bound_program(item, memory, where, shifts, lx, checked))
        program[1].run(deferred)


def _iterations(levels: tuple[range, ...]) -> list[tuple[int, ...]]:
    if math.prod(len(r) for r in levels) <= CHECK_ITERATIONS:
        return list(itertools.product(*levels))
    corners = [sorted({r[0], r[min(1, len(r) - 1)], r[-1]}) for r in levels]
    return list(itertools.product(*corners))


def _coordinates(arg: TensorArg, env: dict[str, Any], shift: dict[Any, Any]) -> list[torch.Tensor]:
    return [torch.as_tensor(evaluate(coord.xreplace(shift) if shift else coord, env),
                            dtype=torch.int64) for coord in arg.device_coordinates]


def _offsets(coords: list[torch.Tensor], arg: TensorArg) -> torch.Tensor:
    total: Any = 0
    for value, stride in zip(coords, device_strides(arg.device_size)):
        total = total + value * stride
    return torch.as_tensor(total, dtype=torch.int64)


def _check_range(spec: OpSpec, arg: TensorArg, coords: list[torch.Tensor],
                 iteration: tuple[int, ...], where: str) -> None:
    for d, (value, size) in enumerate(zip(coords, arg.device_size)):
        bad = (value < 0) | (value >= int(size))
        if bool(bad.any()):
            raise DeviceMemoryError(
                f"kernel {where}: op {spec.op}: tensor {arg.name}: at loop iteration "
                f"{list(iteration)} device coordinate {d} = {arg.device_coordinates[d]} "
                f"(shifted) takes the value {int(value.expand(bad.shape)[bad][0])} outside "
                f"[0, {int(size)})")


def _masked_loads(spec: OpSpec) -> set[int]:
    """Positions in ``spec.args`` of the args some load reads under masks."""
    return {entry["arg"] for entry in spec.op_info.get("program", ())
            if entry.get("op") == "load" and entry.get("masks")}


def _check_arg(spec: OpSpec, arg: TensorArg, levels: tuple[range, ...], where: str,
               check_range: bool = True) -> None:
    depth = len(levels)
    strides = arg_level_strides(spec, arg, depth)
    used = set().union(*(c.free_symbols for c in arg.device_coordinates))
    # an indirect symbol takes every value of its dim; it never moves with a loop
    ranges = {**{s: int(r) for s, (r, _) in spec.iteration_space.items()}, **arg.indirect_ranges()}
    names = [s for s in ranges if s in used]
    env: dict[str, Any] = {}
    for axis, sym in enumerate(names):
        shape = [1] * len(names)
        shape[axis] = ranges[sym]
        env[str(sym)] = torch.arange(ranges[sym], dtype=torch.int64).view(shape)
    base = _offsets(_coordinates(arg, env, {}), arg)
    width = element_bytes(arg.device_dtype)
    for iteration in _iterations(levels):
        shift = shifted_symbols(spec, iteration)
        coords = _coordinates(arg, env, shift)
        if check_range:
            _check_range(spec, arg, coords, iteration, where)
        exact = _offsets(coords, arg)
        affine = sum(i * s for i, s in zip(iteration, strides))
        if affine % width or not bool(torch.equal(*torch.broadcast_tensors(exact, base + affine // width))):
            raise LoopAddressError(
                f"kernel {where}: op {spec.op}: tensor {arg.name}: at loop iteration "
                f"{list(iteration)} the affine offset {affine} bytes (strides {strides}) differs "
                "from the exact coordinate shift "
                f"{', '.join(f'{s} -> {e}' for s, e in shift.items())}; "
                "the tile is not a rigid translation of the first one (e.g. not a whole "
                "number of sticks along the stick dim)"
            )


def check_affine(items: list[Any], where: str) -> int:
    """Cross-check every moving arg of every looped OpSpec; returns how many were checked."""
    checked = 0
    for spec, levels in _walk(items, ()):
        if not levels:
            continue
        masked = _masked_loads(spec)
        for index, arg in enumerate(spec.args):
            if arg_moves(arg) and any(level_symbols(spec, len(levels))):
                _check_arg(spec, arg, levels, where, check_range=index not in masked)
                checked += 1
    return checked
