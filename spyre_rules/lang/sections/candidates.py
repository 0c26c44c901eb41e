"""The ``candidates`` section, checker's half: generators, each a nest of ``for`` / ``if`` /
``let`` clauses ending in ``emit`` of a ``Candidate``.

Its evaluation: ``spyre_rules/engine/candidates.py`` (docs/rules_language.md §6.2).
"""

from __future__ import annotations

from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang import types as T
from spyre_rules.lang.sections.spec import EMIT_TYPE, SectionSpec, SectionState

def check_generator(checker: Any, gen: A.Generator, state: SectionState) -> None:
    gs = state.scope.child()
    made = []
    for clause in gen.clauses:
        if isinstance(clause, A.GenFor):
            t = checker.expr(clause.iter, gs)
            elem = checker.iter_elem(t, clause.iter, "a `for` clause")
            gs = gs.child()
            made.append(checker.bind(gs, clause.var, elem, "for"))
        elif isinstance(clause, A.GenIf):
            checker.cond(clause.cond, gs, "an `if` filter")
            gs = gs.child(checker.known_when(clause.cond, True, gs))
        else:
            t = checker.expr(clause.value, gs)
            gs = gs.child()
            made.append(checker.bind(gs, clause.name, t, "let"))
    t = checker.expr(gen.emit, gs)
    want = checker.vocab.parse_spelling(EMIT_TYPE)
    if not T.assignable(t, want):
        checker.error("E022", f"`emit` produces a `{want}`, found `{t}`", gen.emit.span)
    checker.unused(made)


SPEC = SectionSpec("candidates", (A.LetItem, A.Generator), (), {"op": "Op", "tile": "Tiling"},
                   item_checks={A.Generator: check_generator})
