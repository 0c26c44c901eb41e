"""The ``eligibility`` section, checker's half: first-match ``skip`` / ``reject`` rules over ``op``.

Its evaluation: ``spyre_rules/engine/eligibility.py`` (docs/rules_language.md §6.1).
"""

from __future__ import annotations

from spyre_rules.lang import ast as A
from spyre_rules.lang.sections.spec import SectionSpec

SPEC = SectionSpec("eligibility", (A.LetItem, A.Decision), ("skip", "reject"), {"op": "Op"},
                   first_match=True)
