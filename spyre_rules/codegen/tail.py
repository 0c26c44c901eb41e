"""The peeled last iteration of a loop level whose last tile is shorter (a remainder tile).

A level of ``N`` tiles of ``T`` elements over an extent ``E`` that ``N`` does not
divide (docs/layout_model.md §5.2) leaves a last tile of ``R = E - (N - 1) * T``.
Codegen states it as two loops over the same body:

* ``LoopSpec(count=N - 1, body)`` -- every whole tile, as for an exact split;
* ``LoopSpec(count=1, first=N - 1, tail)`` -- the last tile: each OpSpec of the
  body whose op has a remainder at this level runs with ``R`` as its symbol's
  range, and keeps the whole tile's per-iteration step (``tiled_steps`` written
  out), so its tensors sit at ``(N - 1) * stride``, exactly where iteration
  ``N - 1`` of one loop of ``N`` would put them.

Every access of the last tile is a sub-box of that translated whole tile: the
span check and the executor's bounds checks see its real extent, and no access
reaches past the buffers.  Nested levels keep their own loops inside the tail.

Levels are peeled innermost first (codegen builds a nest from the inside out), so
an op with a remainder at two levels is clipped twice: the outer level's tail
clips the copies the inner level's tail made.  Those copies therefore inherit
their origin's entry in ``tails`` (keyed by ``id(OpSpec)``): without it the outer
peel found nothing for them and the corner tile (last outer x last inner) kept
the outer dim's whole range, one row past a buffer whose extent is odd
(``a @ a.T`` at (127, 64), issue 40).
"""

from __future__ import annotations

import copy
from collections.abc import MutableMapping
from typing import Any

import sympy

from spyre_rules.program.op_spec import LoopSpec, OpSpec

__all__ = ["peel_last_tile"]


Tails = MutableMapping[int, list[dict[Any, int]]]


def peel_last_tile(loop: LoopSpec, level: int, tails: Tails) -> list[LoopSpec]:
    """``[loop]``, or ``[whole tiles, last tile]`` when an op of ``loop``'s body has a
    shorter last tile at ``level`` (outermost level 0).  ``tails``: ``id(OpSpec)`` ->
    per level, ``{symbol: last tile extent}`` (``codegen.build.tail_ranges``); each
    OpSpec copy of the last tile is entered with its origin's (module doc)."""
    if not _has_tail(loop.body, level, tails):
        return [loop]
    count = int(loop.count)
    first = int(loop.first)
    return [LoopSpec(count=sympy.Integer(count - 1), body=loop.body, first=first),
            LoopSpec(count=sympy.Integer(1), body=_clip(loop.body, level, tails),
                     first=first + count - 1)]


def _level_tail(spec: Any, level: int, tails: Tails) -> dict[Any, int]:
    levels = tails.get(id(spec)) or []
    return levels[level] if level < len(levels) else {}


def _has_tail(items: list[Any], level: int, tails: Tails) -> bool:
    for item in items:
        if isinstance(item, LoopSpec):
            if _has_tail(item.body, level, tails):
                return True
        elif _level_tail(item, level, tails):
            return True
    return False


def _clip(items: list[Any], level: int, tails: Tails) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, LoopSpec):
            out.append(LoopSpec(count=item.count, body=_clip(item.body, level, tails),
                                first=item.first))
        else:
            clipped = _clip_spec(item, _level_tail(item, level, tails))
            if id(item) in tails:  # an outer level peels this copy again
                tails[id(clipped)] = tails[id(item)]
            out.append(clipped)
    return out


def _clip_spec(spec: OpSpec, last: dict[Any, int]) -> OpSpec:
    """A copy of ``spec`` over the last tile: clipped ranges, the whole tile's steps."""
    new = copy.copy(spec)
    ranges = {s: int(r) for s, (r, _) in spec.iteration_space.items()}
    if spec.tiled_steps is None:
        new.tiled_steps = [[ranges[s] for s in row] for row in spec.tiled_symbols]
    else:
        new.tiled_steps = [list(row) for row in spec.tiled_steps]
    new.iteration_space = {
        s: ((sympy.Integer(last[s]), split) if s in last else (r, split))
        for s, (r, split) in spec.iteration_space.items()
    }
    return new
