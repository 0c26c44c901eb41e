"""The ``eligibility`` section: is the op planned at all (docs/rules_language.md §6.1).

The section kind's check is its record ``SPEC`` (``lang/sections/eligibility.py``:
``skip`` / ``reject`` rules over ``op``); this module compiles it and runs it.  First match: ``skip`` -> no plan, with
the rule's message as the reason; ``reject`` -> Unsupported with its message;
no rule fires -> the op is planned.
"""

from __future__ import annotations

from typing import Any

from spyre_rules.errors import Unsupported
from spyre_rules.lang import ast as A
from spyre_rules.lang.sections.eligibility import SPEC
from spyre_rules.engine.program import ItemCompiler, Rule

__all__ = ["SPEC", "EligibilityEvaluation", "compile_eligibility"]


def compile_eligibility(ic: ItemCompiler, sec: A.Section) -> list[Rule]:
    return ic.first_match(sec)


class EligibilityEvaluation:
    """The planner's eligibility (mixed into ``planner.Evaluator``)."""

    def skipped(self, op: Any) -> str | None:
        """Why the op is not planned (a ``skip`` fired), or None; a ``reject`` raises."""
        fired = self.first_match(self.program.eligibility, self.env(op=op), op)
        if fired is None:
            return None
        rule, message = fired
        if rule.action == "reject":
            raise Unsupported(message or rule.name)
        return message or rule.name
