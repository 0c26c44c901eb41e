"""Grouped matmuls (the experts' projections) as one reduction the program runs (issue 41).

``torch._grouped_mm(x, w, offs)`` with ``x`` ``[S, K]`` (rows sorted by group), ``w``
``[G, K, N]`` and ``offs`` ``[G]`` the cumulative row counts multiplies rows
``offs[g-1] <= t < offs[g]`` by ``w[g]``; transformers' float32 path calls its own
``transformers::grouped_mm_fallback`` custom op with the same contract (a host loop
over ``offs.tolist()``), and Inductor lowers both to fallback kernels.  Their row
boundaries are data (``offs`` comes from the router), so we lower both to what has
static sizes (the backend realizes every op it lowers, so these are lowerings that
build the Reductions directly, not decompositions whose gather would be a buffer):

* each row's group is the number of offsets at or below it:
  ``g(t) = sum_e (offs[e] <= t)`` (a comparison sum over the ``G`` groups: one small Reduction);
* ``out[t, n] = sum_k x[t, k] * w[g(t), k, n]``: one Reduction over ``k`` whose read
  of ``w`` is indirect through ``g`` (the gather is inside the reduction's body, so no
  ``[S, K, N]`` tensor is ever made), ranges ``[S, N]``: the planner tiles it
  along ``n`` and ``t`` like any reduction, which matters at real size where ``w`` is
  a GiB;
* rows at or past ``offs[-1]`` belong to no group and are zero (what the custom op
  writes; ``torch._grouped_mm`` leaves them unspecified): the body reads expert
  ``min(g, G - 1)`` and multiplies by ``g < G``'s mask.

Products are summed in float32 (``torch._grouped_mm`` accumulates low precision in
float32 too) and cast to the output dtype; the summation order differs from ATen's
matmul, so results agree within the usual matmul tolerance, not bitwise.  Other forms
(3-D inputs, a bias, offsets along ``k``) keep the fallback kernel and are refused
by name.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch._inductor import ir
from torch._inductor import lowering as L
from torch._inductor.virtualized import ops

from spyre_rules.backend.lowering_table import lowerings_swapped

__all__ = ["grouped_mm_lowerings"]

aten = torch.ops.aten


def _row_groups(offs: Any, rows: Any) -> Any:
    """``g(t) = #{e: offs[e] <= t}`` for ``t < rows`` (int64 ``[rows]``)."""
    load = offs.make_loader()

    def inner_fn(index: Any, reduction_index: Any) -> Any:
        (t,), (e,) = index, reduction_index
        past = ops.le(ops.to_dtype(load([e]), torch.int64), ops.index_expr(t, torch.int64))
        return ops.to_dtype(past, torch.int64)

    out = ir.Reduction.create(
        device=offs.get_device(), dst_dtype=torch.int64, src_dtype=torch.int64, inner_fn=inner_fn,
        ranges=[rows], reduction_ranges=[offs.get_size()[0]], reduction_type="sum",
    )
    out.realize()
    return out


def grouped_rows_mm(x: Any, w: Any, offs: Any, out_dtype: torch.dtype | None = None) -> Any:
    """``x[t] @ w[g(t)]`` for every row ``t`` (zero past ``offs[-1]``) as one Reduction."""
    rows, depth = x.get_size()
    groups, _, cols = w.get_size()
    group = _row_groups(offs, rows)
    load_group, load_x, load_w = group.make_loader(), x.make_loader(), w.make_loader()
    accumulate = torch.promote_types(x.get_dtype(), torch.float32)

    def inner_fn(index: Any, reduction_index: Any) -> Any:
        (t, n), (k,) = index, reduction_index
        g = load_group([t])
        last = ops.constant(int(groups) - 1, torch.int64)
        expert = ops.indirect_indexing(ops.minimum(g, last), groups, check=False)
        product = ops.mul(ops.to_dtype(load_x([t, k]), accumulate),
                          ops.to_dtype(load_w([expert, k, n]), accumulate))
        inside = ops.lt(g, ops.constant(int(groups), torch.int64))
        return ops.where(inside, product, ops.constant(0.0, accumulate))

    out = ir.Reduction.create(
        device=x.get_device(), dst_dtype=accumulate, src_dtype=accumulate, inner_fn=inner_fn,
        ranges=[rows, cols], reduction_ranges=[depth], reduction_type="sum",
    )
    out.realize()
    wanted = out_dtype or x.get_dtype()
    return out if wanted == accumulate else L.to_dtype(out, wanted)


def _supported(x: Any, w: Any, offs: Any) -> bool:
    return (offs is not None and len(x.get_size()) == 2 and len(w.get_size()) == 3
            and len(offs.get_size()) == 1)


def _transformers_op() -> Any:
    """transformers' ``grouped_mm_fallback`` custom op, when transformers registered it."""
    try:
        return torch.ops.transformers.grouped_mm_fallback.default
    except (AttributeError, RuntimeError):
        return None


def _our_lowerings() -> dict[Any, Any]:
    table: dict[Any, Any] = {}
    aten_fallback = L.lowerings[aten._grouped_mm.default]

    def aten_grouped_mm(x: Any, w: Any, offs: Any = None, bias: Any = None,
                        out_dtype: torch.dtype | None = None) -> Any:
        if bias is not None or not _supported(x, w, offs):
            return aten_fallback(x, w, offs, bias, out_dtype)
        return grouped_rows_mm(x, w, offs, out_dtype)

    L.register_lowering([aten._grouped_mm.default], type_promotion_kind=None,
                        lowering_dict=table)(aten_grouped_mm)
    op = _transformers_op()
    if op is not None:
        fallback = L.lowerings.get(op) or L.fallback_handler(op, add_to_fallback_set=False)

        def transformers_grouped_mm(x: Any, w: Any, offs: Any) -> Any:
            if not _supported(x, w, offs):
                return fallback(x, w, offs)
            return grouped_rows_mm(x, w, offs)

        L.register_lowering([op], type_promotion_kind=None, lowering_dict=table)(
            transformers_grouped_mm)
    return table


def grouped_mm_lowerings() -> contextlib.AbstractContextManager[None]:
    """Swap our grouped-matmul lowerings into Inductor's table; restore the originals after."""
    return lowerings_swapped(_our_lowerings())
