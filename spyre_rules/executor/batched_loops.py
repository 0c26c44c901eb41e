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
import itertools
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
    """One access of one body op: its view of the first tile and each loop level's stride."""

    arg: int
    dtype: torch.dtype
    view: Any  # native_half._View: sizes, strides, start, low, high
    steps: tuple[int, ...]  # elements per iteration of each level, outermost first
    write: bool
    #: the view's sizes and strides in the block's rank (a load of one point has none)
    sizes: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    scratch_of: tuple[int, int] | None = None  # (op index, -1): the per-tile store it reads
    #: each level's first iteration (``LoopSpec.first``): batched iteration ``k`` is ``origin + k``
    origins: tuple[int, ...] = (0,)

    @property
    def moves(self) -> bool:
        return any(self.steps)

    def shifts(self, counts: tuple[int, ...]) -> tuple[int, int]:
        """The smallest and largest element shift over all iterations."""
        lo = hi = 0
        for step, origin, count in zip(self.steps, self.origins, counts):
            first, last = step * origin, step * (origin + count - 1)
            lo, hi = lo + min(first, last), hi + max(first, last)
        return lo, hi

    def byte_range(self, counts: tuple[int, ...]) -> tuple[int, int]:
        """The bytes it touches over all iterations."""
        width = self.view.access.width
        base = self.view.access.base // width
        low, high = self.shifts(counts)
        lo = base + self.view.low + low
        hi = base + self.view.high + high
        return lo * width, (hi + 1) * width

    def same_view(self, other: _Tile) -> bool:
        a, b = self.view, other.view
        return (a.access.memory is b.access.memory and a.access.width == b.access.width
                and (a.sizes, a.strides, a.start, self.steps, self.origins)
                == (b.sizes, b.strides, b.start, other.steps, other.origins)
                and self.dtype == other.dtype)


@dataclasses.dataclass
class _Op:
    program: Any  # evaluate._Program, bound with no loop offset
    shape: list[int]
    tiles: dict[int, _Tile]  # by program entry index (loads) and -1 (the store)


def nest(loop: LoopSpec) -> tuple[list[LoopSpec], list[Any]]:
    """A perfect loop nest's levels, outermost first (each level's body is the next level
    alone), and the innermost body."""
    levels = [loop]
    while len(levels[-1].body) == 1 and isinstance(levels[-1].body[0], LoopSpec):
        levels.append(levels[-1].body[0])
    return levels, levels[-1].body


def run_batched(loop: LoopSpec, memory: DeviceMemory, where: str, lx: DeviceMemory | None,
                checked: dict, deferred: Deferred,
                level_strides: Callable[[OpSpec, int], list[list[int]]]) -> bool:
    """Run a counted loop, or a perfect nest of them, as batched passes; False (nothing
    run) when it is not one whose batched passes provably write the iterations' bytes."""
    levels, body = nest(loop)
    if views.FORCE_GENERAL or not ENABLED or not body or \
            not all(isinstance(s, OpSpec) for s in body):
        return False
    loop_counts = tuple(int(level.count) for level in levels)
    if math.prod(loop_counts) < 2:
        return False
    origins = tuple(int(level.first) for level in levels)
    programs = []
    try:
        for spec in body:
            programs.append(bound_program(spec, memory, where, [0] * len(spec.args), lx, checked))
        ops = _plan(body, programs, loop_counts, origins,
                    lambda spec: level_strides(spec, len(levels)))
        if ops is None:
            return False
        passes = _passes(loop_counts, _largest(ops) if GROUP_BYTES else 0)
        if passes is None:
            return False  # a tile this large: per-iteration Python is small beside the ops
        if deferred.chains:
            deferred.flush()  # earlier stores are checked before the pass reads them
        _run(ops, loop_counts, passes)
        counts["batched"] += 1
        return True
    finally:
        for program in programs:
            program.release()


def _plan(specs: list[OpSpec], programs: list[Any], loop_counts: tuple[int, ...],
          origins: tuple[int, ...],
          level_strides: Callable[[OpSpec], list[list[int]]]) -> list[_Op] | None:
    ops = []
    for spec, program in zip(specs, programs):
        op = _op(spec, program, loop_counts, origins, level_strides(spec))
        if op is None:
            return None
        ops.append(op)
    writes = [(j, op.tiles[-1]) for j, op in enumerate(ops)]
    for j, store in writes:
        lo, hi = store.byte_range(loop_counts)
        sizes, strides = store.view.sizes, store.view.strides
        if store.moves:  # else a per-tile buffer: every iteration writes the same tile
            sizes, strides = (*loop_counts, *sizes), (*store.steps, *strides)
        if not _injective(sizes, strides):
            return None  # two iterations (or two points of one) may write one element
        for k, op in enumerate(ops):
            for key, tile in op.tiles.items():
                if tile is store:
                    continue
                if tile.view.access.memory is not store.view.access.memory:
                    continue
                t_lo, t_hi = tile.byte_range(loop_counts)
                if t_hi <= lo or hi <= t_lo:
                    continue
                if tile.write or k <= j or not tile.same_view(store):
                    return None
                if not store.moves:
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


def _op(spec: OpSpec, program: Any, loop_counts: tuple[int, ...], origins: tuple[int, ...],
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
        steps_bytes = strides[arg] if strides[arg] else [0] * len(loop_counts)
        if len(steps_bytes) != len(loop_counts) or any(b % access.width for b in steps_bytes):
            return None
        steps = tuple(b // access.width for b in steps_bytes)
        low, high = _Tile(arg, None, view, steps, write, origins=origins).shifts(loop_counts)
        if not view.inside or low + view.low < access.low_limit or \
                high + view.high >= access.limit:
            return None
        storage = dtypes.storage_dtype(access.arg.device_dtype, dtypes.host_dtype(dtype))
        sizes, view_strides = view.sizes, view.strides
        if not sizes:  # one point, broadcast over the block
            sizes, view_strides = (1,) * len(shape), (0,) * len(shape)
        if len(sizes) != len(shape):
            return None
        tiles[key] = _Tile(arg, storage, view, steps, write, sizes, view_strides,
                           origins=origins)
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


def _largest(ops: list[_Op]) -> int:
    """The bytes of the largest operand tile."""
    return max(math.prod(t.view.sizes) * t.view.access.width
               for op in ops for t in op.tiles.values())


@dataclasses.dataclass(frozen=True)
class _Pass:
    """One batched pass over a loop nest: the iterations of the levels before ``level``
    fixed (``prefix``), ``n`` iterations of ``level`` from ``first``, every iteration of
    the levels after it; its views lead with one axis per batched level."""

    level: int
    prefix: tuple[int, ...]
    first: int
    lead: tuple[int, ...]  # (n, counts of the levels after ``level``)

    def at(self, depth: int) -> tuple[int, ...]:
        """Each level's iteration of the pass's first tile, counted from the level's origin."""
        return (*self.prefix, self.first, *(0,) * (depth - self.level - 1))


def _passes(loop_counts: tuple[int, ...], largest: int) -> tuple[int, int] | None:
    """(level, group): passes batch ``group`` iterations of ``level`` and all of the
    levels inside it, as many as keep each operand's tiles within ``GROUP_BYTES`` (a
    pass's result stays in cache for the next op; ``largest`` 0: one pass); None when
    a pass would hold one iteration."""
    for level in range(len(loop_counts)):
        inner = math.prod(loop_counts[level + 1:])
        if not largest or largest * inner <= GROUP_BYTES:
            group = loop_counts[level] if not largest else \
                min(loop_counts[level], GROUP_BYTES // (largest * inner))
            return (level, group) if group * inner >= 2 else None
    return None


def _each_pass(loop_counts: tuple[int, ...], level: int, group: int) -> Any:
    for prefix in itertools.product(*(range(c) for c in loop_counts[:level])):
        for first in range(0, loop_counts[level], group):
            n = min(group, loop_counts[level] - first)
            yield _Pass(level, prefix, first, (n, *loop_counts[level + 1:]))


def _batched(tile: _Tile, at: _Pass, scratches: dict) -> torch.Tensor:
    """The pass's iterations of the tile's view, along its leading loop axes (a per-tile
    buffer's: its scratch)."""
    key = tile.scratch_of
    if key is not None:
        # the reader's view is the store's (``same_view``); a one-point store of a
        # rank-0 op is read as a point broadcast over the reader's block rank. The
        # scratch itself is returned otherwise: NaN-check chains know it by identity.
        buffer = scratches[key]
        return buffer if buffer.dim() == len(tile.sizes) + len(at.lead) \
            else buffer.view(*at.lead, *tile.sizes)
    view = tile.view
    start = view.start + sum((origin + i) * step for origin, i, step
                             in zip(tile.origins, at.at(len(tile.steps)), tile.steps))
    return view.access.memory.strided(tile.dtype, (*at.lead, *tile.sizes),
                                      (*tile.steps[at.level:], *tile.strides), start)


def _scratch(j: int, op: _Op, store: _Tile, at: _Pass) -> torch.Tensor:
    """The per-tile buffer's tiles of the pass: dense, in the memory order of a moving
    load of the same shape if the op has one (torch then runs one contiguous loop over
    operands and result), else contiguous."""
    shape = (*at.lead, *store.view.sizes)
    like = next((t for t in op.tiles.values()
                 if not t.write and t.moves and t.view.sizes == store.view.sizes), None)
    strides = [0] * len(shape)
    if like is None:
        order = list(range(len(shape) - 1, -1, -1))
    else:
        batched = (*like.steps[at.level:], *like.view.strides)
        order = sorted(range(len(shape)), key=lambda d: (abs(batched[d]), -d))
    step = 1
    for d in order:
        strides[d] = step
        step *= shape[d]
    flat = scratch.buffer(("loop", j), (math.prod(shape),), store.dtype)
    return flat.as_strided(shape, strides)


def _run(ops: list[_Op], loop_counts: tuple[int, ...], passes: tuple[int, int]) -> None:
    kept: dict[int, _Tile] = {j: op.tiles[-1] for j, op in enumerate(ops) if not op.tiles[-1].moves}
    scratches: dict[tuple[int, int], torch.Tensor] = {}
    for at in _each_pass(loop_counts, *passes):
        #: native stores not checked for NaN yet, oldest first: each later one read the
        #: one before it whole, point for point, so a NaN there is a NaN of the newest
        chain: list[torch.Tensor] = []
        for j, op in enumerate(ops):
            store = op.tiles[-1]
            if j in kept:
                target = scratches[(j, -1)] = _scratch(j, op, store, at)
            else:
                target = _batched(store, at, scratches)
            native = op.program.native
            if native is None:
                _check(chain)
                target.copy_(_float_value(op, at, scratches, store))
                continue
            ins = [_batched(op.tiles[_load_of(op.program, arg)], at, scratches)
                   for arg in native.operands]
            if chain and not any(x is chain[-1] and x.shape == target.shape for x in ins):
                _check(chain)
            native.fn(*ins, out=target)
            nan_checks.counts["native"] += 1
            chain.append(target)
        _check(chain)
    last = (-1,) * (len(loop_counts) - passes[0])  # the last pass's last iteration
    for j, store in kept.items():  # the last iteration's tile stays in device memory
        view = store.view
        view.access.memory.strided(store.dtype, view.sizes, view.strides, view.start).copy_(
            scratches[(j, -1)][last])


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


def _float_value(op: _Op, at: _Pass, scratches: dict, store: _Tile) -> torch.Tensor:
    """The general path's value and store conversion, over ``n`` tiles at once."""
    program = op.program
    values: list[Any] = []
    for index, entry in enumerate(program.program):
        kind = entry["op"]
        if kind == "load":
            raw = _batched(op.tiles[index], at, scratches)
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
    value = torch.as_tensor(values[program.store["value"]]).expand(*at.lead, *op.shape)
    host = dtypes.host_dtype(program.store["dtype"])
    return dtypes.canonical_stored(dtypes.to_storage(value, host, store.dtype, f"op {program.name}: store"))
