"""FixedTiledLayout: an Inductor FixedLayout (the host view) plus its Spyre device layout.

Spec: ``docs/layout_model.md`` §2.1.  It subclasses the real
``torch._inductor.ir.FixedLayout`` so every Inductor code path (indexers, storage
size, ``as_fixed``, scheduling) keeps treating the buffer as a fixed host layout,
while the Spyre passes read ``device_layout`` for physical addresses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch
from torch._inductor.ir import FixedLayout, Layout

from spyre_rules.errors import LayoutError
from spyre_rules.facts.stick_layout import (
    SpyreTensorLayout,
    contiguous_strides,
    generic_stick_layout,
)

__all__ = ["FixedTiledLayout", "fixed_tiled_layout"]


class FixedTiledLayout(FixedLayout):
    """Host ``FixedLayout`` carrying the device ``SpyreTensorLayout``.

    ``allocation`` is bookkeeping filled by later passes (``{'hbm': addr}``,
    ``{'lx': off}``, ``{'pool': off}``); ``per_tile_fixed`` marks a buffer that
    stays put across the iterations of a coarse-tile loop.  Neither is part of
    equality: they describe where a buffer lives, not what its layout is.
    """

    def __init__(
        self,
        device: torch.device | str,
        dtype: torch.dtype,
        size: Sequence[Any],
        stride: Sequence[Any] | None = None,
        offset: Any = sympy.Integer(0),
        is_pinned: bool = False,
        *,
        device_layout: SpyreTensorLayout,
        allocation: dict[str, Any] | None = None,
        per_tile_fixed: bool = False,
    ) -> None:
        if isinstance(device, str):
            device = torch.device(device)
        super().__init__(device, dtype, size, stride, offset, is_pinned)
        if not isinstance(device_layout, SpyreTensorLayout):
            raise LayoutError(f"device_layout {device_layout!r} is not a SpyreTensorLayout")
        self.device_layout = device_layout
        self.allocation: dict[str, Any] = {} if allocation is None else dict(allocation)
        self.per_tile_fixed = bool(per_tile_fixed)

    def __eq__(self, other: object) -> bool:
        # Same host view but a different stick layout means different bytes in memory.
        return (
            isinstance(other, FixedTiledLayout)
            and Layout.__eq__(self, other)
            and self.device_layout == other.device_layout
        )

    # Layout's hash is constant (its fields are mutable); keep it, consistent with __eq__.
    __hash__ = Layout.__hash__

    def __str__(self) -> str:
        offset = f", offset={self.offset}" if self.offset != 0 else ""
        index = "" if self.device.index is None else f":{self.device.index}"
        extra = ""
        if self.allocation:
            extra += f", allocation={self.allocation}"
        if self.per_tile_fixed:
            extra += ", per_tile_fixed=True"
        dl = self.device_layout
        return (
            f"FixedTiledLayout('{self.device.type}{index}', {self.dtype}, "
            f"size={list(self.size)}, stride={list(self.stride)}{offset}, "
            f"device_size={list(dl.device_size)}, stride_map={list(dl.stride_map)}, "
            f"device_dtype={dl.device_dtype}{extra})"
        )

    __repr__ = __str__


def _static(values: Sequence[Any], what: str) -> list[int]:
    out = []
    for i, v in enumerate(values):
        if isinstance(v, sympy.Expr) and v.is_Integer:
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise LayoutError(
                f"{what}[{i}] = {v!r} is not a static integer (in {what} {list(values)!r}); "
                "a Spyre stick layout needs concrete sizes"
            )
        out.append(v)
    return out


def fixed_tiled_layout(
    device: torch.device | str,
    dtype: torch.dtype,
    size: Sequence[Any],
    stride: Sequence[Any] | None = None,
    offset: Any = 0,
    dim_order: Sequence[int] | None = None,
) -> FixedTiledLayout:
    """A FixedTiledLayout whose device layout is the generic stick layout (§1.3)."""
    sizes = _static(size, "size")
    if stride is None:
        strides = list(contiguous_strides(sizes))
    else:
        strides = _static(stride, "stride")
    stl = generic_stick_layout(sizes, strides, dtype, dim_order)
    return FixedTiledLayout(
        device,
        dtype,
        [sympy.Integer(s) for s in sizes],
        [sympy.Integer(s) for s in strides],
        sympy.sympify(offset),
        device_layout=stl,
    )
