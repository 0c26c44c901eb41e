"""Memoised pure measurements shared across ops (structurally identical accesses).

Many ops of a graph read and write buffers of one shape through one index (a
chain of pointwise ops, the layers of a model), and the measurements of such an
access depend only on values: the layout's sizes, strides, offset, dtype and
stick layout, the index expression, the loop ranges and the splits.  A function
decorated with :func:`structural` is memoised on its (hashable) arguments, so
the second op with the same access asks sympy and the enumerating verifier
nothing.  Every argument that can change the answer must be part of the key:
callers pass a layout's values (sizes, strides, offset, stick layout), never the
layout object (whose hash is constant and whose fields are mutable).

``clear()`` forgets every memo (``op_facts.clear_cache`` calls it: benchmarks
that measure cold caches, tests).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["clear", "structural"]

_MEMOS: list[Any] = []


def structural(maxsize: int = 8192) -> Callable[[Callable], Callable]:
    """``functools.lru_cache(maxsize)``, registered so :func:`clear` forgets it."""
    def decorate(fn: Callable) -> Callable:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        _MEMOS.append(cached)
        return cached
    return decorate


def clear() -> None:
    for cached in _MEMOS:
        cached.cache_clear()
