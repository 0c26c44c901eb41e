"""Swapping our lowerings into Inductor's table for one compilation."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from torch._inductor import lowering as L

__all__ = ["lowerings_swapped", "register_on_every_overload"]


def register_on_every_overload(packet: Any, fn: Any, table: dict[Any, Any]) -> None:
    """Register ``fn`` for ``packet`` and each of its overloads in ``table``: Inductor's
    get_overloads skips overloads that already have a lowering, so list them all."""
    targets = [packet, *(getattr(packet, name) for name in packet.overloads())]
    L.register_lowering(targets, type_promotion_kind=None, lowering_dict=table)(fn)


@contextlib.contextmanager
def lowerings_swapped(ours: dict[Any, Any]) -> Iterator[None]:
    """Put ``ours`` into Inductor's lowering table; restore the originals after."""
    saved = {key: L.lowerings.get(key) for key in ours}
    L.lowerings.update(ours)
    try:
        yield
    finally:
        for key, fn in saved.items():
            if fn is None:
                L.lowerings.pop(key, None)
            else:
                L.lowerings[key] = fn
