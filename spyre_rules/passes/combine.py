"""How the partial results of a tiled reduction combine (the accumulator's operation).

``COMBINE``: reduction type -> the pointwise op (``executor/pointwise.py`` name) that
merges two partial results held in one accumulator field.

``FIELDS``: reductions whose partial result is a tuple, one accumulator field per
element, merged by a fixed formula (``codegen/accumulate_fields.py``), exactly as
Inductor's own split reductions merge them:

* argmax / argmin: ``value`` and ``index`` (the extreme and its first index;
  NaN is the extreme, ties keep the lower index: Inductor's
  ``maximum_with_index`` / ``minimum_with_index``) and ``count``, the reduction
  points combined so far, which turns a tile's local index into the index over
  the whole reduction range;
* welford_reduce: ``mean``, ``m2`` and ``weight`` (Chan's parallel combination:
  Inductor's ``welford_combine``);
* softmax_values (``backend/softmax_values.py``): ``acc`` (the unnormalised value
  sum ``sum exp(s - max) v``), ``max`` (the running max of the scores) and ``sum``
  (``sum exp(s - max)``), merged by flash-decoding's online-softmax combine:
  ``max' = max(max, max_t)``, both sides rescaled by ``exp(max - max')`` and
  ``exp(max_t - max')`` and added; the output is ``acc / sum`` after the loop.

A type in neither table cannot be tiled along its reduction dim.  Whether a
reduction *should* be split automatically (exactness in the executed dtype) is
policy (``rules/planner.rules``), not these tables.
"""

from __future__ import annotations

__all__ = ["COMBINE", "FIELDS", "FIELD_COMBINE", "combines", "combining_kinds"]

COMBINE = {
    "sum": "add",
    "batchmatmul": "add",
    "prod": "mul",
    "max": "maximum",
    "min": "minimum",
    "any": "logical_or",
}

#: field roles of a tuple-valued partial result; the first is the primary field
FIELDS = {
    "argmax": ("value", "index", "count"),
    "argmin": ("value", "index", "count"),
    "welford_reduce": ("mean", "m2", "weight"),
    "softmax_values": ("acc", "max", "sum"),
}

#: the name of the merge a multi-field accumulator records (plan.json, op_info)
FIELD_COMBINE = {
    "argmax": "maximum_with_index",
    "argmin": "minimum_with_index",
    "welford_reduce": "welford_combine",
    "softmax_values": "online_softmax_combine",
}


def combines(kind: str) -> bool:
    """Whether partial results of reduction ``kind`` can be merged across tiles."""
    return kind in COMBINE or kind in FIELDS


def combining_kinds() -> list[str]:
    """Every reduction type whose partials combine, sorted (for messages)."""
    return sorted({*COMBINE, *FIELDS})
