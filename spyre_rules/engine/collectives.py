"""The ``collectives`` section: which chunking of a collective step the policy takes
(docs/rules_language.md §6.7).

The section kind's check is its record ``SPEC`` (``lang/sections/collectives.py``: the
bound ``max_chunks`` and the ``cost`` binder); this module compiles it and applies it.

A collective step whose whole buffers span more than one core may address runs in
chunks along one host dim (``codegen/collective_spans.py`` finds, per dim the collective
can be cut along, the fewest chunks up to ``max_chunks`` whose every chunk fits); the
policy's ``cost`` orders those candidates, ascending and stable (ties keep dim order),
and the first is the chunking.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from spyre_rules.engine.compile import CTX, EvalError, Fn
from spyre_rules.engine.program import ItemCompiler
from spyre_rules.engine.records import TraceStep
from spyre_rules.engine.values import Chunking, sort_key
from spyre_rules.errors import Unsupported
from spyre_rules.lang import ast as A
from spyre_rules.lang.sections.collectives import BOUNDS, SPEC

__all__ = ["SPEC", "Collectives", "compile_collectives"]


@dataclasses.dataclass
class Collectives:
    """The compiled section: its bounds and its cost key."""

    bounds: dict[str, int]
    cost: tuple[Any, Fn]     # (binder slot, key)

    @property
    def max_chunks(self) -> int:
        return self.bounds["max_chunks"]

    def choose(self, collective: str, candidates: Sequence[Chunking], config: dict[str, Any],
               trace: list[TraceStep] | None = None) -> Chunking | None:
        """The cheapest of ``candidates`` by the policy's cost (None when there are none);
        the choice is appended to ``trace`` when one is given."""
        slot, key = self.cost
        context = _Context(config)
        try:
            chosen = min(candidates, default=None, key=lambda c: sort_key(
                key({CTX: context, "collective": collective, slot: c})))
        except EvalError as err:
            raise Unsupported(f"Cannot chunk the {collective} step: rule collectives.cost failed: "
                              f"{err}") from None
        if trace is not None:
            trace.append(TraceStep("collectives", "cost", "chose", None, {
                "collective": collective, "candidates": [c.as_dict() for c in candidates],
                "chosen": None if chosen is None else chosen.as_dict()}))
        return chosen


@dataclasses.dataclass
class _Context:
    """What a collectives expression reads besides its bindings: the configuration."""

    config: dict[str, Any]


def compile_collectives(ic: ItemCompiler, sec: A.Section) -> Collectives:
    cost: tuple[Any, Fn] | None = None
    for item in sec.items:
        if isinstance(item, A.LetItem):
            ic.let(item)
        elif isinstance(item, A.CostItem):
            cost = (ic.c.slot(item.var), ic.c.expr(item.key))
    assert cost is not None
    return Collectives({name: ic.resolution.bounds[name] for name in BOUNDS}, cost)
