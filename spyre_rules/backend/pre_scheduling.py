"""The pre-scheduling seam: our passes over ``graph.operations`` before the Scheduler.

Runs inside ``GraphLowering._update_scheduler`` (patched by the context), in this
order:

0. ``drop_dead_ops``    -- remove the ops nothing reads (fills Inductor inlined into
   their readers), as the Scheduler would, before anything plans them;
1. ``check_supported``  -- refuse (name + reason) what we cannot lower; under a
   host plan (fallback='eager') ``host_steps.partition`` instead: ops without a
   Spyre lowering become host steps (``host_step_layouts`` gives the outputs
   Spyre ops read a layout; ``host_step_records`` adds their plan records last);
2. ``assign_layouts``   -- FixedTiledLayout on every input and ComputedBuffer (with
   automatic tiling on, an op's gathered reads it splits finely are first given the
   layout it reads them through: backend/gathered_sticks.py);
3. ``insert_restickify``-- copies stuck on the dim a consumer needs;
   then, with automatic tiling on, ``relayout_finely_split_inputs``: a graph input a
   reader must split finer than another read's stick gets that dim just outside its
   stick (backend/input_layouts.py), and ``window_gathered_reads``: an op whose gathered
   rows alone overflow the limit reads its table in windows of rows
   (backend/gathered_windows.py), and an overflowing op that computes a value from
   its index reads it from an index table instead (backend/index_tables.py);
4. ``record_plan``      -- one plan record per op: ``decision = "no plan"``;
5. every pass in ``pass_lists.PRE_SCHEDULING_PASSES``, in order (hints, then
   coarse tiling; each is called as ``fn(graph)`` and may update the op's plan
   record via ``graph_state(graph).plan``, passes/plan_record.py); a capture skips
   ``pass_lists.SKIPPED_BY_CAPTURE``;
6. ``plan_memory``      -- an HBM byte address for every buffer (memory_map.py);
7. capture: ``capture_operations`` takes the operations exactly as they are now.

The seam can be reached twice for one graph (``codegen`` then
``codegen_with_cpp_wrapper``), so it runs once per graph.
"""

from __future__ import annotations

from typing import Any

from torch._inductor import ir

from spyre_rules.backend.dead_ops import drop_dead_ops
from spyre_rules.backend.gathered_windows import window_gathered_reads
from spyre_rules.backend.index_tables import read_index_values
from spyre_rules.backend.collectives import register_collective_steps
from spyre_rules.backend.host_steps import (
    active_plan,
    host_step_layouts,
    partition,
)
from spyre_rules.backend.input_layouts import relayout_finely_split_inputs
from spyre_rules.backend.layouts import assign_layouts
from spyre_rules.backend.pass_lists import PRE_SCHEDULING_PASSES, SKIPPED_BY_CAPTURE
from spyre_rules.backend.restickify import insert_restickify
from spyre_rules.backend.support import check_supported
from spyre_rules.codegen.dump import dump_graph
from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.ir.graph_state import RulesGraphState, graph_state
from spyre_rules.ir.ir_edit import op_description
from spyre_rules.ir.op_identity import op_kind
from spyre_rules.passes.pipeline import automatic_tiling_enabled
from spyre_rules.passes.plan_record import HOST_STEP_KIND, OpPlanRecord
from spyre_rules.program.memory_map import MemoryMap

__all__ = [
    "run_pre_scheduling_passes",
    "capture_sink",
    "CaptureComplete",
]

# When set (by capture_operations), ``(graph, operations)`` is appended here and
# the compilation stops with CaptureComplete instead of generating code.
_capture_sink: list[Any] | None = None


class CaptureComplete(Exception):
    """Raised after the operations were captured; the capture backend catches it."""


class capture_sink:  # noqa: N801 - used as a context manager, reads like a function
    def __init__(self, sink: list[Any]) -> None:
        self._sink = sink
        self._saved: list[Any] | None = None

    def __enter__(self) -> list[Any]:
        global _capture_sink
        self._saved, _capture_sink = _capture_sink, self._sink
        return self._sink

    def __exit__(self, *exc: object) -> None:
        global _capture_sink
        _capture_sink = self._saved


def layout_record(layout: Any) -> dict[str, Any]:
    dl = layout.device_layout
    return {
        "dtype": str(layout.dtype).removeprefix("torch."),
        "size": [int(s) for s in layout.size],
        "stride": [int(s) for s in layout.stride],
        "device_size": list(dl.device_size),
        "stride_map": list(dl.stride_map),
        "device_dtype": str(dl.device_dtype),
        "allocation": dict(layout.allocation),
    }


def record_plan(graph: Any, state: RulesGraphState) -> None:
    for op in graph.operations:
        if not isinstance(op, ir.ComputedBuffer):
            continue
        state.plan[op.get_name()] = OpPlanRecord.open(op.get_name(), op_description(op), op_kind(op),
                                                      writes_region_of=state.regions.get(op.get_name()))


def plan_memory(graph: Any, state: RulesGraphState) -> None:
    memory = MemoryMap()
    # A region op shares its concatenation's layout object and allocation.
    names = list(state.host_inputs)
    for op in graph.operations:
        if isinstance(op, (ir.ComputedBuffer, ir.ConcatKernel)):
            if op.get_name() not in state.regions and op.get_name() not in state.in_place:
                names.append(op.get_name())
            acc = getattr(op, "accumulator", None)  # a reduction level's (passes/accumulators.py)
            if acc is not None:
                names.extend(field.name for field in acc.fields)
        else:
            names.extend(state.host_stickify.get(op.get_name(), []))
    for name in dict.fromkeys(names):  # a host step may write a buffer it mutates
        layout = state.layouts[name]
        if "lx" in layout.allocation:  # in the LX scratchpad (passes/scratchpad.py), not HBM
            continue
        seg = memory.allocate(name, layout.device_layout.size_in_bytes)
        layout.allocation["hbm"] = seg.address
    state.memory = memory
    for name, record in state.plan.items():
        state.plan[name] = record.with_layout(layout_record(state.layouts[name]))


def host_step_records(graph: Any, state: Any) -> None:
    """A plan record per host step (plan.json), in graph order with the others."""
    for op in graph.operations:
        step = state.host_steps.get(op.get_name())
        if step is None:
            continue
        record = OpPlanRecord.open_host_step(op.get_name(), step["description"], step["reason"],
                                             kind=step.get("kind", HOST_STEP_KIND))
        if op.get_name() in state.layouts:
            record = record.with_layout(layout_record(state.layouts[op.get_name()]))
        state.plan[op.get_name()] = record
    order = [op.get_name() for op in graph.operations if op.get_name() in state.plan]
    ordered = set(order)  # once: rebuilt per record it made this quadratic in the ops
    rest = [n for n in state.plan if n not in ordered]
    reordered = {n: state.plan[n] for n in order + rest}
    state.plan.clear()
    state.plan.update(reordered)


def run_pre_scheduling_passes(graph: Any) -> None:
    state = graph_state(graph)
    if state.prepared:
        return
    drop_dead_ops(graph, state.regions)
    register_collective_steps(graph, state)
    plan = active_plan()
    if plan is None:
        check_supported(graph)
    else:
        partition(graph, state, plan)
    assign_layouts(graph, state)
    host_step_layouts(graph, state)
    insert_restickify(graph, state)
    if automatic_tiling_enabled():
        relayout_finely_split_inputs(graph, state)
        window_gathered_reads(graph, state.host_steps)
        read_index_values(graph, state, state.host_steps)
    record_plan(graph, state)
    capturing = _capture_sink is not None
    try:
        for fn in list(PRE_SCHEDULING_PASSES):
            if capturing and fn in SKIPPED_BY_CAPTURE:
                continue
            fn(graph)
    except UnsupportedGraph:
        if any(record.graph_error for record in state.plan.values()):
            # The pipeline refused the graph and recorded why (passes/pipeline.py):
            # no code follows, so this plan.json is the only place that says why.
            dump_graph(graph, state)
        raise
    plan_memory(graph, state)
    host_step_records(graph, state)
    state.prepared = True
    if _capture_sink is not None:
        _capture_sink.append((graph, list(graph.operations)))
        raise CaptureComplete()
