"""Reductions over the trailing (reduction) axis of a chunk, and how chunks combine.

A reduction whose range is larger than the chunk bound is evaluated in pieces
along the reduction axis; ``combine`` merges the partial result of a piece into
the running one (sums add, extrema compare, arg-extrema keep the first index,
Welford partials merge with Chan's formula, softmax_values partials -- (acc, max,
sum) -- with the online-softmax combine).
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["reduce_chunk", "combine", "finish"]


def _t(x: Any) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.tensor(x)


def _full_rank(x: torch.Tensor, rank: int) -> torch.Tensor:
    return x.reshape((1,) * (rank - x.dim()) + tuple(x.shape)) if x.dim() < rank else x


def _accumulate_dtype(x: torch.Tensor) -> torch.dtype | None:
    # Integer and bool sums accumulate in int64 like torch.sum; floats stay float32/64.
    if x.dtype == torch.bool or not x.dtype.is_floating_point:
        return torch.int64
    return None


def reduce_chunk(kind: str, values: list[Any], shape: list[int], n_red: int, offset: int) -> Any:
    """Partial result over the trailing ``n_red`` axes of a chunk of ``shape``.

    ``values`` broadcast to ``shape`` (a value only has the axes of the symbols
    it depends on).  ``offset`` is the row-major position of the chunk's first
    element in the whole reduction space (arg-reductions report absolute
    indices); the chunk is contiguous in that order.
    """
    out_shape = shape[: len(shape) - n_red]
    dims = tuple(range(len(out_shape), len(shape)))
    count = math.prod(shape[len(out_shape):])
    if kind == "batchmatmul":
        # sum_k a*b without materialising the broadcast product (einsum -> bmm).
        # An operand whose every symbol takes one value in this chunk (a unit M
        # row, a K tile of extent 1) is 0-dim or short; einsum's "...k" needs the
        # reduction axis, so pad to the chunk's rank (leading unit axes broadcast).
        a, b = (_full_rank(_t(v), len(shape)) for v in values)
        if n_red != 1:
            raise ValueError(f"batchmatmul over {n_red} reduction axes")
        return torch.einsum("...k,...k->...", a, b).expand(out_shape)
    if kind == "softmax_values":
        return _softmax_values(*(_t(v).expand(shape) for v in values), out_shape, count)
    if kind in ("argmax", "argmin") and len(values) == 2:
        return _arg_with_index(kind, *(_t(v).expand(shape) for v in values), out_shape, count)
    (x,) = (_t(v).expand(shape) for v in values)
    if kind == "sum":
        return x.sum(dims, dtype=_accumulate_dtype(x)) if dims else x.clone()
    if kind == "max":
        return x.amax(dims)
    if kind == "min":
        return x.amin(dims)
    if kind == "any":
        return x.bool().any(dims) if dims else x.bool()
    flat = x.reshape(*out_shape, count)  # copies only for broadcast inputs
    if kind == "prod":
        return flat.prod(-1, dtype=_accumulate_dtype(x))
    if kind in ("argmax", "argmin"):
        value, index = (torch.max if kind == "argmax" else torch.min)(flat, -1)
        return value, index + offset
    if kind == "welford_reduce":
        flat = flat.double() if flat.dtype == torch.float64 else flat.float()
        mean = flat.mean(-1)
        m2 = ((flat - mean.unsqueeze(-1)) ** 2).sum(-1)
        return mean, m2, torch.full_like(mean, count)
    raise ValueError(f"unknown reduction type {kind!r}")


def _arg_with_index(kind: str, x: torch.Tensor, index: torch.Tensor, out_shape: list[int],
                    count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """An arg-reduction whose index is a value of the program (Inductor's logical
    index of a non-contiguous input): the extreme value (NaN is the extreme) and the
    lowest index among the points holding it, as Inductor's ``maximum_with_index``."""
    flat = x.reshape(*out_shape, count)
    idx = index.reshape(*out_shape, count).to(torch.int64)
    value = (torch.amax if kind == "argmax" else torch.amin)(flat, -1)  # NaN propagates
    at = (flat == value.unsqueeze(-1)) | (torch.isnan(flat) & torch.isnan(value).unsqueeze(-1))
    big = torch.iinfo(torch.int64).max
    return value, torch.where(at, idx, torch.full_like(idx, big)).amin(-1)


def _safe_max(top: torch.Tensor) -> torch.Tensor:
    """The max the exponentials subtract: 0 where every key is masked (-inf), so an
    empty range or tile gives exp(-inf) = 0, never exp(nan)."""
    return torch.where(top == -math.inf, torch.zeros_like(top), top)


def _softmax_values(scores: torch.Tensor, values: torch.Tensor, out_shape: list[int],
                    count: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """softmax_values' partial result over a chunk: (acc, max, sum) = (sum exp(s - m) v,
    m, sum exp(s - m)), m the chunk's max of the scores (passes/combine.py FIELDS)."""
    s = scores.reshape(*out_shape, count)
    v = values.reshape(*out_shape, count)
    top = s.amax(-1)
    weights = torch.exp(s - _safe_max(top).unsqueeze(-1))
    return (weights * v).sum(-1), top, weights.sum(-1)


def _better(kind: str, new: tuple, old: tuple) -> torch.Tensor:
    # torch.max/min treat NaN as the extreme value; equal values (NaN with NaN) keep
    # the lower index (Inductor's maximum_with_index), which for positional indices
    # is the earlier chunk's.
    nv, ni = new
    ov, oi = old
    strict = nv > ov if kind == "argmax" else nv < ov
    new_nan, old_nan = torch.isnan(nv), torch.isnan(ov)
    equal = (nv == ov) | (new_nan & old_nan)
    return strict | (new_nan & ~old_nan) | (equal & (ni < oi))


def combine(kind: str, acc: Any, part: Any) -> Any:
    if acc is None:
        return part
    if kind in ("sum", "batchmatmul"):
        return acc + part
    if kind == "prod":
        return acc * part
    if kind == "max":
        return torch.maximum(acc, part)
    if kind == "min":
        return torch.minimum(acc, part)
    if kind == "any":
        return acc | part
    if kind in ("argmax", "argmin"):
        take = _better(kind, part, acc)
        return torch.where(take, part[0], acc[0]), torch.where(take, part[1], acc[1])
    if kind == "welford_reduce":
        (ma, m2a, na), (mb, m2b, nb) = acc, part
        n = na + nb
        delta = mb - ma
        return ma + delta * nb / n, m2a + m2b + delta * delta * na * nb / n, n
    if kind == "softmax_values":
        (acc_a, max_a, sum_a), (acc_b, max_b, sum_b) = acc, part
        top = torch.maximum(max_a, max_b)
        scale_a = torch.exp(_safe_max(max_a) - _safe_max(top))
        scale_b = torch.exp(_safe_max(max_b) - _safe_max(top))
        return acc_a * scale_a + acc_b * scale_b, top, sum_a * scale_a + sum_b * scale_b
    raise ValueError(f"unknown reduction type {kind!r}")


def finish(kind: str, acc: Any) -> Any:
    """The reduction's value: arg-reductions keep only the index."""
    if kind in ("argmax", "argmin"):
        return acc[1]
    if kind == "softmax_values":
        return acc[0] / acc[2]
    return acc
