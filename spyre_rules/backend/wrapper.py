"""Wrapper codegen: Inductor's Python wrapper plus our imports, no host
allocation for buffers that live only in simulated device memory, and every
call of a graph with device kernels bracketed by ``spyre_device.begin_call()`` /
``spyre_device.end_call()`` (executor/runtime.py)."""

from __future__ import annotations

from typing import Any

from torch._inductor.codegen.wrapper import PythonWrapperCodegen
from torch._inductor.virtualized import V

from spyre_rules import config
from spyre_rules.backend.host_codegen import host_tensor_names
from spyre_rules.backend.logs import report_graph
from spyre_rules.codegen import source
from spyre_rules.codegen.span_check import enforce, record_results
from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.ir.graph_state import graph_state

__all__ = ["RulesWrapperCodegen"]


class RulesWrapperCodegen(PythonWrapperCodegen):
    @staticmethod
    def create(
        is_subgraph: bool,
        subgraph_name: str | None,
        parent_wrapper: PythonWrapperCodegen | None,
        partition_signatures: Any = None,
    ) -> PythonWrapperCodegen:
        if is_subgraph:
            raise UnsupportedGraph(
                f"subgraph {subgraph_name} (control flow / higher-order op) is unsupported"
            )
        return RulesWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        for line in source.IMPORTS:
            self.imports.writeline(line)

    def make_buffer_allocation(self, buffer: Any) -> str:
        name = buffer.get_name()
        state = graph_state(V.graph)
        if name in state.layouts and name not in host_tensor_names(state):
            # Computed and consumed on the device only; kernels never touch a host copy.
            return f"{name} = None  # lives only in simulated device memory"
        return super().make_buffer_allocation(buffer)

    def codegen_allocation(self, buffer: Any) -> None:
        name = buffer.get_name()
        base = graph_state(V.graph).regions.get(name)
        if base is None or name in self.allocated:
            return super().codegen_allocation(buffer)
        # A region of a concatenation: kernels address the concatenation buffer.
        self.allocated.add(name)
        self.codegen_allocation(V.graph.get_buffer(base))
        self.writeline(f"{name} = None  # a region of {base}")

    def generate(self, is_inference: bool) -> Any:
        state = graph_state(V.graph)
        if state.device_var is not None and not getattr(self, "_call_bracketed", False):
            # Every call starts knowing no graph input is resident in device memory
            # (executor/resident.py); the end stops skips by kernels run outside a call.
            self.lines.insert(0, f"{state.device_var}.begin_call()")
            self.lines.append(f"{state.device_var}.end_call()")
            self._call_bracketed = True
        result = super().generate(is_inference)
        state.wrapper_source = result[0].value if hasattr(result[0], "value") else str(result[0])
        from spyre_rules.codegen.dump import dump_graph

        mode = config.span_check
        record_results(state.span_checks, state.plan, mode)
        dump_graph(V.graph, state)
        report_graph(V.graph, graph_label(V.graph), state, mode)  # TORCH_LOGS / TORCH_TRACE
        # After the dump (plan.json shows the overflow), before the program can run.
        enforce(graph_label(V.graph), state.span_checks, state.plan, mode)
        return result


def graph_label(graph: Any) -> str:
    """How messages name a graph: its name, else the Dynamo compile id (frame/attempt)."""
    name = getattr(graph, "name", None)
    if name:
        return str(name)
    from torch._guards import CompileContext

    compile_id = CompileContext.current_compile_id()
    return str(compile_id) if compile_id is not None else "<unnamed>"
