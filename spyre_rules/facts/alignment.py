"""Whether a consumer's tiles read a producer's tiles element for element: facts only.

Automatic grouping puts a consumer into its producer's tile loop only when tile
``t`` of the consumer reads exactly tile ``t`` of the producer.  For a split of
the producer's host dim ``h`` that holds when every read of the producer's buffer
addresses host dim ``h`` by one bare loop symbol ``s`` over the buffer's whole
extent of ``h``, ``s`` drives one output host dim ``d`` of the consumer over the
same range, and ``s`` addresses no other host dim of the buffer: a split of the
consumer's dim ``d`` by the same count then reads tile ``t`` of the buffer in
iteration ``t``.  ``d`` need not equal ``h``: a matmul reads its restickified
weight's dim 0 through its output dim 1, ``x.transpose(0, 1)`` reads dim 1 of
``x`` through its dim 0.  A view that merges or splits ``h`` (the coordinate is
not a bare symbol) or reads only part of it has no such ``d``.

A *reduction* symbol can be that symbol too (a matmul reads its restickified
weight's k dim by k): ``d`` is then the reduction's split dim ``rank + r``, and
the consumer shares the loop only by tiling its reduction range there (a
reduction level, accumulated across tiles).  Which consumers may is the rules'.
"""

from __future__ import annotations

from spyre_rules.errors import CoordinateError
from spyre_rules.facts.coordinates import host_coordinates
from spyre_rules.facts.op_cache import op_facts
from spyre_rules.facts.records import as_int
from spyre_rules.facts.registry import Op, fact

__all__ = ["read_tile_dim", "reads_dim_by_own_symbol"]


@fact
def read_tile_dim(op: Op, buffer: str, dim: int) -> int | None:
    """The split dim of ``op`` whose loop symbol alone addresses host dim ``dim``
    of every read of ``buffer`` (whole extent, the same range in ``op``'s write
    or reduction ranges, no other host dim of the buffer by it): an output host
    dim, or ``rank + r`` for the reduction dim ``r`` a reduction symbol walks;
    unknown when there is none or it cannot be shown."""
    facts = op_facts(op)
    h = as_int(dim)
    write = facts.write
    deps = [dep for dep in facts.memory_reads if dep.name == buffer]
    layout = facts.buffer_layout(buffer)
    if h is None or write is None or not deps or layout is None or not 0 <= h < len(layout.size):
        return None
    size = as_int(layout.size[h])
    found = None
    for dep in deps:
        if dep.is_indirect():
            return None
        try:
            coords = host_coordinates(layout.size, layout.stride, dep.index, dep.ranges)
        except (CoordinateError, AttributeError, TypeError):
            return None
        if len(coords) != len(layout.size):
            return None
        sym = coords[h]
        if not getattr(sym, "is_Symbol", False) or (found is not None and sym != found):
            return None
        if any(sym in c.free_symbols for j, c in enumerate(coords) if j != h):
            return None
        if size is None or size != as_int(dep.ranges.get(sym)):
            return None
        if sym in facts.symbol_dims and size != as_int(write.ranges.get(sym)):
            return None
        found = sym
    dims = facts.split_dims
    out_dim = dims.get(found)
    if out_dim is None or [s for s, d in dims.items() if d == out_dim] != [found]:
        return None
    if found in facts.reduction_dims and size != _split_extent(op, out_dim):
        return None  # the read covers part of the reduction range
    return int(out_dim)


def _split_extent(op: Op, split_dim: int) -> int | None:
    """The static range of one split dim: an output range, else a reduction range."""
    data = getattr(op, "data", None)
    ranges = list(getattr(data, "ranges", None) or ()) + list(
        getattr(data, "reduction_ranges", None) or ())
    return as_int(ranges[split_dim]) if 0 <= split_dim < len(ranges) else None


@fact
def reads_dim_by_own_symbol(op: Op, buffer: str, dim: int) -> bool:
    """Every read of ``buffer`` by ``op`` addresses the buffer's host dim ``dim``
    exactly by the loop symbol of ``op``'s output dim ``dim`` (same range), and no
    other host dim by it: ``read_tile_dim(op, buffer, dim) == dim``.  False when
    that cannot be shown."""
    d = as_int(dim)
    return d is not None and read_tile_dim(op, buffer, d) == d
