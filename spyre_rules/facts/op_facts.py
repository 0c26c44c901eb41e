"""Facts about Inductor operations: the Python side of ``rules/prelude.rules``.

Every function here *measures* a ``torch._inductor.ir.Operation`` (its type,
ranges, layout, MemoryDeps, symbol maps, device coordinates and spans) and
decides nothing: no limit, no threshold, no skip/accept.  The rule engine binds
the prelude's ``fact`` declarations to :data:`FACTS` by name.

Caching.  Symbol maps and coordinates cost sympy work and the planner asks the
same questions many times, but ops are *mutated* later (coarse tiling divides
``data.ranges`` and replaces layouts; restickify rewrites ``inner_fn``).  So the
cache is keyed on a snapshot of everything a fact depends on -- the identity of
``op.data`` and ``inner_fn``, the ranges, the reduction type and a fingerprint of
the layout -- and an edit makes the next call re-measure.  The cache holds ops
weakly (``id`` plus a weakref that must still point at the same object), so a
recycled ``id`` can never serve another op's facts.  Per-read and per-tiling
answers are cached inside the snapshot, keyed additionally on the read
buffer's layout fingerprint and the normalised tiling.  ``OpFacts(op)`` gives an
explicit, uncached-by-module snapshot for callers that prefer to own one.

Inductor queries (``get_read_writes``, buffer lookups) need ``V.graph``; an
``OpFacts`` remembers the graph current at construction (or the one passed in)
and installs it around those queries.

Symbols: Inductor squeezes size-1 dims out of MemoryDeps while ``data.ranges``
keeps them (layout_model §7.10); ``ReadWrites.range_vars`` says which loop
variable (or 0) iterates each position of ``data.ranges`` -- the output host
dims -- and is what maps a symbol back to its host dim.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Iterator
from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep
from torch._inductor.virtualized import NullHandler, V

from spyre_rules.errors import CoordinateError
from spyre_rules.facts.coordinates import host_coordinates
from spyre_rules.facts.per_tile import (
    CannotRebuild,
    OutputView,
    tile_access_coords,
    output_coords as _output_coord_records,
    per_tile_output,
    split_by_symbol,
)
from spyre_rules.facts.records import Coord, FactError, HostCoord, Read, TilingKey, tiling_key
from spyre_rules.facts.records import as_int as _int
from spyre_rules.facts.stick_layout import within_stick_host_dim
from spyre_rules.facts.tiled_layout import FixedTiledLayout


BATCH_MATMUL = "batchmatmul"


# --------------------------------------------------------------------------- small helpers


def _name(op: Any) -> str:
    try:
        return str(op.get_name())
    except Exception:  # noqa: BLE001 - unnamed IR nodes are described by type
        return type(op).__name__


def _static_layout(layout: Any) -> bool:
    """Every size, stride, device_size, stride_map entry and the stick size is an int."""
    if not isinstance(layout, FixedTiledLayout):
        return False
    dl = layout.device_layout
    values = [*layout.size, *layout.stride, *dl.device_size, *dl.stride_map, dl.elems_per_stick]
    return all(_int(v) is not None for v in values)


def _layout_fingerprint(layout: Any) -> tuple:
    """Everything a measurement reads from a layout (identity included: conservative)."""
    if layout is None:
        return (None,)
    try:
        return (
            type(layout).__name__, id(layout), tuple(layout.size), tuple(layout.stride),
            layout.offset, str(layout.dtype), getattr(layout, "device_layout", None),
        )
    except Exception:  # noqa: BLE001 - e.g. a mutation layout without its own stride
        return (type(layout).__name__, id(layout))


def _snapshot(op: Any) -> tuple:
    data = getattr(op, "data", None)
    return (
        type(op).__name__,
        _name(op),
        id(data),
        id(getattr(data, "inner_fn", None)),
        tuple(getattr(data, "ranges", None) or ()),
        tuple(getattr(data, "reduction_ranges", None) or ()),
        getattr(data, "reduction_type", None),
        _layout_fingerprint(getattr(op, "layout", None)),
    )


def _current_graph() -> Any:
    graph = V.graph
    return None if isinstance(graph, NullHandler) else graph


def _symbol_named(mapping: Any, sym: Any) -> Any:
    """The key of ``mapping`` that is ``sym`` (a Symbol or its name), or None."""
    if sym in mapping:
        return sym
    name = sym.name if isinstance(sym, sympy.Symbol) else str(sym)
    for key in mapping:
        if getattr(key, "name", None) == name:
            return key
    return None


# --------------------------------------------------------------------------- one snapshot


class OpFacts:
    """Measurements of one op as it is now (one snapshot; see the module docstring)."""

    def __init__(self, op: Any, graph: Any = None) -> None:
        try:
            self._op_ref: Any = weakref.ref(op)
        except TypeError:
            self._op_ref = lambda op=op: op
        self.name = _name(op)
        self._graph = graph if graph is not None else _current_graph()
        self.snapshot = _snapshot(op)
        self._data = getattr(op, "data", None)
        self._layout = getattr(op, "layout", None)
        self._rw: Any = None
        self._rw_error: str | None = None
        self._symbol_dims: dict[sympy.Symbol, int] | None = None
        self._views: dict[TilingKey, OutputView | CannotRebuild] = {}
        self._read_coords: dict[tuple, list[Coord]] = {}
        self._full_coords: dict[TilingKey, list[Coord]] = {}

    @property
    def graph(self) -> Any:
        """The op's graph: the one given or current at construction, else the current one."""
        if self._graph is None:
            self._graph = _current_graph()
        return self._graph

    @property
    def op(self) -> Any:
        op = self._op_ref()
        if op is None:
            raise FactError(f"{self.name}: the operation no longer exists")
        return op

    @contextlib.contextmanager
    def _graph_ctx(self) -> Iterator[None]:
        if self.graph is None or _current_graph() is self.graph:
            yield
        else:
            with V.set_graph_handler(self.graph):
                yield

    # ------------------------------------------------------------ Inductor dependencies

    @property
    def read_writes(self) -> Any:
        """The op's ``ReadWrites`` (None if Inductor cannot produce them; see ``rw_error``)."""
        if self._rw is None and self._rw_error is None:
            graph = self.graph
            try:
                with self._graph_ctx():
                    self._rw = self.op.get_read_writes()
            except Exception as exc:  # noqa: BLE001 - any failure means "no dependency facts"
                error = f"{type(exc).__name__}: {exc}"
                if graph is None:  # no V.graph yet: answer "unknown" now, retry later
                    return None
                self._rw_error = error
        return self._rw

    @property
    def rw_error(self) -> str | None:
        if self.read_writes is None and self._rw_error is None:
            return "no Inductor graph is set (V.graph); wrap the call in the op's graph"
        return self._rw_error

    @property
    def memory_reads(self) -> list[MemoryDep]:
        rw = self.read_writes
        return [] if rw is None else [d for d in rw.reads if isinstance(d, MemoryDep)]

    @property
    def write(self) -> MemoryDep | None:
        """The op's single MemoryDep write of its own buffer (None otherwise)."""
        rw = self.read_writes
        writes = [] if rw is None else [d for d in rw.writes if isinstance(d, MemoryDep)]
        return writes[0] if len(writes) == 1 and writes[0].name == self.name else None

    @property
    def ranges(self) -> list[Any]:
        return list(getattr(self._data, "ranges", None) or [])

    @property
    def position_vars(self) -> list[Any] | None:
        """Loop variable (or 0 for a squeezed size-1 dim) of each output host dim."""
        rw = self.read_writes
        n = len(self.ranges)
        if rw is None or len(rw.range_vars) < n:
            return None
        return list(rw.range_vars[:n])

    # ------------------------------------------------------------ symbols (layout_model §3.5)

    @property
    def symbol_dims(self) -> dict[sympy.Symbol, int]:
        """Output symbol -> output host dim.

        Host coordinates of the write dep: the first dim whose coordinate holds the
        symbol.  Any write symbol not found there gets the host dim it iterates in
        ``data.ranges`` (``range_vars``) -- not its position in the squeezed dep.
        """
        if self._symbol_dims is not None:
            return self._symbol_dims
        dims = self._compute_symbol_dims()
        if self._settled():
            self._symbol_dims = dims
        return dims

    def _settled(self) -> bool:
        """Whether the dependency facts are final (not "no V.graph yet, retry later")."""
        return self.read_writes is not None or self._rw_error is not None

    def _compute_symbol_dims(self) -> dict[sympy.Symbol, int]:
        write = self.write
        layout = self._layout
        if write is None or layout is None:
            return {}
        out: dict[sympy.Symbol, int] = {}
        try:
            coords = host_coordinates(layout.size, layout.stride, write.index, write.ranges)
        except (CoordinateError, AttributeError, TypeError):
            coords = []
        loop = set(write.ranges)
        for dim, coord in enumerate(coords):
            for sym in sorted(coord.free_symbols & loop, key=str):
                out.setdefault(sym, dim)
        positions = self.position_vars or []
        for sym in write.ranges:
            if sym not in out and sym in positions:
                out[sym] = positions.index(sym)
        return out

    @property
    def reduction_symbols(self) -> frozenset:
        """Symbols of the op's MemoryDep read ranges that are not output symbols."""
        dims = self.symbol_dims
        syms = {s for dep in self.memory_reads for s in dep.ranges}
        return frozenset(s for s in syms if s not in dims)

    # ------------------------------------------------------------ reads

    def buffer_layout(self, name: str) -> Any:
        """The FixedTiledLayout of buffer ``name`` in the op's graph (None if it has none).

        Constants have no IR buffer carrying our layout; the backend records theirs
        in the graph state (``spyre_rules_state.layouts``).
        """
        graph = self.graph
        if graph is None:
            return None
        try:
            with self._graph_ctx():
                buf = graph.try_get_buffer(name)
                layout = None if buf is None else buf.get_layout()
        except Exception:  # noqa: BLE001 - an unknown buffer has no measurable layout
            buf, layout = None, None
        if isinstance(layout, FixedTiledLayout):
            return layout
        if buf is None or isinstance(buf, ir.ConstantBuffer):
            state = getattr(graph, "spyre_rules_state", None)
            recorded = None if state is None else state.layouts.get(name)
            if isinstance(recorded, FixedTiledLayout):
                return recorded
        return None

    def input_reads(self) -> list[Read]:
        """Direct (not indirect) MemoryDep reads of buffers with a static FixedTiledLayout.

        Not cached: another buffer's layout can change without this op changing.
        """
        out = []
        for position, dep in enumerate(self.memory_reads):
            if dep.is_indirect() or not isinstance(dep.index, sympy.Expr):
                continue
            layout = self.buffer_layout(dep.name)
            if layout is None or not _static_layout(layout):
                continue
            out.append(Read.of(dep.name, layout, dep, position))
        return out

    def dep_of(self, read: Read) -> MemoryDep:
        """The op's current MemoryDep that ``read`` describes."""
        deps = [d for d in self.memory_reads if d.name == read.buffer]
        wanted = getattr(read, "_dep", None)
        if wanted is not None:
            same = [d for d in deps if d.index == wanted.index]
            if same:
                position = getattr(read, "_position", None)
                reads = self.memory_reads
                if position is not None and position < len(reads) and reads[position] in same:
                    return reads[position]
                return same[0]
            raise FactError(
                f"{self.name} no longer reads {read.buffer} with index {wanted.index} "
                "(the Read is stale: ask input_reads again)"
            )
        indices = {str(d.index) for d in deps}
        if len(indices) == 1:
            return deps[0]
        if not deps:
            raise FactError(f"{self.name} does not read {read.buffer} through a MemoryDep")
        raise FactError(
            f"{self.name} reads {read.buffer} through {len(indices)} indices; "
            "pass a Read from input_reads to say which"
        )

    # ------------------------------------------------------------ coordinates

    def output_view(self, tiling: Any = None) -> OutputView | CannotRebuild:
        """Per-tile output view under ``tiling`` (see ``per_tile``); cached per tiling."""
        key = tiling_key(tiling)
        if key in self._views:
            return self._views[key]
        view = self._compute_view(key)
        if self._settled():
            self._views[key] = view
        return view

    def _compute_view(self, key: TilingKey) -> OutputView | CannotRebuild:
        layout = self._layout
        if not isinstance(layout, FixedTiledLayout):
            return CannotRebuild(f"{self.name} has no FixedTiledLayout")
        write = self.write
        if write is None:
            why = self.rw_error or "it has no single MemoryDep write of its own buffer"
            return CannotRebuild(f"{self.name}: no write index ({why})")
        positions = self.position_vars
        if positions is None:
            return CannotRebuild(f"{self.name}: loop variables of its output dims are unknown")
        if len(self.ranges) != len(layout.size):
            return CannotRebuild(
                f"{self.name}: {len(self.ranges)} loop ranges for a rank-{len(layout.size)} layout"
            )
        return per_tile_output(
            host_size=layout.size,
            host_stride=layout.stride,
            offset=layout.offset,
            device_layout=layout.device_layout,
            dtype=layout.dtype,
            position_vars=positions,
            write_index=write.index,
            write_ranges=write.ranges,
            tiling=key,
        )

    def output_coords(self, tiling: Any = None) -> list[Coord]:
        view = self.output_view(tiling)
        return _output_coord_records(self.name, view) if view else []

    def full_output_coords(self, tiling: Any = None) -> list[Coord]:
        """One tile's write into the full output buffer (see ``per_tile.tile_access_coords``);
        empty when it cannot be derived.  Cached per tiling."""
        key = tiling_key(tiling)
        cached = self._full_coords.get(key)
        if cached is not None:
            return list(cached)
        layout, write = self._layout, self.write
        records: Any = []
        if isinstance(layout, FixedTiledLayout) and _static_layout(layout) and write is not None:
            splits = split_by_symbol(self.symbol_dims, key)
            records = tile_access_coords(
                self.name, layout, layout.dtype, write.index, write.ranges, splits,
                "full-buffer output",
            ) or []
        if self._settled():
            self._full_coords[key] = records
        return list(records)

    def read_coords(self, read: Read, tiling: Any = None) -> list[Coord]:
        """Device coordinates of ``read`` on the per-tile ranges (empty if not derivable)."""
        dep = self.dep_of(read)
        key = tiling_key(tiling)
        layout = read.layout
        cache_key = (
            dep.name, str(dep.index), tuple(dep.ranges.items()), _layout_fingerprint(layout), key
        )
        if cache_key not in self._read_coords:
            if not _static_layout(layout):
                records: Any = []
            else:
                splits = split_by_symbol(self.symbol_dims, key)
                records = tile_access_coords(
                    dep.name, layout, layout.dtype, dep.index, dep.ranges, splits, "input"
                )
            self._read_coords[cache_key] = records if records else []
        return list(self._read_coords[cache_key])

    def read_host_coords(self, read: Read) -> list[HostCoord]:
        """Which loop symbols drive each host dim of ``read``'s buffer.

        If host coordinates cannot be derived, every host dim is reported as driven
        by every loop symbol of the index: an over-approximation, so a caller that
        checks "does symbol s touch dim d" checks too much rather than too little.
        """
        dep = self.dep_of(read)
        layout = read.layout
        loop = set(dep.ranges)
        try:
            coords = host_coordinates(layout.size, layout.stride, dep.index, dep.ranges)
        except (CoordinateError, AttributeError, TypeError):
            every = frozenset(s for s in dep.index.free_symbols if s in loop)
            return [HostCoord(d, every) for d in range(len(layout.size))]
        return [
            HostCoord(d, frozenset(s for s in c.free_symbols if s in loop))
            for d, c in enumerate(coords)
        ]


# --------------------------------------------------------------------------- the cache

_CACHE: dict[int, tuple[Any, tuple, OpFacts]] = {}


def _evict(key: int, ref: Any, cache: dict = _CACHE) -> None:
    # ``cache`` is bound at definition: weakref callbacks can fire during
    # interpreter shutdown, after module globals were cleared.
    entry = cache.get(key)
    if entry is not None and entry[0] is ref:
        del cache[key]


def op_facts(op: Any) -> OpFacts:
    """The cached :class:`OpFacts` of ``op`` as it is now (re-measured after any edit)."""
    snap = _snapshot(op)
    entry = _CACHE.get(id(op))
    if entry is not None and entry[0]() is op and entry[1] == snap:
        return entry[2]
    facts = OpFacts(op)
    try:
        ref = weakref.ref(op, lambda r, k=id(op), evict=_evict: evict(k, r))
    except TypeError:
        return facts
    _CACHE[id(op)] = (ref, snap, facts)
    return facts


def clear_cache() -> None:
    """Forget every cached measurement (tests; never needed for correctness)."""
    _CACHE.clear()


# --------------------------------------------------------------------------- op facts


def is_computed_buffer(op: Any) -> bool:
    return isinstance(op, ir.ComputedBuffer)


def has_fixed_tiled_layout(op: Any) -> bool:
    return isinstance(getattr(op, "layout", None), FixedTiledLayout)


def is_pointwise(op: Any) -> bool:
    return isinstance(getattr(op, "data", None), ir.Pointwise)


def is_reduction(op: Any) -> bool:
    return isinstance(getattr(op, "data", None), ir.Reduction)


def is_batch_matmul(op: Any) -> bool:
    return is_reduction(op) and getattr(op.data, "reduction_type", None) == BATCH_MATMUL


def has_static_layout(op: Any) -> bool:
    return _static_layout(getattr(op, "layout", None))


def has_indirect_reads(op: Any) -> bool:
    """True if a read goes through an indirect (gather/scatter) index.

    If Inductor cannot list the op's reads at all, the answer is True: "cannot
    tell" must not read as "only direct reads".
    """
    facts = op_facts(op)
    rw = facts.read_writes
    if rw is None:
        return True
    return any(d.is_indirect() for d in rw.reads if isinstance(d, MemoryDep))


#: ``DimHint.dim_names`` of the hints the automatic planner stamps (spyre_rules.hints.DimHint).
AUTO_HINT_DIM_NAMES = ("_span_overflow",)


def is_auto_hint(hint: Any) -> bool:
    """Whether a DimHint was stamped by automatic span-overflow grouping."""
    names = getattr(hint, "dim_names", None)
    return names is not None and tuple(names) == AUTO_HINT_DIM_NAMES


def has_user_hints(op: Any) -> bool:
    """The op carries dim hints a user wrote (hints the automatic grouping stamped
    do not count, so planning an op again after grouping sees the same op)."""
    return any(not is_auto_hint(h) for h in (getattr(op, "dim_hints", None) or ()))


def rank(op: Any) -> int:
    return len(getattr(getattr(op, "data", None), "ranges", None) or ())


def extent(op: Any, dim: int) -> int | None:
    ranges = list(getattr(getattr(op, "data", None), "ranges", None) or ())
    d = _int(dim)
    if d is None or not 0 <= d < len(ranges):
        return None
    return _int(ranges[d])


def layout(op: Any) -> Any:
    found = getattr(op, "layout", None)
    if not isinstance(found, FixedTiledLayout):
        raise FactError(
            f"{_name(op)} has a {type(found).__name__}, not a FixedTiledLayout "
            "(check has_fixed_tiled_layout first)"
        )
    return found


def read_buffers(op: Any) -> frozenset:
    return frozenset(d.name for d in op_facts(op).memory_reads)


# --------------------------------------------------------------------------- symbol facts


def output_symbols(op: Any) -> frozenset:
    return frozenset(op_facts(op).symbol_dims)


def output_dim(op: Any, s: Any) -> int | None:
    dims = op_facts(op).symbol_dims
    key = _symbol_named(dims, s)
    return None if key is None else dims[key]


def reduction_symbols(op: Any) -> frozenset:
    return op_facts(op).reduction_symbols


# --------------------------------------------------------------------------- coordinate facts


def output_coords(op: Any, tile: Any) -> list[Coord]:
    return op_facts(op).output_coords(tile)


def has_output_coords(op: Any, tile: Any) -> bool:
    return bool(op_facts(op).output_view(tile))


def full_output_coords(op: Any, tile: Any) -> list[Coord]:
    return op_facts(op).full_output_coords(tile)


def input_reads(op: Any) -> list[Read]:
    return op_facts(op).input_reads()


def read_coords(op: Any, read: Read, tile: Any) -> list[Coord]:
    return op_facts(op).read_coords(read, tile)


def read_host_coords(op: Any, read: Read) -> list[HostCoord]:
    return op_facts(op).read_host_coords(read)


# --------------------------------------------------------------------------- layout facts


def _host_ints(values: Any) -> list[int] | None:
    out = [_int(v) for v in values]
    return None if any(v is None for v in out) else out  # type: ignore[return-value]


# Layout facts are asked once per split count and input; a layout's answer
# depends only on its fingerprint (sizes, strides, device layout), so it is
# cached on that (bounded: cleared when it grows past _LAYOUT_CACHE_SIZE).
_STICK_DIMS: dict[tuple, int | None] = {}
_LAYOUT_CACHE_SIZE = 1 << 14


def within_stick_dim(layout: Any) -> int | None:
    key = _layout_fingerprint(layout)
    if key in _STICK_DIMS:
        return _STICK_DIMS[key]
    size, stride = _host_ints(layout.size), _host_ints(layout.stride)
    found = None if size is None or stride is None else within_stick_host_dim(
        size, stride, layout.device_layout)
    if len(_STICK_DIMS) >= _LAYOUT_CACHE_SIZE:
        _STICK_DIMS.clear()
    _STICK_DIMS[key] = found
    return found


def host_size(layout: Any, dim: int) -> int | None:
    d = _int(dim)
    sizes = list(layout.size)
    if d is None or not 0 <= d < len(sizes):
        return None
    return _int(sizes[d])


def stick_elems(layout: Any) -> int:
    return layout.device_layout.elems_per_stick


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` ascending, by trial division up to sqrt(n)."""
    v = _int(n)
    if v is None or v < 1:
        return []
    low, high = [], []
    for i in range(1, math.isqrt(v) + 1):
        if v % i == 0:
            low.append(i)
            if i != v // i:
                high.append(v // i)
    return low + high[::-1]


from spyre_rules.facts.alignment import reads_dim_by_own_symbol  # noqa: E402  (binds op_facts lazily)

#: Prelude fact name -> its Python binding (what the rule engine binds).
FACTS: dict[str, Any] = {
    fn.__name__: fn
    for fn in (
        is_computed_buffer, has_fixed_tiled_layout, is_pointwise, is_reduction, is_batch_matmul,
        has_static_layout, has_indirect_reads, has_user_hints, rank, extent, layout,
        read_buffers, output_symbols, output_dim, reduction_symbols, output_coords,
        has_output_coords, full_output_coords, input_reads, read_coords, read_host_coords,
        within_stick_dim, host_size, stick_elems, divisors, reads_dim_by_own_symbol,
    )
}

#: Each binding's type in the prelude's spelling.  The engine compares these with
#: the prelude's ``fact`` declarations and refuses to load if they disagree.
SIGNATURES: dict[str, str] = {
    "is_computed_buffer": "(op: Op) -> bool",
    "has_fixed_tiled_layout": "(op: Op) -> bool",
    "is_pointwise": "(op: Op) -> bool",
    "is_reduction": "(op: Op) -> bool",
    "is_batch_matmul": "(op: Op) -> bool",
    "has_static_layout": "(op: Op) -> bool",
    "has_indirect_reads": "(op: Op) -> bool",
    "has_user_hints": "(op: Op) -> bool",
    "rank": "(op: Op) -> int",
    "extent": "(op: Op, dim: int) -> int?",
    "layout": "(op: Op) -> Layout",
    "read_buffers": "(op: Op) -> set[str]",
    "output_symbols": "(op: Op) -> set[Sym]",
    "output_dim": "(op: Op, s: Sym) -> int?",
    "reduction_symbols": "(op: Op) -> set[Sym]",
    "output_coords": "(op: Op, tile: Tiling) -> list[Coord]",
    "has_output_coords": "(op: Op, tile: Tiling) -> bool",
    "full_output_coords": "(op: Op, tile: Tiling) -> list[Coord]",
    "input_reads": "(op: Op) -> list[Read]",
    "read_coords": "(op: Op, read: Read, tile: Tiling) -> list[Coord]",
    "read_host_coords": "(op: Op, read: Read) -> list[HostCoord]",
    "within_stick_dim": "(layout: Layout) -> int?",
    "host_size": "(layout: Layout, dim: int) -> int?",
    "stick_elems": "(layout: Layout) -> int",
    "divisors": "(n: int) -> list[int]",
    "reads_dim_by_own_symbol": "(op: Op, buffer: str, dim: int) -> bool",
}

__all__ = ["FACTS", "SIGNATURES", "OpFacts", "clear_cache", "is_auto_hint", "op_facts", *FACTS]
