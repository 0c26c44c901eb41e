"""Run a counted loop's iterations as one batched pass when that writes the same bytes.

A counted loop runs its body once per tile, each moving TensorArg shifted by its
affine byte stride (``loops``).  When the body is only pointwise programs of exact
ops (``scratch.EXACT``: correctly rounded, so their bits do not depend on layout)
and no iteration reads what another one writes, running each body op once over
all ``count`` tiles -- every view of the tile gains a leading loop axis whose
stride is the arg's affine stride -- computes every element as the iterations
do.  The per-iteration Python (binding, views, checks: ~25 us per op and tile)
is then paid once per op.

Legality (``_plan``), from the specs and their bound views alone:

* every body op is one block of loads, constants and exact ops, stored once per
  point (``store_views_write_once``), all through single strided views of HBM;
* the loop's byte ranges: a store that moves writes disjoint tiles; whatever else
  touches the bytes a store writes (over all iterations) is a load of a *later*
  body op through the very same view, which reads in each iteration exactly what
  that iteration stored there;
* every view is inside its allocation at the first and the last iteration (the
  offsets are affine in the iteration, so all others are too); anything else
  runs the iterations one by one, which raises the exact error.

A loop starting at ``first`` (a ``LoopSpec`` whose iterations are ``first ..
first + count - 1``) is the same pass with every moving view starting ``first``
steps on: each tile's ``origin`` is the loop's first iteration, and every range,
bound and view above is taken over the real iterations.

A store that does not move is a per-tile buffer, overwritten every iteration and
read by later ops of the same iteration: the batched pass keeps its ``count``
tiles in a scratch tensor and leaves the last one in device memory, as the last
iteration does.  Half-precision stores follow the route the iterations take
(``native_half``) and make every NaN canonical; the float route widens loads,
computes, and rounds at the store as the general path does (docs/architecture.md,
"Batched counted loops").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import torch

from spyre_rules.executor import dtypes, native_half, scratch, views
from spyre_rules.executor.evaluate import CHUNK_ELEMENTS
from spyre_rules.executor.run_program import bound_program
from spyre_rules.executor.hbm import DeviceMemory
from spyre_rules.executor import nan_checks
from spyre_rules.executor.nan_checks import Deferred
from spyre_rules.executor.space import Space
from spyre_rules.program.op_spec import LoopSpec, OpSpec
from spyre_rules.program.pointwise import apply_pointwise

__all__ = ["ENABLED", "GROUP_BYTES", "counts", "run_batched"]

#: off: every counted loop runs its iterations one by one (tests of that route)
ENABLED = True

#: loops run as batched passes (tests prove which route ran)
counts = {"batched": 0}

#: most bytes of one operand's tiles in one batched pass: a pass's result should
#: still be in the last-level cache when the next body op reads it (0: every
#: iteration in one pass)
GROUP_BYTES = 4 << 20

#: program entries a batched body op may hold besides its loads
_VALUES = {"constant", *scratch.EXACT}


@dataclasses.dataclass
class _Tile:
    """One access of one body op: its view of the first tile and the loop's stride."""

    arg: int
    dtype: torch.dtype
    view: Any  # native_half._View: sizes, strides, start, low, high
    step: int  # elements per iteration
    write: bool
    #: the view's sizes and strides in the block's rank (a load of one point has none)
    sizes: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    scratch_of: tuple[int, int] | None = None  # (op index, -1): the per-tile store it reads
    #: the loop's first iteration (``LoopSpec.first``): batched iteration ``k`` is ``origin + k``
    origin: int = 0

    def byte_range(self, count: int) -> tuple[int, int]:
        """The bytes it touches over all iterations."""
        width = self.view.access.width
        base = self.view.access.base // width
        first, last = self.step * self.origin, self.step * (self.origin + count - 1)
        lo = base + self.view.low + min(first, last)
        hi = base + self.view.high + max(first, last)
        return lo * width, (hi + 1) * width

    def same_view(self, other: _Tile) -> bool:
        a, b = self.view, other.view
        return (a.access.memory is b.access.memory and a.access.width == b.access.width
                and (a.sizes, a.strides, a.start, self.step, self.origin)
                == (b.sizes, b.strides, b.start, other.step, other.origin)
                and self.dtype == other.dtype)


@dataclasses.dataclass
class _Op:
    program: Any  # evaluate._Program, bound with no loop offset
    shape: list[int]
    tiles: dict[int, _Tile]  # by program entry index (loads) and -1 (the store)


def run_batched(loop: LoopSpec, memory: DeviceMemory, where: str, lx: DeviceMemory | None,
                checked: dict, deferred: Deferred,
                level_strides: Callable[[OpSpec], list[list[int]]]) -> bool:
    """Run a depth-1 counted loop as one batched pass; False (nothing run) when it is
    not one whose batched pass provably writes the iterations' bytes."""
    if views.FORCE_GENERAL or not ENABLED or not loop.body or \
            not all(isinstance(s, OpSpec) for s in loop.body):
        return False
    count = int(loop.count)
    if count < 2:
        return False
    programs = []
    try:
        for spec in loop.body:
            programs.append(bound_program(spec, memory, where, [0] * len(spec.args), lx, checked))
        ops = _plan(loop.body, programs, count, int(loop.first), level_strides)
        if ops is None:
            return False
        group = min(count, _group(ops) if GROUP_BYTES else count)
        if group < 2:
            return False  # a tile this large: per-iteration Python is small beside the ops
        if deferred.chains:
            deferred.flush()  # earlier stores are checked before the pass reads them
        _run(ops, count, group)
        counts["batched"] += 1
        return True
    finally:
        for program in programs:
            program.release()


def _plan(specs: list[OpSpec], programs: list[Any], count: int, origin: int,
          level_strides: Callable[[OpSpec], list[list[int]]]) -> list[_Op] | None:
    ops = []
    for spec, program in zip(specs, programs):
        op = _op(spec, program, count, origin, level_strides(spec))
        if op is None:
            return None
        ops.append(op)
    writes = [(j, op.tiles[-1]) for j, op in enumerate(ops)]
    for j, store in writes:
        lo, hi = store.byte_range(count)
        sizes, strides = store.view.sizes, store.view.strides
        if store.step:  # else a per-tile buffer: every iteration writes the same tile
            sizes, strides = (count, *sizes), (store.step, *strides)
        if not _injective(sizes, strides):
            return None  # two iterations (or two points of one) may write one element
        for k, op in enumerate(ops):
            for key, tile in op.tiles.items():
                if tile is store:
                    continue
                if tile.view.access.memory is not store.view.access.memory:
                    continue
                t_lo, t_hi = tile.byte_range(count)
                if t_hi <= lo or hi <= t_lo:
                    continue
                if tile.write or k <= j or not tile.same_view(store):
                    return None
                if not store.step:
                    tile.scratch_of = (j, -1)
    return ops


def _injective(sizes: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Every index of the view names its own element (a sufficient test): sorted by
    stride, each stride steps over everything the smaller ones reach."""
    reach = 0
    for stride, size in sorted((abs(st), n) for n, st in zip(sizes, strides) if n != 1):
        if stride <= reach:
            return False
        reach += stride * (size - 1)
    return True


def _op(spec: OpSpec, program: Any, count: int, origin: int,
        strides: list[list[int]]) -> _Op | None:
    if program.reduction is not None or program.native is None and not _float_route(program):
        return None
    ranges = [r for _, r in program.out]
    if math.prod(ranges) > CHUNK_ELEMENTS:
        return None  # several blocks per iteration
    names = [n for n, _ in program.out]
    block = [(0, r) for r in ranges]
    shape = Space.dims(names, block, program.splits)
    space = Space(len(shape)).add(names, block, program.splits)
    store_access = program.accesses[program.store["arg"]]
    if not program.store_views_write_once(store_access, space):
        return None
    tiles: dict[int, _Tile] = {}
    entries = [(i, e["arg"], e["dtype"], False) for i, e in enumerate(program.program)
               if e["op"] == "load"]
    entries.append((-1, program.store["arg"], program.store["dtype"], True))
    for key, arg, dtype, write in entries:
        access = program.accesses[arg]
        if access.kind != "hbm" or access.arg.indirect:
            return None
        view = native_half._view(access, space, shape if write else None)
        if view is None:
            return None
        step_bytes = strides[arg][0] if strides[arg] else 0
        if step_bytes % access.width:
            return None
        step = step_bytes // access.width
        for i in (origin, origin + count - 1):
            shift = i * step
            if not view.inside or shift + view.low < access.low_limit or \
                    shift + view.high >= access.limit:
                return None
        storage = dtypes.storage_dtype(access.arg.device_dtype, dtypes.host_dtype(dtype))
        sizes, view_strides = view.sizes, view.strides
        if not sizes:  # one point, broadcast over the block
            sizes, view_strides = (1,) * len(shape), (0,) * len(shape)
        if len(sizes) != len(shape):
            return None
        tiles[key] = _Tile(arg, storage, view, step, write, sizes, view_strides, origin=origin)
    return _Op(program, shape, tiles)


def _float_route(program: Any) -> bool:
    """Loads (no masks), constants and exact ops, the store the last value."""
    for entry in program.program:
        kind = entry["op"]
        if kind == "load":
            if entry.get("masks"):
                return False
        elif kind not in _VALUES or entry.get("masks"):
            return False
    return program.store["value"] == len(program.program) - 1


def _group(ops: list[_Op]) -> int:
    """Iterations per batched pass: as many as keep each operand's tiles within
    ``GROUP_BYTES`` (a pass's result stays in cache for the next op)."""
    largest = max(math.prod(t.view.sizes) * t.view.access.width
                  for op in ops for t in op.tiles.values())
    return max(1, GROUP_BYTES // max(largest, 1))


def _batched(tile: _Tile, first: int, n: int, scratches: dict) -> torch.Tensor:
    """Batched iterations ``first .. first + n - 1`` (loop iterations ``origin +
    first ..``) of the tile's view, along a leading loop axis (a per-tile buffer's:
    its scratch)."""
    key = tile.scratch_of
    if key is not None:
        # the reader's view is the store's (``same_view``); a one-point store of a
        # rank-0 op is read as a point broadcast over the reader's block rank. The
        # scratch itself is returned otherwise: NaN-check chains know it by identity.
        buffer = scratches[key]
        return buffer if buffer.dim() == len(tile.sizes) + 1 else buffer.view(n, *tile.sizes)
    view = tile.view
    return view.access.memory.strided(tile.dtype, (n, *tile.sizes), (tile.step, *tile.strides),
                                      view.start + (tile.origin + first) * tile.step)


def _scratch(j: int, op: _Op, store: _Tile, n: int) -> torch.Tensor:
    """The per-tile buffer's ``n`` tiles: dense, in the memory order of a moving load
    of the same shape if the op has one (torch then runs one contiguous loop over
    operands and result), else contiguous."""
    shape = (n, *store.view.sizes)
    like = next((t for t in op.tiles.values() if not t.write and t.step and t.view.sizes == store.view.sizes),
                None)
    strides = [0] * len(shape)
    if like is None:
        order = list(range(len(shape) - 1, -1, -1))
    else:
        batched = (like.step, *like.view.strides)
        order = sorted(range(len(shape)), key=lambda d: (abs(batched[d]), -d))
    step = 1
    for d in order:
        strides[d] = step
        step *= shape[d]
    flat = scratch.buffer(("loop", j), (math.prod(shape),), store.dtype)
    return flat.as_strided(shape, strides)


def _run(ops: list[_Op], count: int, group: int) -> None:
    kept: dict[int, _Tile] = {j: op.tiles[-1] for j, op in enumerate(ops) if not op.tiles[-1].step}
    scratches: dict[tuple[int, int], torch.Tensor] = {}
    for first in range(0, count, group):
        n = min(group, count - first)
        #: native stores not checked for NaN yet, oldest first: each later one read the
        #: one before it whole, point for point, so a NaN there is a NaN of the newest
        chain: list[torch.Tensor] = []
        for j, op in enumerate(ops):
            store = op.tiles[-1]
            if j in kept:
                target = scratches[(j, -1)] = _scratch(j, op, store, n)
            else:
                target = _batched(store, first, n, scratches)
            native = op.program.native
            if native is None:
                _check(chain)
                target.copy_(_float_value(op, first, n, scratches, store))
                continue
            ins = [_batched(op.tiles[_load_of(op.program, arg)], first, n, scratches)
                   for arg in native.operands]
            if chain and not any(x is chain[-1] and x.shape == target.shape for x in ins):
                _check(chain)
            native.fn(*ins, out=target)
            nan_checks.counts["native"] += 1
            chain.append(target)
        _check(chain)
    for j, store in kept.items():  # the last iteration's tile stays in device memory
        view = store.view
        view.access.memory.strided(store.dtype, view.sizes, view.strides, view.start).copy_(
            scratches[(j, -1)][-1])


def _check(chain: list[torch.Tensor]) -> None:
    """Make every NaN of the chain's stores canonical (one look at the newest)."""
    if chain and dtypes.has_nan(_runs(chain[-1])):
        for stored in chain:
            dtypes.canonical_nans_(stored)
        nan_checks.counts["canonical"] += 1
    chain.clear()


def _runs(view: torch.Tensor) -> torch.Tensor:
    """The same elements as dims in memory order, merged where contiguous: the
    cheapest order to sum them."""
    sizes, strides = native_half._memory_order(tuple(view.shape), tuple(view.stride()))
    return view.as_strided(sizes, strides, view.storage_offset())


def _load_of(program: Any, arg: int) -> int:
    return next(i for i, e in enumerate(program.program) if e["op"] == "load" and e["arg"] == arg)


def _float_value(op: _Op, first: int, n: int, scratches: dict, store: _Tile) -> torch.Tensor:
    """The general path's value and store conversion, over ``n`` tiles at once."""
    program = op.program
    values: list[Any] = []
    for index, entry in enumerate(program.program):
        kind = entry["op"]
        if kind == "load":
            raw = _batched(op.tiles[index], first, n, scratches)
            values.append(dtypes.to_compute(dtypes.from_storage(raw, dtypes.host_dtype(entry["dtype"]))))
        elif kind == "constant":
            value = entry["value"]
            if entry["dtype"] is not None:
                value = dtypes.to_dtype(value, dtypes.host_dtype(entry["dtype"]))
            values.append(value)
        else:
            ins = [values[i] for i in entry["in"]]
            value = scratch.compute_exact(kind, ins, ("loop value", index))
            if value is None:
                value = apply_pointwise(kind, [x.contiguous() if isinstance(x, torch.Tensor) else x
                                               for x in ins])
            values.append(value)
    value = torch.as_tensor(values[program.store["value"]]).expand(n, *op.shape)
    host = dtypes.host_dtype(program.store["dtype"])
    return dtypes.canonical_stored(dtypes.to_storage(value, host, store.dtype, f"op {program.name}: store"))
