"""How every layer names an op and says what kind of op it is (one function each).

* :func:`op_name`  -- the buffer name (``buf3``); an unnamed IR node by its type.
* :func:`op_kind`  -- the plan record's ``kind``: the kind stamped by the pass that
  inserted the op (``restickify``, ``copy``), else ``reduction:<type>``, else
  ``pointwise``.
* :func:`ir_class` -- the IR class computing the op (``Pointwise``, ``Reduction``;
  the op's own type when it has no ``data``): the engine's ``OpDecision.kind``.
* :func:`is_allocation` -- Inductor's uninitialised allocation (``torch.empty``): a
  buffer with no loop body to plan, trace or run.

``op_description`` (``ir_edit.py``) adds the aten origins for messages.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KIND_ATTR", "ir_class", "is_allocation", "op_kind", "op_name", "set_op_kind",
           "stamped_kind"]

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


def is_allocation(op: Any) -> bool:
    """``op`` only allocates its buffer: Inductor lowers ``torch.empty`` / ``empty_like`` /
    ``empty_strided`` to a Pointwise fill whose loop ranges it then sets to zero, so that
    its Scheduler makes a NopKernelSchedulerNode (no kernel) while the layout keeps the
    real size.  Tracing that loop body fails inside Inductor (a range ``[0:-1]``), so
    every stage that plans, traces or runs a body asks this first; the buffer is laid
    out and allocated like any other and its contents are whatever the ops that write
    into it (in place) leave there, as on stock Inductor."""
    from torch._inductor import ir

    if not isinstance(op, ir.ComputedBuffer) or not isinstance(op.data, ir.Pointwise):
        return False
    ranges, size = op.data.get_size(), op.get_size()
    return any(r == 0 for r in ranges) and not any(s == 0 for s in size)
