"""Wrapper code of a host step (backend/host_steps.py).

``Scheduler.codegen_extern_call`` (patched by the context) writes Inductor's own
host call of the ExternKernel, after the transfers of its inputs::

    # host step buf2 (aten ops: tanh): aten.tanh has no Spyre lowering (...)
    buf1 = rules_to_host(spyre_device, TensorPlacement(name='buf1', ...))
    buf2 = torch.ops.aten.tanh.default(buf1)

An input is unstickified when its host copy is stale at that point of the
wrapper (``backend/residency.py``): its last write was a Spyre kernel's.  Its
outputs, and the buffers it mutates, are stickified right before the next kernel
that reads them (``rules_to_device``, written by ``backend/scheduling.py``).  A
tiled op's tile read by a host step is read from its full-size copy
(``state.host_renames``).
"""

from __future__ import annotations

from typing import Any

from torch._inductor.virtualized import V

from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.ir.graph_state import graph_state
from spyre_rules.passes.host_boundaries import read_names
from spyre_rules.backend.residency import (host_copy_taken, host_step_wrote, mutated_names,
                                           stale_on_host, written_names)
from spyre_rules.backend.collectives import CollectiveStepCode
from spyre_rules.codegen.source import HOST_STEP_IMPORTS, placement_source
from spyre_rules.passes.plan_record import COLLECTIVE_STEP_KIND, HOST_STEP_KIND

__all__ = ["make_codegen_extern_call", "host_tensor_names"]


_IMPORTED = "spyre_rules_host_imports"


def host_tensor_names(state: Any) -> set[str]:
    """Buffers that hold a real host tensor in the wrapper."""
    names = set(state.host_inputs) | set(state.host_outputs) | set(state.host_steps)
    for written in state.host_stickify.values():
        names |= set(written)
    return names


def _inputs_from_device(op: Any, state: Any) -> list[tuple[str, str]]:
    """(wrapper variable, device buffer) of each input to unstickify: those whose
    host copy is stale at this point of the wrapper (backend/residency.py)."""
    out = []
    for name in dict.fromkeys([*read_names(op), *mutated_names(op)]):
        source = state.host_renames.get(name, name)
        if not stale_on_host(state, source):
            continue
        layout = state.layouts[source]
        if "hbm" not in layout.allocation or getattr(layout, "per_tile_fixed", False):
            raise UnsupportedGraph(
                f"host step {state.host_steps[op.get_name()]['description']} reads {name}, "
                "which holds one tile of a coarse-tile loop (no full buffer to read)"
            )
        out.append((name, source))
    return out


def make_codegen_extern_call(original: Any) -> Any:
    def codegen_extern_call(self: Any, scheduler_node: Any) -> None:
        from spyre_rules.backend.scheduling import DEVICE_VAR, ensure_device, placement

        state = graph_state(V.graph)
        op = scheduler_node.node
        step = state.host_steps.get(op.get_name())
        if step is None:
            raise UnsupportedGraph(
                f"{op.get_name()} ({type(op).__name__}) reached code generation without "
                "being a host step"
            )
        wrapper = V.graph.wrapper_code
        ensure_device(state, wrapper)
        if not getattr(wrapper, _IMPORTED, False):
            for line in HOST_STEP_IMPORTS:
                wrapper.imports.writeline(line)
            setattr(wrapper, _IMPORTED, True)
        collective = (CollectiveStepCode(op, state) if step.get("kind") == COLLECTIVE_STEP_KIND
                      else None)
        if collective is None:
            state.program_steps.append({"step": HOST_STEP_KIND, "op": op.get_name()})
        suffix = collective.comment_suffix() if collective is not None else ""
        wrapper.writeline(
            f"# {step.get('kind', 'host step')} {step['description']}: {step['reason']}{suffix}")
        for var, source in _inputs_from_device(op, state):
            wrapper.writeline(
                f"{var} = rules_to_host({DEVICE_VAR}, {placement_source(placement(source, state))})"
            )
            host_copy_taken(state, source)
        start = len(wrapper.lines)
        original(self, scheduler_node)
        if collective is not None:
            collective.rewrite(wrapper, start)
        # Stickified lazily, before the next kernel that reads them (backend/scheduling.py).
        host_step_wrote(state, written_names(op))

    return codegen_extern_call
