"""One snapshot of an Inductor operation's measurements (:class:`OpFacts`).

Symbol maps and coordinates cost sympy work and the planner asks the same
questions many times, but ops are *mutated* later (coarse tiling divides
``data.ranges`` and replaces layouts; restickify rewrites ``inner_fn``).  An
``OpFacts`` measures the op as it is at construction: :func:`snapshot` lists
everything a measurement depends on (the identity of ``op.data`` and
``inner_fn``, the ranges, the reduction type and a fingerprint of the layout),
and ``spyre_rules.facts.op_cache`` serves one ``OpFacts`` per op while that
snapshot holds.  Inside a snapshot, answers that depend on arguments (a tiling,
a read) are memoised by :func:`per_snapshot`, the one cache mechanism: a fact
never keeps its own cache.

Inductor queries (``get_read_writes``, buffer lookups) need ``V.graph``; an
``OpFacts`` remembers the graph current at construction (or the one passed in)
and installs it around those queries.  Answers given before any graph was set
are not memoised ("unknown now, retry later").

Symbols: Inductor squeezes size-1 dims out of MemoryDeps while ``data.ranges``
keeps them (docs/layout_model.md §7.2); ``ReadWrites.range_vars`` says which loop
variable (or 0) iterates each position of ``data.ranges`` -- the output host
dims -- and is what maps a symbol back to its host dim.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep, is_indirect
from torch._inductor.virtualized import NullHandler, V

from spyre_rules.errors import CoordinateError
from spyre_rules.facts import memo
from spyre_rules.facts.coordinates import host_coordinates
from spyre_rules.facts.gathered import indirect_ranges
from spyre_rules.facts.in_place import in_place_target, in_place_write
from spyre_rules.facts.per_tile import (
    CannotRebuild,
    OutputView,
    tile_access_coords,
    output_coords as _output_coord_records,
    per_tile_output,
    split_by_symbol,
)
from spyre_rules.facts.read_writes import read_writes
from spyre_rules.facts.records import Coord, FactError, HostCoord, Read, TilingKey, by_str, tiling_key
from spyre_rules.facts.records import as_int as _int
from spyre_rules.facts.regions import effective_layout, region_output_view, region_target, region_write
from spyre_rules.facts.tiled_layout import FixedTiledLayout
from spyre_rules.facts.translation import first_untranslated
from spyre_rules.ir.op_identity import op_name

__all__ = ["OpFacts", "layout_fingerprint", "per_snapshot", "snapshot", "static_layout"]


# --------------------------------------------------------------------------- small helpers


def static_layout(layout: Any) -> bool:
    """Every size, stride, device_size, stride_map entry and the stick size is an int."""
    if not isinstance(layout, FixedTiledLayout):
        return False
    return memo.by_identity("static_layout", layout, _static_layout)


def _static_layout(layout: FixedTiledLayout) -> bool:
    if not isinstance(layout, FixedTiledLayout):
        return False
    dl = layout.device_layout
    values = [*layout.size, *layout.stride, *dl.device_size, *dl.stride_map, dl.elems_per_stick]
    return all(_int(v) is not None for v in values)


def layout_fingerprint(layout: Any) -> tuple:
    """Everything a measurement reads from a layout (identity included: conservative)."""
    if layout is None:
        return (None,)
    return memo.by_identity("layout_fingerprint", layout, _layout_fingerprint)


def _layout_fingerprint(layout: Any) -> tuple:
    try:
        return (
            type(layout).__name__, id(layout), tuple(layout.size), tuple(layout.stride),
            layout.offset, str(layout.dtype), getattr(layout, "device_layout", None),
        )
    except Exception:  # noqa: BLE001 - e.g. a mutation layout without its own stride
        return (type(layout).__name__, id(layout))


def snapshot(op: Any) -> tuple:
    data = getattr(op, "data", None)
    return (
        type(op).__name__,
        op_name(op),
        id(data),
        id(getattr(data, "inner_fn", None)),
        tuple(getattr(data, "ranges", None) or ()),
        tuple(getattr(data, "reduction_ranges", None) or ()),
        getattr(data, "reduction_type", None),
        layout_fingerprint(effective_layout(op)),
    )


def _current_graph() -> Any:
    graph = V.graph
    return None if isinstance(graph, NullHandler) else graph


def per_snapshot(key: Callable[..., Any] | None = None) -> Callable[[Callable], Callable]:
    """Memoise an ``OpFacts`` method inside its snapshot.

    ``key(self, *args)`` normalises the arguments into the cache key (default: no
    arguments).  An answer is kept only once the dependency facts are settled, and
    a list answer is returned as a fresh copy so callers cannot edit the cache.
    """

    def decorate(method: Callable) -> Callable:
        name = method.__name__

        @functools.wraps(method)
        def cached(self: OpFacts, *args: Any) -> Any:
            slot = (name, () if key is None else key(self, *args))
            try:
                found = self._memo[slot]
            except KeyError:
                found = method(self, *args)
                if self._settled():
                    self._memo[slot] = found
            return list(found) if isinstance(found, list) else found

        return cached

    return decorate


def _tiling_slot(self: OpFacts, tiling: Any = None) -> TilingKey:
    return tiling_key(tiling)


def _reads_slot(self: OpFacts, tiling: Any = None) -> tuple:
    """A tiling plus every read's slot: the answer depends on the read buffers' layouts."""
    return (tiling_key(tiling), tuple(_read_slot(self, r) for r in self.input_reads()))


def _read_slot(self: OpFacts, read: Read, tiling: Any = None) -> tuple:
    dep = self.dep_of(read)
    # The dep by identity: it is one of this snapshot's own MemoryDeps (``dep_of``),
    # which the snapshot keeps alive, so its id names it for the memo's lifetime
    # (hashing its index and ranges per call cost more than the answer's lookup).
    return (id(dep), layout_fingerprint(read.layout), tiling_key(tiling))


# --------------------------------------------------------------------------- one snapshot


class OpFacts:
    """Measurements of one op as it is now (one snapshot; see the module docstring)."""

    def __init__(self, op: Any, graph: Any = None) -> None:
        try:
            self._op_ref: Any = weakref.ref(op)
        except TypeError:
            self._op_ref = lambda op=op: op
        self.name = op_name(op)
        self._graph = graph if graph is not None else _current_graph()
        self.snapshot = snapshot(op)
        self._data = getattr(op, "data", None)
        self._layout = effective_layout(op)  # a region op's: its concatenation's (regions.py)
        self._rw: Any = None
        self._rw_error: str | None = None
        self._memo: dict[tuple, Any] = {}  # see per_snapshot
        self._deps: tuple[list[MemoryDep], MemoryDep | None] | None = None  # of self._rw
        self._scope = 0                    # see _in_scope
        self._scope_memo: dict[Any, Any] = {}

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
                    self._rw = read_writes(self.op)
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

    def _dependencies(self) -> tuple[list[MemoryDep], MemoryDep | None]:
        """The MemoryDep reads and the single own-buffer write, kept once ``read_writes``
        is (it never changes after that within a snapshot)."""
        if self._deps is not None:
            return self._deps
        rw = self.read_writes
        if rw is None:
            return [], None
        reads = [d for d in rw.reads if isinstance(d, MemoryDep)]
        writes = [d for d in rw.writes if isinstance(d, MemoryDep)]
        write = writes[0] if len(writes) == 1 and writes[0].name == self.name else None
        write = region_write(self.op, write)
        write = in_place_write(self.op, write, rw)  # indirect symbols over their whole dim
        self._deps = (reads, write)
        return self._deps

    @property
    def memory_reads(self) -> list[MemoryDep]:
        return list(self._dependencies()[0])

    @property
    def write(self) -> MemoryDep | None:
        """The op's single MemoryDep write of its own buffer (None otherwise)."""
        return self._dependencies()[1]

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

    # ------------------------------------------------------------ symbols (docs/layout_model.md §3.5)

    @property
    def symbol_dims(self) -> dict[sympy.Symbol, int]:
        """Output symbol -> output host dim.

        Host coordinates of the write dep: the first dim whose coordinate holds the
        symbol.  Any write symbol not found there gets the host dim it iterates in
        ``data.ranges`` (``range_vars``) -- not its position in the squeezed dep.
        """
        return self._symbol_dims()

    def _settled(self) -> bool:
        """Whether the dependency facts are final (not "no V.graph yet, retry later")."""
        return self.read_writes is not None or self._rw_error is not None

    @per_snapshot()
    def _symbol_dims(self) -> dict[sympy.Symbol, int]:
        write = self.write
        layout = self._layout
        if write is None or layout is None:
            return {}
        out: dict[sympy.Symbol, int] = {}
        try:
            coords = host_coordinates(layout.size, layout.stride, write.index, write.ranges)
        except (CoordinateError, AttributeError, TypeError):
            coords = []
        # an in-place write's indirect symbol (the indexed row) is no loop symbol
        loop = [s for s in write.ranges if not is_indirect(s.name)]
        for dim, coord in enumerate(coords):
            for sym in sorted(coord.free_symbols & set(loop), key=by_str):
                out.setdefault(sym, dim)
        positions = self.position_vars or []
        for sym in loop:
            if sym not in out and sym in positions:
                out[sym] = positions.index(sym)
        return out

    @property
    def output_symbols(self) -> frozenset:
        """The keys of :attr:`symbol_dims` (one frozenset per snapshot: asked per coord)."""
        return self._output_symbols()

    @per_snapshot()
    def _output_symbols(self) -> frozenset:
        return frozenset(self.symbol_dims)

    @property
    def reduction_dims(self) -> dict[sympy.Symbol, int]:
        return self._reduction_dims()

    @per_snapshot()
    def _reduction_dims(self) -> dict[sympy.Symbol, int]:
        """Reduction symbol -> its *split dim*: ``rank + r`` for ``reduction_ranges[r]``.

        A plan names a reduction dim past the output dims (the convention of
        ``coarse_tile``'s explicit dims), so one split map covers both kinds.
        ``ReadWrites.range_vars`` lists one variable per output dim, then one per
        reduction dim (0 for a squeezed unit dim).
        """
        rw = self.read_writes
        n = len(self.ranges)
        if rw is None:
            return {}
        out = {}
        for r, var in enumerate(list(rw.range_vars)[n:]):
            if isinstance(var, sympy.Symbol) and var not in self.symbol_dims:
                out[var] = n + r
        return out

    @property
    def split_dims(self) -> dict[sympy.Symbol, int]:
        """Every loop symbol -> the split dim whose split divides its range."""
        return {**self.reduction_dims, **self.symbol_dims}

    @property
    def reduction_symbols(self) -> frozenset:
        """Symbols of the op's MemoryDep read ranges that are not output symbols."""
        return self._reduction_symbols()

    @per_snapshot()
    def _reduction_symbols(self) -> frozenset:
        dims = self.symbol_dims
        syms = {s for dep in self._dependencies()[0] for s in dep.ranges}
        return frozenset(s for s in syms if s not in dims)

    # ------------------------------------------------------------ reads

    def _in_scope(self, slot: Any, compute: Callable[[], Any]) -> Any:
        """``compute()``, kept under ``slot`` while one stable scope is open (``memo.stable``:
        nothing in the graph is edited, so answers that depend on other buffers hold).
        Kept only once settled, as for ``per_snapshot``."""
        scope = memo.stable_scope()
        if not scope:
            return compute()
        if self._scope != scope:
            self._scope, self._scope_memo = scope, {}
        try:
            return self._scope_memo[slot]
        except KeyError:
            value = compute()
            if self._graph is not None and self._settled():
                self._scope_memo[slot] = value
            return value

    def buffer_layout(self, name: str) -> Any:
        """The FixedTiledLayout of buffer ``name`` in the op's graph (None if it has none).

        Constants have no IR buffer carrying our layout; the backend records theirs
        in the graph state (``spyre_rules_state.layouts``).
        """
        return self._in_scope(("buffer_layout", name), lambda: self._buffer_layout(name))

    def _buffer_layout(self, name: str) -> Any:
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

        Not cached across edits: another buffer's layout can change without this op
        changing (kept only inside a stable scope, where nothing is edited).
        """
        return list(self._in_scope("input_reads", self._input_reads))

    def _input_reads(self) -> list[Read]:
        out = []
        for position, dep in enumerate(self._dependencies()[0]):
            if dep.is_indirect() or not isinstance(dep.index, sympy.Expr):
                continue
            layout = self.buffer_layout(dep.name)
            if layout is None or not static_layout(layout):
                continue
            out.append(Read.of(dep.name, layout, dep, position))
        return out

    def indirect_reads(self) -> tuple[list[Read], bool]:
        """Gathered (indirect) MemoryDep reads measurable like an input read (a static
        FixedTiledLayout, every indirect symbol's extent shown: ``facts.gathered``),
        and whether any other indirect read is left unmeasured."""
        return self._in_scope("indirect_reads", self._indirect_reads)

    def _indirect_reads(self) -> tuple[list[Read], bool]:
        out, unmeasured = [], False
        for position, dep in enumerate(self._dependencies()[0]):
            if not dep.is_indirect():
                continue
            layout = self.buffer_layout(dep.name) if isinstance(dep.index, sympy.Expr) else None
            if layout is None or not static_layout(layout) \
                    or indirect_ranges(dep.index, self.read_writes) is None:
                unmeasured = True
                continue
            out.append(Read.of(dep.name, layout, dep, position))
        return out, unmeasured

    def dep_of(self, read: Read) -> MemoryDep:
        """The op's current MemoryDep that ``read`` describes."""
        reads = self._dependencies()[0]
        wanted = getattr(read, "_dep", None)
        if wanted is not None:
            position = getattr(read, "_position", None)
            if position is not None and position < len(reads) and reads[position] is wanted \
                    and wanted.name == read.buffer:
                return wanted  # the common case: the Read came from this snapshot's reads
        deps = [d for d in reads if d.name == read.buffer]
        if wanted is not None:
            same = [d for d in deps if d.index == wanted.index]
            if same:
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

    @per_snapshot(_tiling_slot)
    def output_view(self, tiling: Any = None) -> OutputView | CannotRebuild:
        """Per-tile output view under ``tiling`` (see ``per_tile``); cached per tiling."""
        key = tiling_key(tiling)
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
        # a reduction split (dim >= rank) leaves the output tile as it is
        key = tuple((d, k) for d, k in key if d < len(self.ranges))
        if region_target(self.op) is not None or in_place_target(self.op) is not None:
            # tiles go straight into the concatenation / the in-place write's target
            return region_output_view(layout, write, positions, self.ranges, key)
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
        layout, write = self._layout, self.write
        records: Any = []
        if isinstance(layout, FixedTiledLayout) and static_layout(layout) and write is not None:
            splits = split_by_symbol(self.split_dims, key)
            records = tile_access_coords(
                self.name, layout, layout.dtype, write.index, write.ranges, splits,
                "full-buffer output",
            ) or []
        return records

    @per_snapshot(_read_slot)
    def read_coords(self, read: Read, tiling: Any = None) -> list[Coord]:
        """Device coordinates of ``read`` on the per-tile ranges (empty if not derivable)."""
        dep = self.dep_of(read)
        layout = read.layout
        if not static_layout(layout):
            return []
        splits = split_by_symbol(self.split_dims, tiling_key(tiling))
        ranges = dep.ranges
        if dep.is_indirect():  # an indirect symbol ranges over the whole dim it indexes
            ranges = {**ranges, **(indirect_ranges(dep.index, self.read_writes) or {})}
        records = tile_access_coords(
            dep.name, layout, layout.dtype, dep.index, ranges, splits, "input"
        )
        return records if records else []

    @per_snapshot(_read_slot)
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

    @per_snapshot(_reads_slot)
    def tiles_translate(self, tiling: Any = None) -> bool:
        """Whether every tile of ``tiling`` (one loop level per tiled host dim) is a rigid
        translation of the first for the op's write into its full buffer and each
        measurable input read, and no value the op computes depends on a tiled symbol
        (``facts.translation``; codegen proves the same on the emitted program)."""
        levels = [{dim: k} for dim, k in tiling_key(tiling)]
        return not levels or self.untranslated(levels, write=True) is None

    def untranslated(self, levels: list[dict[int, int]], write: bool,
                     reads: Any = None) -> str | None:
        """What stops the loop nest ``levels`` (per level, outermost first, ``{output
        host dim: count}``) from moving by one constant offset per tile: ``"index"``
        when the op computes a value from a tiled symbol, else the name of the first
        access that does not translate (its full-buffer write if ``write``, the
        measurable reads of buffers in ``reads``, every one when None); None if none."""
        layout, dep, rw = self._layout, self.write, self.read_writes
        if not isinstance(layout, FixedTiledLayout) or dep is None or rw is None:
            return self.name
        # a reduction dim's split moves the reads too (its tiles are summed, but each
        # tile's read must still be a rigid translation of the first: codegen proves it)
        split_dims = self.split_dims
        tiled = {s for s, d in split_dims.items() if any(d in level for level in levels)}
        # an index_expr of a constant (ops.index_expr(0, ...)) is a plain int
        if tiled & {s for e in rw.index_exprs for s in sympy.sympify(e.index).free_symbols}:
            return "index"
        accesses = [(self.name, layout, dep.index, dep.ranges)] if write else []
        for read in self.input_reads():
            if reads is None or read.buffer in reads:
                found = self.dep_of(read)
                accesses.append((read.buffer, read.layout, found.index, found.ranges))
        for read in self.indirect_reads()[0]:  # a gathered coordinate never moves
            if reads is None or read.buffer in reads:
                found = self.dep_of(read)
                ranges = {**found.ranges, **(indirect_ranges(found.index, self.read_writes) or {})}
                accesses.append((read.buffer, read.layout, found.index, ranges))
        return first_untranslated(accesses, split_dims, levels)
