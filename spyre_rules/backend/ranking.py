"""``topk`` and ``sort`` as counting reductions the program runs (issue 41).

Inductor's CPU backend lowers both to ATen fallback kernels (``ir.Sort`` is a
Triton-only path), which the Spyre program cannot describe.  A router picks a small
``k`` of ``E`` experts per token and the grouped experts sort ``tokens x k`` small
integer expert ids, so we lower both to comparisons and sums (each a single Inductor Reduction whose body
compares inline: no ``n x n`` intermediate is ever a buffer):

* the *rank* of element ``i`` along the dim is the number of elements that come
  before it in the order: ``rank_i = #{j: x_j before x_i} + #{j < i: x_j ties x_i}``
  (the comparison summed over ``j``: one Reduction);
* the index at output position ``r`` is the element whose rank is ``r``:
  ``index_r = sum_i i * (rank_i == r)`` (one Reduction; every rank is distinct, so
  exactly one term is nonzero and the integer sum is exact);
* the values are Inductor's ``gather(x, index)`` (an indirect read), so they are
  bitwise the input's values.

What this guarantees: the values equal ``torch.topk`` / ``torch.sort`` exactly.  The
indices equal ATen's wherever the order is strict; among equal values ours come in
ascending index order (a stable sort), while ATen's CPU kernels leave the order of
ties unspecified (they differ from it for ``n`` around a thousand, and ``topk`` even
for eight columns), so with ties both are correct answers but not always the same
one.  NaN orders as ATen does: greater than every number (last ascending, first
descending, picked first by ``topk(largest=True)``).  ``topk(sorted=False)`` returns
the ``k`` elements in sorted order, one of the orders ATen may return.  The work is
``n^2`` comparisons per row, which is small for routers (``E`` of 8 to 128) and
for the experts' sort of ``tokens x k`` ids it is a reduction the planner tiles like
any other.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch._inductor import ir
from torch._inductor import lowering as L
from torch._inductor.virtualized import ops

from spyre_rules.backend.lowering_table import lowerings_swapped

__all__ = ["ranking_lowerings"]

aten = torch.ops.aten


def _comes_before(mine: Any, other: Any, descending: bool, floating: bool) -> tuple[Any, Any]:
    """(``other`` strictly before ``mine`` in the order, the two tie), in a loop body."""
    strictly = ops.gt(other, mine) if descending else ops.lt(other, mine)
    tie = ops.eq(other, mine)
    if floating:
        # NaN is greater than every number and ties every NaN, as ATen orders it
        nan_mine, nan_other = ops.isnan(mine), ops.isnan(other)
        if descending:
            bigger_nan = ops.logical_and(nan_other, ops.logical_not(nan_mine))
        else:
            bigger_nan = ops.logical_and(nan_mine, ops.logical_not(nan_other))
        strictly = ops.logical_or(strictly, bigger_nan)
        tie = ops.logical_or(tie, ops.logical_and(nan_mine, nan_other))
    return strictly, tie


def _sum_reduction(x: Any, ranges: list[Any], reduction: Any, inner_fn: Any) -> Any:
    out = ir.Reduction.create(
        device=x.get_device(), dst_dtype=torch.int64, src_dtype=torch.int64, inner_fn=inner_fn,
        ranges=ranges, reduction_ranges=[reduction], reduction_type="sum",
    )
    out.realize()
    return out


def _ranks(x: Any, axis: int, descending: bool) -> Any:
    """Each element's position in the stable order along ``axis`` (int64, x's shape)."""
    load = x.make_loader()
    floating = x.get_dtype().is_floating_point

    def inner_fn(index: Any, reduction_index: Any) -> Any:
        (j,) = reduction_index
        other_index = list(index)
        other_index[axis] = j
        strictly, tie = _comes_before(load(index), load(other_index), descending, floating)
        earlier = ops.lt(ops.index_expr(j, torch.int64), ops.index_expr(index[axis], torch.int64))
        before = ops.logical_or(strictly, ops.logical_and(tie, earlier))
        return ops.to_dtype(before, torch.int64)

    size = list(x.get_size())
    return _sum_reduction(x, size, size[axis], inner_fn)


def _ordered_indices(x: Any, axis: int, count: int, descending: bool) -> Any:
    """The indices of the first ``count`` elements along ``axis`` in the stable order."""
    ranks = _ranks(x, axis, descending)
    load_rank = ranks.make_loader()

    def inner_fn(index: Any, reduction_index: Any) -> Any:
        (i,) = reduction_index
        source = list(index)
        source[axis] = i
        at_rank = ops.eq(load_rank(source), ops.index_expr(index[axis], torch.int64))
        return ops.where(at_rank, ops.index_expr(i, torch.int64), ops.constant(0, torch.int64))

    size = list(x.get_size())
    n = size[axis]
    size[axis] = count
    return _sum_reduction(x, size, n, inner_fn)


def _ordered(x: Any, dim: int, count: int, descending: bool) -> tuple[Any, Any]:
    axis = L._validate_dim(x, dim)
    indices = _ordered_indices(x, axis, count, descending)
    values = L.lowerings[aten.gather.default](x, axis, indices)
    return values, indices


def _sort(x: Any, dim: int = -1, descending: bool = False) -> Any:
    if not x.get_size():
        return L.clone(x), L.full_like(x, 0, dtype=torch.int64)
    return _ordered(x, dim, x.get_size()[L._validate_dim(x, dim)], descending)


def _sort_stable(x: Any, *, stable: bool | None = None, dim: int = -1,
                 descending: bool = False) -> Any:
    return _sort(x, dim, descending)


def _topk(x: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
    if not x.get_size():
        return L.clone(x), L.full_like(x, 0, dtype=torch.int64)
    return _ordered(x, dim, k, descending=largest)


def _our_lowerings() -> dict[Any, Any]:
    table: dict[Any, Any] = {}
    L.register_lowering([aten.topk.default], type_promotion_kind=None, lowering_dict=table)(_topk)
    L.register_lowering([aten.sort.default], type_promotion_kind=None, lowering_dict=table)(_sort)
    L.register_lowering([aten.sort.stable], type_promotion_kind=None,
                        lowering_dict=table)(_sort_stable)
    return table


def ranking_lowerings() -> contextlib.AbstractContextManager[None]:
    """Swap our topk and sort lowerings into Inductor's table; restore the originals after."""
    return lowerings_swapped(_our_lowerings())
