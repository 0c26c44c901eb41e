"""The gathered read of an embedding / index_select / gather, measured for the planner.

A gathered read's index holds an *indirect symbol* (Inductor's ``(tmpN)``): a
value loaded from another tensor, bounded by the size Inductor passed to
``ops.indirect_indexing`` (recorded by ``facts.read_writes``).  It may take any
value below that size, so that is its sound range -- the bound the span check
uses (``TensorArg.indirect_ranges``) and the executor enforces (an index outside
it is an ``IndirectIndexError``).  With that range the read is measured like any
input read: ``w[ids[s], h]`` on a (V, H) table has its row coordinate spanning
all V rows whatever the split, while the coordinates of H follow the output's
hidden dim and shrink with its split.
"""

from __future__ import annotations

from typing import Any

import sympy
from torch._inductor.dependencies import is_indirect

__all__ = ["indirect_ranges"]


def indirect_ranges(index: Any, read_writes: Any) -> dict[sympy.Symbol, int] | None:
    """Each indirect symbol of ``index`` -> its static bound (the indexed extent);
    None when one has no recorded static bound.  Never guessed: an unmeasured
    read stays unplanned."""
    if not isinstance(index, sympy.Expr):
        return None
    sizes = getattr(read_writes, "indirect_sizes", None) or {}
    out: dict[sympy.Symbol, int] = {}
    for sym in index.free_symbols:
        if not is_indirect(sym.name):
            continue
        size = sizes.get(sym)
        try:
            size = int(size)
        except (TypeError, ValueError):
            return None
        if size < 1:
            return None
        out[sym] = size
    return out or None
