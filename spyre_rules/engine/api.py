"""Public entry points of the rule engine for one op or a list of ops.

* ``plan_span_overflow_tile(op, max_cores=None)`` -> plan | None, or raises
  ``spyre_rules.Unsupported`` with the deciding rule's message (docs/layout_model.md §4.8);
* ``explain_op(op)`` -> the :class:`OpDecision` with its rule trace;
* ``restickify_staged(op)`` -> whether a restickify copy goes through an intermediate
  (the ``restickify`` section), with the trace of the rule that decided;
* ``layout_choice_taken(op, remedy, buffer, layout_bytes)`` -> whether the backend takes a
  layout remedy it found (the ``layout_choice`` section), with the trace of the rule that
  decided;
* ``plan_graph(operations)`` -> one :class:`OpDecision` per op (never raises
  Unsupported: it is recorded in the decision).

Facts query Inductor (``get_read_writes``), which needs the op's graph as
``V.graph``.  The backend calls the engine inside its graph; ops from
``capture_operations`` carry their graph (``OWNER_GRAPH_ATTR``), and these
functions install it themselves, for a lone op as for any list of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from torch._inductor.virtualized import NullHandler, V

from spyre_rules.engine.collector import existing_objects_frozen
from spyre_rules.engine.planner import Evaluator
from spyre_rules.facts import memo
from spyre_rules.engine.policy import get_policy
from spyre_rules.engine.records import OpDecision, SpanOverflowTilePlan

__all__ = ["evaluator", "explain_op", "graph_scope", "layout_choice_taken", "plan_graph",
           "plan_span_overflow_tile", "restickify_staged"]


#: Set by ``capture_operations`` on every captured op: the GraphLowering it belongs to.
OWNER_GRAPH_ATTR = "spyre_rules_graph"


class NoGraphError(RuntimeError):
    """Facts need the op's Inductor graph and none is set."""


def evaluator(max_cores: int | None = None) -> Evaluator:
    """A fresh evaluator over the current policy and configuration."""
    policy = get_policy()
    overrides = {} if max_cores is None else {"sencores": int(max_cores)}
    return Evaluator(policy, policy.config_snapshot(**overrides))


def _graph_set() -> bool:
    return not isinstance(V.graph, NullHandler)


def _require_graph(op: Any) -> None:
    if not _graph_set():
        name = getattr(op, "get_name", lambda: type(op).__name__)()
        raise NoGraphError(
            f"planning {name} needs its Inductor graph (V.graph) to read its dependencies: "
            "call inside `ops.graph_context(i)` of the captured operations, or use plan_graph(ops)"
        )


def plan_span_overflow_tile(op: Any, max_cores: int | None = None) -> SpanOverflowTilePlan | None:
    """The op's span-overflow tile plan, or None; raises ``Unsupported`` (docs/layout_model.md §4.8)."""
    decision = explain_op(op, max_cores)
    if decision.error is not None:
        raise decision.error
    return decision.plan


def explain_op(op: Any, max_cores: int | None = None) -> OpDecision:
    """The op's decision and the trace of every rule that fired."""
    with _op_graph(op, getattr(op, OWNER_GRAPH_ATTR, None)):
        _require_graph(op)
        return evaluator(max_cores).decide(op)


def restickify_staged(op: Any, side: str) -> tuple[bool, list[Any]]:
    """Whether the restickify copy ``op`` goes through an intermediate on its ``side``
    (``"source"`` or ``"output"``: the ``restickify`` section), and the trace of the rule
    that decided (empty: none fired)."""
    with _op_graph(op, getattr(op, OWNER_GRAPH_ATTR, None)):
        _require_graph(op)
        with memo.stable():
            return evaluator().staged(op, side)


def layout_choice_taken(op: Any, remedy: str, buffer: str,
                        layout_bytes: int | None = None) -> tuple[bool, list[Any]]:
    """Whether the backend takes the layout remedy ``remedy`` it found for ``buffer``,
    serving ``op`` (the ``layout_choice`` section, docs/rules_language.md §6.9), and the
    trace of the rule that decided (empty: none fired, the layout stays)."""
    with _op_graph(op, getattr(op, OWNER_GRAPH_ATTR, None)):
        _require_graph(op)
        with memo.stable():
            return evaluator().taken(op, remedy, buffer, layout_bytes)


@contextlib.contextmanager
def _op_graph(op: Any, graph: Any) -> Iterator[None]:
    if graph is None or (_graph_set() and V.graph is graph):
        yield
    else:
        with V.set_graph_handler(graph):
            yield


@contextlib.contextmanager
def graph_scope(operations: Sequence[Any]) -> Iterator[Any]:
    """Yield ``graph_of(op)``: a context manager installing an op's graph.

    For ``capture_operations`` results the graph of each op is found among
    ``operations.graphs``; otherwise the current ``V.graph`` is used as it is.
    """
    graphs = list(getattr(operations, "graphs", None) or [])
    owner: dict[int, Any] = {}
    for graph in graphs:
        for op in getattr(graph, "operations", ()):
            owner[id(op)] = graph

    def graph_of(op: Any) -> Any:
        return _op_graph(op, owner.get(id(op)) or getattr(op, OWNER_GRAPH_ATTR, None))

    yield graph_of


def plan_graph(operations: Sequence[Any], max_cores: int | None = None) -> list[OpDecision]:
    """One decision (with its trace) per op, in order; Unsupported is recorded."""
    ev = evaluator(max_cores)
    out = []
    # Planning reads the graph, never edits it: measurements of shared buffers hold for all ops.
    with graph_scope(operations) as graph_of, memo.stable(), existing_objects_frozen():
        for op in operations:
            with graph_of(op):
                _require_graph(op)
                out.append(ev.decide(op))
    return out
