"""A gathered read whose rows alone overflow the span limit, read one window of rows at a time.

An embedding's (V, H) table is laid out ``[H / stick, V, stick]``: its gathered row
coordinate (an indirect symbol: any index may pick any of the V rows) spans V sticks
whatever the output's split, so the planner refuses it (rules/planner.rules
``unshrinkable_gathered_read``).  The op is rewritten to read the table in K windows of
consecutive rows, as a vocabulary-parallel embedding does: window j covers rows
``[lo_j, hi_j)`` and is read through an indirect symbol of its own over
``[0, hi_j - lo_j)`` at the constant row offset ``lo_j``, with the local index
``where(lo_j <= i < hi_j, i - lo_j, 0)`` (always inside the window, so the read never
leaves it); the op's value is the window's wherever the index falls in it:

    out = where(i in W_{K-1}, f(w[W_{K-1}]), ... where(i in W_1, f(w[W_1]), f(w[W_0])))

Every index lies in exactly one window, and the value picked is the op's own value
computed from that very table element: bitwise equal to the untiled read, whatever
the data (repeated indices, NaN, -0.0).  One more indirect index binds the original
index over the whole dim and reads nothing: the executor's bounds check of every
index against ``[0, V)`` (an index outside the table is an error naming the op, as
without windows) stays.

The rewrite only changes the op's inner function: the op is then planned, tiled and
span-checked like any other (each window's gathered coordinate spans its own rows).
It applies only where it can help: automatic tiling is on, the op's one indirect
index drives a coordinate over the limit on its own, and K windows of whole rows fit
(K at most ``_MAX_GATHER_WINDOWS`` of rules/limits.rules); elsewhere the planner's
refusal stands unchanged.
"""

from __future__ import annotations

from typing import Any

import sympy
import torch
from torch._inductor import ir
from torch._inductor.virtualized import V, ops

from spyre_rules import config
from spyre_rules.engine.policy import get_policy
from spyre_rules.facts.op_cache import op_facts
from spyre_rules.ir.ir_edit import drop_caches, set_frozen

__all__ = ["gather_windows", "window_gathered_reads"]


def gather_windows(rows: int, bytes_per_row: int, limit: int,
                   max_windows: int) -> list[tuple[int, int]] | None:
    """``[(lo, hi), ...]``: the fewest windows of near-equal size covering ``rows``
    whose spans (``rows * bytes_per_row``) fit ``limit``; None when one row alone
    overflows or more than ``max_windows`` are needed."""
    fit = limit // bytes_per_row
    if fit < 1:
        return None
    count = -(-rows // fit)
    if count < 2 or count > max_windows:
        return None
    base, extra = divmod(rows, count)
    windows, lo = [], 0
    for j in range(count):
        hi = lo + base + (1 if j < extra else 0)
        windows.append((lo, hi))
        lo = hi
    return windows


class _Window(V.WrapperHandler):  # type: ignore[name-defined]
    """Answers the op's one ``indirect_indexing`` with window ``lo..hi``'s rows."""

    def __init__(self, inner: Any, lo: int, hi: int, rows: int, check_whole: bool,
                 loads: dict[tuple[str, Any], Any]) -> None:
        super().__init__(inner)
        self._lo, self._hi, self._rows = lo, hi, rows
        self._check_whole = check_whole
        self._loads = loads
        self.mask: Any = None

    def load(self, name: str, index: Any) -> Any:
        # the windows share every load but the table's (whose index differs per
        # window): the index tensor is read once, not once per window
        key = (name, index)
        if key not in self._loads:
            self._loads[key] = self._inner.load(name, index)
        return self._loads[key]

    def indirect_indexing(self, index: Any, size: Any, check: bool = True,
                          wrap_neg: bool = True) -> sympy.Expr:
        inner = self._inner
        if self._check_whole:
            # binds the index over the whole dim and reads nothing: the bounds check
            inner.indirect_indexing(index, size, check, wrap_neg)
        i64 = torch.int64
        index = inner.to_dtype(index, i64)
        if wrap_neg:
            index = inner.where(inner.lt(index, inner.constant(0, i64)),
                                inner.add(index, inner.constant(self._rows, i64)), index)
        lo = inner.constant(self._lo, i64)
        self.mask = inner.and_(inner.ge(index, lo),
                               inner.lt(index, inner.constant(self._hi, i64)))
        local = inner.where(self.mask, inner.sub(index, lo), inner.constant(0, i64))
        symbol = inner.indirect_indexing(local, self._hi - self._lo, False, False)
        return symbol + self._lo


def _windowed(fn: Any, windows: list[tuple[int, int]], rows: int) -> Any:
    def inner_fn(*args: Any) -> Any:
        value, loads = None, {}
        for j, (lo, hi) in enumerate(windows):
            handler = _Window(V.get_ops_handler(), lo, hi, rows, j == 0, loads)
            with V.set_ops_handler(handler):
                window_value = fn(*args)
            value = window_value if value is None else ops.where(handler.mask, window_value, value)
        return value

    return inner_fn


def _overflowing_rows(op: Any, limit: int) -> tuple[int, int] | None:
    """``(rows, bytes per row)`` of the op's one gathered coordinate that overflows on
    its own (its indirect symbol alone drives it), when the op has exactly one
    indirect index, used by its one gathered read and not by its write."""
    facts = op_facts(op)
    sizes = getattr(facts.read_writes, "indirect_sizes", None) or {}
    if len(sizes) != 1 or any(dep.is_indirect() for dep in facts.read_writes.writes):
        return None
    reads, unmeasured = facts.indirect_reads()
    if unmeasured or len(reads) != 1:
        return None
    (symbol, rows), = sizes.items()
    if not isinstance(rows, (int, sympy.Integer)) or int(rows) < 2:
        return None
    rows = int(rows)
    for coord in facts.read_coords(reads[0], None):
        if coord.is_stick or {str(s) for s in coord.symbols} != {str(symbol)}:
            continue
        if coord.span_bytes is None or coord.span_bytes <= limit:
            return None
        if coord.span_elems != rows or coord.span_bytes % rows:
            return None
        return rows, coord.span_bytes // rows
    return None


def window_gathered_reads(graph: Any, host_steps: Any = ()) -> list[str]:
    """Rewrite every op whose gathered rows alone overflow (module doc), except the
    ``host_steps`` (names: they run as aten calls); returns the names of the ops
    rewritten."""
    limit = int(config.max_span_bytes)
    max_windows = int(get_policy().consts["_MAX_GATHER_WINDOWS"])
    rewritten = []
    for op in graph.operations:
        # a gather is realized as a Pointwise of its own (its readers, reductions
        # included, read its buffer); nothing else is rewritten
        if not isinstance(op, ir.ComputedBuffer) or type(op.data) is not ir.Pointwise:
            continue
        if op.get_name() in host_steps:
            continue
        measured = _overflowing_rows(op, limit)
        if measured is None:
            continue
        rows, per_row = measured
        windows = gather_windows(rows, per_row, limit, max_windows)
        if windows is None:
            continue
        set_frozen(op.data, "inner_fn", _windowed(op.data.inner_fn, windows, rows))
        drop_caches(op)
        rewritten.append(op.get_name())
    return rewritten
