"""Memoised pure measurements shared across ops, and the stable-graph scope.

Many ops of a graph read and write buffers of one shape through one index (a
chain of pointwise ops, the layers of a model), and the measurements of such an
access depend only on values: the layout's sizes, strides, offset, dtype and
stick layout, the index expression, the loop ranges and the splits.  A function
decorated with :func:`structural` is memoised on its (hashable) arguments, so
the second op with the same access asks sympy and the enumerating verifier
nothing.  Every argument that can change the answer must be part of the key:
callers pass a layout's values (sizes, strides, offset, stick layout), never the
layout object (whose hash is constant and whose fields are mutable).

:func:`stable` opens a scope in which the caller promises that no op, layout or
buffer of the graph is edited (the planner and the grouping section only read
the IR).  Inside it, measurements that depend on *another* object than the op
(an input buffer's layout) or that must otherwise be re-validated per call (the
op's snapshot) may be kept by identity (:func:`by_identity`) until the
outermost scope closes; outside any scope nothing is kept that way, so an edit
between two scopes is always seen.

``clear()`` forgets every memo (``op_facts.clear_cache`` calls it: benchmarks
that measure cold caches, tests).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["by_identity", "clear", "stable", "stable_scope", "structural"]

_MEMOS: list[Any] = []


def structural(maxsize: int = 8192) -> Callable[[Callable], Callable]:
    """``functools.lru_cache(maxsize)``, registered so :func:`clear` forgets it."""
    def decorate(fn: Callable) -> Callable:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        _MEMOS.append(cached)
        return cached
    return decorate


# ---------------------------------------------------------------- the stable scope

_depth = 0
_scope = 0  # the id of the open outermost scope (0: none open)
_scope_counter = 0
#: kind -> {id(obj): (obj, value)}: kept only while a scope is open; ``obj`` is held so
#: its id cannot be recycled for another object while the entry lives.  (One table per
#: kind: no key tuple to build and hash per lookup.)
_BY_IDENTITY: dict[str, dict[int, tuple[Any, Any]]] = {}


@contextlib.contextmanager
def stable() -> Iterator[None]:
    """A scope in which the graph is not edited (nestable; see the module doc)."""
    global _depth, _scope, _scope_counter
    if _depth == 0:
        _scope_counter += 1
        _scope = _scope_counter
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            _scope = 0
            _BY_IDENTITY.clear()


def stable_scope() -> int:
    """The id of the open stable scope (distinct per outermost scope), 0 when none is open."""
    return _scope


def by_identity(kind: str, obj: Any, compute: Callable[[Any], Any]) -> Any:
    """``compute(obj)``, kept per ``obj`` (by identity) while a stable scope is open."""
    if not _scope:
        return compute(obj)
    table = _BY_IDENTITY.get(kind)
    if table is None:
        table = _BY_IDENTITY[kind] = {}
    entry = table.get(id(obj))
    if entry is not None and entry[0] is obj:
        return entry[1]
    value = compute(obj)
    table[id(obj)] = (obj, value)
    return value


def clear() -> None:
    for cached in _MEMOS:
        cached.cache_clear()
    _BY_IDENTITY.clear()
