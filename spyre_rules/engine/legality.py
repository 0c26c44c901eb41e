"""The ``legality`` section: which split counts of one host dim are legal (docs/rules_language.md §6.3).

The section kind's check is its record ``SPEC`` (``lang/sections/legality.py``;
guards before ``splits``, requirements after it: E038); this module compiles it
and runs it.

Per (op, dim): the first ``reject`` guard that fires makes the dim untileable
(``legal_splits`` is ``[]``); otherwise every split count ``k > 1`` of
``splits`` is legal unless a ``require`` fails for it.  ``1`` is always legal.
When none above 1 is, the counts of ``otherwise splits`` (if the section has
one) not tried yet are tested by the same requirements: exact splits are
preferred, a fallback (remainder tiles) is tried only where none is legal.
A ``let`` after ``splits`` may read the split variable, so its value is never
shared between split counts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.engine.compile import BASE, EvalError, Fn
from spyre_rules.lang.sections.legality import SPEC
from spyre_rules.engine.program import ItemCompiler, Requirement, Rule

__all__ = ["SPEC", "Legality", "LegalityEvaluation", "compile_legality"]


@dataclasses.dataclass
class Legality:
    guards: list[Rule]
    splits_key: int
    splits: Fn
    requires: list[Requirement]
    fallback: Fn | None = None  # `otherwise splits`: tried when no count of `splits` above 1 is legal


def compile_legality(ic: ItemCompiler, sec: A.Section) -> Legality:
    guards: list[Rule] = []
    requires: list[Requirement] = []
    splits_key, splits, fallback = -1, None, None
    after_splits = False
    for item in sec.items:
        if isinstance(item, A.LetItem):
            # a let after `splits` may read the split variable: never share it
            ic.let(item, shared=not after_splits)
        elif isinstance(item, A.Decision):
            guards.append(ic.rule("legality", item))
        elif isinstance(item, A.SplitsItem) and item.fallback:
            fallback = ic.c.expr(item.source)  # binds the plain `splits` variable (E044)
        elif isinstance(item, A.SplitsItem):
            splits = ic.c.expr(item.source)
            splits_key = ic.c.slot(item.var)
            after_splits = True
        elif isinstance(item, A.Require):
            requires.append(ic.require("legality", item))
    assert splits is not None  # the checker requires one `splits` item
    return Legality(guards, splits_key, splits, requires, fallback)


class _Legality:
    __slots__ = ("legal", "rejected", "guard", "fallback")

    def __init__(self, legal: list[int], rejected: dict[int, tuple[str, str]],
                 guard: tuple[str, str] | None, fallback: bool = False):
        self.legal = legal
        self.rejected = rejected  # split count -> (requirement, its message) that refused it
        self.guard = guard  # (rule, message) of a reject guard that fired
        self.fallback = fallback  # the `otherwise splits` counts were tried

    def refusals(self, dim: int) -> str:
        """Why no split count above 1 is legal: the guard's message, or each failing
        requirement with the split counts it refused (its message for the first)."""
        if self.guard is not None:
            return f"host dim {dim}: {self.guard[1]}"
        if not self.rejected:
            return f"host dim {dim}: no split count above 1 divides its range" + (
                " or tiles it" if self.fallback else "")
        by_req: dict[str, list[int]] = {}
        for k, (name, _) in sorted(self.rejected.items()):
            by_req.setdefault(name, []).append(k)
        parts = []
        for name, ks in by_req.items():
            message = self.rejected[ks[0]][1]
            counts = _count_list(ks)
            parts.append(f"split{'s' if len(ks) > 1 else ''} {counts} fail{'' if len(ks) > 1 else 's'} "
                         f"{name} ({message})")
        return f"host dim {dim}: " + "; ".join(parts)


#: A refusal lists at most this many split counts per requirement: the first ones,
#: then the largest, and how many were refused in all (a remainder fallback tries
#: about 2 * sqrt(n) counts).
LISTED_COUNTS = 24


def _count_list(ks: list[int]) -> str:
    if len(ks) <= LISTED_COUNTS:
        return ", ".join(str(k) for k in ks)
    head = ", ".join(str(k) for k in ks[:LISTED_COUNTS - 2])
    return f"{head}, ..., {ks[-1]} ({len(ks)} counts)"


def _rejected_trace(rejected: dict[int, tuple[str, str]]) -> list[str]:
    """``"k: requirement"`` per refused count, at most ``LISTED_COUNTS`` of them and a
    last entry counting the rest (a remainder fallback refuses hundreds)."""
    entries = [f"{k}: {r}" for k, (r, _) in sorted(rejected.items())]
    if len(entries) <= LISTED_COUNTS:
        return entries
    return entries[:LISTED_COUNTS - 1] + [f"... {len(entries) - LISTED_COUNTS + 1} more"]


class LegalityEvaluation:
    """The planner's legality (mixed into ``planner.Evaluator``; cached per (op, dim))."""

    _legality: dict[tuple[int, int], _Legality]

    def legality(self, op: Any, dim: int) -> _Legality:
        key = (id(op), dim)
        found = self._legality.get(key)
        if found is not None:
            return found
        self._keep_alive(op)
        leg = self.program.legality
        env = self.env(op=op, dim=dim)
        fired = self.first_match(leg.guards, env, op)
        if fired is not None:
            result = _Legality([], {}, (fired[0].name, fired[1] or fired[0].name))
        else:
            legal, rejected = [1], {}
            self._try_counts(op, env, leg.splits, "legality.splits", legal, rejected)
            fallback = leg.fallback is not None and legal == [1]
            if fallback:
                self._try_counts(op, env, leg.fallback, "legality.otherwise_splits", legal, rejected)
            result = _Legality(legal, rejected, None, fallback)
            extra = {"fallback": True} if fallback else {}
            self.record("legality", "splits", "legal", None, op=op, dim=dim, legal=legal,
                        rejected=_rejected_trace(rejected), **extra)
        self._legality[key] = result
        return result

    def _try_counts(self, op: Any, env: dict, counts: Fn, where: str, legal: list[int],
                    rejected: dict[int, tuple[str, str]]) -> None:
        """Test each count above 1 of ``counts`` not tried yet, ascending: legal iff every
        requirement holds (appended to ``legal``), else recorded in ``rejected``."""
        leg = self.program.legality
        try:
            values = counts(env)
        except EvalError as err:
            raise self._fail(op, where, err) from None
        for k in sorted({v for v in values if v > 1} - set(legal) - set(rejected)):
            kenv = dict(env)
            kenv[BASE] = env
            kenv[leg.splits_key] = k
            req = self.failing(leg.requires, kenv, op)
            if req is None:
                legal.append(k)
            else:
                rejected[k] = (req.name, self._message(req, kenv))

    def legal_splits(self, op: Any, dim: int) -> list[int]:
        """The ``legal_splits`` builtin: ``[]`` when a legality guard fires."""
        result = self.legality(op, dim)
        return [] if result.guard is not None else list(result.legal)
