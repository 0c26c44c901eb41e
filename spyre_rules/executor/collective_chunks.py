"""Running one functional collective in chunks (codegen/collective_spans.py).

``in_chunks(kernel, dim, length)`` is a drop-in for the c10d functional op
``kernel`` (the wrapper calls it with the arguments Inductor wrote for the op):
it cuts host dim ``dim`` into runs of ``length`` elements and issues one
collective per run on the rank's process group, each waited for before the
next, so the op's own ``wait_tensor`` later finds nothing outstanding.  Every
rank runs the same program, so every rank issues the same chunks in the same
order.  The chunk of an all_gather's or a reduce_scatter's output along a dim
above 0 is exactly the gathered or scattered chunk of the input, so the result
is the unchunked collective's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = ["in_chunks"]


def _runs(n: int, length: int) -> Iterator[tuple[int, int]]:
    for start in range(0, n, length):
        yield start, min(length, n - start)


def _wait(t: torch.Tensor) -> torch.Tensor:
    return torch.ops._c10d_functional.wait_tensor(t)


def _reduce_in_place(kernel: Any, dim: int, length: int, tensor: torch.Tensor,
                     *args: Any) -> torch.Tensor:
    for start, size in _runs(tensor.shape[dim], length):
        view = tensor.narrow(dim, start, size)
        part = view if view.is_contiguous() else view.contiguous()
        _wait(kernel(part, *args))
        if part is not view:
            view.copy_(part)
    return tensor


def _gather_or_scatter(kernel: Any, dim: int, length: int, out: torch.Tensor | None,
                       tensor: torch.Tensor, *args: Any) -> torch.Tensor:
    for start, size in _runs(tensor.shape[dim], length):
        part = _wait(kernel(tensor.narrow(dim, start, size).contiguous(), *args))
        if out is None:
            shape = list(part.shape)
            shape[dim] = tensor.shape[dim]
            out = part.new_empty(shape)
        out.narrow(dim, start, size).copy_(part)
    assert out is not None
    return out


def in_chunks(kernel: Any, dim: int, length: int) -> Callable[..., torch.Tensor]:
    name = kernel._opname
    if name == "all_reduce_":
        return lambda tensor, *args: _reduce_in_place(kernel, dim, length, tensor, *args)
    if name == "all_reduce":
        return lambda tensor, *args: _reduce_in_place(
            torch.ops._c10d_functional.all_reduce_.default, dim, length, tensor.clone(), *args)
    if name == "all_gather_into_tensor_out":
        gather = torch.ops._c10d_functional.all_gather_into_tensor.default
        return lambda tensor, *args, out: _gather_or_scatter(gather, dim, length, out, tensor,
                                                             *args)
    if name in ("all_gather_into_tensor", "reduce_scatter_tensor"):
        return lambda tensor, *args: _gather_or_scatter(kernel, dim, length, None, tensor, *args)
    raise ValueError(f"{name} cannot run in chunks")
