"""Python's cycle collector while the engine plans: the objects that exist are frozen.

Planning (``plan_graph``, ``decide_groups``) allocates many short-lived objects,
so the collector runs often, and every full collection traverses the whole heap
-- the Inductor graph included (hundreds of objects per op), which planning only
reads.  Its share grew with the graph: about 4 s of 23 s planning CPU at 5,000
ops (bench/bench_planner.py, measured with ``gc.callbacks``).

``gc.freeze()`` moves every object tracked now into the permanent generation (a
list splice, O(1)), so collections during planning traverse only what planning
made; ``gc.unfreeze()`` at the end puts them back into the oldest generation,
where the next full collection sees them as before.  Nothing is freed that would
not have been: cyclic garbage made before the scope is collected after it.
Results cannot depend on it: the identity memo holds every object it keys by ``id`` (facts/memo.py).

Only the outermost scope freezes, only when the collector is enabled and nobody
else froze objects (``gc.get_freeze_count()``: a server that freezes before it
forks keeps its frozen objects frozen).
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
    """Freeze every tracked object for the collector until the outermost scope ends."""
    global _depth, _froze
    with _lock:
        _depth += 1
        if _depth == 1:
            _froze = gc.isenabled() and gc.get_freeze_count() == 0
            if _froze:
                gc.freeze()
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _froze:
                _froze = False
                gc.unfreeze()
