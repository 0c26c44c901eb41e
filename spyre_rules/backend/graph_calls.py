"""One name for each spelling of a call in a Dynamo graph.

Dynamo records ``x.softmax(-1)`` as ``call_method softmax``, ``torch.softmax(x, -1)`` and
``F.softmax(x, dim=-1)`` as ``call_function`` of two different functions, ``x / 8`` as
``operator.truediv``.  A matcher over the graph asks ``call_of(node)`` and sees one
``Call(name, args, kwargs)`` whatever the spelling: for a method the tensor is
``args[0]``, as for the function.  Only the calls a matcher asks about are named here;
anything else is ``None`` (not matched).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Call", "call_of", "value_of", "argument", "int_dims"]

F = torch.nn.functional

_FUNCTIONS: dict[Any, str] = {
    operator.getitem: "getitem",
    operator.matmul: "matmul", torch.matmul: "matmul", torch.Tensor.matmul: "matmul",
    operator.truediv: "div", torch.div: "div", torch.true_divide: "div",
    operator.mul: "mul", torch.mul: "mul",
    operator.add: "add", torch.add: "add",
    operator.sub: "sub", torch.sub: "sub",
    torch.softmax: "softmax", F.softmax: "softmax", torch.Tensor.softmax: "softmax",
    torch.where: "where", torch.masked_fill: "masked_fill",
    torch.permute: "permute", torch.transpose: "transpose", torch.swapaxes: "transpose",
    torch.reshape: "reshape", torch.flatten: "flatten", torch.unsqueeze: "unsqueeze",
    torch.repeat_interleave: "repeat_interleave", torch.clone: "clone",
    F.dropout: "dropout",
}

_METHODS: dict[str, str] = {
    "__matmul__": "matmul", "matmul": "matmul", "div": "div", "true_divide": "div",
    "__truediv__": "div", "mul": "mul", "__mul__": "mul", "add": "add", "__add__": "add",
    "sub": "sub", "__sub__": "sub",
    "softmax": "softmax", "masked_fill": "masked_fill", "where": "where_method",
    "permute": "permute", "transpose": "transpose", "swapaxes": "transpose",
    "reshape": "reshape", "view": "view", "flatten": "flatten", "unsqueeze": "unsqueeze",
    "expand": "expand", "repeat_interleave": "repeat_interleave",
    "contiguous": "contiguous", "clone": "clone",
    "to": "cast", "type": "cast", "type_as": "cast", "float": "cast", "half": "cast",
    "bfloat16": "cast", "double": "cast",
}


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple
    kwargs: dict


def call_of(node: Any) -> Call | None:
    """The call ``node`` makes under its one name, or None."""
    if not isinstance(node, torch.fx.Node):
        return None
    if node.op == "call_function":
        name = _FUNCTIONS.get(node.target)
    elif node.op == "call_method":
        name = _METHODS.get(node.target)
    else:
        return None
    return None if name is None else Call(name, tuple(node.args), dict(node.kwargs))


def value_of(node: Any) -> Any:
    """The example value Dynamo traced for ``node`` (a FakeTensor), or None."""
    return node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None


def argument(call: Call, index: int, name: str, default: Any = None) -> Any:
    """Argument ``index`` (``args[0]`` the tensor) or keyword ``name``."""
    if index < len(call.args):
        return call.args[index]
    return call.kwargs.get(name, default)


def int_dims(values: Any, rank: int) -> list[int] | None:
    """``values`` (ints, or one tuple of them) as dims in ``[0, rank)``, or None."""
    if len(values) == 1 and isinstance(values[0], (tuple, list)):
        values = values[0]
    if not all(isinstance(v, int) and -rank <= v < rank for v in values):
        return None
    return [v % rank for v in values]
