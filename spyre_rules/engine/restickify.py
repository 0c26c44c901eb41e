"""The ``restickify`` section: does a restickify copy go through an intermediate
(docs/rules_language.md §6.8).

The section kind's check is its record ``SPEC`` (``lang/sections/restickify.py``: first-match
``stage`` rules over ``op``); this module compiles it and runs it.  ``op`` is a copy the
backend inserted to move a buffer's stick to the host dim its reader needs
(``backend/restickify.py``), measured before anything is tiled; the section is asked once
per side, ``side`` bound to ``"source"`` and to ``"output"``.  A ``stage`` rule that fires
for the source side sends the copy's read through an intermediate stuck on the source's
stick dim with the new stick dim just outside it; for the output side, its write through
one stuck on the new stick dim with the old one just outside it (docs/layout_model.md §1.6).
Each stage is a copy planned and span-checked like any op.  No rule fires: one copy.
"""

from __future__ import annotations

from typing import Any

from spyre_rules.engine.program import ItemCompiler, Rule
from spyre_rules.engine.records import TraceStep
from spyre_rules.lang import ast as A
from spyre_rules.lang.sections.restickify import SPEC

__all__ = ["SPEC", "RestickifyEvaluation", "compile_restickify"]


def compile_restickify(ic: ItemCompiler, sec: A.Section) -> list[Rule]:
    return ic.first_match(sec)


class RestickifyEvaluation:
    """The restickify section (mixed into ``planner.Evaluator``)."""

    def staged(self, op: Any, side: str) -> tuple[bool, list[TraceStep]]:
        """Whether the copy ``op`` goes through an intermediate on its ``side``
        (``"source"`` or ``"output"``), and the steps recorded."""
        start = len(self.trace)
        fired = self.first_match(self.program.restickify, self.env(op=op, side=side), op)
        return fired is not None, self.trace[start:]
