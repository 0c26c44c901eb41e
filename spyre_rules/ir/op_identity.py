"""How every layer names an op and says what kind of op it is (one function each).

* :func:`op_name`  -- the buffer name (``buf3``); an unnamed IR node by its type.
* :func:`op_kind`  -- the plan record's ``kind``: the kind stamped by the pass that
  inserted the op (``restickify``, ``copy``), else ``reduction:<type>``, else
  ``pointwise``.
* :func:`ir_class` -- the IR class computing the op (``Pointwise``, ``Reduction``;
  the op's own type when it has no ``data``): the engine's ``OpDecision.kind``.

``op_description`` (``ir_edit.py``) adds the aten origins for messages.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KIND_ATTR", "ir_class", "op_kind", "op_name", "set_op_kind", "stamped_kind"]

#: Attribute holding the kind of an op a pass inserted (restickify, copy).
KIND_ATTR = "spyre_rules_kind"


def op_name(op: Any) -> str:
    try:
        return str(op.get_name())
    except Exception:  # noqa: BLE001 - some IR nodes have no name; describe by type
        return type(op).__name__


def set_op_kind(op: Any, kind: str) -> None:
    """Stamp the kind of an op a pass inserted (codegen names its OpSpec after it)."""
    setattr(op, KIND_ATTR, kind)


def stamped_kind(op: Any) -> str | None:
    return getattr(op, KIND_ATTR, None)


def op_kind(op: Any) -> str:
    from torch._inductor import ir  # here: the rules-language tools import this module, not torch

    kind = stamped_kind(op)
    if kind is not None:
        return kind
    data = getattr(op, "data", None)
    if isinstance(data, ir.Reduction):
        return f"reduction:{data.reduction_type}"
    return "pointwise"


def ir_class(op: Any) -> str:
    data = getattr(op, "data", None)
    return type(data).__name__ if data is not None else type(op).__name__
