"""The per-op cache of :class:`~spyre_rules.facts.snapshot.OpFacts` snapshots.

``op_facts(op)`` serves the same snapshot while the op's snapshot tuple is
unchanged, and a fresh one after any edit (inside a stable scope, where nothing
is edited, the tuple is compared once per op and scope).  The cache holds ops weakly (``id``
plus a weakref that must still point at the same object), so a recycled ``id``
can never serve another op's facts.  ``OpFacts(op)`` gives an explicit snapshot
for callers that prefer to own one.
"""

from __future__ import annotations

import weakref
from typing import Any

from spyre_rules.facts import coordinates, memo
from spyre_rules.facts.snapshot import OpFacts, snapshot

__all__ = ["clear_cache", "op_facts"]

_CACHE: dict[int, tuple[Any, tuple, OpFacts]] = {}


def _evict(key: int, ref: Any, cache: dict = _CACHE) -> None:
    # ``cache`` is bound at definition: weakref callbacks can fire during
    # interpreter shutdown, after module globals were cleared.
    entry = cache.get(key)
    if entry is not None and entry[0] is ref:
        del cache[key]


def op_facts(op: Any) -> OpFacts:
    """The cached :class:`OpFacts` of ``op`` as it is now (re-measured after any edit).

    Inside a stable scope (``memo.stable``: nothing is edited) the op's snapshot is
    compared once per scope, not once per fact call."""
    if memo.stable_scope():
        return memo.by_identity("op_facts", op, _current_facts)
    return _current_facts(op)


def _current_facts(op: Any) -> OpFacts:
    snap = snapshot(op)
    entry = _CACHE.get(id(op))
    if entry is not None and entry[0]() is op and entry[1] == snap:
        return entry[2]
    facts = OpFacts(op)
    try:
        ref = weakref.ref(op, lambda r, k=id(op), evict=_evict: evict(k, r))
    except TypeError:
        return facts
    _CACHE[id(op)] = (ref, snap, facts)
    return facts


def clear_cache() -> None:
    """Forget every cached measurement (tests; never needed for correctness)."""
    _CACHE.clear()
    coordinates.clear_caches()
    memo.clear()

