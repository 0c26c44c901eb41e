"""One correctly rounded op on half-precision loads, computed in the half dtype.

The general path computes a float16/bfloat16 program in float32 and rounds once at
the store (``dtypes``): widen each load (exact), apply the op in float32, convert
the result.  For a program that is *only* loads of one half dtype feeding one
``+ - * /``, negation or ``x*x`` whose result is stored in that dtype, torch's native
half kernel does the very same per element: both its vectorised and its scalar loop
widen to float32, apply the float32 op and round the float32 result to the half
dtype.  So the two agree bit for bit on every output that is not NaN, and are NaN at
the same elements (checked over every float16 / bfloat16 value and random pairs,
tests/executor/test_native_half.py).  They differ only in a NaN's sign and payload,
which torch's loops keep or drop by memory layout; a stored half NaN is always the
canonical one (``dtypes.CANONICAL_NAN``) on every path.

Hence: compute natively, straight into the store's view of device memory (into a
reused half buffer first when a load may overlap the store: torch refuses partly
overlapping ``out=``), then look for a NaN with one cheap reduction along the
memory's contiguous runs, and make any NaN canonical in place.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from spyre_rules.executor import dtypes, scratch, views
from spyre_rules.executor.space import Space

__all__ = ["NATIVE", "Deferred", "NativeHalf", "counts", "prepare"]

#: blocks stored natively, and those of them whose NaNs were made canonical (tests
#: prove which route ran)
counts = {"native": 0, "canonical": 0}

#: ops whose native half result is the float32 route's except in NaN payloads
NATIVE: dict[str, tuple[Any, int]] = {
    "add": (torch.add, 2),
    "sub": (torch.sub, 2),
    "mul": (torch.mul, 2),
    "truediv": (torch.true_divide, 2),
    "div_rn": (torch.true_divide, 2),
    "neg": (torch.neg, 1),
    "square": (torch.square, 1),
}

_HALF = (torch.float16, torch.bfloat16)


class _View:
    """One access's strided view of a block, from the spec and the block alone; a run
    adds its loop offset and checks its bounds (``Access.view_plan``)."""

    __slots__ = ("access", "sizes", "strides", "offset", "low", "high", "inside", "start")

    def __init__(self, access: Any, plan: views.Plan) -> None:
        self.access = access
        _, _, sizes, strides, self.offset = plan.views[0]
        self.sizes, self.strides = tuple(sizes), tuple(strides)
        strides = access.strides
        #: element offsets of the block's lowest and highest points, from the origin
        self.low = sum(c * s for c, s in zip(plan.low, strides))
        self.high = sum(c * s for c, s in zip(plan.high, strides))
        self.inside = all(lo >= 0 and hi < int(size) for lo, hi, size
                          in zip(plan.low, plan.high, access.arg.device_size))
        #: the view's first element with no loop offset (the allocation is the arg's)
        self.start = access.base // access.width + self.offset

    def at_run(self, dtype: torch.dtype) -> torch.Tensor | None:
        """This run's view, or None when any point is off limits (the usual route then
        raises the exact error)."""
        access = self.access
        shift = access.shift
        if not self.inside or shift + self.low < access.low_limit or shift + self.high >= access.limit:
            return None
        return access.memory.strided(dtype, self.sizes, self.strides, self.start + shift)


class _Block:
    """A block's views (operands, then the store) and the store view's contiguous runs
    (``check``: sizes and strides in memory order, the last axis one contiguous run,
    which the NaN check sums along: the cheapest order to read it)."""

    __slots__ = ("shape", "operands", "target", "check")

    def __init__(self, shape: list[int], operands: list[_View], target: _View) -> None:
        self.shape = shape
        self.operands = operands
        self.target = target
        self.check = _memory_order(target.sizes, target.strides)


def _memory_order(sizes: tuple[int, ...], strides: tuple[int, ...]) -> tuple[tuple, tuple]:
    """The same points as dims sorted by stride, unit dims dropped, adjacent dims
    merged where one steps exactly over the other."""
    dims = sorted(((n, s) for n, s in zip(sizes, strides) if n != 1), key=lambda d: -d[1])
    merged: list[list[int]] = []
    for n, s in dims:
        if merged and merged[-1][1] == n * s:
            merged[-1] = [merged[-1][0] * n, s]
        else:
            merged.append([n, s])
    return tuple(n for n, _ in merged) or (1,), tuple(s for _, s in merged) or (1,)


_MISSING = object()


class Deferred:
    """The NaN checks a kernel run has put off (``loops.run_items``): native stores not
    yet checked, oldest first, each read whole and point for point by the next
    (``NativeHalf.store_block`` certifies that, else it flushes first).  Every op in
    ``NATIVE`` makes a NaN of any operand a NaN of its result at the same point, so
    a NaN in any of them is a NaN of the last: one check of the last store covers
    the chain.  Whatever else runs flushes first, so nothing but such an op ever
    reads a NaN that is not canonical yet, and such an op's result does not depend
    on NaN bits except in its NaNs, which are made canonical too.  A later store of
    the chain may overwrite an earlier one; making the NaNs of that range canonical
    again only touches bytes the chain's own checks cover."""

    __slots__ = ("stores",)

    def __init__(self) -> None:
        #: (store view, its contiguous runs: the NaN check's operand)
        self.stores: list[tuple[torch.Tensor, torch.Tensor]] = []

    def flush(self) -> None:
        """Check the chain now: any NaN in it makes every stored NaN canonical."""
        if self.stores and dtypes.has_nan(self.stores[-1][1]):
            self.canonicalise()
        self.stores.clear()

    def canonicalise(self) -> None:
        for view, _ in self.stores:
            dtypes.canonical_nans_(view)
        counts["canonical"] += 1
        self.stores.clear()


class NativeHalf:
    """What a program's native half store needs from its spec alone (``prepare``), and
    per block of its iteration space the views (``_Block``), made on first use."""

    __slots__ = ("fn", "dtype", "operands", "slot", "_blocks")

    def __init__(self, fn: Any, dtype: torch.dtype, operands: list[int], slot: int) -> None:
        self.fn = fn
        self.dtype = dtype
        #: per operand of the op, the arg its load reads
        self.operands = operands
        #: the op's program index (names its reused buffer)
        self.slot = slot
        self._blocks: dict[tuple, _Block | None] = {}

    def store_block(self, program: Any, block: tuple, deferred: Deferred | None = None) -> bool:
        """Compute and store one block natively; False (nothing written that the
        float32 route does not overwrite) when a view is missing or off limits.
        ``deferred``: the kernel run's NaN checks put off so far (``Deferred``)."""
        if views.FORCE_GENERAL:
            return False
        geometry = self._blocks.get(block, _MISSING)
        if geometry is _MISSING:
            if len(self._blocks) >= 256:
                self._blocks.clear()
            geometry = self._blocks[block] = self._geometry(program, block)
        if geometry is None:
            return False
        dtype = self.dtype
        ins = []
        for view in geometry.operands:
            tensor = view.at_run(dtype)
            if tensor is None:
                return False
            ins.append(tensor)
        target = geometry.target.at_run(dtype)
        if target is None:
            return False
        certified = False
        if deferred is not None and deferred.stores:
            head = deferred.stores[-1][0]
            # the op reads the last unchecked store whole, point for point: a NaN there
            # is a NaN of this op's result at the same point, which its check sees
            certified = any(t is head for t in ins) and head.shape == target.shape
            if not certified:
                deferred.flush()
        # a store that may overlap a load computes aside (torch refuses overlapping out=)
        cacheable = program._cacheable
        aside = program.store["arg"] in cacheable or len(cacheable) != len(program.accesses) - 1
        out = scratch.buffer(("native", self.slot), geometry.shape, dtype) if aside else target
        self.fn(*ins, out=out)
        counts["native"] += 1
        if aside:
            if dtypes.has_nan(out.view(-1)):
                dtypes.canonical_nans_(out)
                counts["canonical"] += 1
                if certified:
                    deferred.canonicalise()
            elif certified:
                deferred.stores.clear()  # none of them held a NaN
            target.copy_(out)
            return True
        sizes, strides = geometry.check
        runs = geometry.target.access.memory.strided(dtype, sizes, strides, target.storage_offset())
        if deferred is not None:
            deferred.stores.append((target, runs))
        elif dtypes.has_nan(runs):
            dtypes.canonical_nans_(out)
            counts["canonical"] += 1
        return True

    def _geometry(self, program: Any, block: list[tuple[int, int]]) -> _Block | None:
        names = [n for n, _ in program.out]
        shape = Space.dims(names, block, program.splits)
        space = Space(len(shape)).add(names, block, program.splits)
        made = []
        for arg in self.operands:
            made.append(_view(program.accesses[arg], space, None))
        store = program.accesses[program.store["arg"]]
        if not program.store_views_write_once(store, space):
            return None
        target = _view(store, space, shape)
        if target is None or any(v is None for v in made) or \
                list(scratch.broadcast_shape([torch.Size(v.sizes) for v in made])) != shape:
            return None
        return _Block(shape, made, target)


def _view(access: Any, space: Space, shape: list[int] | None) -> _View | None:
    """The access's one view of the block (in the block's shape: ``views.direct_view``)."""
    if access.structure is None:
        return None
    plan = views.plan(access.structure, space.box, space.rank, 0)
    if plan is None or len(plan.views) != 1:
        return None
    _, fine, sizes, _, _ = plan.views[0]
    if fine != plan.shape or math.prod(sizes) == 0 or (shape is not None and list(sizes) != shape):
        return None
    return _View(access, plan)


def prepare(program: list[dict[str, Any]], store: dict[str, Any], accesses: list[Any],
            reduction: Any) -> NativeHalf | None:
    """The native store of a pointwise program that is loads of one half dtype, each
    consumed by its one last op, stored unconverted in that dtype; else None (every
    other program keeps the float32 route: an intermediate rounded on one path only
    would change bits)."""
    if reduction is not None or len(program) < 2 or store.get("value") != len(program) - 1:
        return None
    last = program[-1]
    native = NATIVE.get(last["op"])
    host = store.get("dtype")
    host = dtypes.host_dtype(host) if isinstance(host, (str, torch.dtype)) else None
    if native is None or host not in _HALF or set(last) - {"op", "in"}:
        return None
    fn, arity = native
    ins = list(last.get("in", ()))
    loads = program[:-1]
    if len(ins) != arity or set(ins) != set(range(len(loads))):
        return None  # every load feeds the op (an unused load's bounds check must run)
    for entry in loads:
        if entry.get("op") != "load" or set(entry) - {"op", "arg", "dtype"} or \
                dtypes.host_dtype(entry["dtype"]) != host:
            return None
    operands = [loads[i]["arg"] for i in ins]
    for arg in [*operands, store["arg"]]:
        access = accesses[arg]
        if getattr(access, "kind", None) is None or access.arg.indirect or \
                dtypes.storage_dtype(access.arg.device_dtype, host) != host:
            return None
    return NativeHalf(fn, host, operands, len(program) - 1)
