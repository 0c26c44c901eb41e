"""A buffer read across its stick into its outermost dim: the layout with rows outermost.

The generic stick layout (docs/layout_model.md §1.3) moves the outermost host dim to
just outside the stick, inside the stick's tile count: ``[R, C]`` is laid out
``[C/eps, R, eps]``.  A reader that walks one variable from the stick on into that
outermost dim -- a ``[T * H, D]`` buffer read as ``[T, H * D]``, qwen3_next's gated
norm output flattened for the output projection (``k = 128 h + e`` over 4096 of a
``[T * 32, 128]`` buffer) -- then steps through two device dims in the wrong nesting:
a tile of ``k`` narrower than a row jumps between stick columns ``R * eps`` elements
apart (no rigid translation of the first tile), and a tile holding whole rows spans
every stick column.

Laid out with the host dims in their own order and the stick's tile count just
outside the stick (``[R, C/eps, eps]``: row-major, as the generic layout of
``[1, R, C]`` already is), such a walk moves along consecutive sticks: a tile of
``k`` is one stick, its tiles are translations, and the writer's tiles of rows stay
whole rows.  Host size and strides are kept, and the device dims map one-to-one to
host dims, so a per-tile resize (§2.2) rebuilds it.

A last dim padded to whole sticks (olmo_hybrid's heads of 48, ``[T * 4, 48]`` read as
``[T, 192]``) gains too: a tile of ``k`` holding whole heads moves by one padded row a
head (a translation), and its rows sit in one block instead of one per stick column
(two columns 64 KiB apart at 128 tokens: no tile of whole heads fitted 64 KiB).

Only for a dense row-major buffer stuck on its last dim of more than one stick (one
stick: the generic layout is row-major already), with host dim 0
above 1 (it is the dim the generic layout moves), and only when some access term
crosses the stick's boundary (``step < C < limit``) and reaches dim 0 (``limit >
stride[0]``).  No torch IR and no policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from spyre_rules.errors import CoordinateError
from spyre_rules.facts.coordinates import index_term_extents
from spyre_rules.facts.merged_view import dense_row_major
from spyre_rules.facts.stick_layout import SpyreTensorLayout, dtype_info

__all__ = ["may_read_across_the_stick_into_dim_0", "reads_across_the_stick_into_dim_0",
           "row_major_stick_layout"]


def may_read_across_the_stick_into_dim_0(size: Sequence[int], stride: Sequence[int],
                                         eps: int) -> bool:
    """Whether the buffer's shape admits the case at all (no access asked): dense
    row-major, dim 0 above 1, stuck on its last dim of more than one stick."""
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    return len(size) >= 2 and size[0] > 1 and size[-1] > eps and stride[-1] == 1 \
        and dense_row_major(size, stride)


def reads_across_the_stick_into_dim_0(
    size: Sequence[int],
    stride: Sequence[int],
    eps: int,
    accesses: Iterable[tuple[Any, Mapping[Any, Any]]],
) -> bool:
    """Whether one of ``accesses`` (``(index, ranges)``, index relative to the storage)
    walks a variable from the last (stick) host dim on into host dim 0, in a dense
    row-major buffer whose last dim is more than one stick.  An access whose terms cannot be
    derived is not counted."""
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    if not may_read_across_the_stick_into_dim_0(size, stride, eps):
        return False
    stick, outermost = size[-1], stride[0]
    for index, ranges in accesses:
        try:
            terms = index_term_extents(index, ranges)
        except CoordinateError:
            continue
        if any(step < stick < limit and limit > outermost for step, limit in terms):
            return True
    return False


def row_major_stick_layout(
    size: Sequence[int], stride: Sequence[int], dtype: Any
) -> SpyreTensorLayout:
    """``[size[0], ..., size[-2], size[-1] / eps, eps]``: the host dims in their order, the
    stick's tile count just outside the stick (a size-1 dim: device size 1, stride -1)."""
    info = dtype_info(dtype)
    eps = info.elems_per_stick
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    device_size = [*size[:-1], -(-size[-1] // eps), eps]
    stride_map = [st if s > 1 else -1 for s, st in zip(size[:-1], stride[:-1])]
    stride_map += [eps * stride[-1], stride[-1]]
    return SpyreTensorLayout(tuple(device_size), tuple(stride_map), info.device_dtype)
