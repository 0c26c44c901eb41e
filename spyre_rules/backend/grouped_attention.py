"""Grouped-query SDPA reaches our decomposition with its key/value heads unrepeated.

A model whose key/value heads are fewer than its query heads (grouped-query and
multi-query attention: Llama-3, Mistral, Falcon) reaches
``F.scaled_dot_product_attention`` in one of three forms:

* ``enable_gqa=True``: the CPU dispatch picks the fused kernel, which our
  decomposition (``attention._math_attention``) computes grouped.
* **Multi-query by broadcast** (Falcon: key/value ``[N, 1, S, E]``, no
  ``enable_gqa``): the CPU dispatch picks ATen's math path, which is
  CompositeImplicitAutograd and so is decomposed while tracing, before any
  decomposition table is consulted: its ``matmul`` expands the one key head over
  every query head and merges ``[N, H]`` into a ``bmm``, so the key and the value
  are each copied ``H`` times (at Falcon-7B's batch 4 x 8192 tokens, 71 heads,
  595 MB a layer a token), and the merged batch reads the copy with ``d0 mod H``
  coordinates no split keeps rigid.
* **Heads repeated by the model** (transformers' ``repeat_kv`` when a mask is
  passed, as every static-cache decode step does): ``k[:, :, None].expand(N, KV,
  R, S, E).reshape(N, KV * R, S, E)`` before the call; the reshape of an expanded
  view is a copy, ``R`` times the cache per layer per step.

``grouped_kv_heads`` rewrites the Dynamo graph before ``compile_fx`` (as
``batch_matmul.keep_matmul_batch`` does) so that all three reach the first form:
a repeated key/value is replaced by its unrepeated source (``expand``'s input with
the unit dim squeezed) and the call gets ``enable_gqa=True``; a broadcast single
key/value head gets ``enable_gqa=True``.  Both are the same function: query head
``h`` attends with key/value head ``h // R`` either way.  What is left: a call the
CPU dispatch still sends to the math path (a dropout, a head dim the fused kernel
refuses), whose heads ATen repeats itself.

Attention written out by hand repeats the heads the same way (transformers' eager
attention: ``matmul(q, repeat_kv(k).transpose(2, 3))``, then ``matmul(p,
repeat_kv(v))``).  ``grouped_kv_products`` rewrites each such product to the grouped
one: the ``[N, H, L, K]`` operand viewed ``[N, KV, R, L, K]`` times the unrepeated
``[N, KV, 1, K, M]`` (broadcast over ``R``; ``batch_matmul.keep_matmul_batch`` then
reads it in place), the result viewed back ``[N, H, L, M]``.  Each output element is
the same dot product of the same elements; only the copy is gone.
"""

from __future__ import annotations

import operator
from typing import Any

import torch

__all__ = ["grouped_kv_heads", "grouped_kv_products"]

_SDPA = {torch._C._nn.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention}
_RESHAPES = {"reshape", "view"}
_EXPANDS = {"expand"}
_MATMULS = {torch.matmul, torch.Tensor.matmul, operator.matmul}


def _value(node: Any) -> Any:
    return node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None


def _shape(node: Any) -> list[int] | None:
    value = _value(node)
    return list(value.shape) if isinstance(value, torch.Tensor) else None


def _is_method(node: Any, names: set[str]) -> bool:
    return isinstance(node, torch.fx.Node) and (
        node.op == "call_method" and node.target in names
        or node.op == "call_function" and getattr(node.target, "__name__", None) in names
        and node.target in (torch.reshape, torch.Tensor.reshape, torch.Tensor.view,
                            torch.Tensor.expand))


def _repeated_source(node: Any) -> tuple[Any, int] | None:
    """``(source, R)`` when ``node`` is ``source[:, :, None].expand(N, KV, R, S, E)
    .reshape(N, KV * R, S, E)`` (any way of inserting the unit dim), else None."""
    if not _is_method(node, _RESHAPES) or not node.args:
        return None
    expanded = node.args[0]
    if not _is_method(expanded, _EXPANDS) or not expanded.args:
        return None
    unit = expanded.args[0]
    out, wide, narrow = _shape(node), _shape(expanded), _shape(unit)
    if out is None or wide is None or narrow is None or len(out) != 4 or len(wide) != 5 \
            or len(narrow) != 5 or narrow[2] != 1:
        return None
    n, kv, repeats, s, e = wide
    if narrow != [n, kv, 1, s, e] or out != [n, kv * repeats, s, e]:
        return None
    return unit, repeats


def _squeezed(graph: Any, unit: Any, meta: dict) -> Any:
    node = graph.call_method("squeeze", (unit, 2))
    node.meta = {**meta, "example_value": _value(unit).squeeze(2)}
    return node


def _erase_unused(graph: Any, reshape: Any) -> None:
    if reshape.users:
        return
    expanded = reshape.args[0]
    graph.erase_node(reshape)
    if not expanded.users:
        graph.erase_node(expanded)


def _call_parts(node: Any) -> tuple[list[Any], dict[str, Any]] | None:
    if node.op != "call_function" or node.target not in _SDPA or len(node.args) < 3:
        return None
    return list(node.args), dict(node.kwargs)


def grouped_kv_heads(gm: torch.fx.GraphModule) -> bool:
    """Rewrite every grouped-query SDPA call of ``gm`` in place (module doc); True if any
    changed."""
    graph = gm.graph
    changed = False
    repeats: list[Any] = []
    for node in list(graph.nodes):
        parts = _call_parts(node)
        if parts is None:
            continue
        args, kwargs = parts
        q, k, v = args[:3]
        qs, ks, vs = _shape(q), _shape(k), _shape(v)
        if qs is None or ks is None or vs is None or not len(qs) == len(ks) == len(vs) == 4:
            continue
        dropout = args[4] if len(args) > 4 else kwargs.get("dropout_p", 0.0)
        if dropout != 0.0:
            continue
        kr, vr = _repeated_source(k), _repeated_source(v)
        if kr is not None and vr is not None and kr[1] == vr[1] and \
                qs[0] == ks[0] == vs[0] and qs[1] == ks[1] == vs[1]:
            with graph.inserting_before(node):
                args[1] = _squeezed(graph, kr[0], k.meta)
                args[2] = _squeezed(graph, vr[0], v.meta)
            repeats.extend((k, v))
        elif not (ks[1] == vs[1] == 1 < qs[1] and qs[0] == ks[0] == vs[0]):
            continue
        # a single key/value head by broadcast, or the repeat undone: grouped either way
        if len(args) > 7:
            args[7] = True
        else:
            kwargs["enable_gqa"] = True
        node.args, node.kwargs = tuple(args), kwargs
        changed = True
    for reshape in dict.fromkeys(repeats):  # the copies no one reads now (not a general DCE: keep the
        _erase_unused(graph, reshape)  # graph's in-place cache writes untouched)
    if changed:
        graph.lint()
        gm.recompile()
    return changed


def _matmul_operands(node: Any) -> tuple[Any, Any] | None:
    if len(node.args) != 2 or node.kwargs:
        return None
    if node.op == "call_function" and node.target in _MATMULS \
            or node.op == "call_method" and node.target == "matmul":
        return node.args[0], node.args[1]
    return None


def _last_two_swapped(node: Any) -> Any:
    """``x`` when ``node`` is ``x.transpose`` of the last two dims of a 4-D ``x``, else None."""
    if not isinstance(node, torch.fx.Node) or len(node.args) != 3 or node.kwargs:
        return None
    if not (node.op == "call_method" and node.target == "transpose"
            or node.op == "call_function" and node.target in (torch.transpose, torch.Tensor.transpose)):
        return None
    source, *dims = node.args
    shape = _shape(source)
    if shape is None or len(shape) != 4 or not all(isinstance(d, int) for d in dims):
        return None
    return source if sorted(d % 4 for d in dims) == [2, 3] else None


def _grouped(graph: Any, node: Any, left: Any, unit: Any, repeats: int, swapped: bool) -> Any:
    """``left [N, H, L, K] @ unit`` grouped (module doc), viewed back to ``node``'s shape."""
    n, heads, rows, inner = _shape(left)
    with graph.inserting_before(node):
        left5 = graph.call_method("view", (left, n, heads // repeats, repeats, rows, inner))
        left5.meta = {**left.meta, "example_value": _value(left).view(n, heads // repeats,
                                                                      repeats, rows, inner)}
        right = unit
        if swapped:
            right = graph.call_method("transpose", (unit, 3, 4))
            right.meta = {**unit.meta, "example_value": _value(unit).transpose(3, 4)}
        product = graph.call_function(torch.matmul, (left5, right))
        product.meta = {**node.meta, "example_value": torch.matmul(_value(left5), _value(right))}
        out = graph.call_method("reshape", (product, *_shape(node)))
        out.meta = {**node.meta}
    return out


def grouped_kv_products(gm: torch.fx.GraphModule) -> bool:
    """Rewrite every product of a 4-D operand with repeated key/value heads (module doc)
    in place; True if any changed."""
    graph = gm.graph
    repeats: list[Any] = []
    for node in list(graph.nodes):
        operands = _matmul_operands(node)
        if operands is None:
            continue
        left, right = operands
        swapped = _last_two_swapped(right)
        repeated = swapped if swapped is not None else right
        found = _repeated_source(repeated)
        left_shape = _shape(left)
        if found is None or left_shape is None or len(left_shape) != 4 \
                or left_shape[:2] != _shape(repeated)[:2] or _shape(node) is None:
            continue
        unit, times = found
        node.replace_all_uses_with(_grouped(graph, node, left, unit, times, swapped is not None))
        graph.erase_node(node)
        if swapped is not None and not right.users:
            graph.erase_node(right)
        repeats.append(repeated)
    for reshape in dict.fromkeys(repeats):
        _erase_unused(graph, reshape)
    if repeats:
        graph.lint()
        gm.recompile()
    return bool(repeats)
