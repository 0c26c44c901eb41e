"""Lower the matmul family to one ``batchmatmul`` Reduction.

On CPU Inductor turns a matmul into an extern call (``extern_kernels.mm``) that
our program could never describe.  Spyre computes a matmul as a reduction:
``out[*b, m, n] = sum_k a[*b, m, k] * b[*b, k, n]``.  The Reduction's inner
function returns the *pair* of loaded operands; the reduction type
``"batchmatmul"`` tells codegen and the executor to multiply the pair and sum
over the reduction range (K).

``linear`` and ``matmul`` reach us as ``mm``/``addmm``/``bmm`` (AOT autograd
decomposes them); their decompositions into mul+sum are removed from the table
handed to ``compile_fx`` (see ``context.decomposition_table``).  A product
ATen would fold or merge batch dims of reaches us as the custom op
``spyre_rules.batchmatmul`` over the real batch instead (``batch_matmul.py``).

K == 1 is a pointwise multiply (Inductor would otherwise turn a one-element
reduction into a Pointwise that stores the pair itself).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch._inductor import ir
from torch._inductor import lowering as L
from torch._inductor.virtualized import V

from spyre_rules.backend.lowering_table import lowerings_swapped, register_on_every_overload

__all__ = ["MATMUL_PACKETS", "batchmatmul_lowerings", "lower_batchmatmul"]

aten = torch.ops.aten

MATMUL_PACKETS = (aten.mm, aten.bmm, aten.addmm, aten.baddbmm)

BATCHMATMUL = "batchmatmul"


def lower_batchmatmul(a: Any, b: Any) -> Any:
    """``a[*batch, M, K] @ b[*batch, K, N]`` as a Reduction over K."""
    a_size, b_size = list(a.get_size()), list(b.get_size())
    if len(a_size) != len(b_size) or len(a_size) < 2:
        raise ValueError(f"batchmatmul operands of rank {len(a_size)} and {len(b_size)}")
    *batch, m, k = a_size
    n = b_size[-1]
    dtype = a.get_dtype()
    if V.graph.sizevars.statically_known_equals(k, 1):
        # One product per output element: a broadcast multiply, no reduction.
        return L.mul(a, b)

    a.realize()
    b.realize()
    a_loader = a.make_loader()
    b_loader = b.make_loader()

    def inner_fn(index: Any, reduction_index: Any) -> Any:
        *bidx, mi, ni = index
        (ki,) = reduction_index
        return (a_loader([*bidx, mi, ki]), b_loader([*bidx, ki, ni]))

    out = ir.Reduction.create(
        device=a.get_device(),
        dst_dtype=dtype,
        src_dtype=dtype,
        inner_fn=inner_fn,
        ranges=[*batch, m, n],
        reduction_ranges=[k],
        reduction_type=BATCHMATMUL,
    )
    out.realize()
    return out


def _check_dtypes(*tensors: Any) -> None:
    dtypes = {t.get_dtype() for t in tensors}
    if len(dtypes) != 1:
        raise TypeError(f"matmul operands of different dtypes {sorted(map(str, dtypes))}")


def _mm(mat1: Any, mat2: Any, out_dtype: Any = None, **_: Any) -> Any:
    if out_dtype is not None and out_dtype != mat1.get_dtype():
        raise NotImplementedError(f"mm with out_dtype={out_dtype}")
    _check_dtypes(mat1, mat2)
    return lower_batchmatmul(mat1, mat2)


def _scaled_sum(inp: Any, product: Any, alpha: Any, beta: Any) -> Any:
    # beta * inp + alpha * product, skipping the identities so a plain bias add
    # stays one pointwise op.
    if alpha != 1:
        product = L.mul(product, alpha)
    if beta == 0:
        return product
    if beta != 1:
        inp = L.mul(inp, beta)
    return L.add(inp, product)


def _addmm(inp: Any, mat1: Any, mat2: Any, *, alpha: Any = 1, beta: Any = 1, **_: Any) -> Any:
    _check_dtypes(mat1, mat2)
    return _scaled_sum(inp, lower_batchmatmul(mat1, mat2), alpha, beta)


def _bmm(mat1: Any, mat2: Any, out_dtype: Any = None, **_: Any) -> Any:
    return _mm(mat1, mat2, out_dtype)


def _baddbmm(inp: Any, mat1: Any, mat2: Any, *, alpha: Any = 1, beta: Any = 1, **_: Any) -> Any:
    return _addmm(inp, mat1, mat2, alpha=alpha, beta=beta)


def _our_lowerings() -> dict[Any, Any]:
    import spyre_rules.backend.batch_matmul  # noqa: F401 - registers the custom op

    table: dict[Any, Any] = {}
    for packet, fn in ((aten.mm, _mm), (aten.bmm, _bmm), (aten.addmm, _addmm),
                       (aten.baddbmm, _baddbmm),
                       (torch.ops.spyre_rules.batchmatmul, _bmm)):
        register_on_every_overload(packet, fn, table)
    return table


def batchmatmul_lowerings() -> contextlib.AbstractContextManager[None]:
    """Swap our matmul lowerings into Inductor's table; restore the originals after."""
    return lowerings_swapped(_our_lowerings())
