"""The view of a buffer in which no access walks across a dim boundary.

The generic stick layout (docs/layout_model.md §1.3) moves the outermost host
dim to just outside the stick.  A reader that walks two host dims with one loop
variable (a flattening view: ``torch.stack([a, b], 1).flatten(0, 1)``, the
interleave of ``associative_scan``'s odd-even recursion) then steps through two
device dims that are far apart and in the other order: element ``k`` of the
flattened dim sits at device offset ``Mod(k, 2) * big + floor(k / 2) * small``.
No tile of ``k`` narrower than the pair is a rigid translation of the first, and
every tile that keeps the pair whole spans both far-apart halves.

Laid out as the view its accesses walk -- the host dims that some access walks as
one merged into one dim -- the same storage gets the generic layout of that view,
where such a variable moves along one device dim.  Host size and strides are
kept (Inductor indexes the buffer by them); only the device layout changes, and
every access's device coordinates still come from the exact host descent
(``coordinates.access_coordinates``), so the choice of view can change where
bytes sit, never which element an access reaches.

``merged_view`` finds that view from the accesses' index terms: the boundaries
between dims of a view are storage strides; every host dim's stride and every
access term's step is a candidate, and a boundary that some term strides across
(``step < boundary < step * extent``) is dropped.  None when no access walks
across a host dim boundary (the buffer's own view serves), when the storage is
not dense row-major with the stick last, or when an access walks across the
stick's own boundary (a view flattening sticks: merging there changes what a
stick holds).  No torch IR and no policy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from spyre_rules.errors import CoordinateError
from spyre_rules.facts.coordinates import index_term_extents

__all__ = ["dense_row_major", "merged_view"]


def dense_row_major(size: Sequence[int], stride: Sequence[int]) -> bool:
    """Whether ``stride`` is the contiguous row-major stride of ``size`` (size-1 dims free)."""
    expected = 1
    for s, st in zip(reversed(size), reversed(stride)):
        if s > 1 and st != expected:
            return False
        expected *= s
    return True


def merged_view(
    size: Sequence[int],
    stride: Sequence[int],
    accesses: Iterable[tuple[Any, Mapping[Any, Any]]],
) -> tuple[list[int], list[int]] | None:
    """``(view sizes, view strides)`` outermost first, or None to keep the host view.

    ``accesses``: ``(index, ranges)`` of every read and write of the buffer, index
    relative to its storage.  An access whose terms cannot be derived counts as
    unknown: the host view is kept.
    """
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    if not size or size[-1] <= 1 or stride[-1] != 1 or not dense_row_major(size, stride):
        return None
    total = math.prod(size)
    stick = size[-1]  # the stick host dim's extent: its outer boundary stays
    terms: list[tuple[int, int]] = []
    for index, ranges in accesses:
        try:
            terms.extend(index_term_extents(index, ranges))
        except CoordinateError:
            return None

    def crossed(boundary: int) -> bool:
        return any(step < boundary < limit for step, limit in terms)

    if crossed(stick):
        return None
    host = {st for s, st in zip(size[:-1], stride[:-1]) if s > 1}
    if not any(crossed(b) for b in host):
        return None
    candidates = host | {step for step, _ in terms if stick <= step < total} | {stick}
    bounds = sorted(b for b in candidates if not crossed(b)) + [total]
    if any(outer % inner for inner, outer in zip(bounds, bounds[1:])):
        return None
    sizes = [outer // inner for inner, outer in zip(bounds, bounds[1:])][::-1]
    strides = bounds[:-1][::-1]
    return sizes + [stick], strides + [1]
