"""The ``validation`` section: does one whole tiling work for an op (docs/rules_language.md §6.5).

The section kind's check is its record ``SPEC`` (``lang/sections/validation.py``;
a generator's name stands for its candidates here only); this module compiles it
and runs it.

A tiling is accepted when every ``require`` holds, in order; the first that
fails is recorded with its message.  ``conforms(op, tiling)`` (a builtin of
grouping) is legality of every split plus validation.  A generator's name
evaluates to the candidates it emits on the per-tile view of the current
(op, tile).
"""

from __future__ import annotations

from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang.sections.validation import SPEC
from spyre_rules.engine.program import ItemCompiler, Requirement
from spyre_rules.engine.values import Tiling

__all__ = ["SPEC", "ValidationEvaluation", "compile_validation"]


def compile_validation(ic: ItemCompiler, sec: A.Section) -> list[Requirement]:
    return ic.requirements(sec)


class ValidationEvaluation:
    """The planner's validation (mixed into ``planner.Evaluator``; cached per (op, tiling))."""

    _validation: dict[tuple[int, Tiling, frozenset], tuple[bool, Requirement | None]]
    loop_local: frozenset

    def validate(self, op: Any, tile: Tiling) -> tuple[bool, Requirement | None]:
        key = (id(op), tile, self.loop_local)
        if key not in self._validation:
            self._keep_alive(op)
            env = self.env(op=op, tile=tile)
            req = self.failing(self.program.validation, env, op)
            if req is None:
                self.record("validation", "accepted", "accept", None, op=op, tile=tile)
            else:
                self.record("validation", req.name, "fail", self._message(req, env), op=op, tile=tile)
            self._validation[key] = (req is None, req)
        return self._validation[key]

    def conforms(self, op: Any, tiling: Tiling) -> bool:
        """The ``conforms`` builtin: every split legal and the tiling validates."""
        for dim, k in tiling:
            result = self.legality(op, dim)
            if result.guard is not None or k not in result.legal:
                self.record("grouping", "conforms", "false", None, op=op, tiling=tiling,
                            dim=dim, split=k)
                return False
        accepted, _ = self.validate(op, tiling)
        return accepted

    def accepted_by(self) -> str:
        names = ", ".join(f"`{r.name}`" for r in self.program.validation)
        return f"the `validation` section (requirements {names or 'none'} held)"

    def _message(self, req: Requirement, env: dict) -> str:
        return req.message(env) if req.message is not None else req.name
