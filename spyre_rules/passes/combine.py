"""How the partial results of a tiled reduction combine (the accumulator's one operation).

reduction type -> the pointwise op (``executor/pointwise.py`` name) that merges two
partial results.  A type not listed cannot be tiled along its reduction dim:
argmax / argmin carry an index with their value, welford a (mean, m2, weight)
triple.  Whether a combinable reduction *should* be split automatically (exactness
in the executed dtype) is policy (``rules/planner.rules``), not this table.
"""

from __future__ import annotations

__all__ = ["COMBINE"]

COMBINE = {
    "sum": "add",
    "batchmatmul": "add",
    "prod": "mul",
    "max": "maximum",
    "min": "minimum",
    "any": "logical_or",
}
