"""Python's cycle collector while the engine plans: existing objects frozen, no collection until the end.

Planning (``plan_graph``, ``decide_groups``) allocates many objects and keeps
most of what survives an op (per-op fact snapshots, decisions, traces, the
engine's caches), while the Inductor graph it only reads is hundreds of objects
per op.  Every collection in that scope was overhead that grew with the graph:

* full collections traversed the whole heap, the graph included: about 4 s of
  23 s planning CPU at 5,000 ops, and re-traversed a heap that only grows (5-9
  of them at 5,000 ops, 1 at 1,000; measured with ``gc.callbacks``);
* young collections freed nothing (planning makes no cyclic garbage since a
  recorded Unsupported keeps no traceback: ``planner._without_tracebacks``;
  about 1.8 objects per op before) but cost 4-7% of planning and grouping CPU
  (about 160 collections per 1,000 ops), each 20% dearer at 5,000 ops than at
  1,000: a collection reads the collector header of every object a young
  object refers to, scattered over a larger heap.  A higher young threshold made
  it worse (10,000: twice the collection time; the young objects left the cache).

So for the outermost scope only:

* ``gc.freeze()`` moves every object tracked now into the permanent generation
  (a list splice, O(1)), and automatic collection is off (``gc.disable()``;
  explicit ``gc.collect()`` still works);
* at the end, ``gc.freeze()`` then ``gc.unfreeze()`` put everything -- the objects
  that existed and those made in the scope -- into the oldest generation, both
  splices, and collection is on again.  Nothing made in the scope is traversed
  on its way there; the next full collection sees it (and would free any cycle
  the scope left behind).

Nothing is freed that would not have been, only later.  Results cannot depend
on it: the identity memo holds every object it keys by ``id`` (facts/memo.py).

Only when the collector is enabled and nobody else froze objects
(``gc.get_freeze_count()``: a server that freezes before it forks keeps its
frozen objects frozen).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["existing_objects_frozen"]

_lock = threading.Lock()
_depth = 0
_froze = False


@contextlib.contextmanager
def existing_objects_frozen() -> Iterator[None]:
    """Freeze every tracked object and collect nothing until the outermost scope ends."""
    global _depth, _froze
    with _lock:
        _depth += 1
        if _depth == 1:
            _froze = gc.isenabled() and gc.get_freeze_count() == 0
            if _froze:
                gc.freeze()
                gc.disable()
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _froze:
                _froze = False
                gc.freeze()    # the scope's survivors join the existing objects, untraversed,
                gc.unfreeze()  # and all of them the oldest generation
                gc.enable()
