"""``LoopStamp``: the counted loops an op runs in, stamped on the op by coarse tiling.

One record per op, on one attribute (``op.loop_stamp``), written by
``passes/coarse_tile.py`` (and copied onto the copy ops tiling propagation
inserts); read through the accessors below by tiling propagation, the
scratchpad planner, the scheduler (``CountedLoopSchedulerNode`` per group) and
codegen.  An op without a stamp runs once, outside every loop.

Fields, one entry per loop level, outermost first (docs/layout_model.md §5.2):

* ``group_id`` -- the nesting path ``(g, 0, ..., 0)``; ops whose paths agree up
  to a depth share that loop;
* ``counts`` -- the trip count of each level (``sympy.Integer``);
* ``tiled_dims`` -- per level, the positions in ``op.data.ranges`` it divides;
* ``tiled_reduction_dims`` -- per level, the positions in
  ``op.data.reduction_ranges`` it divides (a reduction level: the loop
  accumulates the op's partial results, docs/accumulation.md);
* ``last_tiles`` -- per level, aligned with ``tiled_dims``, the extent of the
  level's last tile of each dim: the tile extent itself when the count divides
  the dim, shorter for a remainder tile (docs/layout_model.md §5.2), which
  codegen runs as a peeled last iteration.  Empty: every tile is whole.
* ``last_reduction_tiles`` -- the same for ``tiled_reduction_dims``: a reduction
  level's last tile may be shorter too (its combine step accumulates it like any).
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = [
    "LOOP_STAMP_ATTR",
    "LoopStamp",
    "loop_count",
    "loop_group_id",
    "loop_stamp",
    "loop_tiled_dims",
    "loop_reduction_remainders",
    "loop_remainders",
    "loop_tiled_reduction_dims",
    "set_loop_stamp",
]

LOOP_STAMP_ATTR = "loop_stamp"


@dataclasses.dataclass(frozen=True)
class LoopStamp:
    group_id: tuple[int, ...]
    counts: tuple[Any, ...]
    tiled_dims: tuple[tuple[int, ...], ...]
    tiled_reduction_dims: tuple[tuple[int, ...], ...]
    last_tiles: tuple[tuple[int, ...], ...] = ()
    last_reduction_tiles: tuple[tuple[int, ...], ...] = ()  # the same, of tiled_reduction_dims

    def __post_init__(self) -> None:
        object.__setattr__(self, "group_id", tuple(self.group_id))
        object.__setattr__(self, "counts", tuple(self.counts))
        object.__setattr__(self, "tiled_dims", tuple(tuple(d) for d in self.tiled_dims))
        object.__setattr__(self, "tiled_reduction_dims",
                           tuple(tuple(d) for d in self.tiled_reduction_dims))
        object.__setattr__(self, "last_tiles", tuple(tuple(int(t) for t in d) for d in self.last_tiles))
        if self.last_tiles and [len(t) for t in self.last_tiles] != [len(d) for d in self.tiled_dims]:
            raise ValueError(f"LoopStamp: last_tiles {self.last_tiles} do not align with "
                             f"tiled_dims {self.tiled_dims}")
        object.__setattr__(self, "last_reduction_tiles",
                           tuple(tuple(int(t) for t in d) for d in self.last_reduction_tiles))
        if self.last_reduction_tiles and [len(t) for t in self.last_reduction_tiles] != [
                len(d) for d in self.tiled_reduction_dims]:
            raise ValueError(f"LoopStamp: last_reduction_tiles {self.last_reduction_tiles} do "
                             f"not align with tiled_reduction_dims {self.tiled_reduction_dims}")
        levels = len(self.group_id)
        for name in ("counts", "tiled_dims", "tiled_reduction_dims"):
            if len(getattr(self, name)) != levels:
                raise ValueError(f"LoopStamp: group_id {self.group_id} has {levels} level(s) but "
                                 f"{name} {getattr(self, name)} has {len(getattr(self, name))}")

    @property
    def depth(self) -> int:
        """The number of nested loop levels."""
        return len(self.group_id)



def set_loop_stamp(op: Any, stamp: LoopStamp) -> None:
    setattr(op, LOOP_STAMP_ATTR, stamp)


def loop_stamp(op: Any) -> LoopStamp | None:
    """The op's stamp; None for an op outside every loop (or no op)."""
    return getattr(op, LOOP_STAMP_ATTR, None)


def loop_group_id(op: Any) -> tuple[int, ...] | None:
    stamp = loop_stamp(op)
    return None if stamp is None else stamp.group_id


def loop_count(op: Any) -> list[Any]:
    """Trip count per level, outermost first; ``[]`` outside every loop."""
    stamp = loop_stamp(op)
    return [] if stamp is None else list(stamp.counts)


def loop_tiled_dims(op: Any) -> list[list[int]]:
    """Per level, the ``data.ranges`` positions it divides; ``[]`` outside every loop."""
    stamp = loop_stamp(op)
    return [] if stamp is None else [list(d) for d in stamp.tiled_dims]


def loop_tiled_reduction_dims(op: Any) -> list[list[int]]:
    """Per level, the ``reduction_ranges`` positions it divides; ``[]`` outside every loop."""
    stamp = loop_stamp(op)
    return [] if stamp is None else [list(d) for d in stamp.tiled_reduction_dims]


def loop_reduction_remainders(op: Any) -> list[dict[int, int]]:
    """Per level, ``{reduction_ranges position: last tile extent}`` of the reduction dims
    the level tiles with a shorter last tile (one level only: coarse_tile); ``[]``
    outside every loop.  The op's reduction ranges hold the whole tile."""
    stamp = loop_stamp(op)
    if stamp is None:
        return []
    if not any(stamp.last_reduction_tiles):
        return [{} for _ in range(stamp.depth)]
    ranges = [int(r) for r in op.data.reduction_ranges]
    return [{d: last for d, last in zip(dims, lasts) if last != ranges[d]}
            for dims, lasts in zip(stamp.tiled_reduction_dims, stamp.last_reduction_tiles)]


def loop_remainders(op: Any) -> list[dict[int, int]]:
    """Per level, ``{data.ranges position: last tile extent}`` of the dims the level
    tiles with a shorter last tile (a remainder tile); ``[]`` outside every loop.
    The op's ranges hold the whole tile after coarse tiling."""
    stamp = loop_stamp(op)
    if stamp is None:
        return []
    if not stamp.last_tiles:
        return [{} for _ in range(stamp.depth)]
    ranges = [int(r) for r in op.data.ranges]
    # a dim with a remainder is tiled by one level only (coarse_tile), so its range
    # is that level's tile; a dim two levels divide exactly has no remainder
    once = [d for dims in stamp.tiled_dims for d in dims]
    return [{d: last for d, last in zip(dims, lasts) if once.count(d) == 1 and last != ranges[d]}
            for dims, lasts in zip(stamp.tiled_dims, stamp.last_tiles)]
