"""The ``layout_choice`` section, checker's half: first-match ``take`` rules over one
remedy the backend found before tiling, ``remedy`` naming it (``"outer_reorder"``,
``"reordered_output"``, ``"own_buffer"``, ``"stick_aligned"``, ``"value_per_stick"``,
``"unit_stick_guard"``),
``op`` the op it serves, ``buffer`` the buffer it copies or lays out, and ``layout_bytes``
what the remedy's new layout asks to fit (unknown when the remedy measures nothing).

Its evaluation: ``spyre_rules/engine/layout_choice.py`` (docs/rules_language.md §6.9).
"""

from __future__ import annotations

from spyre_rules.lang import ast as A
from spyre_rules.lang.sections.spec import SectionSpec

SPEC = SectionSpec("layout_choice", (A.LetItem, A.Decision), ("take",),
                   {"op": "Op", "remedy": "str", "buffer": "str", "layout_bytes": "int?"},
                   first_match=True)
