"""Keep an einsum's batch letters as separate dims: one ``batchmatmul`` over them.

ATen's ``einsum`` (CompositeImplicitAutograd, decomposed before any decomposition
table is consulted) permutes its operands and folds every batch letter into the
one batch dim of a ``bmm``.  Mamba2's chunked scan contracts ``bclhn,bcshn->bclsh``:
the bmm's batch is ``(b, c, h)`` merged, 4096 at 8192 tokens, and the operand it
reads is laid out with ``c`` (host dim 0 of the chunked buffer) inside its stick
count and ``h`` far outside.  A tile of the merged batch then crosses a chunk
boundary (every head in it: 512 MiB at the real size) or, cut at chunk
boundaries, is no rigid translation of the first tile (the batch index is
``c * 128 + h``): no split of the merged dim fits, and a split of ``c`` or ``h``
alone is not a dim the bmm has.  Kept apart, each batch letter is a host dim of
its own whose every tile moves the reads by one constant offset.

So, as ``batch_matmul.keep_matmul_batch`` does for ``matmul``, the Dynamo graph is
rewritten before ``compile_fx``: a two-operand einsum whose letters each belong to
one matmul role (batch: both operands and the output; M: the first operand and
the output; N: the second and the output; K: both operands only) becomes

    a.permute(batch, M, K).reshape(*batch, prod M, prod K)
    b.permute(batch, K, N).reshape(*batch, prod K, prod N)
    spyre_rules.batchmatmul(a', b').reshape(*batch, *M, *N).permute(output order)

a reshape of one letter per role is a no-op view.  Left to ATen: other operand
counts, an ellipsis, a letter repeated in one operand (a diagonal), a letter
summed in one operand only, operands of different dtypes or of unequal sizes
of a letter (a broadcast), and no batch letter at all (a plain ``mm``, which
ATen lowers as one already).
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["EinsumRoles", "einsum_roles", "keep_einsum_batch"]

_EINSUM_FUNCTIONS = {torch.einsum, torch.functional.einsum}


class EinsumRoles:
    """The letters of a two-operand einsum by matmul role, each in first-seen order."""

    def __init__(self, a: str, b: str, out: str) -> None:
        self.a, self.b, self.out = a, b, out
        self.batch = [c for c in out if c in a and c in b]
        self.m = [c for c in out if c in a and c not in b]
        self.n = [c for c in out if c in b and c not in a]
        self.k = [c for c in a if c in b and c not in out]


def einsum_roles(equation: str, shapes: list[tuple[int, ...]]) -> EinsumRoles | None:
    """The roles of ``equation`` over operands of ``shapes``, or None when the einsum is
    not one batched matmul (module doc: what stays with ATen)."""
    eq = equation.replace(" ", "")
    if "->" not in eq or "." in eq or len(shapes) != 2:
        return None
    inputs, out = eq.split("->")
    parts = inputs.split(",")
    if len(parts) != 2:
        return None
    a, b = parts
    if any(len(set(s)) != len(s) for s in (a, b, out)) or not all(c.isalpha() for c in a + b + out):
        return None
    if len(a) != len(shapes[0]) or len(b) != len(shapes[1]):
        return None
    if any(c not in a and c not in b for c in out):
        return None
    if any(c not in out and (c not in a or c not in b) for c in a + b):
        return None  # summed in one operand only
    size_a, size_b = dict(zip(a, shapes[0])), dict(zip(b, shapes[1]))
    if any(size_a[c] != size_b[c] for c in a if c in b):
        return None  # a broadcast letter
    roles = EinsumRoles(a, b, out)
    return roles if roles.batch else None


def _value(node: Any) -> Any:
    return node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None


def _operands(node: Any) -> tuple[str, list[Any]] | None:
    if node.op != "call_function" or node.target not in _EINSUM_FUNCTIONS or node.kwargs:
        return None
    if not node.args or not isinstance(node.args[0], str):
        return None
    rest = list(node.args[1:])
    if len(rest) == 1 and isinstance(rest[0], (list, tuple)):
        rest = list(rest[0])
    return node.args[0], rest


class _Emitter:
    """Appends method calls before one node, each with its example value."""

    def __init__(self, graph: Any, meta: dict) -> None:
        self.graph, self.meta = graph, meta

    def call(self, node: Any, value: torch.Tensor, method: str, *args: Any) -> tuple[Any, torch.Tensor]:
        result = getattr(value, method)(*args)
        out = self.graph.call_method(method, (node, *args))
        out.meta = {**self.meta, "example_value": result}
        return out, result


def _arranged(emit: _Emitter, node: Any, value: torch.Tensor, letters: str, order: list[str],
              shape: list[int]) -> tuple[Any, torch.Tensor]:
    """``node`` permuted to ``order`` and reshaped to ``shape`` (each only when it changes)."""
    perm = [letters.index(c) for c in order]
    if perm != list(range(len(perm))):
        node, value = emit.call(node, value, "permute", *perm)
    if list(value.shape) != shape:
        node, value = emit.call(node, value, "reshape", *shape)
    return node, value


def keep_einsum_batch(gm: torch.fx.GraphModule) -> bool:
    """Rewrite every two-operand einsum of ``gm`` that is one batched matmul; True if any
    changed."""
    from spyre_rules.backend.batch_matmul import batchmatmul  # noqa: F401 - registers the op

    graph = gm.graph
    changed = False
    for node in list(graph.nodes):
        found = _operands(node)
        if found is None:
            continue
        equation, operands = found
        values = [_value(o) for o in operands]
        result = _value(node)
        if len(values) != 2 or not all(isinstance(v, torch.Tensor) for v in [*values, result]):
            continue
        av, bv = values
        if not all(isinstance(s, int) for s in (*av.shape, *bv.shape)):
            continue  # symbolic sizes: left to ATen (the shapes below are constants)
        if av.dtype != bv.dtype or av.dtype != result.dtype:
            continue
        roles = einsum_roles(equation, [tuple(av.shape), tuple(bv.shape)])
        if roles is None:
            continue
        size = {**dict(zip(roles.b, bv.shape)), **dict(zip(roles.a, av.shape))}
        batch = [int(size[c]) for c in roles.batch]

        def prod(letters: list[str]) -> int:
            return math.prod(int(size[c]) for c in letters)

        emit = _Emitter(graph, dict(node.meta))
        with graph.inserting_before(node):
            a, a_val = _arranged(emit, operands[0], av, roles.a, roles.batch + roles.m + roles.k,
                                 [*batch, prod(roles.m), prod(roles.k)])
            b, b_val = _arranged(emit, operands[1], bv, roles.b, roles.batch + roles.k + roles.n,
                                 [*batch, prod(roles.k), prod(roles.n)])
            product = graph.call_function(torch.ops.spyre_rules.batchmatmul.default, (a, b))
            p_val = torch.ops.spyre_rules.batchmatmul.default(a_val, b_val)
            product.meta = {**emit.meta, "example_value": p_val}
            # the product's M and N back into their letters, then the output's order
            letters = roles.batch + roles.m + roles.n
            out, o_val = product, p_val
            split = [int(size[c]) for c in letters]
            if list(o_val.shape) != split:
                out, o_val = emit.call(out, o_val, "reshape", *split)
            perm = [letters.index(c) for c in roles.out]
            if perm != list(range(len(perm))):
                out, o_val = emit.call(out, o_val, "permute", *perm)
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        changed = True
    if changed:
        graph.lint()
        gm.recompile()
    return changed
