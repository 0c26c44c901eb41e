"""The ``layout_choice`` section: does the backend take a layout remedy it found before
tiling (docs/rules_language.md §6.9).

The section kind's check is its record ``SPEC`` (``lang/sections/layout_choice.py``:
first-match ``take`` rules over ``op``, ``remedy``, ``buffer`` and ``layout_bytes``); this
module compiles it and runs it.  The backend finds each remedy's candidate (a read whose
outer order makes the op split a variable finer than another read's sticks, two matmul
operands viewing one buffer...: ``backend/layout_choice.py`` lists them) and asks this
section once per candidate; a ``take`` rule that fires applies it (a copy, or the op's own
layout changed), no rule fires: the layout stays (docs/layout_model.md §1.8).
"""

from __future__ import annotations

from typing import Any

from spyre_rules.engine.program import ItemCompiler, Rule
from spyre_rules.engine.records import TraceStep
from spyre_rules.lang import ast as A
from spyre_rules.lang.sections.layout_choice import SPEC

__all__ = ["SPEC", "LayoutChoiceEvaluation", "compile_layout_choice"]


def compile_layout_choice(ic: ItemCompiler, sec: A.Section) -> list[Rule]:
    return ic.first_match(sec)


class LayoutChoiceEvaluation:
    """The layout_choice section (mixed into ``planner.Evaluator``)."""

    def taken(self, op: Any, remedy: str, buffer: str,
              layout_bytes: int | None) -> tuple[bool, list[TraceStep]]:
        """Whether the backend takes ``remedy`` for ``buffer`` (serving ``op``), and the
        steps recorded."""
        start = len(self.trace)
        env = self.env(op=op, remedy=remedy, buffer=buffer, layout_bytes=layout_bytes)
        fired = self.first_match(self.program.layout_choice, env, op)
        return fired is not None, self.trace[start:]
