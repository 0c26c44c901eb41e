"""Index values read from index tables, so that a loop may tile the dims they come from.

An op that computes a value from its own index (``ops.index_expr``: an iota, a ``tril``
mask, the ``k <= j`` of our scans, backend/scan.py) cannot be tiled along the dims that
value uses: a counted loop runs one program for every tile, addressing each tile by a
constant offset per iteration, so a value computed from the index would restart at 0
on every tile (codegen/rigid_tiles.py refuses it, the planner's ``tiles_translate``
asks the same).  Mamba2's segment sum (a cumsum over the chunk of an expanded tensor,
masked by the position pair) is such an op, and far larger than one core's span.

The values are instead *read*: for each extent ``n`` a graph needs, one small op
computes the table ``[n, stick]`` int64 whose row ``i`` holds ``i`` (one index per
stick, read at column 0, so a read of row ``i`` moves by whole sticks whatever a
tile's step), and the op's ``index_expr(a_0 + a_1*s_1 + ...)`` becomes
``a_0 + a_1 * table_n1[s_1] + ...`` in int64, cast to the value's dtype.  A read moves
with the loop like any other (a rigid translation), so the dims become tileable;
the values are the same integers, so the result is bitwise the untiled one.

Applied only where it can help (the policy numbers are rules/limits.rules):
automatic tiling is on, some span of the op exceeds the limit, the value is an
affine combination of loop symbols with integer coefficients (anything else, e.g. a
``floor`` or ``Mod``, stays computed and those dims untiled), and the table itself
fits untiled (``n * 128`` bytes within the limit: its own rows are computed from the
index).  A table of ``n`` rows is shared by every op of the graph that needs one.
"""

from __future__ import annotations

from typing import Any

import sympy
import torch
from torch._inductor import ir
from torch._inductor.virtualized import V

from spyre_rules import config
from spyre_rules.facts.op_cache import op_facts
from spyre_rules.facts.tiled_layout import fixed_tiled_layout
from spyre_rules.ir.graph_state import RulesGraphState
from spyre_rules.ir.ir_edit import drop_caches, set_frozen
from spyre_rules.ir.op_identity import set_op_kind, stamped_kind

__all__ = ["INDEX_TABLE_KIND", "read_index_values", "table_bytes"]

#: the plan record's kind of a table op (codegen names its OpSpec after it)
INDEX_TABLE_KIND = "IndexTable"
_I64 = torch.int64
#: a table row is one stick: one int64 padded to 128 bytes
_STICK_BYTES = 128


def table_bytes(rows: int) -> int:
    """Bytes of an index table of ``rows`` rows (one stick per row)."""
    return int(rows) * _STICK_BYTES


def _affine_terms(expr: Any) -> dict[Any, int] | None:
    """``{symbol or 1: integer coefficient}`` of an affine ``expr``; None otherwise."""
    expr = sympy.expand(sympy.sympify(expr))
    terms: dict[Any, int] = {}
    for term, coeff in expr.as_coefficients_dict().items():
        if not (coeff.is_Integer or (coeff.is_Rational and coeff.q == 1)):
            return None
        if term == 1 or isinstance(term, sympy.Symbol):
            terms[term] = terms.get(term, 0) + int(coeff)
        else:
            return None
    return terms


class _TableReads(V.WrapperHandler):  # type: ignore[name-defined]
    """Answers ``index_expr`` of an affine value by reading the tables of its symbols."""

    def __init__(self, inner: Any, tables: dict[Any, str], width: int) -> None:
        super().__init__(inner)
        self._tables, self._width = tables, width

    def _read(self, name: str, var: Any) -> Any:
        """Row ``var`` of table ``name``, indexed through the table's *current* layout
        (Inductor's lazy ``make_loader``): a later pass may give it another."""
        # outside a graph (a pass asking an op its read names) no layout is read
        get_buffer = getattr(V.graph, "get_buffer", None)
        buf = get_buffer(name) if get_buffer is not None else None
        if isinstance(buf, ir.Buffer):  # not make_loader: it would inline the table's body
            return self._inner.load(name, buf.get_layout().make_indexer()([var, sympy.Integer(0)]))
        return self._inner.load(name, var * self._width)

    def index_expr(self, expr: Any, dtype: Any) -> Any:
        inner = self._inner
        terms = _affine_terms(expr)
        symbols = [t for t in (terms or {}) if t != 1]
        if not symbols or any(t not in self._tables for t in symbols):
            return inner.index_expr(expr, dtype)
        value = None
        for term, coeff in sorted(terms.items(), key=lambda kv: str(kv[0])):
            if term == 1:
                part = inner.constant(coeff, _I64)
            else:
                part = self._read(self._tables[term], term)
                if coeff != 1:
                    part = inner.mul(part, inner.constant(coeff, _I64))
            value = part if value is None else inner.add(value, part)
        return value if dtype == _I64 else inner.to_dtype(value, dtype)


def _tabled(fn: Any, extents: list[list[Any]], tables: dict[int, str], width: int) -> Any:
    """``fn`` whose affine index values read ``tables`` (extent -> table name);
    ``extents``: per argument of ``fn`` (index, reduction index), each dim's range."""

    def inner_fn(*args: Any) -> Any:
        by_symbol: dict[Any, str] = {}
        squeezed: list[tuple[Any, str]] = []
        for index, ranges in zip(args, extents):
            for var, extent in zip(index, ranges):
                if int(extent) in tables:
                    if isinstance(var, sympy.Symbol):
                        by_symbol[var] = tables[int(extent)]
                    else:
                        squeezed.append((var, tables[int(extent)]))
        handler = _TableReads(V.get_ops_handler(), by_symbol, width)
        # A dim a tiling cut to one value per tile reaches Inductor's dependency analysis
        # as a constant (its size-1 range squeezed), so no index value names its table,
        # while codegen, tracing every dim as a loop symbol, reads it: the Scheduler then
        # dropped the table as unread (qwen3_next's chunk select_scatter, one chunk a
        # tile: AssertionError in codegen).  The row is read (its value unused) so the
        # dependency stays; a traced symbol never takes this path.  It also keeps every
        # reader of a shared table a user of it, else the wrapper frees the table after
        # one reader (the 1-layer GraniteMoeHybrid's two segment sums at 64 KiB).
        for var, name in squeezed:
            handler._read(name, var)
        with V.set_ops_handler(handler):
            return fn(*args)

    return inner_fn


def _extents(data: Any) -> list[list[Any]]:
    ranges = list(data.ranges)
    if isinstance(data, ir.Reduction):
        return [ranges, list(data.reduction_ranges)]
    return [ranges]


def _table_extents(op: Any, limit: int) -> set[int]:
    """The extents of the loop symbols ``op``'s affine index values use, whose tables fit."""
    rw = op_facts(op).read_writes
    if rw is None:
        return set()
    var_ranges = getattr(rw, "var_ranges", None) or {}
    found = set()
    for dep in rw.index_exprs:
        terms = _affine_terms(dep.index)
        for sym in (terms or {}):
            extent = var_ranges.get(sym)
            if sym != 1 and extent is not None and int(extent) > 1 \
                    and table_bytes(int(extent)) <= limit:
                found.add(int(extent))
    return found


def _overflows(op: Any, limit: int) -> bool:
    """Whether some output or input span of ``op`` (untiled) exceeds ``limit`` (or has
    no proven bound): only then may a loop need to tile the dims."""
    facts = op_facts(op)
    coords = list(facts.output_coords(None))
    for read in facts.input_reads():
        coords += facts.read_coords(read, None)
    return any(not c.is_stick and (c.span_bytes is None or c.span_bytes > limit)
               for c in coords)


def _stick_elems(device: Any) -> int:
    """Elements of one stick of an int64 table (its device dtype's)."""
    return int(fixed_tiled_layout(device, _I64, [1, 1], [1, 1], 0, None).device_layout
               .device_size[-1])


def _make_table(graph: Any, state: RulesGraphState, rows: int, before: Any) -> str:
    """The op computing the ``[rows, stick]`` int64 table whose row ``i`` holds ``i``,
    placed before ``before``: one stick per row (a table ``[rows, 1]`` pads to the same
    bytes, but its stick would sit on a unit dim no stride names), read at column 0."""
    device = before.get_layout().device
    width = _stick_elems(device)
    layout = fixed_tiled_layout(device, _I64, [rows, width], [width, 1], 0, None)

    def inner_fn(index: Any) -> Any:
        from torch._inductor.virtualized import ops

        return ops.index_expr(index[0], _I64)

    data = ir.Pointwise(device=device, dtype=_I64, inner_fn=inner_fn,
                        ranges=[sympy.Integer(rows), sympy.Integer(width)])
    buf = ir.ComputedBuffer(name=None, layout=layout, data=data)
    name = graph.register_buffer(buf, set_name=True)
    graph.register_operation(buf)
    graph.operations.remove(buf)
    graph.operations.insert(graph.operations.index(before), buf)
    buf.origins = type(before.origins)(before.origins)
    set_op_kind(buf, INDEX_TABLE_KIND)
    state.layouts[name] = layout
    return name


def read_index_values(graph: Any, state: RulesGraphState, host_steps: Any = ()) -> list[str]:
    """Rewrite every op whose index values may stop a loop from tiling (module doc),
    except the ``host_steps`` (names: they run as aten calls); returns the names of
    the ops rewritten."""
    limit = int(config.max_span_bytes)
    tables: dict[int, str] = {}
    rewritten = []
    for op in list(graph.operations):
        if not isinstance(op, ir.ComputedBuffer) or type(op.data) not in (ir.Pointwise,
                                                                         ir.Reduction):
            continue
        if op.get_name() in host_steps or stamped_kind(op) is not None:
            continue
        extents = _table_extents(op, limit)
        if not extents or not _overflows(op, limit):
            continue
        for rows in sorted(extents):
            if rows not in tables:
                tables[rows] = _make_table(graph, state, rows, op)
        needed = {rows: tables[rows] for rows in extents}
        set_frozen(op.data, "inner_fn", _tabled(op.data.inner_fn, _extents(op.data), needed,
                                                      _stick_elems(op.get_layout().device)))
        drop_caches(op)
        rewritten.append(op.get_name())
    return rewritten
