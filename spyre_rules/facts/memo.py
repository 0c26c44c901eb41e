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

:func:`per_scope_call` memoises a fact on the *identity* of its arguments while
a stable scope is open: the engine binds the bundled facts through it
(``engine/policy.py``), so the rules asking ``output_symbols(op)`` or
``read_host_coords(op, r)`` a dozen times per op pay one dict lookup after the
first answer.  Exact because (1) a bundled fact is a function of its arguments
and of the IR, and the IR is not edited inside the scope; (2) the entry holds its
arguments, so an ``id`` in a live entry names that object and no other; (3) an
exception is never kept (the next call raises again); (4) a list answer is handed
out as a fresh copy, as ``per_snapshot`` does.  Arguments are compared by
identity, never by equality: two equal ``Read`` records of one buffer through two
indices are different questions.

``clear()`` forgets every memo (``op_facts.clear_cache`` calls it: benchmarks
that measure cold caches, tests).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["by_identity", "clear", "per_scope_call", "stable", "stable_scope", "structural"]

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
            _clear_calls()


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


# ------------------------------------------------- facts memoised per scope by argument identity

#: One table per wrapped function: key (``id`` of each argument) -> (arguments, answer).
#: Cleared in place (closures hold the tables) when the outermost scope closes.
_CALL_TABLES: list[dict] = []


def _clear_calls() -> None:
    for table in _CALL_TABLES:
        table.clear()


def per_scope_call(fn: Callable) -> Callable:
    """``fn`` memoised on the identity of its arguments while a stable scope is open
    (see the module doc for why that is exact); outside any scope it is called as is."""
    table: dict = {}
    _CALL_TABLES.append(table)

    def one(a: Any) -> Any:
        if not _scope:
            return fn(a)
        entry = table.get(id(a))
        if entry is None:
            entry = table[id(a)] = (a, fn(a))
        value = entry[1]
        return list(value) if type(value) is list else value

    def two(a: Any, b: Any) -> Any:
        if not _scope:
            return fn(a, b)
        key = (id(a), id(b))
        entry = table.get(key)
        if entry is None:
            entry = table[key] = (a, b, fn(a, b))
        value = entry[2]
        return list(value) if type(value) is list else value

    def many(*args: Any) -> Any:
        if not _scope:
            return fn(*args)
        key = tuple(map(id, args))
        entry = table.get(key)
        if entry is None:
            entry = table[key] = (args, fn(*args))
        value = entry[1]
        return list(value) if type(value) is list else value

    import inspect

    try:
        arity = len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        arity = -1
    wrapper = one if arity == 1 else two if arity == 2 else many
    functools.update_wrapper(wrapper, fn)
    wrapper.__wrapped__ = fn
    return wrapper


def clear() -> None:
    for cached in _MEMOS:
        cached.cache_clear()
    _BY_IDENTITY.clear()
    _clear_calls()
