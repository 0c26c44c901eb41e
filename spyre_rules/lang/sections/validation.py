"""The ``validation`` section, checker's half: ``require`` conditions over ``op`` and ``tile``.

A generator's name stands for its candidates here only (``expressions.py``).
Its evaluation: ``spyre_rules/engine/validation.py`` (docs/rules_language.md §6.5).
"""

from __future__ import annotations

from spyre_rules.lang import ast as A
from spyre_rules.lang.sections.spec import SectionSpec

SPEC = SectionSpec("validation", (A.LetItem, A.Require), (), {"op": "Op", "tile": "Tiling"})
