"""Complex rotary embeddings as real arithmetic (issue 41: Llama 4, DeepSeek-V2).

Llama 4 and DeepSeek-V2 rotate queries and keys as complex numbers::

    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    out = torch.view_as_real(xq_ * freqs_cis[:, :, None, :]).flatten(3)

Inductor lowers every complex op to an ATen fallback kernel; the program has no
complex dtype.  This post-grad pass (``post_grad.py``: Inductor's
``post_grad_custom_pre_pass``, run on the functional ATen graph before lowering)
carries each complex64 value as two float32 tensors, its real and imaginary
parts, with ATen's own formulas:

* ``view_as_complex(x)``: ``x[..., 0]`` and ``x[..., 1]``;
* ``polar(r, t)``: ``r * cos(t)`` and ``r * sin(t)``;
* ``z * w``: ``(ac - bd, ad + bc)``, each product rounded to float32, as ATen's
  vectorised complex multiply computes it; a real factor ``c`` (a tensor or a
  scalar) is promoted to ``c + 0i`` by ATen and is here too;
* views and copies that keep the complex shape (unsqueeze, view, expand, slice,
  select, permute, clone, ...): applied to both parts;
* ``view_as_real(z)``: the parts concatenated along a new last dim.

The rewrite is all or nothing per graph: a complex value any other op reads (or a
complex graph input or output) leaves the graph unchanged, and its complex ops
reach the fallback as before.

Equality with eager: the products and sums are the ones ATen's vectorised
(AVX2/AVX-512) complex multiply rounds, so they are bitwise equal; ATen's scalar
loop (the tail of a row whose complex count is not a multiple of the vector
width, or a chunk boundary of a parallel loop) may contract ``ac - bd`` into a
fused multiply-add and then differs by one rounding of that sum.  ``polar``'s
eager kernel calls the C library's ``cos``/``sin`` per element, the program
``torch.cos``/``torch.sin`` (SLEEF, documented within 1 ULP): those parts may
differ by 1 ULP (docs/accumulation.md).
"""

from __future__ import annotations

from typing import Any

import torch
from torch._inductor.fx_passes.reinplace import graph_call_function

__all__ = ["complex_as_real"]

aten = torch.ops.aten

#: Ops that keep a complex value's shape semantics per element: applied to each part
#: with the same arguments.
_PER_PART = {
    aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default,
    aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.expand.default,
    aten.slice.Tensor, aten.select.int, aten.permute.default, aten.clone.default,
    aten.alias.default, aten.transpose.int, aten.t.default,
}
_SOURCES = {aten.view_as_complex.default, aten.polar.default}
_SINKS = {aten.view_as_real.default}
_ARITHMETIC = {aten.mul.Tensor}
_COMPLEX = {torch.complex64: torch.float32}


def _val(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _is_complex(node: Any) -> bool:
    value = _val(node)
    return isinstance(value, torch.Tensor) and value.dtype.is_complex


def _rewritable(graph: torch.fx.Graph) -> bool:
    """Every complex value is made by a source, a per-part op or arithmetic, and read
    only by those or a sink (complex64 only)."""
    known = _SOURCES | _PER_PART | _ARITHMETIC
    any_complex = False
    for node in graph.nodes:
        if not _is_complex(node):
            continue
        any_complex = True
        if _val(node).dtype not in _COMPLEX or node.op != "call_function" \
                or node.target not in known:
            return False
        if node.target in _PER_PART and not _is_complex(node.args[0]):
            return False
        for user in node.users:
            if user.op != "call_function" or user.target not in known | _SINKS:
                return False
            if user.target in _PER_PART and user.args[0] is not node:
                return False  # a complex value as a size or index argument
        if node.kwargs and node.target not in _PER_PART:
            return False  # per-part ops pass their kwargs on; the others take none
        if node.target in _ARITHMETIC and not all(
                _is_complex(a) or isinstance(a, (int, float)) and not isinstance(a, bool)
                or isinstance(a, torch.fx.Node) and _val(a) is not None
                and _val(a).dtype.is_floating_point for a in node.args):
            return False  # a python complex scalar or an integer tensor factor
    return any_complex


class _Emitter:
    """Inserts ATen calls, each with its fake value (Inductor's ``V.fake_mode``)."""

    def __init__(self, graph: torch.fx.Graph) -> None:
        self.graph = graph

    def __call__(self, target: Any, *args: Any, **kwargs: Any) -> torch.fx.Node:
        return graph_call_function(self.graph, target, *args, **kwargs)


def _factor(parts: dict, operand: Any) -> tuple[Any, Any]:
    """``operand`` as (real, imaginary): a real tensor or scalar has imaginary 0."""
    if isinstance(operand, torch.fx.Node) and operand in parts:
        return parts[operand]
    return operand, 0.0


def _multiply(emit: _Emitter, a: Any, b: Any, c: Any, d: Any) -> tuple[Any, Any]:
    """``(a + bi)(c + di)`` as ATen computes it: ``(ac - bd, ad + bc)``."""
    def mul(x: Any, y: Any) -> Any:
        if not isinstance(x, torch.fx.Node):
            x, y = y, x  # a scalar factor goes second (mul.Tensor takes a Scalar there)
        return emit(aten.mul.Tensor, x, y)

    return (emit(aten.sub.Tensor, mul(a, c), mul(b, d)),
            emit(aten.add.Tensor, mul(a, d), mul(b, c)))


def _rewrite(node: torch.fx.Node, emit: _Emitter, parts: dict) -> Any:
    """The parts of complex ``node`` (a tuple), or the real node replacing a sink."""
    target, args = node.target, node.args
    if target is aten.view_as_complex.default:
        return emit(aten.select.int, args[0], -1, 0), emit(aten.select.int, args[0], -1, 1)
    if target is aten.polar.default:
        radius, angle = args
        return (emit(aten.mul.Tensor, radius, emit(aten.cos.default, angle)),
                emit(aten.mul.Tensor, radius, emit(aten.sin.default, angle)))
    if target is aten.mul.Tensor:
        (a, b), (c, d) = _factor(parts, args[0]), _factor(parts, args[1])
        return _multiply(emit, a, b, c, d)
    if target in _PER_PART:
        re, im = parts[args[0]]
        rest, kwargs = args[1:], node.kwargs
        return emit(target, re, *rest, **kwargs), emit(target, im, *rest, **kwargs)
    re, im = parts[args[0]]  # view_as_real
    return emit(aten.cat.default, [emit(aten.unsqueeze.default, re, -1),
                                   emit(aten.unsqueeze.default, im, -1)], -1)


def complex_as_real(graph: torch.fx.Graph) -> bool:
    """Rewrite every complex64 value of ``graph`` into real parts (module doc); True if
    the graph changed."""
    if not _rewritable(graph):
        return False
    emit = _Emitter(graph)
    parts: dict[torch.fx.Node, tuple[Any, Any]] = {}
    for node in list(graph.nodes):
        if node.op != "call_function" or not (_is_complex(node) or node.target in _SINKS):
            continue
        with graph.inserting_before(node):
            result = _rewrite(node, emit, parts)
        if node.target in _SINKS:
            node.replace_all_uses_with(result)
        else:
            parts[node] = result
    for node in reversed(list(graph.nodes)):
        if (_is_complex(node) or node.target in _SINKS) and not node.users:
            graph.erase_node(node)
    graph.lint()
    return True
