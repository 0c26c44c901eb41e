"""Device coordinates of one access, composed through host coordinates.

``facts.device_coordinates`` applies layout_model §1.4 directly to the flat
index against the device ``stride_map``.  When an index walks several host dims
with one variable across a *padded* stick (e.g. a flattening view ``x.view(-1)``
of a ``[5, 37]`` fp32 buffer read as ``c0``) the interleaved device strides
(32 for the stick tile, 37 for the row) make that direct decomposition inexact:
it yields ``Mod(c0, 32)`` for the in-stick position instead of
``Mod(Mod(c0, 37), 32)``.  The executor would then silently read the wrong
element, so coordinates here are composed in two exact steps instead:

1. host coordinates of the index in the buffer's host view (§1.4 over host
   strides, where nothing is padded), then
2. the layout's forward map ``host index -> device coordinates`` (the generic
   contiguous index ``sum(h_k * stride_k)`` over host dim variables ``h_k``),
   with each ``h_k`` replaced by its host coordinate.

For ordinary reads both routes give the same expressions (``[floor(c1/64), c0,
Mod(c1, 64)]``); only the exotic ones differ, and there the composed one is right.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import sympy

from spyre_rules.facts.coordinates import device_coordinates, host_coordinates
from spyre_rules.facts.stick_layout import SpyreTensorLayout

__all__ = ["access_coordinates", "forward_coordinates"]


@functools.lru_cache(maxsize=1024)
def forward_coordinates(
    layout: SpyreTensorLayout, host_size: tuple[int, ...], host_stride: tuple[int, ...]
) -> tuple[list[sympy.Expr], list[sympy.Symbol]]:
    """Device coordinates as functions of host dim variables ``h0, h1, ...``."""
    syms = [sympy.Symbol(f"h{d}", integer=True, nonnegative=True) for d in range(len(host_size))]
    index = sum((s * st for s, st in zip(syms, host_stride)), sympy.Integer(0))
    return device_coordinates(layout, index, dict(zip(syms, host_size))), syms


def access_coordinates(
    layout: SpyreTensorLayout,
    host_size: Sequence[int],
    host_stride: Sequence[int],
    host_offset: int,
    index: Any,
    var_ranges: Mapping[Any, Any],
) -> list[sympy.Expr]:
    """Device coordinates of the element at ``index`` (an offset into the buffer's
    storage, like Inductor's load/store indices) over the loop ``var_ranges``."""
    size = tuple(int(s) for s in host_size)
    stride = tuple(int(s) for s in host_stride)
    local = sympy.sympify(index) - int(host_offset)
    host = host_coordinates(size, stride, local, var_ranges)
    forward, syms = forward_coordinates(layout, size, stride)
    return [c.xreplace(dict(zip(syms, host))) for c in forward]
