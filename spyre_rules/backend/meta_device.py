"""Compiling without running: meta-device graphs and outputs made from shapes.

Two jobs, both about never touching tensor data at compile time:

* ``retarget(gm, example_inputs)``: a graph traced on the meta device (a model
  built under ``torch.device("meta")``) compiled as the CPU graph it stands
  for.  Inductor falls back on every op that reads a meta tensor (and our
  codegen is the "cpu" device's), so the meta inputs become fake CPU tensors of
  Dynamo's own fake mode and every ``device=meta`` argument in the graph
  becomes ``cpu``.  Fake tensors hold no storage: lowering, planning, codegen
  and the span check see the real shapes and cost nothing per byte.  A ``histc``
  of integers becomes a ``histc`` of their float32 values, the form the CPU
  kernel takes (``_float_histc_inputs``).
* ``outputs_from_shapes(gm)``: the graph's outputs made from the shapes and
  dtypes Dynamo recorded (``example_value``), without running the graph.  A
  meta compile returns them on the meta device; ``capture_operations`` returns
  them to Dynamo so that code after a graph break can go on (the values are
  uninitialised: a capture computes nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils import _pytree as pytree

__all__ = ["has_meta_inputs", "retarget", "outputs_from_shapes"]

_META = torch.device("meta")
_CPU = torch.device("cpu")


def has_meta_inputs(example_inputs: Sequence[Any]) -> bool:
    return any(isinstance(x, torch.Tensor) and x.is_meta for x in example_inputs)


def _is_meta_device(value: Any) -> bool:
    if isinstance(value, torch.device):
        return value.type == "meta"
    return isinstance(value, str) and value == "meta"


def _cpu_args(value: Any) -> Any:
    return pytree.tree_map(lambda v: _CPU if _is_meta_device(v) else v, value)


def _fake_mode() -> Any:
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    if context is not None and context.fake_mode is not None:
        return context.fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode()


def retarget(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> list[Any]:
    """Rewrite ``gm``'s meta device arguments to cpu in place; the inputs to compile it with.

    Fake inputs come from Dynamo's fake mode (Inductor takes its fake mode from
    the tracing context and insists every fake input shares it)."""
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method", "call_module"):
            node.args = _cpu_args(node.args)
            node.kwargs = _cpu_args(node.kwargs)
    _float_histc_inputs(gm)
    gm.recompile()
    mode = _fake_mode()
    with mode:
        return [_cpu_fake(x) if isinstance(x, torch.Tensor) and x.is_meta else x
                for x in example_inputs]


def _cpu_fake(x: torch.Tensor) -> torch.Tensor:
    """The fake CPU tensor a meta input stands for.  A tensor subclass (a DTensor
    parameter of a tensor-parallel module: its local shard and its placement on the
    mesh) keeps its subclass: only its inner tensors move to the CPU."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    if is_traceable_wrapper_subclass(x):
        names, context = x.__tensor_flatten__()
        # an inner attribute may be no tensor at all (a DTensor's device mesh)
        inner = {name: _cpu_fake(v) if isinstance(v := getattr(x, name), torch.Tensor)
                 and v.is_meta else v for name in names}
        out = type(x).__tensor_unflatten__(inner, context, x.size(), x.stride())
        return out.requires_grad_(x.requires_grad) if x.requires_grad else out
    return torch.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=x.dtype,
                               device=_CPU, requires_grad=x.requires_grad)


_HISTC = (torch.histc, torch.ops.aten.histc.default)


def _float_histc_inputs(gm: torch.fx.GraphModule) -> None:
    """Cast the input of each integer ``histc`` to float32.

    Model code picks the histc form by device: transformers' grouped experts count
    tokens per expert with ``histc(ids.float())`` on the CPU and ``histc(ids.int())``
    elsewhere, the meta device included, and the CPU kernel the graph now stands for
    refuses integers (``"histogram_cpu" not implemented for 'Int'``).  The cast makes
    it the CPU graph the model would have traced; nothing runs on the meta device, and
    integer counts of ids below 2**24 are the same either way."""
    for node in list(gm.graph.nodes):
        if not ((node.op == "call_function" and node.target in _HISTC)
                or (node.op == "call_method" and node.target == "histc")):
            continue
        source = node.args[0]
        value = source.meta.get("example_value") if isinstance(source, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor) or value.is_floating_point():
            continue
        with gm.graph.inserting_before(node):
            cast = gm.graph.call_method("float", (source,))
        cast.meta["example_value"] = value.float()
        node.args = (cast, *node.args[1:])


def _recorded(node: Any) -> Any:
    for key in ("example_value", "val"):
        if key in node.meta:
            return node.meta[key]
    raise RuntimeError(
        f"spyre_rules: graph output {node.name} has no recorded shape (node.meta "
        "example_value/val); cannot produce it without running the graph"
    )


def outputs_from_shapes(gm: torch.fx.GraphModule, device: torch.device | None = None) -> Callable:
    """A callable returning ``gm``'s outputs built from recorded shapes (nothing runs).

    ``device``: where the outputs live (None: the device each was traced on).  A
    graph input returned as an output is returned as it is."""
    (output,) = [n for n in gm.graph.nodes if n.op == "output"]
    placeholders = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    leaves, spec = pytree.tree_flatten(output.args[0])
    makers: list[Callable[[Sequence[Any]], Any]] = []
    for leaf in leaves:
        if not isinstance(leaf, torch.fx.Node):
            makers.append(lambda args, value=leaf: value)
        elif leaf in placeholders:
            makers.append(lambda args, i=placeholders[leaf]: args[i])
        else:
            makers.append(_maker(_recorded(leaf), device))

    def run(*args: Any) -> Any:
        return pytree.tree_unflatten([make(args) for make in makers], spec)

    return run


def _maker(value: Any, device: torch.device | None) -> Callable[[Sequence[Any]], Any]:
    if isinstance(value, torch.Tensor):
        shape, stride = tuple(int(s) for s in value.shape), tuple(int(s) for s in value.stride())
        dtype, where = value.dtype, device if device is not None else value.device
        return lambda args: torch.empty_strided(shape, stride, dtype=dtype, device=where)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise RuntimeError(f"spyre_rules: a symbolic graph output ({value}) cannot be made without running")
    return lambda args: value
