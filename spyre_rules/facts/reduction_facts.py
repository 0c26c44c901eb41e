"""Facts about an op's reduction dims, for reduction-range tiling (``rules/planner.rules``).

A plan splits *split dims*: an output host dim ``d < rank(op)``, or reduction dim
``r`` of ``op.data.reduction_ranges`` named ``rank(op) + r`` (the convention of
``coarse_tile``'s explicit dims).  These facts measure; which reductions may be
split, and when, is policy.
"""

from __future__ import annotations

from torch._inductor import ir

from spyre_rules.facts.op_cache import op_facts
from spyre_rules.facts.records import as_int as _int
from spyre_rules.facts.registry import Op, Sym, fact

__all__ = ["output_dtype", "reduction_split_dim", "reduction_type", "split_extent"]


@fact
def reduction_type(op: Op) -> str:
    data = getattr(op, "data", None)
    return str(data.reduction_type) if isinstance(data, ir.Reduction) else ""


@fact
def output_dtype(op: Op) -> str:
    get = getattr(op, "get_dtype", None)
    return "" if get is None else str(get()).removeprefix("torch.")


@fact
def reduction_split_dim(op: Op, s: Sym) -> int | None:
    return op_facts(op).reduction_dims.get(s)


@fact
def split_extent(op: Op, dim: int) -> int | None:
    data = getattr(op, "data", None)
    ranges = list(getattr(data, "ranges", None) or ())
    if isinstance(data, ir.Reduction):
        ranges += list(data.reduction_ranges)
    d = _int(dim)
    if d is None or not 0 <= d < len(ranges):
        return None
    return _int(ranges[d])
