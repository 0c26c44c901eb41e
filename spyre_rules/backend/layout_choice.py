"""Ask the policy whether to take a layout remedy found before tiling (rules/layout_choice.rules).

The passes that lay buffers out find where a layout would leave automatic tiling no legal
split and what would remedy it; whether a remedy is taken is policy, the ``layout_choice``
section (docs/rules_language.md §6.9).  The remedies, each found where it is built:

* ``outer_reorder`` (outer_order.py ``outer_reorders``): a read through a copy with the
  dim a finely split variable drives just outside its stick;
* ``reordered_output`` (outer_order.py ``reordered_output``): an op's own write so laid
  out, no copy (``layout_bytes``: one step of the new layout's outermost dim);
* ``own_buffer`` (matmul.py ``_own_buffers``): one of two product operands viewing one
  buffer through a copy of its own;
* ``stick_aligned`` (matmul.py ``_stick_aligned``): a product operand whose heads start
  inside a stick through a copy of its own;
* ``value_per_stick`` (value_sticks.py): a read through a copy with one value a stick
  (``layout_bytes``: the copy whole);
* ``unit_stick_guard`` (restickify.py ``_off_a_cut_stick``): a read restickified onto its
  unit dim, one value a stick;
* ``row_major`` (row_major_layouts.py): a buffer some read walks from its stick into its
  outermost dim laid out rows outermost, no copy (``op`` is the buffer's own op).

Each question is asked once per graph (op, remedy, buffer, bytes); the trace of the rule
that decided is kept per buffer (``RulesGraphState.layout_choices``; empty: asked, not
taken), as ``restickify_stages`` keeps the restickify section's.
"""

from __future__ import annotations

from typing import Any

from torch._inductor.virtualized import V

from spyre_rules.ir.graph_state import graph_state

__all__ = ["take"]


def take(op: Any, remedy: str, buffer: str, layout_bytes: int | None = None) -> bool:
    """Whether the policy takes ``remedy`` for ``buffer``, serving ``op`` (its decision is
    recorded in the current graph's state)."""
    from spyre_rules.engine.api import layout_choice_taken

    state = graph_state(V.graph)
    name = getattr(op, "get_name", lambda: None)()
    key = (name, remedy, buffer, layout_bytes)
    decided = state.layout_choice_answers.get(key)
    if decided is None:
        decided, steps = layout_choice_taken(op, remedy, buffer, layout_bytes)
        state.layout_choice_answers[key] = decided
        state.layout_choices.setdefault(buffer, []).extend(steps)
    return decided
