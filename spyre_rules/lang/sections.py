"""What each section kind may contain and which names the engine binds in it.

This table is the checker's half of the evaluation semantics written down in
docs/rules_language.md ("Evaluation semantics"); the engine implements the
other half.  Binding types are names of prelude types (``Op``, ``Tiling``...);
``int`` etc. are primitives.  No torch, no lark.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spyre_rules.lang import ast as A

SECTION_KINDS = ("eligibility", "candidates", "legality", "search", "validation", "grouping")


@dataclass(frozen=True)
class SectionSpec:
    kind: str
    items: tuple            # allowed item classes
    actions: tuple = ()     # allowed decision actions
    bindings: dict = field(default_factory=dict)  # name -> type spelling, visible to every item
    first_match: bool = False


SPECS: dict[str, SectionSpec] = {
    "eligibility": SectionSpec(
        "eligibility", (A.LetItem, A.Decision), ("skip", "reject"), {"op": "Op"}, True),
    "candidates": SectionSpec(
        "candidates", (A.LetItem, A.Generator), (), {"op": "Op", "tile": "Tiling"}),
    "legality": SectionSpec(
        "legality", (A.LetItem, A.Decision, A.SplitsItem, A.Require), ("reject",),
        {"op": "Op", "dim": "int"}, True),
    "search": SectionSpec(
        "search", (A.LetItem, A.Decision, A.BoundItem, A.OrderItem, A.RequiredItem, A.CostItem,
                   A.ExhaustedItem), ("reject",), {"op": "Op"}, True),
    "validation": SectionSpec(
        "validation", (A.LetItem, A.Require), (), {"op": "Op", "tile": "Tiling"}),
    "grouping": SectionSpec(
        "grouping", (A.LetItem, A.Decision), ("pass", "join", "conform", "start", "single", "reject"),
        {"op": "Op", "plan": "Plan?", "run": "Run", "auto_tiled_producers": "set[str]",
         "hinted_producers": "set[str]", "carried": "Carry?"}, True),
}

# Extra names bound for particular search items.
SEARCH_DECISION_BINDINGS = {"dims": "list[int]"}
SEARCH_EXHAUSTED_BINDINGS = {"dims": "list[int]", "tried": "int"}
ORDER_BINDER = "DimGroup"
REQUIRED_BINDER = "DimGroup"
COST_BINDER = "Combo"
EMIT_TYPE = "Candidate"

# The knobs of the search algorithm (each must be a positive integer constant).
BOUNDS = ("max_splits_per_dim", "max_combos", "keep_smallest_splits", "split_window_radius")

# Items a section must contain exactly once.
REQUIRED_ITEMS = {
    "legality": ((A.SplitsItem, "splits"),),
    "search": ((A.OrderItem, "order"), (A.RequiredItem, "required"), (A.CostItem, "cost"),
               (A.ExhaustedItem, "exhausted")),
}

ITEM_WORD = {
    A.LetItem: "let", A.Decision: "decision", A.Require: "require", A.Generator: "generator",
    A.SplitsItem: "splits", A.BoundItem: "bound", A.OrderItem: "order", A.RequiredItem: "required",
    A.CostItem: "cost", A.ExhaustedItem: "exhausted",
}

# Types the language itself needs from the prelude: name -> "extern type" | "record" | "extern record".
REQUIRED_TYPES = {
    "Op": "extern type", "Sym": "extern type", "Tiling": "extern type",
    "Candidate": "record", "DimGroup": "extern record", "Combo": "extern record",
    "Plan": "extern record", "Run": "extern record", "Carry": "extern record",
}
# Fields the engine reads from records the rules build.
REQUIRED_FIELDS = {
    "Candidate": {"host_dim": "int", "span_bytes": "int", "reason": "str", "source": "str"},
}

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
