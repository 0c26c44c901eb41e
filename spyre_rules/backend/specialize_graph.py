"""One symbolic-shape FX graph made static for one call's concrete sizes.

Dynamo hands a graph with symbolic sizes (``SymInt`` placeholders, tensors of
shape ``[1, s0]``) to the backend, but the planner and codegen need concrete
sizes (exact divisors, post-tile layouts, concrete loop counts).
:func:`specialize` binds the symbols to one call's values: the ``SymInt``
placeholders are replaced by their integers, then the graph is run once on fake
tensors of the call's shapes and every node whose value is a plain scalar or a
size (``torch.Size([1, s0, 64])``, ``s0 * 4``, ``x.size(1)``) becomes that
constant.  What is left is the graph Dynamo would have traced for these shapes
with static shapes, with every node's meta (``spyre_hint`` annotations
included) kept, so the static-shape pipeline compiles it unchanged.

:func:`same_graph` compares two such graphs op by op (targets, arguments,
annotations): the backend reuses the program of a static graph of the same
frame for a specialisation only when the two are the same computation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Node
from torch.fx.node import map_arg

__all__ = ["Specialized", "specialize", "same_graph", "is_symbolic_value", "value_inputs"]

#: How a graph reads a tensor input's value as a Python scalar (Dynamo passes a
#: float it does not specialise as a 0-d tensor input and reads it with ``item()``).
_VALUE_METHODS = ("item", "tolist")
_VALUE_FUNCTIONS = (
    torch.Tensor.item, torch.Tensor.tolist, torch.ops.aten._local_scalar_dense.default,
)


def _reads_value(node: Node) -> bool:
    return (node.op == "call_method" and node.target in _VALUE_METHODS) or \
        (node.op == "call_function" and node.target in _VALUE_FUNCTIONS)


def value_inputs(gm: GraphModule) -> list[int]:
    """Positions of the tensor inputs whose value the graph reads as a scalar: a
    specialisation folds that value in, so it is part of what the program is for."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return [i for i, p in enumerate(placeholders) if any(_reads_value(u) for u in p.users)]


def is_symbolic_value(value: Any) -> bool:
    """A SymInt/SymFloat/SymBool, or a tensor with a symbolic size or stride."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if isinstance(value, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride()))
    return False


@dataclass
class Specialized:
    """The static graph and which of the call's arguments it takes (positions)."""

    gm: GraphModule
    kept: list[int]  # positions of the call's arguments that stay graph inputs


def specialize(gm: GraphModule, args: Sequence[Any]) -> Specialized:
    """``gm`` with its scalar placeholders bound to ``args`` and its sizes folded."""
    graph = Graph()
    env: dict[Node, Node] = {}
    graph.output(graph.graph_copy(gm.graph, env))  # node_copy keeps each node's meta
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    kept = []
    for index, (node, value) in enumerate(zip(placeholders, args)):
        if isinstance(value, torch.Tensor):
            kept.append(index)
            continue
        _replace_with_constant(node, value)
        graph.erase_node(node)
    out = GraphModule(gm, graph)
    _fold_scalars(out, [args[i] for i in kept])
    # an input read only for its value is folded in: it is no input of the program
    remaining = []
    for node, index in zip([n for n in graph.nodes if n.op == "placeholder"], kept):
        if not node.users and any(_reads_value(u) for u in gm.graph.find_nodes(
                op="placeholder", target=node.target)[0].users):
            graph.erase_node(node)
        else:
            remaining.append(index)
    out.recompile()
    return Specialized(out, remaining)


def _replace_with_constant(node: Node, value: Any) -> None:
    for user in list(node.users):
        user.args = map_arg(user.args, lambda n: value if n is node else n)
        user.kwargs = map_arg(user.kwargs, lambda n: value if n is node else n)


def _is_constant(value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return value is not None
    if isinstance(value, (int, float)):
        return not (isinstance(value, float) and not math.isfinite(value))
    if isinstance(value, (tuple, list)) and not isinstance(value, torch.Tensor):
        return all(_is_constant(v) for v in value)
    return False


#: Runtime assertions whose condition became a constant True are dropped: the fake
#: run evaluated them for these sizes (a False condition raises there).
_ASSERTS = {torch.ops.aten._assert_scalar.default, torch._check}


class _Recorder(torch.fx.Interpreter):
    def __init__(self, gm: GraphModule, real: dict[str, tuple[Any, Any]]) -> None:
        super().__init__(gm)
        self.values: dict[Node, Any] = {}
        self.real = real  # placeholder name -> (item(), tolist()) of the call's tensor

    def run_node(self, n: Node) -> Any:
        source = n.args[0] if n.args else None
        if _reads_value(n) and isinstance(source, Node) and source.name in self.real:
            # a fake tensor has no value: the call's own, read before entering fake mode
            item, as_list = self.real[source.name]
            value = as_list if n.target in ("tolist", torch.Tensor.tolist) else item
        else:
            value = super().run_node(n)
        self.values[n] = value
        return value


def _fold_scalars(gm: GraphModule, args: Sequence[Any]) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    real = {p.name: (a.item() if a.numel() == 1 else None, a.tolist())
            for p, a in zip(placeholders, args)
            if isinstance(a, torch.Tensor) and any(_reads_value(u) for u in p.users)}
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake_args = [mode.from_tensor(a, static_shapes=True) if isinstance(a, torch.Tensor) else a
                     for a in args]
        recorder = _Recorder(gm, real)
        with torch.no_grad():
            recorder.run(*fake_args)
    graph = gm.graph
    for node in list(graph.nodes):
        if node not in recorder.values:
            continue
        value = recorder.values[node]
        if isinstance(value, torch.Tensor):
            node.meta["example_value"] = value
            node.meta["val"] = value
            continue
        if node.op == "call_function" and node.target in _ASSERTS and _asserted(node):
            graph.erase_node(node)
            continue
        if node.op in ("output", "placeholder") or not _is_constant(value) or node.is_impure():
            continue
        if isinstance(value, torch.Size):
            value = tuple(value)
        _replace_with_constant(node, value)
        graph.erase_node(node)
    gm.recompile()


def _asserted(node: Node) -> bool:
    condition = node.args[0] if node.args else node.kwargs.get("cond")
    return condition is True


def same_graph(a: GraphModule, b: GraphModule) -> bool:
    """Whether ``a`` and ``b`` compute the same thing from the same inputs: the same
    placeholders in order, and the same ops with the same arguments, constants and
    ``node.meta["custom"]`` annotations (the user's hints) in the same order."""
    nodes_a, nodes_b = list(a.graph.nodes), list(b.graph.nodes)
    if len(nodes_a) != len(nodes_b):
        return False
    index: dict[Node, int] = {}
    for i, (x, y) in enumerate(zip(nodes_a, nodes_b)):
        if x.op != y.op or x.target != y.target:
            return False
        if x.op == "placeholder" and x.name != y.name:
            return False
        if x.op in ("get_attr", "call_module") and _fetch(a, x.target) is not _fetch(b, x.target):
            # the very same module or tensor: a program may keep a reference to it
            return False
        if x.meta.get("custom") != y.meta.get("custom"):
            return False
        if not _same_arg(x.args, y.args, index, nodes_b) or \
                not _same_arg(x.kwargs, y.kwargs, index, nodes_b):
            return False
        index[x] = i
    return True


def _fetch(module: Any, target: str) -> Any:
    for part in target.split("."):
        module = getattr(module, part, None)
    return module


def _same_arg(x: Any, y: Any, index: dict[Node, int], nodes_b: list[Node]) -> bool:
    if isinstance(x, Node) or isinstance(y, Node):
        return isinstance(x, Node) and isinstance(y, Node) and x in index and \
            nodes_b[index[x]] is y
    if isinstance(x, (tuple, list)) and isinstance(y, (tuple, list)):
        # a folded torch.Size is a tuple; a static trace may have written a list
        return len(x) == len(y) and all(_same_arg(p, q, index, nodes_b) for p, q in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same_arg(x[k], y[k], index, nodes_b) for k in x)
    if type(x) is not type(y):
        return False
    if isinstance(x, torch.Tensor):
        return x.shape == y.shape and x.dtype == y.dtype and bool(torch.equal(x, y))
    try:
        return bool(x == y)
    except Exception:  # noqa: BLE001 - an uncomparable constant is not known equal
        return False

