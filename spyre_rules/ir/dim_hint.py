"""``DimHint``: one loop level of one op, stamped on the op as ``op.dim_hints``.

Written by the hint pass (``hints/assign.py``) for user hints and, for the
automatic levels the rule engine decided, by ``hints/automatic.py``; read by
coarse tiling and the plan records.  It sits in the IR floor because every one of those layers names it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import sympy

__all__ = ["AutomaticDimHint", "DimHint"]


@dataclasses.dataclass(frozen=True)
class DimHint:
    """One loop level of one op.

    ``dim_names``: the named dim(s) the level splits (``["A"]``; an
    :class:`AutomaticDimHint` is labelled ``["_span_overflow"]``).  ``split_count``: the loop trip count
    (sympy Integer).  ``loop_var``: the op's loop symbol of that dim (None: the
    level does not tile this op).  ``is_reduction``: the dim is a reduction dim.
    ``hint_id``: the level's id, shared by all ops of the level.  ``host_dim``:
    index into ``op.data.ranges`` (= output host dim), or into
    ``op.data.reduction_ranges`` when ``is_reduction``; None with ``loop_var``.
    """

    dim_names: Sequence[str]
    split_count: Any
    loop_var: sympy.Symbol | None
    is_reduction: bool
    hint_id: int
    host_dim: int | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "split_count", sympy.Integer(self.split_count))


@dataclasses.dataclass(frozen=True)
class AutomaticDimHint(DimHint):
    """A level the rule engine's grouping decided (stamped by ``hints/automatic.py``),
    not a user's ``spyre_hint``.  The type is what tells the two apart
    (``facts.hint_kinds.has_user_hints``); ``dim_names`` is only a label here."""
