"""Identical layers compiled once: nested compile regions.

A model marks a repeated block with ``torch.compiler.nested_compile_region``
(PyTorch's regional compilation; ``spyre-rules plan`` marks the decoder layer of
a transformers model itself, ``commands/model_regions.py``).  Dynamo then traces
the block once: the graph the backend receives calls it through
``invoke_subgraph`` nodes, one per layer, all naming the same subgraph, with the
layer's parameters and activations as operands.

The backend splits such a graph into steps, in graph order: each
``invoke_subgraph`` call is a step that runs the program of its subgraph, and
each run of other nodes between them (the embedding before the first layer,
the norm and head after the last) is a step of its own.  Every step compiles at
its first call, with the call's tensors, through the whole static pipeline
(planned, generated, span-checked, dumped); a subgraph is compiled once per
operand shape and every call of it runs that one program: planning and code
generation cost one layer, whatever the number of layers.  The values between
steps are the tensors eager PyTorch would pass between the layers.

Each dumped ``plan.json`` says which part it is (``"region"``): the subgraph and
every call sharing its program, or the place of a run between regions.

A graph with symbolic sizes, or one that reads a call's results other than one
by one, has its regions inlined (each call replaced by a copy of the subgraph's
nodes) and compiles as before (one program per shape for symbolic sizes).
"""

from __future__ import annotations

import contextlib
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Node

from spyre_rules import config

__all__ = ["has_regions", "splittable", "inline_regions", "RegionProgram", "call_path"]

INVOKE_SUBGRAPH = torch.ops.higher_order.invoke_subgraph
_ROOT_SOURCE = re.compile(r"^L\[[^\]]*\](\[\d+\])*\.?")


def _is_invoke(node: Node) -> bool:
    return node.op == "call_function" and node.target is INVOKE_SUBGRAPH


def has_regions(gm: GraphModule) -> bool:
    return any(_is_invoke(n) for n in gm.graph.nodes)


def splittable(gm: GraphModule) -> bool:
    """Whether ``gm`` can run as steps: every call's results are read one by one
    (a call's whole tuple read by another op would be a tuple between two programs)."""
    return all(_reads_call(u) for n in gm.graph.nodes if _is_invoke(n) for u in n.users)


def _subgraph(gm: GraphModule, node: Node) -> GraphModule:
    attr = node.args[0]
    return getattr(gm, attr.target) if isinstance(attr, Node) else attr


def call_path(node: Node) -> str:
    """The module path a region call stands for (``model.layers.3``), from Dynamo's
    module stack; the node's name when it has none."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return node.name
    path = list(stack.values())[-1][0]
    # Dynamo's source of the root module (L['self'], L['args'][0], L['fn'], ...) is not a module path
    return _ROOT_SOURCE.sub("", path) or node.name


def inline_regions(gm: GraphModule) -> None:
    """Replace every region call of ``gm`` by a copy of its subgraph's nodes, in place."""
    graph = gm.graph
    for node in [n for n in graph.nodes if _is_invoke(n)]:
        body = _subgraph(gm, node)
        env: dict[Node, Any] = dict(zip([p for p in body.graph.nodes if p.op == "placeholder"], node.args[2:]))
        result: Any = None
        with graph.inserting_before(node):
            for inner in body.graph.nodes:
                if inner.op == "placeholder":
                    continue
                if inner.op == "output":
                    result = torch.fx.node.map_arg(inner.args[0], lambda x: env[x])
                    continue
                if inner.op == "get_attr":  # a constant of the subgraph: make it the outer graph's
                    name = f"_region_{body.__class__.__name__}_{id(body)}_{inner.target}".replace(".", "_")
                    setattr(gm, name, getattr(body, inner.target))
                    env[inner] = graph.get_attr(name)
                    continue
                env[inner] = graph.node_copy(inner, lambda x: env[x])
        for user in list(node.users):
            if user.op == "call_function" and user.target is operator.getitem:
                user.replace_all_uses_with(result[user.args[1]])
                graph.erase_node(user)
        if node.users:  # the tuple itself is used: a tuple node
            with graph.inserting_before(node):
                whole = graph.call_function(tuple, (list(result),))
            node.replace_all_uses_with(whole)
        attr = node.args[0]
        graph.erase_node(node)
        if isinstance(attr, Node) and not attr.users:
            graph.erase_node(attr)
    graph.lint()
    gm.recompile()


class _Run:
    """A run of nodes between region calls, compiled as a graph of its own."""

    def __init__(self, gm: GraphModule, inputs: list[Node], outputs: list[Node], position: str) -> None:
        self.gm, self.inputs, self.outputs, self.position = gm, inputs, outputs, position
        self.programs: dict[tuple, Callable] = {}

    def values(self, env: dict[Node, Any]) -> list[Any]:
        return [env[n] for n in self.inputs]

    def bind(self, env: dict[Node, Any], results: Sequence[Any]) -> None:
        env.update(zip(self.outputs, results))


class _Call:
    """One region call: the subgraph's program on the call's operands."""

    def __init__(self, node: Node, outputs: list[Node]) -> None:
        self.node, self.outputs = node, outputs
        self.operands = node.args[2:]
        self.name = node.args[1] if len(node.args) > 1 and isinstance(node.args[1], str) else node.name
        self.path = call_path(node)
        self.key: tuple = ()

    def values(self, env: dict[Node, Any]) -> list[Any]:
        return [env[a] if isinstance(a, Node) else a for a in self.operands]

    def bind(self, env: dict[Node, Any], results: Sequence[Any]) -> None:
        for node in self.outputs:
            env[node] = results if node is self.node else results[node.args[1]]


def _operand_key(value: Any) -> tuple:
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), tuple(value.stride()), value.dtype, value.device.type)
    return ("value", type(value).__name__, repr(value))


def _is_subgraph_attr(node: Node) -> bool:
    return node.op == "get_attr" and bool(node.users) and all(_is_invoke(u) for u in node.users)


def _reads_call(node: Node) -> bool:
    return (node.op == "call_function" and node.target is operator.getitem
            and isinstance(node.args[0], Node) and _is_invoke(node.args[0]))


def _split(gm: GraphModule) -> tuple[list[Any], list[Node], Any]:
    """The steps of ``gm`` in graph order, its placeholders and its output structure."""
    nodes = list(gm.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    (output,) = [n for n in nodes if n.op == "output"]
    owner: dict[Node, int] = {}   # node -> index of the group defining it
    groups: list[tuple[str, list[Node]]] = []
    for node in nodes:
        if node.op in ("placeholder", "output") or _is_subgraph_attr(node):
            continue
        if _is_invoke(node):
            groups.append(("call", [node]))
        elif _reads_call(node):  # an output of a call: read with the call
            groups[owner[node.args[0]]][1].append(node)
            owner[node] = owner[node.args[0]]
            continue
        elif not groups or groups[-1][0] != "run":
            groups.append(("run", [node]))
        else:
            groups[-1][1].append(node)
        owner[node] = len(groups) - 1
    calls = [members[0] for kind, members in groups if kind == "call"]
    order = {n: i for i, n in enumerate(nodes)}
    steps: list[Any] = []
    for index, (kind, members) in enumerate(groups):
        # read by another step or by the graph's output
        outputs = [n for n in members if any(owner.get(u, -1) != index for u in n.users)]
        if kind == "call":
            steps.append(_Call(members[0], outputs))
            continue
        if not outputs:
            continue  # nothing after it reads it (a dead op, a logging call): nothing to run
        inside = set(members)
        inputs: list[Node] = []
        for node in members:
            for value in _nodes_in((node.args, node.kwargs)):
                if value not in inside and value not in inputs:
                    inputs.append(value)
        position = _position(order[members[0]], calls, order)
        steps.append(_Run(_piece(gm, members, inputs, outputs), inputs, outputs, position))
    return steps, placeholders, output.args[0]


def _position(at: int, calls: list[Node], order: dict[Node, int]) -> str:
    before = [c for c in calls if order[c] < at]
    later = [c for c in calls if order[c] > at]
    if not calls:
        return "whole graph"
    if not before:
        return f"before {call_path(later[0])}"
    if not later:
        return f"after {call_path(before[-1])}"
    return f"between {call_path(before[-1])} and {call_path(later[0])}"


def _nodes_in(value: Any) -> list[Node]:
    found: list[Node] = []
    torch.fx.node.map_arg(value, found.append)
    return found


def _piece(gm: GraphModule, members: list[Node], inputs: list[Node], outputs: list[Node]) -> GraphModule:
    graph = Graph()
    env: dict[Node, Node] = {}
    for value in inputs:
        env[value] = graph.placeholder(value.name)
        env[value].meta = dict(value.meta)
    for node in members:
        env[node] = graph.node_copy(node, lambda x: env[x])
    graph.output(tuple(env[n] for n in outputs))
    return GraphModule(gm, graph)


class RegionProgram:
    """The callable Dynamo gets for a graph with region calls (see the module doc)."""

    def __init__(self, gm: GraphModule, compile_static: Callable[[GraphModule, list[Any]], Callable]) -> None:
        from spyre_rules.backend.specialize import _compile_id

        self.gm = gm
        self.compile_static = compile_static
        self.steps, self.placeholders, self.output = _split(gm)
        self.config = config.snapshot()  # every step compiles under the settings of the trace
        self.compile_id = _compile_id()
        # (subgraph name, operand key) -> program: one per distinct call signature
        self.programs: dict[tuple, Callable] = {}
        self.sharing: dict[tuple, list[str]] = {}
        for step in self.steps:
            if isinstance(step, _Call):
                step.key = tuple(_operand_key(_recorded(a) if isinstance(a, Node) else a) for a in step.operands)
                self.sharing.setdefault((step.name, step.key), []).append(step.path)

    def __call__(self, *args: Any) -> Any:
        env: dict[Node, Any] = dict(zip(self.placeholders, args))
        for step in self.steps:
            values = step.values(env)
            step.bind(env, self._program(step, values)(*values))
        return torch.fx.node.map_arg(self.output, lambda n: env[n])

    @property
    def compiled_programs(self) -> int:
        return len(self.programs) + sum(len(s.programs) for s in self.steps if isinstance(s, _Run))

    def _program(self, step: Any, values: list[Any]) -> Callable:
        key = tuple(_operand_key(v) for v in values)
        if isinstance(step, _Call):
            program = self.programs.get((step.name, key))
            if program is None:
                # the calls sharing this program: every call of the subgraph with these operand shapes
                shared = self.sharing[(step.name, key)] if key == step.key else [step.path]
                region = {"kind": "region", "subgraph": step.name, "calls": len(shared), "shared_by": shared}
                body = _copy(_subgraph(self.gm, step.node))
                program = self.programs[(step.name, key)] = self._compile(body, values, region)
            return program
        program = step.programs.get(key)
        if program is None:
            region = {"kind": "between regions", "position": step.position}
            program = step.programs[key] = self._compile(_copy(step.gm), values, region)
        return program

    def _compile(self, gm: GraphModule, values: list[Any], region: dict) -> Callable:
        from torch._guards import CompileContext, compile_context

        from spyre_rules.codegen.dump import dump_region

        # the graph's Dynamo compile id again, so messages (span check) name the graph
        context = compile_context(CompileContext(self.compile_id)) \
            if self.compile_id is not None else contextlib.nullcontext()
        with config.patch(**self.config), context, dump_region(region):
            # called as Dynamo calls a backend's callable: the arguments unpacked (compile_fx's
            # callable says _boxed_call, an attribute copied from the boxed function it wraps:
            # aot_module_simplified's forward(*runtime_args), "This should get fixed")
            return self.compile_static(gm, list(values))


def _recorded(node: Node) -> Any:
    return node.meta.get("example_value", node.meta.get("val"))


def _copy(gm: GraphModule) -> GraphModule:
    """A copy to compile (the pipeline edits the graph it compiles in place)."""
    graph = Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    return GraphModule(gm, graph)
