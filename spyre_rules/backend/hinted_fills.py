"""A fill written inside a ``spyre_hint`` block stays its own op, so the hint's loop runs it.

Inductor inlines a ComputedBuffer that reads nothing (``torch.full``, ``full_like``,
``zeros``, an ``arange``) into every reader (``ComputedBuffer.make_loader``): the
reader recomputes the constant and the buffer itself is dead, dropped by the
Scheduler.  Under a hint that lost the user's loop: the hint pass planned a level
for the fill (``plan.json`` recorded it) while the program never ran the fill.
A buffer whose FX origin carries hint levels is therefore loaded like any other
buffer; fills outside hints are still inlined (nothing asked to tile them, and
the pre-scheduling seam drops them once dead, ``backend/dead_ops.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from torch._inductor import ir

from spyre_rules.hints.api import LEVELS_KEY

__all__ = ["hinted_fills_kept"]


def _in_hint_block(buffer: Any) -> bool:
    origins = getattr(buffer, "origins", None) or ()
    return any((getattr(node, "meta", {}).get("custom") or {}).get(LEVELS_KEY) for node in origins)


def _make_loader(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def make_loader(self: Any) -> Any:
        if _in_hint_block(self):
            return super(ir.ComputedBuffer, self).make_loader()
        return original(self)

    return make_loader


@contextlib.contextmanager
def hinted_fills_kept() -> Iterator[None]:
    """Patch ``ComputedBuffer.make_loader`` for one compilation; restore it after."""
    original = ir.ComputedBuffer.__dict__["make_loader"]
    ir.ComputedBuffer.make_loader = _make_loader(original)
    try:
        yield
    finally:
        ir.ComputedBuffer.make_loader = original
