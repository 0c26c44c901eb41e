"""Reused result buffers: pointwise values and structured loads computed ``out=``.

A fresh 4 MB tensor costs more than the op that fills it (the allocator hands
large blocks back to the OS, so every call page-faults them in again: ``mul`` of
two 1M float32 tensors is ~2.7 ms fresh, ~0.8 ms ``out=`` a warm buffer).  Values
of one op's program live only while that op runs (``run_op_spec`` returns nothing
but device memory), so one buffer per *program slot* (entry index, shape, dtype)
serves every block of a run, every loop iteration and every later call; ops run
one at a time, so ops sharing a slot never hold it at once.

Computing ``out=`` must not change a single bit:

* ``EXACT`` ops are correctly rounded IEEE operations (``+ - * /``, negation,
  ``x*x``): their value does not depend on memory layout or vectorisation, so
  they are computed into a *contiguous* buffer -- the layout the general path's
  fresh results have (its gathered operands are contiguous), which matters to a
  reduction that sums the result.
* other ops allocate their fresh result from contiguous operands (the general
  path's layout: which elements take torch's vectorised or scalar loop, which
  may round differently, follows the layout; docs/architecture.md).

Buffers are dropped all at once past ``LIMIT_BYTES`` (a bound on memory, not a
cache policy: a dropped buffer is simply allocated again).
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["EXACT", "LIMIT_BYTES", "broadcast_shape", "buffer", "clear", "compute_exact"]

#: Ops computed into a contiguous reused buffer, and their torch functions.
EXACT: dict[str, Any] = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "truediv": torch.true_divide,
    "div_rn": torch.true_divide,
    "neg": torch.neg,
    "square": torch.square,
}

#: Most bytes held in reused buffers (a few 1M-element chunks per program slot).
LIMIT_BYTES = 256 << 20

_BUFFERS: dict[tuple, torch.Tensor] = {}
_held = 0


def clear() -> None:
    global _held
    _BUFFERS.clear()
    _held = 0


def buffer(slot: Any, shape: tuple[int, ...] | list[int], dtype: torch.dtype) -> torch.Tensor:
    """The contiguous buffer of ``slot`` (any hashable naming one program value)."""
    global _held
    shape = tuple(shape)
    key = (slot, shape, dtype)
    out = _BUFFERS.get(key)
    if out is None:
        size = math.prod(shape) * dtype.itemsize
        if _held + size > LIMIT_BYTES:
            clear()
        out = _BUFFERS[key] = torch.empty(shape, dtype=dtype)
        _held += size
    return out


def compute_exact(kind: str, ins: list[Any], slot: Any) -> torch.Tensor | None:
    """``EXACT[kind](*ins)`` computed into the slot's contiguous buffer, or None when
    that would not be the very same values (no tensor operand, a non-float result,
    operands of another dtype than the result's)."""
    fn = EXACT.get(kind)
    if fn is None:
        return None
    tensors = [x for x in ins if isinstance(x, torch.Tensor)]
    if not tensors or any(not isinstance(x, (torch.Tensor, int, float)) or isinstance(x, bool)
                          for x in ins):
        return None
    dtype = torch.result_type(*ins) if len(ins) > 1 else tensors[0].dtype
    if not dtype.is_floating_point or any(t.dtype != dtype for t in tensors):
        return None
    return fn(*ins, out=buffer(slot, broadcast_shape([t.shape for t in tensors]), dtype))


def broadcast_shape(shapes: list[torch.Size]) -> tuple[int, ...]:
    """``torch.broadcast_shapes`` for the shapes of tensors (its Python reference
    implementation costs ~0.1 ms a call); raises like it on incompatible shapes."""
    first = shapes[0]
    if all(s == first for s in shapes):
        return tuple(first)
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        for d, n in enumerate(s, rank - len(s)):
            if n != 1:
                if out[d] not in (1, n):
                    raise RuntimeError(f"shapes {[tuple(x) for x in shapes]} do not broadcast")
                out[d] = n
    return tuple(out)
