"""The iteration space of one op, cut into chunks of bounded size.

``blocks`` covers the row-major space with blocks of at most a budget of points;
``Space`` is one block as int64 grids per symbol (for the general path's address
expressions) and as ranges (for the structured views).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import Any

import torch

from spyre_rules.executor import views

__all__ = ["Space", "blocks", "is_split"]


def blocks(ranges: list[int], budget: int) -> Iterator[list[tuple[int, int]]]:
    """Cover the row-major space ``ranges`` with blocks of at most ``budget`` points.

    Each block is one ``(start, stop)`` per axis: the axes after a *split axis*
    are whole, the split axis is cut into runs, the axes before it are single
    indices.  The split axis is the outermost one whose inner axes fit the budget.
    """
    inner = [math.prod(ranges[i + 1:]) for i in range(len(ranges))]
    split = next((i for i, n in enumerate(inner) if n <= budget), None)
    if split is None:  # no axes: one point
        yield []
        return
    run = max(1, budget // inner[split])
    for prefix in itertools.product(*(range(r) for r in ranges[:split])):
        for a in range(0, ranges[split], run):
            yield ([(i, i + 1) for i in prefix] + [(a, min(ranges[split], a + run))]
                   + [(0, r) for r in ranges[split + 1:]])


class Space:
    """One chunk of the iteration space: an int64 grid per symbol (``env``, each
    varying along its own axes of a ``rank``-dim chunk; single-index axes become
    plain ints) and the same as ranges (``box``) for the structured views.

    A symbol in ``splits`` whose block is whole runs of its ``k`` takes two axes
    ``(q, r)``, ``c = start + q*k + r``: then a stick-split access is one strided view
    in the chunk's own shape, read and computed on without a copy.

    The grids are built on first use of ``env``: structured accesses need only ``box``."""

    def __init__(self, rank: int, parent: Space | None = None) -> None:
        self.rank = rank
        self._env: dict[str, Any] = dict(parent._env) if parent else {}
        #: grids not built yet: name -> (start, stop, view shape)
        self._pending: dict[str, tuple[int, int, list[int]]] = dict(parent._pending) if parent else {}
        self.box: views.Box = dict(parent.box) if parent else {}
        self.shape: list[int] = list(parent.shape) if parent else []

    @property
    def env(self) -> dict[str, Any]:
        """Symbol name -> its int64 grid (or int); callers may bind more symbols in it."""
        if self._pending:
            for name, (a, b, shape) in self._pending.items():
                self._env[name] = torch.arange(a, b, dtype=torch.int64).view(shape)
            self._pending.clear()
        return self._env

    @staticmethod
    def dims(names: list[str], block: list[tuple[int, int]], splits: dict[str, int]) -> list[int]:
        """The chunk's axis sizes for ``block`` (a split symbol gives two)."""
        out: list[int] = []
        for name, (a, b) in zip(names, block):
            k = splits.get(name, 1)
            out += [(b - a) // k, k] if is_split(k, a, b) else [b - a]
        return out

    def add(self, names: list[str], block: list[tuple[int, int]],
            splits: dict[str, int] | None = None) -> Space:
        splits = splits or {}
        for name, (a, b) in zip(names, block):
            axis = len(self.shape)
            k = splits.get(name, 1)
            if b - a == 1:
                self._env[name] = self.box[name] = a
                self._pending.pop(name, None)
                self.shape.append(1)
                continue
            shape = [1] * self.rank
            if is_split(k, a, b):
                shape[axis], shape[axis + 1] = (b - a) // k, k
                self.box[name] = (axis, a, b, k)
                self.shape += [(b - a) // k, k]
            else:
                shape[axis] = b - a
                self.box[name] = (axis, a, b)
                self.shape.append(b - a)
            self._env.pop(name, None)
            self._pending[name] = (a, b, shape)
        return self


def is_split(k: int, a: int, b: int) -> bool:
    return k > 1 and a % k == 0 and (b - a) % k == 0 and b - a > k

