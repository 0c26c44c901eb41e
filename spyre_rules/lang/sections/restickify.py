"""The ``restickify`` section, checker's half: first-match ``stage`` rules over ``op``, a copy
the backend inserted to move a buffer's stick to the host dim its reader needs, and
``side``, the side of it asked about (``"source"`` or ``"output"``).

Its evaluation: ``spyre_rules/engine/restickify.py`` (docs/rules_language.md §6.8).
"""

from __future__ import annotations

from spyre_rules.lang import ast as A
from spyre_rules.lang.sections.spec import SectionSpec

SPEC = SectionSpec("restickify", (A.LetItem, A.Decision), ("stage",), {"op": "Op", "side": "str"},
                   first_match=True)
