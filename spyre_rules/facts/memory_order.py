"""Per-tile buffers keep their full buffer's memory order.

A tiled op writes a per-tile buffer whose host sizes are the per-tile ranges and
whose strides are dense in the *full buffer's* memory order: a transposed or
permuted buffer (Inductor lays a pointwise op on a permuted read out in that
read's order) stays permuted tile by tile.  Listed in that order, both the full
and the per-tile buffer are contiguous, which is what the device-layout resize
follows.  The planner's per-tile view (``per_tile.py``) and coarse tiling
(``passes/coarse_tile.py``) both build the per-tile layout here, so the plan
describes the buffer the tiled kernel writes.
"""

from __future__ import annotations

from collections.abc import Sequence

from spyre_rules.facts.stick_layout import (
    SpyreTensorLayout,
    contiguous_strides,
    resize_device_layout,
    within_stick_host_dim,
)

__all__ = ["memory_order", "ordered_dense_strides", "resize_in_memory_order"]


def memory_order(size: Sequence[int], stride: Sequence[int]) -> list[int] | None:
    """Host dims outermost first in memory, or None when the strides are not dense.

    Size-1 dims take no room, so their stride is ignored (they sort by position).
    """
    order = sorted(range(len(size)), key=lambda d: (-stride[d] if size[d] > 1 else 0, d))
    big = [d for d in order if size[d] > 1]
    expected = 1
    for d in reversed(big):
        if stride[d] != expected:
            return None
        expected *= size[d]
    return order


def ordered_dense_strides(size: Sequence[int], order: Sequence[int]) -> tuple[int, ...]:
    """Strides of a dense buffer of ``size`` laid out in ``order`` (outermost first)."""
    dense = contiguous_strides([size[d] for d in order])
    stride = [0] * len(size)
    for position, d in enumerate(order):
        stride[d] = dense[position]
    return tuple(stride)


def resize_in_memory_order(
    device_layout: SpyreTensorLayout,
    size: Sequence[int],
    stride: Sequence[int],
    new_size: Sequence[int],
    order: Sequence[int],
) -> SpyreTensorLayout:
    """``resize_device_layout`` over the dims listed in memory order (raises LayoutError).

    The stick host dim is passed explicitly when the layout has one, so the resize
    never infers it by elimination (the inference is what can be ambiguous).
    """
    stick = within_stick_host_dim(size, stride, device_layout)
    return resize_device_layout(
        device_layout, [size[d] for d in order], [new_size[d] for d in order],
        stick_host_dim=None if stick is None else list(order).index(stick),
    )
