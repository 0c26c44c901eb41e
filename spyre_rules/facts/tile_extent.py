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

A count that divides ``n`` means ``n / k`` when those tiles are whole multiples of
``WHOLE_STICK_GRAIN`` (64 elements: a stick of fp16), or when no tiling of ``k`` tiles
in whole grains of ``FINEST_STICK_GRAIN`` (32 elements: a stick of fp32, the finest of
any format) or coarser exists (120 elements in 3 tiles are tiles of 40).  Otherwise it
is a remainder tiling like any other: olmo_hybrid's fp32 heads of 48 in 2 tiles are 32
and 16, not 24 and 24, which cut the stick of every tile after the first (the only split
of a [512, 48] buffer whose two sticks a row are 64 KiB apart, refused before at 64 KiB);
16052 query rows in 4 tiles are 3 tiles of 4096 and one of 3764, not 4 tiles of 4013,
which cut the sticks of every layout whose stick dim the rows are (the softmax's
row statistics) and cost more tiles elsewhere (issue 40: 180 loop trips for one
Mistral-7B layer at 16052 tokens, 142 at 16384).  The count is the planner's choice,
weighed by loop trips in ``rules/planner.rules``; what a count means is this fact.

Facts measure the whole tile ``T``: a shorter last tile is a sub-box of a
translated whole tile, so every span it has is bounded by the whole tile's.
"""

from __future__ import annotations

import math

__all__ = ["FINEST_STICK_GRAIN", "GRAINS", "WHOLE_STICK_GRAIN", "is_even_split",
           "last_tile_extent", "tile_counts", "tile_extent"]

#: Tile grains tried for a remainder split, coarsest first (128 bytes is a stick:
#: 128 int8, 64 fp16, 32 fp32 elements).
GRAINS = (128, 64, 32, 16, 8, 4, 2, 1)

#: The fewest elements a stick holds in any device format (128 bytes of fp32): a dividing
#: count whose ``n / k`` cuts sticks takes whole tiles of this grain or coarser when they exist.
FINEST_STICK_GRAIN = 32

#: An exact count's tiles of ``n / k`` elements are kept when they are whole multiples
#: of this grain (a stick of fp16, the models' dtype; two of fp32), else a tiling in
#: grains of ``FINEST_STICK_GRAIN`` or coarser wins when one exists.
WHOLE_STICK_GRAIN = 64


def tile_extent(n: int, k: int) -> int | None:
    """Elements per tile of ``k`` tiles of ``n`` (None: ``k`` tiles cannot all be non-empty)."""
    if k < 1 or n < 1:
        return None
    exact = n % k == 0
    if exact and (k == 1 or (n // k) % WHOLE_STICK_GRAIN == 0):
        return n // k
    for grain in GRAINS:
        if exact and grain < FINEST_STICK_GRAIN:
            return n // k  # no tiling in whole sticks of any format: the even tiles
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


def is_even_split(n: int, k: int) -> bool:
    """``k`` tiles of ``n`` are all ``tile_extent(n, k)`` long (no shorter last tile)."""
    t = tile_extent(n, k)
    return t is not None and t * k == n


def last_tile_extent(n: int, k: int) -> int | None:
    """Elements of the last of ``k`` tiles of ``n`` (equal to the tile when ``k`` divides ``n``)."""
    t = tile_extent(n, k)
    return None if t is None else n - (k - 1) * t
