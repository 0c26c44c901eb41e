"""Python's cycle collector while the engine plans: existing objects frozen, full collections postponed.

Planning (``plan_graph``, ``decide_groups``) allocates many short-lived objects,
so the collector runs often, and every full collection traverses the whole heap
-- the Inductor graph included (hundreds of objects per op), which planning only
reads.  Its share grew with the graph: about 4 s of 23 s planning CPU at 5,000
ops (bench/bench_planner.py, measured with ``gc.callbacks``).

Two measures, both only for the outermost scope:

* ``gc.freeze()`` moves every object tracked now into the permanent generation
  (a list splice, O(1)), so collections during planning do not traverse the
  graph; ``gc.unfreeze()`` at the end puts them back into the oldest generation,
  where the next full collection sees them as before.
* Full (generation 2) collections are postponed until the scope ends: the
  oldest generation's threshold is raised for the scope and restored after it.
  What survives two young collections during planning is nearly all kept for
  the rest of planning (per-op fact snapshots, decisions, traces, the engine's
  caches), so each full collection re-traversed a heap that only grows: 5-9
  of them cost 0.8-2 s of ~15 s at 5,000 ops, 1 at 1,000 ops (gc.callbacks).
  Young collections still run, so short-lived cycles are freed as before;
  cyclic garbage that reached the oldest generation is freed by the first
  full collection after the scope.

Nothing is freed that would not have been, only later.  Results cannot depend
on it: the identity memo holds every object it keys by ``id`` (facts/memo.py).

Only when the collector is enabled and nobody else froze objects
(``gc.get_freeze_count()``: a server that freezes before it forks keeps its
frozen objects frozen, and its thresholds).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import threading
from collections.abc import Iterator

__all__ = ["POSTPONED_THRESHOLD", "existing_objects_frozen"]

#: The oldest generation's threshold inside the scope: the largest the collector
#: accepts (a C ``int``); a full collection would need that many collections of
#: generation 1 (about 130 run while 5,000 ops plan).
POSTPONED_THRESHOLD = ctypes.c_uint(-1).value // 2

_lock = threading.Lock()
_depth = 0
_froze = False
_thresholds: tuple[int, int, int] | None = None


@contextlib.contextmanager
def existing_objects_frozen() -> Iterator[None]:
    """Freeze every tracked object and postpone full collections until the outermost scope ends."""
    global _depth, _froze, _thresholds
    with _lock:
        _depth += 1
        if _depth == 1:
            _froze = gc.isenabled() and gc.get_freeze_count() == 0
            if _froze:
                gc.freeze()
                _thresholds = gc.get_threshold()
                young, middle, _ = _thresholds
                gc.set_threshold(young, middle, POSTPONED_THRESHOLD)
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _froze:
                _froze = False
                gc.unfreeze()
                if _thresholds is not None:
                    gc.set_threshold(*_thresholds)
                    _thresholds = None
