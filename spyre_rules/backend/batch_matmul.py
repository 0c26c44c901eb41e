"""Keep the batch of a batched matmul/linear: one ``batchmatmul`` over the real batch.

ATen's ``matmul`` folds a ``[*batch, M, K] @ [K, N]`` product into a 2-D ``mm``
over ``batch*M`` rows (and ``linear`` on a 3-D input does the same), and a
``[B1, B2, M, K] @ [B1, B2, K, N]`` into a ``bmm`` over ``B1*B2``.  Both happen
inside the dispatcher (CompositeImplicitAutograd), before any decomposition
table is consulted, so the merged dims are all the pipeline ever sees: a
``spyre_hint`` on ``M`` or ``B1`` then matches no dim.  Spyre computes a matmul
as a ``batchmatmul`` Reduction over the real batch anyway (``matmul.py``), so
the Dynamo graph is rewritten *before* ``compile_fx``: such a product becomes
``spyre_rules.batchmatmul(a.expand(*batch, M, K), b.expand(*batch, K, N))``, a
custom op whose lowering is ``lower_batchmatmul`` (an expand is a view: the
operand is read in place, its batch index ignored) and whose eager kernel is
``torch.matmul``.  The rewritten nodes keep the original node's meta, so
``spyre_hint`` annotations (``node.meta["custom"]``) survive.

Left to ATen: products with a 1-D operand, 2-D @ 2-D, ``[B, M, K] @ [B, K, N]``
(already a ``bmm`` over the real batch), and products of a tensor subclass (DTensor).
"""

from __future__ import annotations

import operator
from typing import Any

import torch

__all__ = ["batched_matmul", "batchmatmul", "keep_matmul_batch"]


@torch.library.custom_op("spyre_rules::batchmatmul", mutates_args=())
def batchmatmul(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``a[*batch, M, K] @ b[*batch, K, N] (+ bias)`` (equal batch shapes); a half
    product and its bias are summed before the one rounding, as ``linear`` does."""
    a, b = _repeated_in_own_layout(a), _repeated_in_own_layout(b)
    if bias is None:
        return torch.matmul(a, b)
    wide = torch.matmul(a.float(), b.float()) + bias.float()
    return wide.to(torch.promote_types(a.dtype, bias.dtype))


def _repeated_in_own_layout(t: torch.Tensor) -> torch.Tensor:
    """``t`` broadcast over a batch dim (a zero stride) of a product of rank above 3, copied
    with each matrix in ``t``'s own layout.

    ``torch.matmul`` merges such a batch with a row-major copy, and the CPU's product of a
    transposed operand sums in another order than that of a row-major one; a model that
    repeats a tensor first (ATen's grouped-query attention repeats each key head, then
    transposes it) multiplies the transposed layout.  Copied in its own layout, the
    broadcast operand gives those bits (``attention._grouped_attention``).  Eager only:
    the lowering reads the operand in place."""
    if t.dim() <= 3 or all(t.stride(d) or t.size(d) == 1 for d in range(t.dim() - 2)):
        return t
    if t.stride(-2) == 1 and t.stride(-1) != 1:
        return t.mT.contiguous().mT
    return t.contiguous()


@batchmatmul.register_fake
def _(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    dtype = a.dtype if bias is None else torch.promote_types(a.dtype, bias.dtype)
    return a.new_empty([*a.shape[:-1], b.shape[-1]], dtype=dtype)


_MATMUL_FUNCTIONS = {operator.matmul, torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__}
_MATMUL_METHODS = {"matmul", "__matmul__"}
_LINEAR_FUNCTIONS = {torch._C._nn.linear, torch.nn.functional.linear}


def _value(node: Any) -> Any:
    return node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None


def _is_tensor(value: Any) -> bool:
    """A plain tensor.  A tensor subclass (a DTensor of a tensor-parallel module) is left
    to its own dispatch: it has no sharding rule for the custom op, and lowers to the
    local shards' own matmul, which our lowering reaches anyway."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    return isinstance(value, torch.Tensor) and not is_traceable_wrapper_subclass(value)


def _batch_shape(a: torch.Tensor, b: torch.Tensor) -> list[int] | None:
    """The common batch shape when ATen would merge or fold it away, else None."""
    if a.dim() < 2 or b.dim() < 2 or max(a.dim(), b.dim()) < 3:
        return None
    batch = list(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    if len(batch) == 1 and list(a.shape[:-2]) == batch == list(b.shape[:-2]):
        return None  # a plain bmm over the real batch already
    return batch


def batched_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.matmul(a, b)`` inside a decomposition, the batch kept where ATen would merge
    or fold it (``keep_matmul_batch``'s rewrite, for products a decomposition makes: the
    graph rewrite ran before them)."""
    batch = _batch_shape(a, b)
    if batch is None:
        return torch.matmul(a, b)
    return torch.ops.spyre_rules.batchmatmul(a.expand(*batch, *a.shape[-2:]),
                                             b.expand(*batch, *b.shape[-2:]))


def _expanded(graph: Any, node: Any, value: torch.Tensor, shape: list[int], meta: dict) -> Any:
    if list(value.shape) == shape:
        return node
    out = graph.call_method("expand", (node, *shape))
    out.meta = {**meta, "example_value": value.expand(*shape)}
    return out


def _operands(node: Any) -> tuple[Any, Any, Any] | None:
    """(a, b, bias) of a matmul/linear node; b is [.., K, N] (a linear's weight transposed)."""
    if node.op == "call_function" and node.target in _MATMUL_FUNCTIONS \
            or node.op == "call_method" and node.target in _MATMUL_METHODS:
        if len(node.args) == 2 and not node.kwargs:
            return node.args[0], node.args[1], None
        return None
    if node.op == "call_function" and node.target in _LINEAR_FUNCTIONS:
        args = list(node.args) + [None] * (3 - len(node.args))
        x, w, bias = args[:3]
        bias = node.kwargs.get("bias", bias)
        if set(node.kwargs) - {"bias"}:
            return None
        return x, ("linear_weight", w), bias
    return None


def keep_matmul_batch(gm: torch.fx.GraphModule) -> bool:
    """Rewrite every batch-merging matmul/linear of ``gm`` in place; True if any changed."""
    graph = gm.graph
    changed = False
    for node in list(graph.nodes):
        found = _operands(node)
        if found is None:
            continue
        a, b, bias = found
        transposed = isinstance(b, tuple)
        if transposed:
            b = b[1]
        av, bv = _value(a), _value(b)
        if not (_is_tensor(av) and _is_tensor(bv)) or (transposed and bv.dim() != 2):
            continue
        if transposed:
            bv = bv.t()
        batch = _batch_shape(av, bv)
        if batch is None or not _is_tensor(_value(node)):
            continue
        meta = dict(node.meta)
        with graph.inserting_before(node):
            if transposed:
                t = graph.call_method("t", (b,))
                t.meta = {**meta, "example_value": bv}
                b = t
            a_e = _expanded(graph, a, av, [*batch, *av.shape[-2:]], meta)
            b_e = _expanded(graph, b, bv, [*batch, *bv.shape[-2:]], meta)
            # the bias goes into the product op: summed before the one rounding
            operands = (a_e, b_e) if bias is None else (a_e, b_e, bias)
            out = graph.call_function(torch.ops.spyre_rules.batchmatmul.default, operands)
            out.meta = dict(meta)
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        changed = True
    if changed:
        graph.lint()
        gm.recompile()
    return changed
