"""``capture_operations(fn, *inputs)``: the ops exactly as the planner sees them.

Traces ``fn`` with Dynamo (so ``spyre_hint`` annotations survive, like in a real
compile), lowers it with the spyre_rules hooks and stops at the pre-scheduling
seam, after layouts, restickify insertion and the seam's passes -- no code is
generated and nothing runs: Dynamo gets each graph's outputs made from their
shapes (uninitialised; ``backend/meta_device.py``), so code after a graph break
goes on without our ops running on real data.  Inputs may live on the meta
device.  Runs under ``torch.no_grad()`` (the backend compiles
inference graphs only).

The result is a ``list[ir.Operation]`` (all graphs of ``fn`` in order when it
has graph breaks) that also carries ``.graphs`` (the GraphLowering objects) and
``graph_context(i)`` for Inductor queries that need ``V.graph`` (e.g.
``op.get_read_writes()`` on a freshly edited op).  Each op also carries its
graph (``engine.api.OWNER_GRAPH_ATTR``), so ``plan_span_overflow_tile(op)``,
``explain_op(op)`` and ``span_overflow_groups(ops)`` work on the ops as they
are.  Shapes are traced static (``dynamic=False``): calling it again on one
function with new shapes captures the new static shapes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch._inductor.virtualized import V

from spyre_rules.backend.compile import compile_for_capture
from spyre_rules.backend.meta_device import outputs_from_shapes
from spyre_rules.backend.pre_scheduling import capture_sink
from spyre_rules.engine.api import OWNER_GRAPH_ATTR
from spyre_rules.ir.errors import find_unsupported
from spyre_rules.ir.graph_state import graph_state

__all__ = ["CapturedOperations", "capture_operations"]


class CapturedOperations(list):
    """``list[ir.Operation]`` plus the graphs they belong to."""

    graphs: list[Any]

    @contextlib.contextmanager
    def graph_context(self, index: int = 0) -> Iterator[Any]:
        with V.set_graph_handler(self.graphs[index]):
            yield self.graphs[index]

    def state(self, index: int = 0) -> Any:
        return graph_state(self.graphs[index])


def _code_of(fn: Any) -> Any:
    target = getattr(fn, "forward", fn)
    return getattr(target, "__code__", None)


def capture_operations(fn: Callable[..., Any], *example_inputs: Any) -> CapturedOperations:
    sink: list[tuple[Any, list[Any]]] = []

    def capture_backend(gm: torch.fx.GraphModule, inputs: list[Any]) -> Callable:
        # Dynamo calls what we return: outputs made from shapes, never the graph
        # itself (a real-size layer would run its matmuls for minutes).
        outputs = outputs_from_shapes(gm)
        with capture_sink(sink):
            compile_for_capture(gm, inputs)
        return outputs

    try:
        with torch.no_grad():
            # dynamic=False: a second capture of ``fn`` with new shapes would otherwise
            # trace symbolic shapes (Dynamo's automatic dynamic, kept per code object
            # across reset_code), which the backend refuses.
            torch.compile(fn, backend=capture_backend, dynamic=False)(*example_inputs)
    except Exception as exc:  # noqa: BLE001 - surface our refusal, not Dynamo's wrapper
        unsupported = find_unsupported(exc)
        if unsupported is None:
            raise
        raise unsupported from None
    finally:
        code = _code_of(fn)
        if code is not None:
            torch._dynamo.reset_code(code)
    if not sink:
        raise RuntimeError(
            f"capture_operations: Dynamo produced no graph for {fn!r} (nothing to lower)"
        )
    for graph, ops in sink:
        for op in ops:
            # the engine's entry points install it for a lone op (engine/api.py)
            setattr(op, OWNER_GRAPH_ATTR, graph)
    result = CapturedOperations(op for _, ops in sink for op in ops)
    result.graphs = [graph for graph, _ in sink]
    return result
