"""Execute one OpSpec over simulated device memory, vectorised and chunked.

The iteration space (output symbols, then reduction symbols) is walked in
chunks of at most ``CHUNK_ELEMENTS`` points (``_blocks``), so temporaries stay
a small, fixed multiple of that bound (a few hundred MB at most) whatever the
tensor sizes; a reduction longer than the bound is evaluated in pieces whose
partial results are combined (``reductions.combine``).  Within a chunk every
iteration symbol is an int64 grid along *its own tensor axis*, so a value only
has the axes of the symbols it depends on: a matmul operand ``A[m, k]`` is
gathered as an ``(M, 1, K)`` tensor, not once per ``n``.  Every TensorArg's
device coordinates are evaluated on those grids, turned into addresses
``allocation + sum(coord_d * device_strides[d]) * element_bytes``,
bounds-checked against the arg's allocation, and gathered; the program's SSA
entries then compute on whole tensors; the result is scattered through the
store arg's addresses.  No Python loop runs per element.

That gather/scatter is the *general* path.  Structured accesses (``views``:
affine / floor / mod coordinates of single symbols) skip the address tensors:
their block is read into the very same contiguous tensor, or written from the
same value, through a few strided views of device memory, after an exact bounds
check on the block's coordinate extremes (any doubt -> the general path, which
raises the exact error).  Everything between loads and the store is shared, so
both paths produce identical bytes (``views.FORCE_GENERAL`` forces the general
path; tests compare the two).  Per spec, the program is compiled once and
re-bound per run (``compiled``, ``run_program.py``); values are computed into reused buffers where
that gives the same bits (``scratch``); a structured load that does not depend on
the split axis is reused by the following blocks of the same run when the store
cannot overwrite it (docs/architecture.md, "Running one OpSpec").
"""

from __future__ import annotations

import math
from typing import Any

import torch

from spyre_rules.executor import (dtypes, extrema, nan_checks, native_half, reductions, scratch,
                                  vector_loops, views)
from spyre_rules.executor.access import Access as _Access
from spyre_rules.executor.hbm import DeviceMemory
from spyre_rules.executor.indirect import active_mask, bind_indirect_index
from spyre_rules.executor.space import Space as _Space
from spyre_rules.executor.space import blocks
from spyre_rules.program.index_eval import evaluate
from spyre_rules.program.op_spec import OpSpec
from spyre_rules.program.pointwise import apply_pointwise

__all__ = ["CHUNK_ELEMENTS"]

#: Most iteration points evaluated at once.
CHUNK_ELEMENTS = 1 << 20

#: Cached per-spec facts kept at most (ids of dead specs are dropped with the lot).
_CACHE_LIMIT = 1 << 14

#: pointwise ops computed straight into the store's view (``_Program._store_in_place``)
_OUT_OPS = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "truediv": torch.true_divide}
#: unary ops computed into the store's view only when torch then iterates as on the
#: general path's contiguous operand and fresh result: both views contiguous, or a
#: float32 load's view of the store's dense layout with no element in a scalar tail
#: (a transcendental's vectorised and scalar loops differ in the last bit, and which
#: elements take which loop follows the layout: ``vector_loops``);
#: relu is eager's clamp_min(x, 0) (NaN and -0.0 kept), which has an ``out=`` form
_LIKE_OPS = {name: getattr(torch, name) for name in (
    "exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh",
    "sigmoid", "erf", "abs", "neg", "reciprocal")}
_LIKE_OPS["relu"] = lambda x, out: torch.clamp_min(x, 0, out=out)

_AXES: dict[int, tuple[OpSpec, tuple, Any, Any]] = {}


def _axes(spec: OpSpec) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(output, reduction) symbol names and ranges, cached per spec (printing sympy
    symbols is slow)."""
    items_in = tuple(spec.iteration_space.items())
    reds = tuple(spec.op_info.get("reduction_symbols", []))
    # identities, not sympy equality (slow): the same objects mean the same axes
    key = tuple(id(x) for item in items_in for x in (item[0], *item[1])) + tuple(map(id, reds))
    hit = _AXES.get(id(spec))
    if hit is not None and hit[0] is spec and hit[1] == key:
        return hit[2]
    if len(_AXES) >= _CACHE_LIMIT:
        _AXES.clear()
    red = {str(s) for s in reds}
    items = [(str(s), int(r)) for s, (r, _) in items_in]
    axes = [(n, r) for n, r in items if n not in red], [(n, r) for n, r in items if n in red]
    _AXES[id(spec)] = (spec, key, axes, (items_in, reds))  # keeps the keyed objects alive
    return axes


class _Program:
    def __init__(self, spec: OpSpec, where: str, memories: dict[str, DeviceMemory],
                 shifts: list[int] | None = None) -> None:
        self.spec = spec
        self.name = f"{where}/{spec.op}" if where else spec.op
        shifts = shifts or [0] * len(spec.args)
        self.accesses = [_Access(self.name, arg, memories, shift)
                         for arg, shift in zip(spec.args, shifts)]
        self.program = spec.op_info["program"]
        self.store = spec.op_info["store"]
        self.out, self.red = _axes(spec)
        self.reduction_at = next(
            (i for i, e in enumerate(self.program) if e["op"] == "reduction"), None)
        self.reduction = None if self.reduction_at is None else self.program[self.reduction_at]
        self._cacheable = self._loads_to_cache()
        self._cacheable_at = {tuple(shifts): self._cacheable}
        self.splits = self._splits(self.out)
        self._loaded: dict[int, tuple[tuple, torch.Tensor]] = {}
        #: a matmul's operands' output symbols (None: not a matmul, or not known)
        self.operand_symbols = self._operand_symbols()
        #: reduction symbols split into stick runs like output symbols (never a matmul's:
        #: its einsum takes one reduction axis); used only when one block covers the
        #: whole reduction (``_reduction_splits``)
        self.red_splits = self._splits(self.red) if self.operand_symbols is None else {}
        self.direct_loads = self._direct_loads()
        #: one exact op of half loads stored in their dtype: computed natively (native_half)
        #: the store goes through ``DeviceMemory.write`` / ``accumulate`` element by
        #: element: an atomic add, or a write a kernel mirrors into a host tensor
        #: (``in_place.write_through``: runtime.ProgramKernel logs what it writes)
        self.general_store = bool(self.store.get("mode")) or bool(
            (spec.op_info.get("in_place") or {}).get("write_through"))
        self.native = None if self.general_store else native_half.prepare(
            self.program, self.store, self.accesses, self.reduction)
        self._blocks: tuple[int, list] | None = None
        self._facts: tuple | None = None

    def bind(self, where: str, memories: dict[str, DeviceMemory], shifts: list[int] | None) -> None:
        """Re-point a compiled program at a new run (``compiled``): only the kernel
        name, the memories and the loop offsets change; per-run state is reset."""
        self.name = f"{where}/{self.spec.op}" if where else self.spec.op
        shifts = shifts or [0] * len(self.spec.args)
        for access, shift in zip(self.accesses, shifts):
            access.bind(self.name, memories, shift)
        self._cacheable = self._loads_to_cache()
        #: loop offsets -> ``_loads_to_cache`` while bound to these memories
        self._cacheable_at = {tuple(shifts): self._cacheable}
        self._loaded = {}

    def move(self, shifts: list[int]) -> None:
        """The next iteration of a counted loop in the same kernel run: the kernel
        name and the memories stay bound, only the loop offsets move (each checked
        for alignment as ``bind`` does); per-run state is reset."""
        for access, shift in zip(self.accesses, shifts):
            access.move(shift)
        key = tuple(shifts)
        cacheable = self._cacheable_at.get(key)
        if cacheable is None:
            cacheable = self._cacheable_at[key] = self._loads_to_cache()
        self._cacheable = cacheable
        self._loaded = {}

    def release(self) -> None:
        """Drop the run's references to device memory (views kept for reuse, the
        memories themselves): a kept program must not keep a dead graph's memory alive."""
        self._loaded = {}
        for access in self.accesses:
            access.memory = None

    def _direct_loads(self) -> set[int]:
        """Loads read as strided views of device memory, no copy: those only
        ``scratch.EXACT`` ops (and, in a pointwise program, the store) consume.  Those
        ops' bits do not depend on the layout and they compute into contiguous buffers,
        so a reduction sums the same contiguous tensor the general path builds
        (summation order sets the bits).  Any other op may round differently when torch
        iterates a strided operand (docs/architecture.md, "Pointwise loads as views"):
        its loads are copied into contiguous buffers, the general path's layout."""
        loads = {i for i, e in enumerate(self.program) if e["op"] == "load"}
        consumers: dict[int, set[str]] = {i: set() for i in loads}
        for entry in self.program:
            for i in entry.get("in", ()):
                if i in consumers:
                    consumers[i].add(entry["op"])
            for i in entry.get("masks", ()):
                if i in consumers:
                    consumers[i].add("mask")
        if self.store["value"] in consumers:
            consumers[self.store["value"]].add("store")
        if self.reduction is None:
            allowed = {*scratch.EXACT, "store"}
            return {i for i, ops in consumers.items() if ops <= allowed}
        return {i for i, ops in consumers.items()
                if i < self.reduction_at and ops and ops <= set(scratch.EXACT)}

    def _loads_to_cache(self) -> set[int]:
        """Args whose structured loads may be reused by later blocks of this run (a
        matmul operand that does not depend on the split axis): those the store
        cannot overwrite meanwhile."""
        store = self.accesses[self.store["arg"]]
        lo, hi = store.base + store.shift * store.width, store.end + store.shift * store.width
        safe = set()
        for i, access in enumerate(self.accesses):
            a_lo = access.base + access.shift * access.width
            a_hi = access.end + access.shift * access.width
            if access.memory is not store.memory or a_hi <= lo or hi <= a_lo:
                safe.add(i)
        return safe

    def _splits(self, axes: list[tuple[str, int]]) -> dict[str, int]:
        """Symbols of ``axes`` every structured access splits into the same stick runs
        ``k`` (floor/Mod by k, or linear): the chunk gives them two axes (``_Space``).
        None for indirect access (its error messages name points by single axes)."""
        if any(a.arg.indirect for a in self.accesses) or any(
                e["op"] == "indirect_index" for e in self.program):
            return {}
        splits = {}
        for name, size in axes:
            ks = {a.structure.ks[name] for a in self.accesses
                  if a.structure is not None and name in a.structure.symbols}
            ks.discard(1)
            if len(ks) == 1 and size % (k := ks.pop()) == 0:
                splits[name] = k
        return splits

    def _operand_symbols(self) -> list[set[str]] | None:
        """Per batchmatmul operand, the output symbols its value varies with.

        A matmul never materialises ``a*b`` (``reductions.reduce_chunk``): its
        temporaries are the operands and the output, so its chunk bound applies to
        each of those, not to output x reduction points (which would cut a 1024^3
        matmul into 1024 calls).  None for other ops and whenever a value's symbols
        are not plain (indirect access)."""
        if self.reduction is None or self.reduction["type"] != "batchmatmul":
            return None
        if any(a.arg.indirect for a in self.accesses) or any(
                e["op"] == "indirect_index" for e in self.program):
            return None
        out = {n for n, _ in self.out}
        deps: list[set[str]] = []
        for entry in self.program[:self.reduction_at]:
            kind = entry["op"]
            if kind == "load":
                arg = self.accesses[entry["arg"]].arg
                names = {str(x) for c in arg.device_coordinates
                         for x in getattr(c, "free_symbols", ())}
            elif kind == "index_expr":
                names = {str(x) for x in getattr(entry["expr"], "free_symbols", ())}
            else:
                names = set()
            for i in [*entry.get("in", ()), *entry.get("masks", ())]:
                names |= deps[i]
            deps.append(names)
        return [deps[i] & out for i in self.reduction["in"]]

    def _load(self, entry: dict[str, Any], space: _Space, values: list[Any],
              slot: int | None = None) -> torch.Tensor:
        """The value of a load (``slot``: its entry index, naming its reused buffer)."""
        if slot is None:
            slot = next(i for i, e in enumerate(self.program) if e is entry)
        access = self.accesses[entry["arg"]]
        active = active_mask(entry, values)
        host = dtypes.host_dtype(entry["dtype"])
        storage = dtypes.storage_dtype(access.arg.device_dtype, host)
        key = None
        if active is None and entry["arg"] in self._cacheable and access.structure is not None:
            key = (space.rank, tuple(space.box.get(n) for n in sorted(access.structure.symbols)))
            hit = self._loaded.get(id(entry))
            if hit is not None and hit[0] == key:
                return hit[1]
        plan = access.view_plan(space.box, space.rank)
        direct = None
        if plan is not None and slot in self.direct_loads and storage == dtypes.compute_dtype(host):
            direct = views.direct_view(access.memory.view(storage), plan)
        if direct is not None:
            value = direct
        elif plan is not None and (storage == host or (storage, host) == (torch.int32, torch.int64)):
            # storage -> host -> compute form is an exact widening (or none): one pass
            compute = dtypes.compute_dtype(host)
            value = scratch.buffer(slot, plan.shape, compute)
            views.copy_into(access.memory.view(storage), plan, value)
        else:
            if plan is not None:
                raw = views.copy_in(access.memory.view(storage), plan)
            else:
                raw = access.memory.read(access.elements(space.env, active, "load"), storage)
            value = dtypes.to_compute(dtypes.from_storage(raw, host))
        if active is not None:
            value = torch.where(active, value, torch.zeros((), dtype=value.dtype))
        if key is not None and plan is not None:
            self._loaded[id(entry)] = (key, value)  # the latest per load: bounded memory
        return value

    def _eval(self, space: _Space, start: int = 0, stop: int | None = None,
              values: list[Any] | None = None) -> list[Any]:
        """Evaluate program entries ``start..stop`` (earlier values given in ``values``)."""
        values = [] if values is None else values
        stop = len(self.program) if stop is None else stop
        for index in range(start, stop):
            entry = self.program[index]
            kind = entry["op"]
            if kind == "load":
                value = self._load(entry, space, values, index)
            elif kind == "constant":
                value = entry["value"]
                if entry["dtype"] is not None:
                    value = dtypes.to_dtype(value, dtypes.host_dtype(entry["dtype"]))
            elif kind == "index_expr":
                value = dtypes.to_dtype(evaluate(entry["expr"], space.env),
                                        dtypes.host_dtype(entry["dtype"]))
            elif kind == "to_dtype":
                value = dtypes.to_dtype(values[entry["in"][0]], dtypes.host_dtype(entry["dtype"]))
            elif kind == "masked":
                mask, body = (values[i] for i in entry["in"])
                value = torch.where(torch.as_tensor(mask).bool(), torch.as_tensor(body),
                                    torch.as_tensor(entry["other"]).to(torch.as_tensor(body).dtype))
            elif kind == "indirect_index":
                value = bind_indirect_index(self.name, self.spec, entry, values, space.env)
            elif kind == "getitem":
                value = values[entry["in"][0]][entry["index"]]
            elif kind == "reduction":
                raise AssertionError("reductions are evaluated chunk-wise by _reduce")
            else:
                value = self._pointwise(entry, values, index)
            values.append(value)
        return values

    def _pointwise(self, entry: dict[str, Any], values: list[Any], index: int) -> Any:
        ins = [values[i] for i in entry["in"]]
        value = scratch.compute_exact(entry["op"], ins, index)
        if value is not None:
            return value
        # Not an EXACT op: its bits may depend on how torch iterates the operands (a
        # transcendental's vectorised and scalar loops differ in the last bit, and
        # which elements take which loop follows the layout).  The general path's
        # operands are contiguous; no load it consumes is a view (_direct_loads), and
        # a value that kept a view's strides (a conversion of one) is made contiguous.
        ins = [x.contiguous() if isinstance(x, torch.Tensor) else x for x in ins]
        return apply_pointwise(entry["op"], ins)

    def _reduce(self, out: _Space, out_shape: list[int], budget: int,
                block_out: dict[str, int] | None = None) -> Any:
        """The reduction's value for every output point of ``out`` (shape ``out_shape``;
        ``block_out``: each output symbol's extent in it, for a matmul's bound)."""
        kind = self.reduction["type"]
        names = [n for n, _ in self.red]
        ranges = [r for _, r in self.red]
        splits = self._reduction_splits()
        rank = out.rank
        points = math.prod(out_shape)
        if self.operand_symbols is not None and block_out is not None:
            # a matmul: bound each operand's chunk (its output extent x reduction block)
            points = max(math.prod(block_out[n] for n in symbols)
                         for symbols in self.operand_symbols)
        per_block = max(1, budget // max(points, 1))
        if kind in ("max", "min") and math.prod(ranges) <= per_block:
            value = self._extremum_from_view(out, out_shape, names, ranges, splits)
            if value is not None:
                return value
        acc = None
        for block in blocks(ranges, per_block):
            space = _Space(rank, out).add(names, block, splits)
            values = self._eval(space, stop=self.reduction_at)
            shape = [*out_shape, *_Space.dims(names, block, splits)]
            offset = sum(a * math.prod(ranges[i + 1:]) for i, (a, _) in enumerate(block))
            inputs = [values[i] for i in self.reduction["in"]]
            part = reductions.reduce_chunk(kind, inputs, shape, len(shape) - len(out_shape), offset)
            acc = reductions.combine(kind, acc, part)
        if self.reduction.get("partial"):  # a reduction level's combine step (op_spec.py)
            return acc
        return reductions.finish(kind, acc)

    def _extremum_from_view(self, out: _Space, out_shape: list[int], names: list[str],
                            ranges: list[int], splits: dict[str, int]) -> torch.Tensor | None:
        """A max/min of a plain float load, reduced from its strided view of device
        memory with no copy (``extrema``: only when no result can depend on the order);
        None: take the usual path (the contiguous operand the general path gathers)."""
        entry = self.program[self.reduction["in"][0]]
        if len(self.reduction["in"]) != 1 or entry["op"] != "load" or entry.get("masks"):
            return None
        access = self.accesses[entry["arg"]]
        host = dtypes.host_dtype(entry["dtype"])
        if host not in (torch.float32, torch.float64) or access.structure is None or \
                dtypes.host_dtype(self.reduction.get("dtype") or entry["dtype"]) != host or \
                dtypes.storage_dtype(access.arg.device_dtype, host) != host:
            return None
        space = _Space(out.rank, out).add(names, [(0, r) for r in ranges], splits)
        plan = access.view_plan(space.box, space.rank)
        if plan is None:
            return None
        view = views.direct_view(access.memory.view(host), plan)
        red_dims = _Space.dims(names, [(0, r) for r in ranges], splits)
        if view is None or list(view.shape) != [*out_shape, *red_dims]:
            return None
        return extrema.extremum_of_view(self.reduction["type"], view, len(red_dims))

    def _reduction_splits(self) -> dict[str, int]:
        """Reduction symbols split into two axes ``(q, r)`` of their stick runs, so a
        stick-split load is one strided view (read without a copy when only exact ops
        consume it).  Only when one block covers the whole reduction (every output
        block then has one reduction block, so the chunk's rank is fixed per run):
        the reduced axes are contiguous and row-major in ``c``, and torch reduces
        the two axes of a contiguous tensor in the order of the one axis they
        replace, so the bits are those of the unsplit chunk (tests/executor)."""
        if not self.red_splits or math.prod(r for _, r in self.red) > CHUNK_ELEMENTS:
            return {}
        return self.red_splits

    def _run_facts(self) -> tuple:
        """What ``run`` derives from the spec alone (kept with the compiled program)."""
        names = [n for n, _ in self.out]
        ranges = [r for _, r in self.out]
        r_total = math.prod(r for _, r in self.red) if self.reduction else 1
        if self.operand_symbols is not None:
            r_total = 1  # a matmul bounds output and operands, not their product (_reduce)
        store_access = self.accesses[self.store["arg"]]
        store_dtype = dtypes.host_dtype(self.store["dtype"])
        storage = dtypes.storage_dtype(store_access.arg.device_dtype, store_dtype)
        return names, ranges, r_total, store_access, store_dtype, storage

    def run(self, deferred: nan_checks.Deferred | None = None) -> None:
        """Run every block (``deferred``: a kernel run's NaN checks put off so far;
        anything but a native store that covers them checks them first)."""
        facts = self._facts
        if facts is None:
            facts = self._facts = self._run_facts()
        names, ranges, r_total, store_access, store_dtype, storage = facts
        budget = max(1, CHUNK_ELEMENTS // r_total)  # read per run: tests lower the bound
        if self._blocks is None or self._blocks[0] != budget:
            # the spec's and budget's alone; tuples: a block keys its native views
            self._blocks = (budget, [tuple(b) for b in blocks(ranges, budget)])
        native = self.native
        for block in self._blocks[1]:
            if native is not None and native.store_block(self, block, deferred):
                continue
            if deferred is not None and deferred.chains:
                deferred.flush()
            shape = _Space.dims(names, block, self.splits)
            space = _Space(len(shape)).add(names, block, self.splits)
            if self.reduction is None:
                if self._store_in_place(space, shape, store_access, storage):
                    continue
                values = self._eval(space)
            else:
                # Output grids carry trailing unit axes for the reduction axes, so
                # loads broadcast against reduction grids; only the reduction's
                # result and what follows it (tuple items) are evaluated per point.
                red_splits = self._reduction_splits()
                rank = len(shape) + len(_Space.dims(
                    [n for n, _ in self.red], [(0, r) for _, r in self.red], red_splits))
                extents = {n: b - a for n, (a, b) in zip(names, block)}
                reduced = self._reduce(_Space(rank).add(names, block, self.splits), shape,
                                       CHUNK_ELEMENTS, extents)
                values = [None] * self.reduction_at + [reduced]
                values = self._eval(space, start=self.reduction_at + 1, values=values)
            value = torch.as_tensor(values[self.store["value"]]).expand(shape)
            plan = self.store_plan(store_access, space)
            if plan is None:
                elements = store_access.elements(space.env, None, "store").expand(shape)
            if plan is not None and store_dtype == storage and storage.is_floating_point and not (
                    storage in dtypes.CANONICAL_NAN and dtypes.has_nan(value)):
                # copy_ rounds to the storage dtype exactly as .to() does: no temporary
                # (a NaN bound for half storage goes the long way: its bits are replaced)
                views.copy_out(store_access.memory.view(storage), plan, value)
                continue
            data = dtypes.canonical_stored(
                dtypes.to_storage(value, store_dtype, storage, f"op {self.name}: store"))
            if plan is not None:
                views.copy_out(store_access.memory.view(storage), plan, data)
            elif self.store.get("mode") == "atomic_add":
                # index_put with accumulate: every value adds into its element in
                # iteration order, repeated indices included, rounding as eager does
                store_access.memory.accumulate(elements.reshape(-1), data.reshape(-1))
            else:
                store_access.memory.write(elements.reshape(-1), data.reshape(-1))

    def _store_in_place(self, space: _Space, shape: list[int], access: _Access,
                        storage: torch.dtype) -> bool:
        """Compute the stored value straight into its view of device memory (``out=``),
        saving the result's allocation and copy: only a float32 arithmetic op whose
        operands already have the block's shape (or a unary op of a contiguous operand
        into a contiguous view, ``_LIKE_OPS``), stored without conversion through one
        strided view no load of this op can overlap.  Elementwise, so the bytes are
        those of computing then storing."""
        entry = self.program[-1]
        like = _LIKE_OPS.get(entry["op"])
        fn = _OUT_OPS.get(entry["op"], like)
        if (fn is None or self.general_store or self.store["value"] != len(self.program) - 1
                or storage != torch.float32
                or dtypes.host_dtype(self.store["dtype"]) != torch.float32
                or set(range(len(self.accesses))) - self._cacheable != {self.store["arg"]}):
            return False
        plan = self.store_plan(access, space)
        if plan is None:
            return False
        target = views.direct_view(access.memory.view(storage), plan)
        if target is None or list(target.shape) != shape:
            return False
        if fn is like:
            operand = self._unary_operand_view(space)
            if operand is not None and vector_loops.dense_same_layout(operand, target) and \
                    vector_loops.tail_free(operand.numel()):
                like(operand, out=target)
                return True
        values = self._eval(space, stop=len(self.program) - 1)
        ins = [values[i] for i in entry["in"]]
        if not all(isinstance(x, torch.Tensor) and x.dtype == torch.float32 for x in ins) or \
                list(scratch.broadcast_shape([x.shape for x in ins])) != shape or \
                (fn is like and not (ins[0].is_contiguous() and target.is_contiguous())):
            value = self._unary_into_buffer(like, ins, shape)
            if value is None:
                values.append(self._pointwise(entry, values, len(self.program) - 1))  # the usual store
                value = torch.as_tensor(values[-1]).expand(shape)
            views.copy_out(access.memory.view(storage), plan,
                           dtypes.to_storage(value, torch.float32, storage, f"op {self.name}: store"))
            return True
        fn(*ins, out=target)
        return True

    def _unary_operand_view(self, space: _Space) -> torch.Tensor | None:
        """The operand of a program that is one float32 load and a ``_LIKE_OPS`` op of
        it, as a strided view of device memory (in bounds: ``view_plan``); None for any
        other program.  The op may then compute from this view straight into the
        store's (``vector_loops``: when the bits are the general path's)."""
        if len(self.program) != 2:
            return None
        load = self.program[0]
        if load["op"] != "load" or load.get("masks") or load["arg"] == self.store["arg"] or \
                dtypes.host_dtype(load["dtype"]) != torch.float32:
            return None
        access = self.accesses[load["arg"]]
        if dtypes.storage_dtype(access.arg.device_dtype, torch.float32) != torch.float32:
            return None
        plan = access.view_plan(space.box, space.rank)
        return None if plan is None else views.direct_view(access.memory.view(torch.float32), plan)

    def _unary_into_buffer(self, like: Any, ins: list[Any], shape: list[int]) -> torch.Tensor | None:
        """A ``_LIKE_OPS`` op of a float32 operand of the block's shape, computed into a
        reused contiguous buffer instead of a fresh tensor (which page-faults 4 MB in
        again every call): the general path's operand and result are contiguous
        tensors of that shape, so torch iterates the same way and the bits are the
        same.  None: not such an op or operand (the usual fresh result)."""
        if like is None or len(ins) != 1 or not isinstance(ins[0], torch.Tensor) or \
                ins[0].dtype != torch.float32 or list(ins[0].shape) != shape:
            return None
        out = scratch.buffer(("store", len(self.program) - 1), shape, torch.float32)
        return like(ins[0].contiguous(), out=out)

    def store_plan(self, access: _Access, space: _Space) -> views.Plan | None:
        """Views for the store only if they write every point of the block exactly once
        (the general scatter's order decides duplicates)."""
        if not self.store_views_write_once(access, space):
            return None
        return access.view_plan(space.box, space.rank)

    def store_views_write_once(self, access: _Access, space: _Space) -> bool:
        """The store's views would write every point of the block once: the spec's and
        the block's alone (bounds are the run's: ``view_plan``)."""
        structure = access.structure
        if structure is None or self.general_store:
            return False
        symbols = structure.symbols
        for name, where in space.box.items():
            if type(where) is tuple and name not in symbols:
                return False
        if access.injective_store is None:  # the spec's alone: once per compiled program
            ranges = dict(self.out + self.red)
            access.injective_store = symbols <= set(ranges) and structure.injective(ranges)
        return access.injective_store
