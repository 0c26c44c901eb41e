"""Combine programs of multi-field accumulators: argmax / argmin, welford, softmax_values.

An OpSpec stores one value, so a reduction whose partial result is a tuple
(``passes/combine.py`` ``FIELDS``) updates its accumulator in one combine step
per field.  Each step recomputes the tile's partial result (the reduction entry
marked ``"partial"``: argmax / argmin yield (value, local index), welford its
triple), loads the accumulator fields it needs and stores one field.  The steps
run in an order in which each reads only fields not yet updated in this
iteration:

* argmax / argmin: index, value, count.  The tile wins where its value is
  strictly better than the accumulator's, or is NaN where the accumulator's is
  not (Inductor's ``maximum_with_index``: NaN is the extreme), and, for the
  index, where the values are equal (NaN and NaN) and its index is lower: tiles
  of the outermost reduction dim run in index order (the accumulator's indices
  are all lower), those of an inner one do not.  Its
  local index becomes the index over the whole range through the points counted
  so far (``accumulators.IndexMap``).  The value starts at -inf / +inf (or the
  integer extreme) and the index at 0: a first tile that does not beat that
  start is all start values, whose first index is 0.
* welford: m2, mean, weight, by Inductor's ``welford_combine``::

      delta = where(mean_a == mean_b, 0, mean_b - mean_a)
      weight = weight_a + weight_b
      w2_over_w = where(weight == 0, 0, weight_b / weight)
      mean = mean_a + delta * w2_over_w
      m2 = m2_a + m2_b + delta * delta * weight_a * w2_over_w

* softmax_values (flash-decoding): acc, sum, max.  With ``m`` the running max,
  ``(acc_t, m_t, l_t)`` the tile's partial and ``g(x) = where(x == -inf, 0, x)``
  (a range whose keys are all masked subtracts 0: ``exp(-inf) = 0``, never NaN)::

      m' = maximum(m, m_t)
      acc = acc * exp(g(m) - g(m')) + acc_t * exp(g(m_t) - g(m'))
      sum = sum * exp(g(m) - g(m')) + l_t * exp(g(m_t) - g(m'))
      max = m'

  and the finalise step divides once: ``out = acc / sum`` (``finalize_step``).

``steps`` returns, per step, the field it stores and the entries appended to
the traced program (loads name accumulator fields by role: codegen binds them to
args).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Step", "steps", "count_step", "finalize_step"]


class Step:
    """One combine step: entries after the traced reduction, storing field ``role``."""

    def __init__(self, role: str, first: int) -> None:
        self.role = role
        self.entries: list[dict[str, Any]] = []
        self.loads: dict[int, str] = {}  # entry position -> accumulator field role
        self._first = first

    def add(self, entry: dict[str, Any]) -> int:
        self.entries.append(entry)
        return self._first + len(self.entries) - 1

    def op(self, name: str, *ins: int) -> int:
        return self.add({"op": name, "in": list(ins)})

    def const(self, value: Any, dtype: str) -> int:
        return self.add({"op": "constant", "value": value, "dtype": dtype})

    def load(self, role: str, dtype: str) -> int:
        at = self.add({"op": "load", "arg": None, "dtype": dtype})
        self.loads[at] = role
        return at

    @property
    def value(self) -> int:
        return self._first + len(self.entries) - 1


def _better(step: Step, kind: str, new: int, old: int, floating: bool) -> int:
    better = step.op("gt" if kind == "argmax" else "lt", new, old)
    if not floating:
        return better
    new_nan = step.op("isnan", new)
    old_ok = step.op("logical_not", step.op("isnan", old))
    return step.op("logical_or", better, step.op("logical_and", new_nan, old_ok))


def _global_index(step: Step, local: int, count: int, index_map: Any) -> int:
    if index_map.outer == 1:
        return step.op("add", local, count)
    block = step.const(index_map.block, "int64")
    head = step.op("mul", step.op("floordiv", local, block), step.const(index_map.whole, "int64"))
    offset = step.op("floordiv", count, step.const(index_map.outer, "int64"))
    return step.op("add", step.op("add", head, offset), step.op("remainder", local, block))


def _index_steps(kind: str, at: int, acc: Any, dtypes: dict[str, str]) -> list[Step]:
    vdt = dtypes["value"]
    floating = vdt.startswith(("float", "bfloat"))
    out = []
    for role in ("index", "value"):
        step = Step(role, at + 1)
        new = step.add({"op": "getitem", "in": [at], "index": 0})
        local = step.add({"op": "getitem", "in": [at], "index": 1})
        old = step.load("value", vdt)
        better = _better(step, kind, new, old, floating)
        if role == "index":
            old_index = step.load("index", "int64")
            index = _global_index(step, local, step.load("count", "int64"), acc.index_map)
            if acc.index_map.outer > 1:
                # tiles of an inner reduction dim do not visit indices in order: an
                # equal value (NaN and NaN) takes the lower index
                equal = step.op("eq", new, old)
                if floating:
                    equal = step.op("logical_or", equal, step.op(
                        "logical_and", step.op("isnan", new), step.op("isnan", old)))
                lower = step.op("logical_and", equal, step.op("lt", index, old_index))
                better = step.op("logical_or", better, lower)
            step.add({"op": "where", "in": [better, index, old_index]})
        else:
            step.add({"op": "where", "in": [better, new, old]})
        out.append(step)
    return out


def _welford_steps(at: int, dtypes: dict[str, str]) -> list[Step]:
    dt = dtypes["mean"]
    out = []
    for role in ("m2", "mean", "weight"):
        step = Step(role, at + 1)
        mean_b, m2_b, weight_b = (step.add({"op": "getitem", "in": [at], "index": i})
                                  for i in range(3))
        weight_a = step.load("weight", dtypes["weight"])
        weight = step.op("add", weight_a, weight_b)
        if role == "weight":
            out.append(step)
            continue
        mean_a = step.load("mean", dt)
        zero = step.const(0.0, dt)
        delta = step.op("where", step.op("eq", mean_a, mean_b), zero,
                        step.op("sub", mean_b, mean_a))
        w2_over_w = step.op("where", step.op("eq", weight, zero), zero,
                            step.op("truediv", weight_b, weight))
        if role == "mean":
            step.op("add", mean_a, step.op("mul", delta, w2_over_w))
        else:
            m2_a = step.load("m2", dtypes["m2"])
            spread = step.op("mul", step.op("mul", step.op("mul", delta, delta), weight_a),
                             w2_over_w)
            step.op("add", step.op("add", m2_a, m2_b), spread)
        out.append(step)
    return out


def _softmax_steps(at: int, dtypes: dict[str, str]) -> list[Step]:
    dt = dtypes["max"]
    out = []
    for role in ("acc", "sum", "max"):
        step = Step(role, at + 1)
        acc_t, max_t, sum_t = (step.add({"op": "getitem", "in": [at], "index": i})
                               for i in range(3))
        old_max = step.load("max", dt)
        top = step.op("maximum", old_max, max_t)
        if role == "max":
            out.append(step)
            continue
        masked, zero = step.const(float("-inf"), dt), step.const(0.0, dt)

        def safe(x: int, step: Step = step) -> int:
            return step.op("where", step.op("eq", x, masked), zero, x)

        safe_top = safe(top)
        scale_old = step.op("exp", step.op("sub", safe(old_max), safe_top))
        scale_new = step.op("exp", step.op("sub", safe(max_t), safe_top))
        old = step.load(role, dtypes[role])
        step.op("add", step.op("mul", old, scale_old),
                step.op("mul", acc_t if role == "acc" else sum_t, scale_new))
        out.append(step)
    return out


def finalize_step(kind: str, dtypes: dict[str, str]) -> Step | None:
    """The finalise program of an accumulator whose output is a formula of its fields
    (softmax_values: ``acc / sum``); None when the output is one field."""
    if kind != "softmax_values":
        return None
    step = Step("acc", 0)
    step.op("truediv", step.load("acc", dtypes["acc"]), step.load("sum", dtypes["sum"]))
    return step


def steps(kind: str, at: int, acc: Any, dtypes: dict[str, str]) -> list[Step]:
    """The combine steps of a multi-field accumulator, in run order (module doc).

    ``at``: the reduction entry of the traced program (the appended entries start
    at ``at + 1``); ``dtypes``: field role -> dtype name.
    """
    if kind in ("argmax", "argmin"):
        return _index_steps(kind, at, acc, dtypes)
    if kind == "welford_reduce":
        return _welford_steps(at, dtypes)
    if kind == "softmax_values":
        return _softmax_steps(at, dtypes)
    raise ValueError(f"no multi-field combine for reduction {kind!r}")


def count_step(tile_points: int) -> Step:
    """The last step of an index reduction: ``count += points of one tile`` (a
    pointwise program over the output points)."""
    step = Step("count", 0)
    count = step.load("count", "int64")
    step.op("add", count, step.const(tile_points, "int64"))
    return step
