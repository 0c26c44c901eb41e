"""Per-graph bookkeeping shared by the pre-scheduling passes, codegen and dumps.

One ``RulesGraphState`` hangs off each ``GraphLowering`` as
``graph.spyre_rules_state``; it exists only during compilation (the generated
program carries everything the executor needs).
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["RulesGraphState", "graph_state"]

STATE_ATTR = "spyre_rules_state"


@dataclasses.dataclass
class RulesGraphState:
    #: buffer name -> FixedTiledLayout for every graph input, constant and ComputedBuffer.
    layouts: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: graph inputs (placeholder order) and constants: their host values are
    #: stickified into device memory by the kernels that read them.
    host_inputs: list[str] = dataclasses.field(default_factory=list)
    #: buffers whose *host* tensor must hold the value after the kernel that writes
    #: it (graph outputs and the bases of output views).
    host_outputs: set[str] = dataclasses.field(default_factory=set)
    #: op name -> plan record (passes/plan_record.py OpPlanRecord; see plan.json).
    plan: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: op writing a region of a concatenation -> the concatenation's buffer
    #: (the op's layout is Inductor's NonOwningLayout view of it; see concat.py).
    regions: dict[str, str] = dataclasses.field(default_factory=dict)
    #: region op -> storage offset of its region in the concatenation buffer
    #: (its own indices are relative to the region, as in Inductor's wrapper).
    region_offsets: dict[str, int] = dataclasses.field(default_factory=dict)
    #: op writing another op's buffer in place -> that buffer (backend/in_place.py;
    #: the op shares its layout and allocation).
    in_place: dict[str, str] = dataclasses.field(default_factory=dict)
    #: buffer -> dim names given by ``name_tensor_dims`` inside compiled code
    #: (hints/api.py ``name_dims``, lowered by backend/named_dims.py).
    named_buffers: dict[str, tuple[str | None, ...]] = dataclasses.field(default_factory=dict)
    #: op name -> {buffer it broadcasts: host dim to restickify it onto} (stick_choice.py:
    #: a read stuck on a variable narrower than a stick, which the op must split).
    broadcast_restickifies: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    #: graph inputs given another device layout for a reader that splits them finely
    #: (backend/input_layouts.py; each at most once).
    relaid_inputs: set[str] = dataclasses.field(default_factory=set)
    #: op name -> {computed buffer it reads gathered: the layout of the restickify copy
    #: to read it through} (backend/gathered_sticks.py; the copies: restickify.py).
    gathered_restickifies: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    #: (source buffer, new stick host dim) -> restickified buffer name.
    restickified: dict[tuple[str, int], str] = dataclasses.field(default_factory=dict)
    #: restickified buffer -> the trace of the ``restickify`` section's decision on it
    #: (a rule that fired sent it through an intermediate; backend/restickify.py).
    restickify_stages: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    #: buffer -> the trace of the ``layout_choice`` section's decisions on the remedies
    #: found for it (empty: asked, none taken; backend/layout_choice.py), and each
    #: question's answer, asked once: (op, remedy, buffer, layout bytes) -> taken.
    layout_choices: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    layout_choice_answers: dict[tuple, bool] = dataclasses.field(default_factory=dict)
    #: the simulated HBM map (program.memory_map.MemoryMap), set last before scheduling.
    memory: Any = None
    #: kernels generated so far: (kernel name, list of OpSpec/LoopSpec).
    kernels: list[tuple[str, list[Any]]] = dataclasses.field(default_factory=list)
    #: the program's steps in the order the wrapper runs them: kernels, host steps and
    #: collective steps (``plan.json`` ``program``; backend/scheduling.py, host_codegen.py).
    program_steps: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: span check of every generated kernel (codegen.span_check.OpCheck), in kernel order.
    span_checks: list[Any] = dataclasses.field(default_factory=list)
    #: the generated wrapper module source (for the dump dir).
    wrapper_source: str | None = None
    #: name of the wrapper variable holding the graph's simulated device memory.
    device_var: str | None = None
    #: op name -> {"description", "reason"} of every host step (backend/host_steps.py),
    #: in graph order; empty unless the graph is partitioned (fallback='eager').
    host_steps: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    #: host step name -> the buffers it writes that Spyre ops read (each gets a device
    #: segment; backend/residency.py decides when it is stickified).
    host_stickify: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    #: buffers whose host copy is older than their device copy, and the reverse, at the
    #: point of the wrapper written so far (backend/residency.py).
    host_stale: set[str] = dataclasses.field(default_factory=set)
    device_stale: set[str] = dataclasses.field(default_factory=set)
    #: buffer -> the full-size copy a host step reads instead (a tiled op read both
    #: inside its loop and by a host step; passes/tiling_propagation.py).
    host_renames: dict[str, str] = dataclasses.field(default_factory=dict)
    #: True once the pre-scheduling passes ran (the seam can be reached twice).
    prepared: bool = False
    #: codegen's per-graph lookups, built once instead of per kernel (backend/scheduling.py):
    #: buffer -> its HBM segment's [start, end), and the accumulator buffers (device only).
    segment_bounds: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    accumulator_buffers: frozenset[str] | None = None
    _input_set: tuple[int, frozenset[str]] = (0, frozenset())
    _in_place_targets: tuple[int, frozenset[str]] = (0, frozenset())

    def host_input_set(self) -> frozenset[str]:
        """``host_inputs`` as a set, rebuilt only when the list grew (it only grows)."""
        if self._input_set[0] != len(self.host_inputs):
            self._input_set = (len(self.host_inputs), frozenset(self.host_inputs))
        return self._input_set[1]

    def in_place_targets(self) -> frozenset[str]:
        """The buffers written in place (``in_place``'s values), rebuilt when it grew."""
        if self._in_place_targets[0] != len(self.in_place):
            self._in_place_targets = (len(self.in_place), frozenset(self.in_place.values()))
        return self._in_place_targets[1]


def graph_state(graph: Any) -> RulesGraphState:
    state = getattr(graph, STATE_ATTR, None)
    if state is None:
        state = RulesGraphState()
        setattr(graph, STATE_ATTR, state)
    return state
