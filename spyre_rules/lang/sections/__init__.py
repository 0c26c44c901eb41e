"""The section kinds of a policy: one module per kind, each the checker's half of it.

``lang/sections/<kind>.py`` holds ``SPEC``, the kind's :class:`SectionSpec`: what
a section of that kind may contain, the names the engine binds in it, and the
checks of the items only that kind has.  The engine's half of the kind, its
compilation and evaluation, is ``spyre_rules/engine/<kind>.py``, which imports
that same ``SPEC`` (lang sits below the engine, so this side names it in its
docstring; ``tests/engine/test_resolved_program.py`` checks both links).  The
evaluation semantics are written down in docs/rules_language.md ("Evaluation
semantics").
"""

from __future__ import annotations

from spyre_rules.lang.sections import (candidates, collectives, eligibility, grouping, layout_choice,
                                      legality, restickify, search, validation)
from spyre_rules.lang.sections.spec import (
    EMIT_TYPE, ITEM_WORD, REQUIRED_FIELDS, REQUIRED_TYPES, SectionSpec, SectionState,
)

__all__ = ["EMIT_TYPE", "ITEM_WORD", "REQUIRED_FIELDS", "REQUIRED_TYPES", "SECTION_KINDS", "SPECS",
           "SectionSpec", "SectionState"]

#: section kind -> its record, in the order the checker checks and the engine compiles them
SPECS: dict[str, SectionSpec] = {m.SPEC.kind: m.SPEC for m in (
    eligibility, candidates, legality, search, validation, grouping, collectives, restickify,
    layout_choice)}
SECTION_KINDS = tuple(SPECS)
