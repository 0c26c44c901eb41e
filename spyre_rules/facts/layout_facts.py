"""Facts about layouts and numbers: the within-stick dim, host sizes, divisors, tile counts.

Each is a ``@fact`` (``spyre_rules.facts.registry``) declared in
``rules/prelude.rules``.
"""

from __future__ import annotations

import math
from typing import Any

from spyre_rules.facts import memo
from spyre_rules.facts.records import as_int as _int
from spyre_rules.facts.registry import Layout, fact
from spyre_rules.facts.snapshot import layout_fingerprint
from spyre_rules.facts.stick_layout import within_stick_host_dim
from spyre_rules.facts.tile_extent import tile_counts as _tile_counts
from spyre_rules.facts.tile_extent import tile_extent as _tile_extent

__all__ = ["NO_STICK_DIM", "divisors", "host_size", "stick_elems", "tile_counts", "within_stick_dim"]


def _host_ints(values: Any) -> list[int] | None:
    out = [_int(v) for v in values]
    return None if any(v is None for v in out) else out  # type: ignore[return-value]


# Layout facts are asked once per split count and input; a layout's answer
# depends only on its fingerprint (sizes, strides, device layout), so it is
# cached on that (bounded: cleared when it grows past _LAYOUT_CACHE_SIZE).
_STICK_DIMS: dict[tuple, int | None] = {}
#: ``within_stick_dim`` of a layout with one value per stick: no host dim is inside it
NO_STICK_DIM = -1
_LAYOUT_CACHE_SIZE = 1 << 14


@fact
def within_stick_dim(layout: Layout) -> int | None:
    # asked per split count and input: kept by identity while the graph is stable
    return memo.by_identity("within_stick_dim", layout, _within_stick_dim)


def _within_stick_dim(layout: Layout) -> int | None:
    key = layout_fingerprint(layout)
    if key in _STICK_DIMS:
        return _STICK_DIMS[key]
    size, stride = _host_ints(layout.size), _host_ints(layout.stride)
    if size is None or stride is None:
        found = None
    elif layout.device_layout.stride_map[-1] == -1 and any(n > 1 for n in size):
        # the stick dim has no host stride: every value sits alone at the start of
        # its own stick (a sparse layout, docs/layout_model.md §1.3), no host dim
        # is inside the stick
        found = NO_STICK_DIM
    else:
        found = within_stick_host_dim(size, stride, layout.device_layout)
    if len(_STICK_DIMS) >= _LAYOUT_CACHE_SIZE:
        _STICK_DIMS.clear()
    _STICK_DIMS[key] = found
    return found


@fact
def host_size(layout: Layout, dim: int) -> int | None:
    d = _int(dim)
    sizes = list(layout.size)
    if d is None or not 0 <= d < len(sizes):
        return None
    return _int(sizes[d])


@fact
def stick_elems(layout: Layout) -> int:
    return layout.device_layout.elems_per_stick


@fact
def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` ascending, by trial division up to sqrt(n)."""
    v = _int(n)
    if v is None or v < 1:
        return []
    low, high = [], []
    for i in range(1, math.isqrt(v) + 1):
        if v % i == 0:
            low.append(i)
            if i != v // i:
                high.append(v // i)
    return low + high[::-1]


@fact
def tile_counts(n: int) -> list[int]:
    """Every count ``k >= 1`` whose ``k`` tiles of ``n`` are all non-empty, ascending
    (``facts/tile_extent.py``; the divisors are among them, empty for n < 1)."""
    v = _int(n)
    return [] if v is None else _tile_counts(v)


@fact
def tile_extent(n: int, k: int) -> int | None:
    """Elements per tile of ``k`` tiles of ``n``: ``n / k`` when ``k`` divides it, else
    a remainder split's whole tile (``facts/tile_extent.py``); unknown when ``k``
    tiles cannot all be non-empty."""
    v, count = _int(n), _int(k)
    if v is None or count is None:
        return None
    return _tile_extent(v, count)
