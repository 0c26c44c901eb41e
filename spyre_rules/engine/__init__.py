"""The rule engine: runs the ``.rules`` policy over Inductor operations.

* ``policy``   -- load, check, bind (``binding``) and compile (``compile``,
  ``program``) the rules once per rules path;
* ``planner``  -- one op: eligibility -> candidates -> search (legality,
  validation) -> plan | None | Unsupported, with a trace of the rules that fired;
* ``grouping`` -- planned ops -> coarse-tile groups and the hints they need
  (``decide_groups``; it writes nothing into the IR: ``spyre_rules.hints.automatic``
  applies the decision, ``group_operations`` / ``span_overflow_groups``);
* ``api``      -- ``plan_span_overflow_tile``, ``explain_op``, ``plan_graph``;
* ``examples`` -- named example programs for ``spyre-rules explain``.

Names load lazily (the engine imports torch; the language tools must not).
"""

from __future__ import annotations

from spyre_rules._lazy import lazy_exports


_LAZY = {
    "plan_span_overflow_tile": "spyre_rules.engine.api",
    "explain_op": "spyre_rules.engine.api",
    "plan_graph": "spyre_rules.engine.api",
    "restickify_staged": "spyre_rules.engine.api",
    "layout_choice_taken": "spyre_rules.engine.api",
    "decide_groups": "spyre_rules.engine.grouping",
    "GroupingOutcome": "spyre_rules.engine.grouping",
    "HINT_ID_BASE": "spyre_rules.engine.grouping",
    "SpanOverflowTilePlan": "spyre_rules.engine.records",
    "SpanOverflowTileLevel": "spyre_rules.engine.records",
    "ChunkingInfo": "spyre_rules.engine.records",
    "OpDecision": "spyre_rules.engine.records",
    "TraceStep": "spyre_rules.engine.records",
    "TileGroup": "spyre_rules.engine.records",
    "GroupLevel": "spyre_rules.engine.records",
    "AutoHint": "spyre_rules.engine.records",
    "get_policy": "spyre_rules.engine.policy",
    "load_policy": "spyre_rules.engine.policy",
    "clear_policy_cache": "spyre_rules.engine.policy",
    "PolicyError": "spyre_rules.engine.policy",
    "BindingError": "spyre_rules.engine.binding",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


__all__ = list(_LAZY)
