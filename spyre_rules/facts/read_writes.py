"""An op's Inductor ``ReadWrites``, traced without formatting the kernel text.

``ComputedBuffer.get_read_writes`` runs the op's store function under
``RecordLoadStore``: a ``KernelFormatterHandler`` that writes one line of kernel
text per operation (``tmpN = ops.add(...)``) around the handler that records the
loads and stores.  The text is thrown away; only the recorded dependencies
matter, and they depend on the text in exactly one way: an indirect index is
the symbol named after the ``tmpN`` variable holding it.  Planning asks for the
dependencies of every op of a graph, and the text costs about a fifth of the
trace (docs/inductor_integration.md §6).

:func:`read_writes` traces the same function with the same variables under a
handler that numbers the ``tmpN`` variables exactly as the formatter does (one
per value leaf, ``None`` included, as ``pytree.tree_map`` visits them) but
keeps no text, and simplifies the loop sizes once per trace instead of once per
load.  The answer equals Inductor's (tests/facts/test_read_writes.py compares
them on many op kinds).  An op whose class overrides ``get_read_writes``, and
a scan or sort, is asked directly.  The traced answer also carries
``indirect_sizes`` (indirect symbol -> the size ``ops.indirect_indexing`` bounds
it by), which Inductor's does not record.
"""

from __future__ import annotations

import itertools
from typing import Any

import sympy
import torch.utils._pytree as pytree
from torch._inductor import dependencies, ir
from torch._inductor.dependencies import ReadWrites, RecordLoadStore, _RecordLoadStoreInner
from torch._inductor.utils import reduction_num_outputs
from torch.utils._ordered_set import OrderedSet
from torch._inductor.virtualized import V

__all__ = ["read_writes"]

_TRACED = (ir.Reduction, ir.Pointwise)
_EMPTY = (ir.Reduction, ir.Scan, ir.Sort, ir.Pointwise)  # Inductor: anything else reads nothing
_INDUCTOR_READ_WRITES = ir.ComputedBuffer.get_read_writes
_ABSENT = object()


class _Recorder(_RecordLoadStoreInner):
    """Inductor's recorder (no normalisation) with the loop sizes simplified once."""

    def __init__(self, var_ranges: Any) -> None:
        super().__init__(var_ranges=var_ranges, normalize=False)
        self._kept: tuple[list, list] | None = None

    def canonicalize(self, index: sympy.Expr) -> tuple:
        # Inductor: simplify every size, keep the vars whose size is not 1, then drop
        # trailing vars the index does not use.  The sizes are the same for every
        # access of one trace, so the first two steps run once.
        if self._kept is None:
            sizes = [V.graph.sizevars.simplify(x) for x in self._var_ranges.values()]
            names = [k for k, v in zip(self._var_ranges.keys(), sizes) if v != 1]
            self._kept = (names, [v for v in sizes if v != 1])
        names, sizes = list(self._kept[0]), list(self._kept[1])
        self.drop_unused_symbols(index, names, sizes)
        return index, tuple(names), tuple(sizes)


class _Numbering(RecordLoadStore):
    """``RecordLoadStore`` that numbers its ``tmpN`` variables but writes no text."""

    def __init__(self, var_ranges: Any) -> None:
        # Not RecordLoadStore.__init__: no IndentedBuffer, our recorder.
        self.parent_handler = _Recorder(var_ranges)
        self.var_counter = itertools.count()
        #: indirect symbol -> the size Inductor bounds it by (the indexed extent)
        self.indirect_sizes: dict[sympy.Symbol, Any] = {}

    def indirect_indexing(self, index_var: Any, size: Any, *args: Any, **kwargs: Any) -> sympy.Symbol:
        symbol = self.parent_handler.indirect_indexing(index_var, size, *args, **kwargs)
        self.indirect_sizes[symbol] = size
        return symbol

    def _write(self, line: Any) -> str:
        return f"tmp{next(self.var_counter)}"

    def _default(self, name: str, args: tuple, kwargs: dict) -> Any:
        value = getattr(self.parent_handler, name)(*args, **kwargs)
        if value is None or isinstance(value, (str, sympy.Basic)):  # one pytree leaf
            return self._write(value)
        return pytree.tree_map(self._write, value)

    def reduction(self, dtype: Any, src_dtype: Any, reduction_type: Any, value: Any) -> Any:
        self.parent_handler.reduction(dtype, src_dtype, reduction_type, value)
        count = reduction_num_outputs(reduction_type)
        names = [f"tmp{next(self.var_counter)}" for _ in range(count)]
        return tuple(names) if count > 1 else names[0]


def read_writes(op: Any) -> ReadWrites:
    """``op.get_read_writes()`` (needs ``V.graph``, as Inductor's does)."""
    if type(op).get_read_writes is not _INDUCTOR_READ_WRITES:
        return op.get_read_writes()
    data = op.data
    if not isinstance(data, _EMPTY):
        return ReadWrites(reads=OrderedSet(), writes=OrderedSet(), index_exprs=OrderedSet())
    if not isinstance(data, _TRACED):
        # Scans and sorts: Inductor lowers them only for backends with those
        # features (not on CPU), so the tests cannot compare them; ask Inductor.
        return op.get_read_writes()
    # Inductor's ``patch.object(FlexibleLayout, "allow_indexing", True)``, without
    # unittest.mock's bookkeeping (it restores the class's own attribute, or removes it).
    layout_class = ir.FlexibleLayout
    saved = layout_class.__dict__.get("allow_indexing", _ABSENT)
    layout_class.allow_indexing = True
    try:
        store = op.get_store_function()  # before the sizes, as Inductor does
        if data.get_reduction_type():
            sizes = (data.get_pointwise_size(), data.get_reduction_size())
        else:
            sizes = (data.get_size(),)
        args, var_ranges = dependencies.index_vars_squeeze(*sizes, prefix="d")
        handler = _Numbering(var_ranges)
        with V.set_ops_handler(handler):
            store(*args)
    finally:
        if saved is _ABSENT:
            del layout_class.allow_indexing
        else:
            layout_class.allow_indexing = saved
    recorded = handler.parent_handler
    out = ReadWrites(
        OrderedSet(recorded._reads), OrderedSet(recorded._writes), recorded._index_exprs,
        [*itertools.chain.from_iterable(args)], var_ranges,
    )
    # not a ReadWrites field: what the gathered reads' planner measure needs (facts.gathered)
    out.indirect_sizes = dict(handler.indirect_sizes)  # type: ignore[attr-defined]
    return out
