"""Collectives as steps of the program (several cards, docs/architecture.md "Collective steps").

The functional collectives Dynamo traces (``all_reduce``, ``all_gather_into_tensor``,
``reduce_scatter_tensor``, ... and their ``wait_tensor``) are lowered by Inductor to
``_CollectiveKernel`` extern kernels.  They are not fallbacks: a card exchanges data
with the others through its own engine, outside every core's loop nest.  Each one is a
*collective step* of the program under either fallback: it sits between kernels like a
host step (a loop group never spans it; ``passes/host_boundaries.py``), its operands move
between the device and the rank's process group as ``backend/residency.py`` decides, and
the CPU executor runs it through ``torch.distributed`` on the rank's group (the c10d
functional op itself, so any backend works: gloo in tests).  ``plan.json`` lists it under
``collective_steps`` with kind "collective step"; it is never counted as a host step.
"""

from __future__ import annotations

from typing import Any

from torch._inductor import ir

from spyre_rules.ir.ir_edit import op_description
from spyre_rules.passes.plan_record import COLLECTIVE_STEP_KIND

__all__ = ["is_collective", "register_collective_steps"]


def is_collective(op: Any) -> bool:
    """A collective kernel, or the MultiOutput picking one of its results."""
    if isinstance(op, ir._CollectiveKernel):
        return True
    if isinstance(op, ir.MultiOutput):
        return any(isinstance(i, ir._CollectiveKernel) for i in op.inputs)
    return False


def _collective_name(op: Any) -> str:
    kernel = op.inputs[0] if isinstance(op, ir.MultiOutput) else op
    overload = getattr(kernel, "op_overload", None)
    return str(getattr(overload, "_opname", None) or getattr(overload, "__name__", type(kernel).__name__))


def register_collective_steps(graph: Any, state: Any) -> None:
    """List every collective op of ``graph`` as a step between the kernels."""
    for op in graph.operations:
        if is_collective(op) and op.get_name() not in state.host_steps:
            state.host_steps[op.get_name()] = {
                "description": op_description(op),
                "reason": f"{_collective_name(op)} on the rank's process group",
                "kind": COLLECTIVE_STEP_KIND,
            }
