"""Facts about an op's reduction dims, for reduction-range tiling (``rules/planner.rules``).

A plan splits *split dims*: an output host dim ``d < rank(op)``, or reduction dim
``r`` of ``op.data.reduction_ranges`` named ``rank(op) + r`` (the convention of
``coarse_tile``'s explicit dims).  These facts measure; which reductions may be
split, and when, is policy.
"""

from __future__ import annotations

import math

import torch
from torch._inductor import ir

from spyre_rules.facts.op_cache import op_facts
from spyre_rules.facts.records import as_int as _int
from spyre_rules.facts.records import tiling_key
from spyre_rules.facts.registry import Op, Sym, Tiling, fact
from spyre_rules.errors import LayoutError
from spyre_rules.facts.tiled_layout import fixed_tiled_layout
from spyre_rules.facts.tile_extent import tile_extent

__all__ = ["accumulation_dtype", "accumulator_span_bytes", "output_dtype", "reduction_split_dim",
           "reduction_type", "split_extent"]

_HALF = (torch.float16, torch.bfloat16)
#: reductions whose accumulator keeps an int64 index (and count) beside the value
_INDEX_REDUCTIONS = ("argmax", "argmin")


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a reduction producing ``dtype`` accumulates in (its compute form)."""
    return torch.float32 if dtype in _HALF else dtype


@fact
def accumulator_span_bytes(op: Op, tile: Tiling) -> int | None:
    # A reduction level keeps partial results in an accumulator of one output tile,
    # laid out in the generic stick layout of the accumulation dtype
    # (passes/accumulators.py): fp32 for half outputs, int64 for an argmax's index.
    # Its widest field's largest per-core span; 0 when the tiling has no reduction level.
    data = getattr(op, "data", None)
    if not isinstance(data, ir.Reduction):
        return 0
    ranges = [_int(r) for r in data.ranges]
    key = tiling_key(tile)
    if not any(d >= len(ranges) and k > 1 for d, k in key) or None in ranges:
        return 0 if None not in ranges else None
    size = list(ranges)
    for d, k in key:
        if d < len(size):
            t = tile_extent(size[d], k)
            if t is None:
                return None
            size[d] = t
    kind = str(data.reduction_type)
    dtype = torch.int64 if kind in _INDEX_REDUCTIONS else accumulation_dtype(op.get_dtype())
    if not dtype.is_floating_point and kind.startswith("welford"):
        dtype = torch.float32
    try:
        device = fixed_tiled_layout("cpu", dtype, size).device_layout.device_size
    except LayoutError:
        return None
    spans = [math.prod(device[d:]) * dtype.itemsize
             for d in range(len(device) - 1) if device[d] > 1]
    return max(spans, default=0)


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
