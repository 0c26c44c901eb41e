"""Our Inductor Scheduling: each scheduler node becomes a kernel of OpSpecs.

Registered for the "cpu" device while the spyre_rules context is active.  It
never fuses (grouping is the project's decision, made in the post-fusion seam)
and advertises no backend features: Inductor consults ``get_backend_features``
*during lowering*, and without TUPLE_REDUCTION / REDUCE_TO_SINGLE_ELEMENT /
SCAN / SORT it lowers to the plain Reductions (incl. welford) we execute.

``codegen_node`` traces every SchedulerNode of the node into an OpSpec (see
``codegen/build.py``), resolves each TensorArg's ``arg_index`` against the
kernel's argument list, and emits into the wrapper::

    sdsc_<ops>_<n> = rules_make_kernel('sdsc_<ops>_<n>', spyre_device, [OpSpec(...)], ...)
    sdsc_<ops>_<n>.run(<buffers in arg_index order>)
"""

from __future__ import annotations

from typing import Any

from torch._inductor.codegen.common import Kernel
from torch._inductor.scheduler import BaseScheduling, NopKernelSchedulerNode
from torch._inductor.utils import OrderedSet
from torch._inductor.virtualized import V

from spyre_rules.backend.host_steps import retry_on_host
from spyre_rules.backend.residency import kernel_wrote, stale_on_device, written_names
from spyre_rules.codegen import source
from spyre_rules.codegen.accumulate import accumulation_specs
from spyre_rules.codegen.build import build_op_spec, output_positions, tail_ranges
from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.ir.graph_state import RulesGraphState, graph_state
from spyre_rules.ir.ir_edit import op_description
from spyre_rules.ir.loop_stamp import loop_count
from spyre_rules.passes.accumulators import ACCUMULATOR_ATTR, accumulators
from spyre_rules import config
from spyre_rules.codegen.in_allocation import prove_in_allocation
from spyre_rules.codegen.loops import unroll_loop_specs
from spyre_rules.codegen.span_check import check_kernel
from spyre_rules.codegen.tail import peel_last_tile
from spyre_rules.program.op_spec import LoopSpec, OpSpec, TensorPlacement, iter_op_specs

__all__ = ["RulesKernel", "RulesScheduling", "ensure_device", "placement"]

DEVICE_VAR = "spyre_device"


def ensure_device(state: RulesGraphState, wrapper: Any) -> None:
    """Declare the graph's simulated device memory once, in the wrapper header."""
    if state.device_var is None:
        state.device_var = DEVICE_VAR
        wrapper.header.writeline(f"{DEVICE_VAR} = rules_device({state.memory.total_bytes})")


class RulesKernel(Kernel):
    """Holds the kernel's argument list (``self.args``) while its nodes are traced."""

    overrides = None


def placement(name: str, state: RulesGraphState) -> TensorPlacement:
    layout = state.layouts[name]
    dl = layout.device_layout
    return TensorPlacement(
        name=name,
        host_size=tuple(int(s) for s in layout.size),
        host_stride=tuple(int(s) for s in layout.stride),
        host_dtype=str(layout.dtype).removeprefix("torch."),
        device_size=tuple(dl.device_size),
        stride_map=tuple(dl.stride_map),
        device_dtype=dl.device_dtype,
        address=int(layout.allocation["hbm"]),
    )


def _segments(state: RulesGraphState) -> dict[str, tuple[int, int]]:
    """Every HBM segment's bytes, kept in step with the memory map (it only grows).

    Built once per graph, not per kernel: rebuilt per kernel it cost O(kernels x
    buffers) (78 s of RWKV's 7000-op graph).
    """
    memory, bounds = state.memory, state.segment_bounds
    if memory is not None and len(bounds) != len(memory.segments):
        bounds.update((n, (s.address, s.end)) for n, s in memory.segments.items()
                      if n not in bounds)
    return bounds


def _device_only(state: RulesGraphState) -> frozenset[str]:
    """The accumulator buffers (never kernel arguments), found once per graph.

    Accumulators are attached before scheduling (passes/tiling_propagation.py), so the
    graph's set is final by codegen; scanning every op per kernel was quadratic.
    """
    if state.accumulator_buffers is None:
        state.accumulator_buffers = frozenset(
            field.name for acc in accumulators(V.graph) for field in acc.fields)
    return state.accumulator_buffers


def _kernel_name(specs: list[OpSpec], state: RulesGraphState) -> str:
    ops = "_".join(dict.fromkeys(spec.op for spec in iter_op_specs(specs)))
    return f"sdsc_{ops}_{len(state.kernels)}"


def _body_of(node: Any) -> list[Any]:
    from spyre_rules.scheduler import CountedLoopSchedulerNode

    return [node] if isinstance(node, CountedLoopSchedulerNode) else list(node.get_nodes())


def _build_specs(nodes: list[Any], kernel: Any, state: RulesGraphState, depth: int = 0,
                 around: dict[int, list[tuple[list[OpSpec], OpSpec]]] | None = None,
                 tails: dict[int, list[dict[Any, int]]] | None = None) -> list[Any]:
    """OpSpecs in node order; a counted-loop node becomes a (nested) LoopSpec.

    An op with a reduction level becomes its combine step; its ``acc_init`` and
    ``acc_finalize`` (``codegen/accumulate.py``) wrap the loop of its outermost
    reduction level (``around``: loop depth -> those pairs, filled by the body).
    A level with a shorter last tile becomes two loops, the last tile peeled
    (``codegen/tail.py``; ``tails``: id of each OpSpec -> its op's last tiles).
    """
    from spyre_rules.scheduler import CountedLoopSchedulerNode

    around = {} if around is None else around
    tails = {} if tails is None else tails
    specs: list[Any] = []
    for node in nodes:
        if isinstance(node, CountedLoopSchedulerNode):
            body = _build_specs(node.body, kernel, state, depth + 1, around, tails)
            steps = around.pop(depth, [])
            specs.extend(init for inits, _ in steps for init in inits)
            specs.extend(peel_last_tile(LoopSpec(count=node.loop_count, body=body), depth, tails))
            specs.extend(finalize for _, finalize in steps)
            continue
        if isinstance(node, NopKernelSchedulerNode):
            continue  # a concatenation inside a loop: its regions are the ops
        try:
            spec = build_op_spec(node, kernel, state)
        except UnsupportedGraph as exc:
            raise retry_on_host(node.node, exc) from exc
        op = node.node
        last_tiles = tail_ranges(op)
        acc = getattr(op, ACCUMULATOR_ATTR, None)
        if acc is not None:
            inits, combines, finalize = accumulation_specs(
                spec, acc, output_positions(op), len(loop_count(op)), op_description(op))
            around.setdefault(acc.first_level, []).append((inits, finalize))
            for derived in (*inits, *combines, finalize):
                tails[id(derived)] = last_tiles
            specs.extend(combines)
            continue
        tails[id(spec)] = last_tiles
        specs.append(spec)
    return specs


def _kernel_writes(snodes: list[Any], state: RulesGraphState) -> list[str]:
    names: list[str] = []
    for sn in snodes:
        for name in written_names(sn.node):
            # a region writes its concatenation, an in-place op its target
            names.append(state.regions.get(name) or state.in_place.get(name, name))
    return names


class RulesScheduling(BaseScheduling):
    def get_backend_features(self, device: Any) -> OrderedSet:
        return OrderedSet()

    def can_fuse_vertical(self, node1: Any, node2: Any) -> bool:
        return False

    def can_fuse_horizontal(self, node1: Any, node2: Any) -> bool:
        return False

    def group_fn(self, sizes: Any) -> Any:
        return tuple(tuple(map(V.graph.sizevars.simplify, s)) for s in sizes)

    def codegen_template(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedGraph("template kernels are unsupported")

    def codegen_sync(self) -> None:
        return None

    def flush(self) -> None:
        return None

    def ready_to_flush(self) -> bool:
        return False

    def codegen_node(self, node: Any) -> None:
        state = graph_state(V.graph)
        snodes = list(node.get_nodes())
        kernel = RulesKernel()
        with V.set_kernel_handler(kernel):
            specs = _build_specs(_body_of(node), kernel, state)
        name = _kernel_name(specs, state)
        # Always, whatever span_check says: a program that may touch another buffer's
        # bytes is a compiler bug, never a policy choice (codegen/in_allocation.py).
        prove_in_allocation(name, specs, _segments(state))
        if config.span_check != "off":
            # On the loops as written: the per-iteration domain is explicit there.
            state.span_checks.extend(check_kernel(name, specs, config.max_span_bytes,
                                                   state.plan))
        if config.unroll_loops:
            specs = unroll_loop_specs(specs)
        _, call_args, _, _ = kernel.args.python_argdefs()
        position = {name: i for i, name in enumerate(call_args)}
        device_only = _device_only(state)  # not kernel arguments
        for spec in iter_op_specs(specs):
            for arg in spec.args:
                arg.arg_index = -1 if arg.name in device_only else position[arg.name]
        inputs = state.host_input_set()  # sets built once per graph, not scanned per kernel
        stickify = {i: placement(n, state) for i, n in enumerate(call_args) if n in inputs}
        unstickify = {i: placement(n, state) for i, n in enumerate(call_args)
                      if n in state.host_outputs and n not in inputs
                      and n in kernel.args.output_buffers}
        # graph inputs written in place: the written elements go to the host tensor too
        write_through = {i: placement(n, state) for i, n in enumerate(call_args)
                         if n in inputs and n in state.in_place_targets()
                         and n in kernel.args.output_buffers}

        wrapper = V.graph.wrapper_code
        ensure_device(state, wrapper)
        wrapper.define_kernel(
            name, source.kernel_definition(name, DEVICE_VAR, specs, stickify, unstickify,
                                           write_through),
            gpu=False,
        )
        for sn in snodes:
            sn.mark_run()
        self.codegen_comment(snodes, name)
        for stale in stale_on_device(state, call_args):  # last written by a host step
            wrapper.writeline(f"rules_to_device({DEVICE_VAR}, "
                              f"{source.placement_source(placement(stale, state))}, {stale})")
        wrapper.writeline(f"{name}.run({', '.join(call_args)})")
        # what it unstickifies, and the inputs it writes through, stay current on the host
        kernel_wrote(state, _kernel_writes(snodes, state),
                     [p.name for p in (*unstickify.values(), *write_through.values())])
        state.kernels.append((name, specs))
        # the ops by their plan record names (their buffers'), for plan.json "program"
        state.program_steps.append({"step": "kernel", "kernel": name, "ops": [
            sn.node.get_name() if getattr(sn, "node", None) is not None else sn.get_name()
            for sn in snodes]})
        self.free_buffers_in_scheduler()
