"""``linalg_solve_triangular`` as matmuls the program runs (issue 41).

Inductor lowers ``aten.linalg_solve_triangular`` to an ATen fallback kernel.  The
gated delta rule's chunked form (Qwen3-Next, Qwen3.5, OLMo-Hybrid, ...) solves a unit
lower-triangular system per chunk: ``solve_triangular(I + T, B, upper=False,
unitriangular=True)`` with ``T`` strictly lower.  We decompose the solve into
products by doubling: for ``A = D (I - N)`` with ``D`` its diagonal and ``N``
strictly lower (upper) triangular, ``N ** n == 0`` for ``n`` rows, so

    (I - N) ** -1 = I + N + ... + N ** (n-1) = (I + N)(I + N ** 2)(I + N ** 4)...

and ``X = A ** -1 B`` is ``D ** -1 B`` multiplied by ``ceil(log2 n)`` such factors:
two matmuls each (the next power, its product with ``X``).  ``left=False``
(``X A = B``) solves the transposed system.
The sums round differently from LAPACK's forward substitution (float32: equal to
eager within the sweep's 1e-4 for the models' well-conditioned chunks).

The products keep the system's batch (``batch_matmul.batched_matmul``): ATen's matmul would
fold a ``[1, heads, chunks, n, n]`` system into a ``bmm`` over ``heads * chunks`` matrices,
a 3-D buffer whose generic layout puts that merged batch just outside the stick (§1.3 of
docs/layout_model.md), so one row of a matrix strides over every matrix of the batch and
no tile of a 64 KiB limit held a whole column (Qwen3-Next's ``N @ N``, [64, 64, 64] fp32:
"Cannot auto-tile buf86 (aten ops: bmm.default, reshape.default)").  Kept, the batch dims
are the outermost dims of every product, and a tile is whole matrices.
"""

from __future__ import annotations

from typing import Any

import torch

from spyre_rules.backend.batch_matmul import batched_matmul

__all__ = ["triangular_solve_decompositions"]

aten = torch.ops.aten


def _solve(a: Any, b: Any, upper: bool, unitriangular: bool) -> Any:
    n = a.shape[-1]
    off_diagonal = torch.triu(a, 1) if upper else torch.tril(a, -1)
    if unitriangular:
        neg_n, x = off_diagonal, b
    else:
        diagonal = torch.diagonal(a, dim1=-2, dim2=-1).unsqueeze(-1)  # [..., n, 1]
        neg_n, x = off_diagonal / diagonal, b / diagonal
    power = -neg_n  # N ** 1
    x = x + batched_matmul(power, x)
    covered = 2  # x holds (I + N + ... + N ** (covered - 1)) D**-1 B
    while covered < n:
        power = batched_matmul(power, power)
        x = x + batched_matmul(power, x)
        covered *= 2
    return x


def _solve_triangular(a: Any, b: Any, *, upper: bool, left: bool = True,
                      unitriangular: bool = False) -> Any:
    if not a.dtype.is_floating_point or a.dtype != b.dtype:
        return NotImplemented
    if not left:  # X A = B  <=>  A^T X^T = B^T (A^T is triangular the other way)
        return _solve_triangular(a.mT, b.mT, upper=not upper, left=True,
                                 unitriangular=unitriangular).mT
    return _solve(a, b, upper, unitriangular)


def triangular_solve_decompositions() -> dict[Any, Any]:
    return {aten.linalg_solve_triangular.default: _solve_triangular}
