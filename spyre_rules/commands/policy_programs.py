"""The programs of policy tests: a few lines of tensor expressions, or a bundled example.

A program is written in a small subset of Python, parsed with :mod:`ast` and
interpreted here (never ``eval``'d), so a test file cannot run arbitrary code::

    c = x + 1
    d = c[:, :, :8, :] * 2
    return c, d

Statements: ``NAME = EXPR`` and one final ``return EXPR[, EXPR ...]``.
Expressions: input and bound names, int/float constants, ``+ - * / @``, unary
``-``, subscripts with ints, slices, ``None`` and index tensors, the methods in
:data:`METHODS` and the functions in :data:`FUNCTIONS`, with constant keyword
arguments.  Inputs are declared as ``{ x = "float16[1, 20, 16, 64]" }``
(dtype and shape; values are zeros -- the planner never reads them).
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from typing import Any

__all__ = ["ProgramError", "FUNCTIONS", "METHODS", "build_program", "parse_input"]


class ProgramError(ValueError):
    """A program or input declaration outside the supported subset."""


METHODS = frozenset({
    "sum", "mean", "amax", "amin", "exp", "relu", "neg", "abs", "sqrt", "t", "transpose",
    "permute", "reshape", "view", "contiguous", "unsqueeze", "squeeze", "expand", "softmax",
    "half", "float", "argmax", "argmin", "var", "std", "prod", "cumsum", "sigmoid",
    "repeat_interleave",
    "index_copy_", "index_add_",  # in-place writes of an input (a KV cache): c = x.index_copy_(...)
})

FUNCTIONS: dict[str, str] = {   # name -> torch attribute path
    "linear": "nn.functional.linear",
    "softmax": "softmax",
    "relu": "relu",
    "exp": "exp",
    "matmul": "matmul",
    "bmm": "bmm",
    "cat": "cat",
    "where": "where",
    "var_mean": "var_mean",
    "layer_norm": "nn.functional.layer_norm",
    "safe_softmax": "ops.aten._safe_softmax",  # softmax zeroing wholly masked rows (SDPA's math path)
}

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.MatMult: operator.matmul,
}

_INPUT = re.compile(r"^\s*([a-z0-9]+)\s*\[\s*([0-9,\s]*)\]\s*$")


def parse_input(text: str) -> tuple[str, tuple[int, ...]]:
    """``"float16[1, 20, 16, 64]"`` -> ``("float16", (1, 20, 16, 64))``."""
    m = _INPUT.match(text) if isinstance(text, str) else None
    if m is None:
        raise ProgramError(f"input {text!r}: expected DTYPE[D0, D1, ...], e.g. \"float16[8, 64]\"")
    dtype = m.group(1)
    import torch

    if not isinstance(getattr(torch, dtype, None), torch.dtype):
        raise ProgramError(f"input {text!r}: unknown dtype {dtype!r}")
    shape = tuple(int(p) for p in m.group(2).split(",") if p.strip())
    return dtype, shape


def _torch_attr(path: str) -> Any:
    import torch

    obj: Any = torch
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


class _Interpreter:
    def __init__(self, names: dict[str, Any]) -> None:
        self.names = names

    def fail(self, node: ast.AST, what: str) -> ProgramError:
        return ProgramError(f"line {getattr(node, 'lineno', '?')}: {what}")

    def const(self, node: ast.expr) -> Any:
        """A constant keyword/positional argument: numbers, None, bools, tuples/lists of them."""
        if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (int, float))):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.const(node.operand)
        if isinstance(node, (ast.Tuple, ast.List)):
            return [self.const(e) for e in node.elts]
        raise self.fail(node, f"expected a constant, got `{ast.unparse(node)}`")

    def index(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Slice):
            parts = [None if p is None else self.const(p) for p in (node.lower, node.upper, node.step)]
            return slice(*parts)
        if isinstance(node, ast.Tuple):
            return tuple(self.index(e) for e in node.elts)
        if isinstance(node, ast.Constant) and node.value is Ellipsis:
            return Ellipsis
        if isinstance(node, ast.Name):
            return self.expr(node)
        return self.const(node)

    def args(self, call: ast.Call) -> tuple[list[Any], dict[str, Any]]:
        """Tensor-valued arguments are evaluated; the rest must be constants (dims, sizes)."""
        tensor_like = (ast.Name, ast.BinOp, ast.Call, ast.Subscript, ast.List)
        args = [self.expr(a) if isinstance(a, tensor_like) and not _is_const_list(a) else self.const(a)
                for a in call.args]
        kwargs = {k.arg: self.const(k.value) for k in call.keywords if k.arg is not None}
        if len(kwargs) != len(call.keywords):
            raise self.fail(call, "`**kwargs` is not supported")
        return args, kwargs

    def expr(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Name):
            if node.id not in self.names:
                raise self.fail(node, f"unknown name `{node.id}`")
            return self.names[node.id]
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.expr(node.operand)
        if isinstance(node, ast.Subscript):
            return self.expr(node.value)[self.index(node.slice)]
        if isinstance(node, ast.List):
            return [self.expr(e) for e in node.elts]
        if isinstance(node, ast.Call):
            args, kwargs = self.args(node)
            func = node.func
            if isinstance(func, ast.Attribute):
                if func.attr not in METHODS:
                    raise self.fail(node, f"method `.{func.attr}` is not supported "
                                          f"(supported: {', '.join(sorted(METHODS))})")
                return getattr(self.expr(func.value), func.attr)(*args, **kwargs)
            if isinstance(func, ast.Name) and func.id in FUNCTIONS:
                return _torch_attr(FUNCTIONS[func.id])(*args, **kwargs)
            raise self.fail(node, f"function `{ast.unparse(func)}` is not supported "
                                  f"(supported: {', '.join(sorted(FUNCTIONS))})")
        raise self.fail(node, f"`{ast.unparse(node)}` is not supported in a policy-test program")


def _is_const_list(node: ast.expr) -> bool:
    return isinstance(node, ast.List) and all(isinstance(e, ast.Constant) for e in node.elts)


def _parse(source: str) -> list[ast.stmt]:
    try:
        body = ast.parse(source, mode="exec").body
    except SyntaxError as err:
        raise ProgramError(f"line {err.lineno}: {err.msg}") from None
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        raise ProgramError("a program ends with `return NAME[, NAME ...]`")
    for stmt in body[:-1]:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            raise ProgramError(f"line {stmt.lineno}: expected `NAME = EXPR` "
                               f"(got `{ast.unparse(stmt)}`)")
    return body


def build_program(source: str, inputs: dict[str, str]) -> tuple[Callable[..., Any], list[Any]]:
    """An FX GraphModule computing ``source`` and zero tensors for ``inputs`` (in order).

    The program is interpreted once over FX proxies, so Dynamo later traces
    plain generated code, exactly like a user's module."""
    import torch
    import torch.fx

    body = _parse(source)
    declared = {name: parse_input(text) for name, text in inputs.items()}
    if not declared:
        raise ProgramError("a program needs at least one input")
    graph = torch.fx.Graph()
    tracer = torch.fx.proxy.GraphAppendingTracer(graph)
    interp = _Interpreter({name: torch.fx.Proxy(graph.placeholder(name), tracer) for name in declared})
    try:
        for stmt in body[:-1]:
            interp.names[stmt.targets[0].id] = interp.expr(stmt.value)
        result = body[-1].value
        if isinstance(result, ast.Tuple):
            out = tuple(interp.expr(e).node for e in result.elts)
        else:
            out = interp.expr(result).node
    except ProgramError:
        raise
    except Exception as exc:  # noqa: BLE001 - a bad call on a proxy: report it as the program's
        raise ProgramError(f"cannot build the program: {type(exc).__name__}: {exc}") from None
    graph.output(out)
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    tensors = [torch.zeros(shape, dtype=getattr(torch, dtype)) for dtype, shape in declared.values()]
    try:  # shape errors surface here, before Dynamo wraps them
        with torch.no_grad():
            module.forward(*tensors)  # not module(...): fx would print the traceback too
    except Exception as exc:  # noqa: BLE001
        raise ProgramError(f"the program fails on its inputs: {type(exc).__name__}: {exc}") from None
    return module, tensors
