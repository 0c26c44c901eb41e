"""Lower inclusive scans (``cumsum``, ``cumprod``) to a masked Reduction.

Inductor's CPU backend has no scan feature, so ``aten.cumsum`` becomes an ATen
fallback kernel that our program cannot describe.  We lower it instead to a
reduction over the scanned dim that masks out the later elements::

    cumsum(x, d)[..., j, ...] = sum_k  where(k <= j, x[..., k, ...], 0)
    cumprod(x, d)[..., j, ...] = prod_k where(k <= j, x[..., k, ...], 1)

(the output keeps every dim; the reduction range is the scanned extent ``n``).
That is ``n`` times the work of a sequential scan -- the price of staying on
the ordinary reduction path that the planner, tiling and executor already
handle; the scans transformer models use (RoBERTa's position ids,
``cumsum(mask, 1)``) run over one sequence.  Integer and bool inputs scan in
int64 like ATen; a ``dtype=`` argument casts the input first, as ATen does.
A float scan sums in a different order than ATen's sequential loop (within
the usual reduction tolerances).  Other scans (``cummax``, ``cummin``,
``logcumsumexp``) keep Inductor's fallback kernel and are refused by name.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch._inductor import ir
from torch._inductor import lowering as L
from torch._prims_common import is_integer_dtype
from torch._inductor.virtualized import ops

from spyre_rules.backend.lowering_table import lowerings_swapped, register_on_every_overload

__all__ = ["scan_lowerings"]

aten = torch.ops.aten

#: scan op -> (reduction type, value of the masked-out elements)
_SCANS = {aten.cumsum: ("sum", 0), aten.cumprod: ("prod", 1)}


def _masked_scan(reduction_type: str, identity: int) -> Any:
    def lower(x: Any, axis: Any = None, dtype: Any = None) -> Any:
        if dtype is None and (is_integer_dtype(x.get_dtype()) or x.get_dtype() == torch.bool):
            dtype = torch.int64
        if dtype is not None and dtype != x.get_dtype():
            x = L.to_dtype(x, dtype)
        size = list(x.get_size())
        if not size:
            return L.to_dtype(x, x.get_dtype(), copy=True)
        axis = L._validate_dim(x, axis)
        out_dtype = x.get_dtype()
        loader = x.make_loader()

        def inner_fn(index: Any, reduction_index: Any) -> Any:
            (k,) = reduction_index
            source = list(index)
            source[axis] = k
            keep = ops.le(ops.index_expr(k, torch.int64), ops.index_expr(index[axis], torch.int64))
            return ops.where(keep, loader(source), ops.constant(identity, out_dtype))

        out = ir.Reduction.create(
            device=x.get_device(),
            dst_dtype=out_dtype,
            src_dtype=out_dtype,
            inner_fn=inner_fn,
            ranges=size,
            reduction_ranges=[size[axis]],
            reduction_type=reduction_type,
        )
        out.realize()
        return out

    return lower


def _our_lowerings() -> dict[Any, Any]:
    table: dict[Any, Any] = {}
    for packet, (reduction_type, identity) in _SCANS.items():
        register_on_every_overload(packet, _masked_scan(reduction_type, identity), table)
    return table


def scan_lowerings() -> contextlib.AbstractContextManager[None]:
    """Swap our scan lowerings into Inductor's table; restore the originals after."""
    return lowerings_swapped(_our_lowerings())
