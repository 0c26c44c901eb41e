"""The ``grouping`` section, checker's half: first-match rules deciding each op's place in a run.

Its evaluation: ``spyre_rules/engine/grouping.py`` (docs/rules_language.md §6.6).
"""

from __future__ import annotations

from spyre_rules.lang import ast as A
from spyre_rules.lang.sections.spec import SectionSpec

SPEC = SectionSpec(
    "grouping", (A.LetItem, A.Decision), ("pass", "join", "conform", "refine", "hoist", "start", "single", "reject"),
    {"op": "Op", "plan": "Plan?", "run": "Run", "auto_tiled_producers": "set[str]",
     "hinted_producers": "set[str]", "carried": "Carry?", "refined": "Refine?",
     "aligned": "Carry?", "independent": "bool"},
    first_match=True)
