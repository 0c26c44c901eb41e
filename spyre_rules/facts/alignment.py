"""Whether a consumer's tiles read a producer's tiles element for element: facts only.

Automatic grouping puts a consumer into its producer's tile loop only when tile
``t`` of the consumer reads exactly tile ``t`` of the producer.  For a split of
output host dim ``d`` that holds when every read of the producer's buffer
addresses the buffer's host dim ``d`` by the very loop symbol that drives the
consumer's output dim ``d``, over the same range, and no other host dim of the
buffer by that symbol.  A permute (``x.transpose(0, 1)``) or a view that merges
or splits dims breaks it: the same dim number then names different elements.
"""

from __future__ import annotations

from spyre_rules.errors import CoordinateError
from spyre_rules.facts.coordinates import host_coordinates
from spyre_rules.facts.op_cache import op_facts
from spyre_rules.facts.records import as_int
from spyre_rules.facts.registry import Op, fact

__all__ = ["reads_dim_by_own_symbol"]


@fact
def reads_dim_by_own_symbol(op: Op, buffer: str, dim: int) -> bool:
    """Every read of ``buffer`` by ``op`` addresses the buffer's host dim ``dim``
    exactly by the loop symbol of ``op``'s output dim ``dim`` (same range), and no
    other host dim by it.  False when that cannot be shown."""
    facts = op_facts(op)
    d = as_int(dim)
    symbols = [s for s, out_dim in facts.symbol_dims.items() if out_dim == d]
    write = facts.write
    deps = [dep for dep in facts.memory_reads if dep.name == buffer]
    layout = facts.buffer_layout(buffer)
    if d is None or len(symbols) != 1 or write is None or not deps or layout is None:
        return False
    (sym,) = symbols
    for dep in deps:
        if dep.is_indirect():
            return False
        try:
            coords = host_coordinates(layout.size, layout.stride, dep.index, dep.ranges)
        except (CoordinateError, AttributeError, TypeError):
            return False
        if not 0 <= d < len(coords) or coords[d] != sym:
            return False
        if any(sym in c.free_symbols for j, c in enumerate(coords) if j != d):
            return False
        size = as_int(layout.size[d])
        if size is None or size != as_int(dep.ranges.get(sym)) or size != as_int(write.ranges.get(sym)):
            return False
    return True
