"""What a split count means for one extent: the tile every fact measures.

``k`` tiles of an extent ``n`` that ``k`` divides are ``n / k`` elements each.  When
``k`` does not divide ``n``, the tiles are ``T`` elements and the last one holds
what is left, ``n - (k - 1) * T`` (a *remainder tile*, docs/layout_model.md §4.5);
the program runs it as a peeled last iteration.  ``T`` is the smallest multiple of
the largest grain in ``GRAINS`` that still leaves the last tile non-empty: whole
sticks when the extent allows it (Granite's vocabulary 49155 in 769 tiles: 64, a
stick of fp16; 1000 in 16 tiles: 64, not 63), ``ceil(n / k)`` at worst.  A count
whose last tile would be empty even then (``n = 9``, ``k = 4``: tiles of 3 cover 9
in 3) does not describe ``k`` tiles and has no tile extent.

A count that divides ``n`` always means ``n / k``: 100 fp32 elements (3 sticks and
4) in 4 tiles are tiles of 25, never 32, 32, 32 and 4.

Facts measure the whole tile ``T``: a shorter last tile is a sub-box of a
translated whole tile, so every span it has is bounded by the whole tile's.
"""

from __future__ import annotations

import math

__all__ = ["GRAINS", "last_tile_extent", "tile_counts", "tile_extent"]

#: Tile grains tried for a remainder split, coarsest first (128 bytes is a stick:
#: 128 int8, 64 fp16, 32 fp32 elements).
GRAINS = (128, 64, 32, 16, 8, 4, 2, 1)


def tile_extent(n: int, k: int) -> int | None:
    """Elements per tile of ``k`` tiles of ``n`` (None: ``k`` tiles cannot all be non-empty)."""
    if k < 1 or n < 1:
        return None
    if n % k == 0:
        return n // k
    for grain in GRAINS:
        tile = grain * -(-n // (k * grain))
        if (k - 1) * tile < n:
            return tile
    return None


def tile_counts(n: int) -> list[int]:
    """Every count ``k >= 1`` with a tile extent (``k`` tiles of ``n`` all non-empty),
    ascending; the divisors are among them.

    They are exactly the values ``ceil(n / t)`` over tile extents ``t`` in 1..n (a
    valid ``k`` has ``t = ceil(n / k)`` and ``k = ceil(n / t)``), of which there are
    about ``2 * sqrt(n)``: those of ``t <= sqrt(n)``, and the small ``k`` tested
    directly (``t > sqrt(n)`` gives ``k <= sqrt(n) + 1``)."""
    if n < 1:
        return []
    r = math.isqrt(n) + 1
    found = {-(-n // t) for t in range(1, r + 1)}
    found.update(k for k in range(1, r + 1) if tile_extent(n, k) is not None)
    return sorted(found)


def last_tile_extent(n: int, k: int) -> int | None:
    """Elements of the last of ``k`` tiles of ``n`` (equal to the tile when ``k`` divides ``n``)."""
    t = tile_extent(n, k)
    return None if t is None else n - (k - 1) * t
