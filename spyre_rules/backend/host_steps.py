"""Partition: ops without a Spyre lowering run on the host inside the compiled program.

With ``config.fallback == "eager"`` the backend compiles a graph with a *host
plan* (``HostPlan``) active.  An op that has no Spyre lowering then becomes a
*host step*: an Inductor ``ExternKernel`` that calls the aten op on host
tensors, placed in the wrapper between the Spyre kernels.  Its inputs are
unstickified from simulated device memory right before it
(``rules_to_host``), its outputs stickified back right after it
(``rules_to_device``); everything else stays on the Spyre program.

How an op becomes a host step (one aten node = one host step):

* Inductor already lowered it to an ExternKernel (``FallbackKernel`` /
  ``MultiOutput``, e.g. SDPA, sort): it is a host step as it stands.
* Its aten target is in the support table ``support.NO_SPYRE_LOWERING``: the
  ``call_function`` hook lowers the node to a ``FallbackKernel`` at once.
* Its lowering produced an op the pipeline refuses (a Scan, a concatenation
  buffer, a loop body the recorder cannot record, ...): the seam collects every
  such op and raises ``HostStepsNeeded`` naming the aten nodes that created
  them; the backend adds them to the plan and compiles again, and the
  ``call_function`` hook lowers those nodes to ``FallbackKernel``s.

Host steps sit in the operation list at the position Inductor lowered them
(graph order).  The tiling passes see only the Spyre ops, and every coarse-tile
group is split at each host step between its ops
(``passes/host_boundaries.py::split_groups_at_host_steps``):
a counted loop never contains a host call (docs/architecture.md, "Host steps").
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

from torch._inductor import ir

from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.passes.host_boundaries import read_names

__all__ = [
    "HostPlan",
    "HostStepsNeeded",
    "active_plan",
    "host_plan",
    "is_host_callable",
    "host_warning",
    "FX_NODE_ATTR",
]

#: Attribute naming the aten (post-grad FX) node whose lowering created an op.
FX_NODE_ATTR = "spyre_rules_fx_node"


@dataclasses.dataclass
class HostStep:
    """One aten node run on the host: its ops (a FallbackKernel and the MultiOutputs
    that pick its results) and why."""

    name: str
    description: str
    reason: str
    ops: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class HostPlan:
    """The host steps of one backend compilation (all attempts)."""

    #: FX node name -> why its op runs on the host (lowered to a FallbackKernel).
    nodes: dict[str, str] = dataclasses.field(default_factory=dict)
    #: host steps of the graph compiled last (the warning lists them).
    steps: list[HostStep] = dataclasses.field(default_factory=list)


class HostStepsNeeded(UnsupportedGraph):
    """Some aten nodes lowered to ops we cannot compile: retry with them on the host."""

    def __init__(self, nodes: dict[str, str]) -> None:
        self.nodes = dict(nodes)
        super().__init__("; ".join(f"{n}: {r}" for n, r in self.nodes.items()))


_ACTIVE: list[HostPlan] = []


def active_plan() -> HostPlan | None:
    """The plan of the compilation running now (None: no partition, refusals raise)."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def host_plan(plan: HostPlan | None) -> Iterator[None]:
    if plan is None:
        yield
        return
    _ACTIVE.append(plan)
    try:
        yield
    finally:
        _ACTIVE.pop()


def is_host_callable(op: Any) -> bool:
    """An ExternKernel whose wrapper code is a host call of an aten kernel (or the
    tuple indexing of one, or Inductor's assert on a data-dependent size a host
    step's output has): it can run as a host step as it stands."""
    if isinstance(op, (ir.NopKernel, ir.ComputedBuffer)):
        return False
    if isinstance(op, (ir.FallbackKernel, ir.MultiOutput, ir.AssertScalar)):
        return True
    return isinstance(op, ir.ExternKernel) and bool(getattr(op, "python_kernel_name", None))


def fx_node_of(op: Any) -> str | None:
    return getattr(op, FX_NODE_ATTR, None)


def host_warning(steps: list[HostStep]) -> str:
    listed = "; ".join(f"{s.description}: {s.reason}" for s in steps)
    count = f"1 op of this graph runs" if len(steps) == 1 else f"{len(steps)} ops of this graph run"
    return (
        f"spyre_rules: {count} on the host instead of the Spyre program "
        f"(fallback='eager'): {listed}"
    )


# -- lowering hooks (installed by backend/context.py) ---------------------------------


def _aten_name(target: Any) -> str:
    return str(getattr(target, "overloadpacket", target))


def _table_reason(target: Any) -> str | None:
    from spyre_rules.backend.support import NO_SPYRE_LOWERING

    packet = getattr(target, "overloadpacket", None)
    reason = NO_SPYRE_LOWERING.get(packet) if packet is not None else None
    if reason is None:
        return None
    return f"{_aten_name(target)} has no Spyre lowering ({reason})"


def make_call_function(original: Any) -> Any:
    """``GraphLowering.call_function``: a node the plan (or the support table) puts
    on the host is lowered to a ``FallbackKernel`` -- a host call of the aten op."""
    import torch

    def call_function(self: Any, target: Any, args: Any, kwargs: Any) -> Any:
        if isinstance(target, torch._ops.OpOverload):
            node = self.current_node
            plan = active_plan()
            reason = plan.nodes.get(node.name) if plan is not None else None
            table = _table_reason(target)
            if reason is None and table is not None:
                if plan is None:
                    raise UnsupportedGraph(f"{node.name} ({_aten_name(target)}): {table}")
                reason = plan.nodes[node.name] = table
            if reason is not None:
                from torch._inductor.lowering import fallback_handler

                return fallback_handler(target, add_to_fallback_set=False)(*args, **kwargs)
        return original(self, target, args, kwargs)

    return call_function


def make_run_node(original: Any) -> Any:
    """``GraphLowering.run_node``: tag every op a node's lowering creates with the node."""

    def run_node(self: Any, n: Any) -> Any:
        start = len(self.operations)
        result = original(self, n)
        for op in self.operations[start:]:
            if getattr(op, FX_NODE_ATTR, None) is None:
                setattr(op, FX_NODE_ATTR, n.name)
        return result

    return run_node


# -- the seam ------------------------------------------------------------------------


def _refusal(op: Any, concats: frozenset[str]) -> str | None:
    from spyre_rules.backend.support import op_refusal
    from spyre_rules.codegen.build import check_recordable

    reason = op_refusal(op, concats)
    if reason is not None or not isinstance(op, ir.ComputedBuffer):
        return reason
    try:
        check_recordable(op)
    except UnsupportedGraph as exc:
        return str(exc)
    return None


def partition(graph: Any, state: Any, plan: HostPlan) -> None:
    """Find the host steps of ``graph`` (module doc).  Ops Inductor lowered to host
    calls become host steps; other refused ops name their aten node in one
    ``HostStepsNeeded`` (the backend retries with them on the host)."""
    from spyre_rules.ir.ir_edit import op_description
    from spyre_rules.backend.support import check_inputs, concat_names

    check_inputs(graph)
    concats = concat_names(graph)
    plan.steps = []
    by_node: dict[str, HostStep] = {}
    needed: dict[str, str] = {}
    for op in graph.operations:
        reason = _refusal(op, concats)
        if reason is None:
            continue
        node = fx_node_of(op)
        if is_host_callable(op):
            what = op_description(op)
            reason = plan.nodes.get(node, reason) if node is not None else reason
            reason = reason.removeprefix(what).lstrip(": ").strip()
            step = by_node.get(node) if node is not None else None
            if step is None:
                step = HostStep(op.get_name(), what, reason)
                plan.steps.append(step)
                if node is not None:
                    by_node[node] = step
            else:
                reason = f"part of host step {step.name}"
            step.ops.append(op.get_name())
            state.host_steps[op.get_name()] = {"description": what, "reason": reason}
            continue
        if node is None or node in plan.nodes:
            raise UnsupportedGraph(reason)
        needed.setdefault(node, _without_subject(reason, op))
    if needed:
        raise HostStepsNeeded(needed)


def retry_on_host(op: Any, exc: UnsupportedGraph) -> UnsupportedGraph:
    """A refusal found while generating ``op``'s code: under a host plan, ask for its
    aten node on the host (unless it already is, or it has none)."""
    plan = active_plan()
    node = fx_node_of(op)
    if plan is None or node is None or node in plan.nodes or isinstance(exc, HostStepsNeeded):
        return exc
    return HostStepsNeeded({node: _without_subject(str(exc), op)})


def _without_subject(reason: str, op: Any) -> str:
    """The reason without the op's own description (the warning names the host op)."""
    from spyre_rules.ir.ir_edit import op_description

    return reason.removeprefix(op_description(op)).lstrip(": ").strip()


def host_step_layouts(graph: Any, state: Any) -> None:
    """A Spyre layout for every host step output a Spyre op reads (it is
    stickified into device memory right after the step)."""
    from spyre_rules.backend.layouts import tiled_layout_for

    if not state.host_steps:
        return
    spyre_reads: set[str] = set()
    for op in graph.operations:
        if op.get_name() not in state.host_steps:
            spyre_reads |= set(read_names(op))
    for op in graph.operations:
        name = op.get_name()
        if name not in state.host_steps:
            continue
        written = [name] + [m for m in op.get_mutation_names() if m != name]
        stick = []
        for buf_name in written:
            if buf_name not in spyre_reads or buf_name in state.host_input_set():
                continue
            buf = graph.get_buffer(buf_name)
            layout = state.layouts.get(buf_name)
            if layout is None:
                if not isinstance(buf.layout, ir.FixedLayout):
                    raise UnsupportedGraph(
                        f"host step {state.host_steps[name]['description']}: its output "
                        f"{buf_name} has no fixed layout ({type(buf.layout).__name__})"
                    )
                layout = tiled_layout_for(buf, buf.layout, f"host step output {buf_name}")
                buf.layout = layout
                state.layouts[buf_name] = layout
            stick.append(buf_name)
        state.host_stickify[name] = stick
