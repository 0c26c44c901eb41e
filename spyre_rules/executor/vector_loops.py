"""When a unary op on a strided view of device memory has the bits of the general path.

The general path computes a unary op on a contiguous operand into a fresh
contiguous result: torch runs one 1-D loop over the ``n`` elements in logical
order (split into one range per thread).  A transcendental op (``exp``,
``sigmoid``, ...) may round an element differently in torch's vectorised loop
body and in its scalar tail (on torch 2.13 CPU with AVX-512, ``sigmoid`` and
``exp2`` do), so *which* elements fall into a tail sets bits.

Computed ``out=`` a view of device memory from an operand view with the same
strides, torch orders the dimensions by stride and merges them: when the views
are dense (a permutation of a contiguous block), that is again one 1-D loop over
``n`` elements, now in memory order, split into the same per-thread ranges.  The
two loops visit different elements at the same position, so their bits agree
when no position is in a tail: every range torch hands a thread is a whole
number of vector steps (``tail_free``).  Then every element takes the
vectorised body on both paths, whose lanes compute independently of their
position (docs/architecture.md, "Unary ops into strided views").
"""

from __future__ import annotations

import torch

__all__ = ["GRAIN", "VECTOR_STEP", "dense_same_layout", "tail_free"]

#: Elements per step of torch's vectorised CPU loop at its widest: two vectors of
#: 16 float32 lanes (AVX-512); a multiple of it is a whole number of steps on
#: narrower vector units too.
VECTOR_STEP = 32

#: Torch's intra-op grain (``at::internal::GRAIN_SIZE``): a loop over fewer
#: elements runs on one thread, a longer one on at most ``ceil(n / GRAIN)``.
GRAIN = 32768


def tail_free(n: int, threads: int | None = None) -> bool:
    """Every per-thread range of a 1-D loop over ``n`` elements is a whole number of
    vector steps.  Torch splits ``[0, n)`` among ``min(threads, ceil(n / GRAIN))``
    threads into ranges of ``ceil(n / used)`` elements (the last one shorter)."""
    if n % VECTOR_STEP:
        return False
    threads = torch.get_num_threads() if threads is None else threads
    if threads == 1 or n < GRAIN:
        return True
    used = min(threads, -(-n // GRAIN))
    return -(-n // used) % VECTOR_STEP == 0


def dense_same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``a`` and ``b`` have one shape and the same strides, which describe a dense
    block (each element once, no gaps): torch merges their dimensions into one
    contiguous loop in memory order.  A unit dimension's stride is never used."""
    if a.shape != b.shape:
        return False
    dims = []
    for size, stride, other in zip(a.shape, a.stride(), b.stride()):
        if size == 1:
            continue
        if stride != other:
            return False
        dims.append((stride, size))
    expected = 1
    for stride, size in sorted(dims):
        if stride != expected:
            return False
        expected *= size
    return True
