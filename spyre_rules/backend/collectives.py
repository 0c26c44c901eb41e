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

from spyre_rules import config
from spyre_rules.backend.residency import written_names
from spyre_rules.codegen.collective_spans import CollectiveBuffer, collective_checks, plan_chunks
from spyre_rules.ir.ir_edit import op_description
from spyre_rules.passes.host_boundaries import read_names
from spyre_rules.passes.plan_record import COLLECTIVE_STEP_KIND

__all__ = ["is_collective", "register_collective_steps", "CollectiveStepCode"]

#: how the wrapper names the chunked form of a collective (executor/collective_chunks.py)
CHUNKS_IMPORT = "from spyre_rules.executor.collective_chunks import in_chunks as rules_collective_in_chunks"


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
                "collective": _collective_name(op),
            }


def _device_buffers(op: Any, state: Any) -> list[CollectiveBuffer]:
    """The device buffers a collective reads and writes (a buffer only the host holds,
    or the op's own NoneLayout name, is no device access)."""
    reads = [CollectiveBuffer(n, state.layouts[n], True)
             for n in dict.fromkeys(read_names(op)) if n in state.layouts]
    # a collective of several tensors writes through the MultiOutputs that pick them
    picked = [out.get_name() for out in getattr(op, "outputs", None) or []
              if isinstance(out, ir.MultiOutput)]
    writes = [CollectiveBuffer(n, state.layouts[n], False)
              for n in dict.fromkeys([*written_names(op), *picked]) if n in state.layouts]
    return reads + writes


class CollectiveStepCode:
    """What the wrapper writes for one collective step: its span check, the chunking
    that makes its accesses fit (codegen/collective_spans.py) and the program step
    ``plan.json`` lists.  A wait or a MultiOutput moves no data: nothing to check."""

    def __init__(self, op: Any, state: Any) -> None:
        self.op, self.state = op, state
        step = state.host_steps[op.get_name()]
        self.collective = step.get("collective") or _collective_name(op)
        moves_data = isinstance(op, ir._CollectiveKernel) and self.collective != "wait_tensor"
        self.buffers = _device_buffers(op, state) if moves_data else []
        limit = config.max_span_bytes
        self.chunking = plan_chunks(self.collective, self.buffers, limit) if self.buffers else None
        if self.buffers and config.span_check != "off":
            state.span_checks.extend(collective_checks(op.get_name(), self.collective,
                                                       self.buffers, self.chunking, limit))
        if self.chunking is not None:
            step["chunks"] = self.chunking.as_dict()
        state.program_steps.append({
            "step": COLLECTIVE_STEP_KIND, "op": op.get_name(), "collective": self.collective,
            "reads": [b.name for b in self.buffers if b.is_input],
            "writes": [b.name for b in self.buffers if not b.is_input],
            **({"chunks": self.chunking.as_dict()} if self.chunking is not None else {})})

    def comment_suffix(self) -> str:
        c = self.chunking
        if c is None:
            return ""
        return (f", in {c.count} chunks of {c.length} along host dim {c.dim} (a whole buffer "
                f"spans more than max_span_bytes)")

    def rewrite(self, wrapper: Any, start: int) -> None:
        """Issue the call Inductor wrote (lines ``start:``) chunk by chunk."""
        c = self.chunking
        if c is None:
            return
        kernel = self.op.python_kernel_name
        lines = wrapper.lines
        for i in range(start, len(lines)):
            if isinstance(lines[i], str) and f"{kernel}(" in lines[i]:
                lines[i] = lines[i].replace(
                    f"{kernel}(", f"rules_collective_in_chunks({kernel}, {c.dim}, {c.length})(", 1)
        wrapper.imports.writeline(CHUNKS_IMPORT)
