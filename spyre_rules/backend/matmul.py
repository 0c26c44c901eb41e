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

``addmm``/``baddbmm`` (and a linear with bias) in float16/bfloat16 round once, as
eager does: ``round(beta * bias + alpha * sum_k a*b)`` with the sum and the bias
add in float32.  So the product of a biased matmul is a float32 Reduction (its
accumulator is float32 whether or not K is tiled: ``passes/accumulators``), the
bias is widened, and the pointwise sum is rounded to the half dtype at its store;
a half product rounded before the bias add would round twice (issue 32).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch._inductor import ir
from torch._inductor import lowering as L
from torch._inductor.virtualized import V, ops

from spyre_rules.backend.lowering_table import lowerings_swapped, register_on_every_overload

__all__ = ["MATMUL_PACKETS", "batchmatmul_lowerings", "lower_batchmatmul"]

aten = torch.ops.aten

MATMUL_PACKETS = (aten.mm, aten.bmm, aten.addmm, aten.baddbmm)

BATCHMATMUL = "batchmatmul"


def lower_batchmatmul(a: Any, b: Any, dst_dtype: Any = None) -> Any:
    """``a[*batch, M, K] @ b[*batch, K, N]`` as a Reduction over K, its result in
    ``dst_dtype`` (default: the operands' dtype)."""
    a_size, b_size = list(a.get_size()), list(b.get_size())
    if len(a_size) != len(b_size) or len(a_size) < 2:
        raise ValueError(f"batchmatmul operands of rank {len(a_size)} and {len(b_size)}")
    *batch, m, k = a_size
    n = b_size[-1]
    dtype = a.get_dtype()
    out_dtype = dtype if dst_dtype is None else dst_dtype
    if V.graph.sizevars.statically_known_equals(k, 1):
        # One product per output element: a broadcast multiply, no reduction (the
        # product of two halves is exact in float32).
        if out_dtype != dtype:
            a, b = L.to_dtype(a, out_dtype), L.to_dtype(b, out_dtype)
        return L.mul(a, b)

    a, b = _stick_aligned(a), _stick_aligned(b)
    a, b = _own_buffers(a, b)
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
        dst_dtype=out_dtype,
        src_dtype=dtype,
        inner_fn=inner_fn,
        ranges=[*batch, m, n],
        reduction_ranges=[k],
        reduction_type=BATCHMATMUL,
    )
    out.realize()
    return out


def _stick_aligned(x: Any) -> Any:
    """``x``, or under automatic tiling a copy of it when it is a view whose batch or row
    steps move along its buffer's stick by part of a stick.

    Multi-head latent attention splits each head of one projection into a rotary and a
    plain part (DeepSeek-V2/V3: 48 columns a head, its values at column 16 of each): the
    values of head ``h`` start ``48 * h + 16`` columns in, a stick and a half per head.
    Untiled the product reads the view in place; a tile of one head would start at
    another place in its stick than the first tile, no rigid translation of it
    (``tiles_translate``), so legality refuses every split of the heads
    (``input_sticks_whole``) and no tiling fits.  A copy of the view is a buffer of its
    own, each head whole sticks; it is exact, and the policy takes it or not
    (``stick_aligned``, rules/layout_choice.rules: only under automatic tiling, the only
    one it pays for)."""
    from spyre_rules.backend.layout_choice import take
    from spyre_rules.errors import LayoutError
    from spyre_rules.facts.stick_layout import dtype_info

    if not ir.is_storage_and_layout(x):
        return x
    storage, layout = ir.as_storage_and_layout(x, freeze=False)
    try:
        stick = dtype_info(x.get_dtype()).elems_per_stick
        size, stride = [int(s) for s in layout.size], [int(s) for s in layout.stride]
        base = storage.get_layout()
        base_size, base_stride = [int(s) for s in base.size], [int(s) for s in base.stride]
        name = storage.get_name()
    except (LayoutError, TypeError, ValueError, NotImplementedError, AttributeError):
        return x  # symbolic or not a strided buffer: left as it is
    if not size or not base_size or stride[-1] != 1 or base_stride[-1] != 1 or size[-1] <= 1:
        return x
    row = base_size[-1]  # the buffer's stick dim: its last, stride-1 host dim
    if any(n > 1 and s % row % stick != 0 for n, s in zip(size[:-1], stride[:-1])) \
            and name and take(_buffer_named(name), "stick_aligned", name):
        return ir.ExternKernel.copy_input(x)
    return x


def _viewed_buffer(x: Any) -> tuple[str, bool] | None:
    """(the buffer ``x`` views, whether the last dim of ``x`` walks that buffer's
    stride-1 dim, the stick of its default layout), or None when ``x`` is no static
    strided view of a named buffer."""
    try:
        storage, layout = ir.as_storage_and_layout(x, freeze=False)
        name = storage.get_name()
        size, stride = [int(s) for s in layout.size], [int(s) for s in layout.stride]
    except (TypeError, ValueError, NotImplementedError, AttributeError, AssertionError):
        return None
    return (name, bool(size) and stride[-1] == 1) if name else None


def _own_buffers(a: Any, b: Any) -> tuple[Any, Any]:
    """``(a, b)``, under automatic tiling with a copy of the one stuck otherwise than the
    product needs when both operands view one buffer (``b`` when both are).

    The product needs ``a`` stuck on its reduction dim k (its last) and ``b`` on n (its
    last).  Bloom's scores ``q @ k^T`` read q and k from one fused projection: q's k (the
    head dim) is that buffer's stick, k^T's n (the keys) is not.  The restickify pass
    copies a buffer onto the stick a read needs and redirects every load of that buffer
    in the op, so q would be read stuck on its rows m too: a tile of m must then hold
    whole sticks of tokens (77 tokens: tiles of 32 at most, too wide for 64 KiB where 20
    were needed) and no split fits.  A copy is a buffer of its own, restickified alone;
    it is exact; the policy takes it or not (``own_buffer``, rules/layout_choice.rules: only
    under automatic tiling, the only one it pays for)."""
    from spyre_rules.backend.layout_choice import take

    a_view, b_view = _viewed_buffer(a), _viewed_buffer(b)
    if a_view is None or b_view is None or a_view[0] != b_view[0] or a_view[1] and b_view[1]:
        return a, b
    if not take(_buffer_named(a_view[0]), "own_buffer", a_view[0]):
        return a, b
    if b_view[1]:
        return ir.ExternKernel.copy_input(a), b
    return a, ir.ExternKernel.copy_input(b)


def _buffer_named(name: str) -> Any:
    """The graph's buffer ``name`` (a graph input's, out of its TensorBox): the ``op`` the
    layout_choice section is told for a remedy decided while a product is lowered, before
    the product exists."""
    buffer = V.graph.get_buffer(name)
    while isinstance(buffer, ir.MutableBox):
        buffer = buffer.data
    return buffer


def _check_dtypes(*tensors: Any) -> None:
    dtypes = {t.get_dtype() for t in tensors}
    if len(dtypes) != 1:
        raise TypeError(f"matmul operands of different dtypes {sorted(map(str, dtypes))}")


def _mm(mat1: Any, mat2: Any, out_dtype: Any = None, **_: Any) -> Any:
    if out_dtype is not None and out_dtype != mat1.get_dtype():
        raise NotImplementedError(f"mm with out_dtype={out_dtype}")
    _check_dtypes(mat1, mat2)
    return lower_batchmatmul(mat1, mat2)


def _scaled_sum(inp: Any, mat1: Any, mat2: Any, alpha: Any, beta: Any) -> Any:
    """``beta * inp + alpha * (mat1 @ mat2)`` rounded once to the operands' dtype: a
    half-precision product and bias are summed in float32 (module doc)."""
    dtype = mat1.get_dtype()
    if dtype not in (torch.float16, torch.bfloat16):
        product = lower_batchmatmul(mat1, mat2)
        if alpha != 1:
            product = L.mul(product, alpha)
        if beta == 0:
            return product
        if beta != 1:
            inp = L.mul(inp, beta)
        return L.add(inp, product)
    wide = torch.float32
    product = lower_batchmatmul(mat1, mat2, wide)
    size = list(product.get_size())
    load_product = product.make_loader()
    load_inp = None if beta == 0 else L.expand(inp, size).make_loader()

    # One pointwise op: the bias is widened where it is read (a widened copy of its
    # own would be one more op, outside any loop of the product's tiles).
    def inner_fn(index: Any) -> Any:
        total = load_product(index)
        if alpha != 1:
            total = ops.mul(total, ops.constant(alpha, wide))
        if load_inp is not None:
            bias = ops.to_dtype(load_inp(index), wide)
            if beta != 1:
                bias = ops.mul(bias, ops.constant(beta, wide))
            total = ops.add(bias, total)
        return ops.to_dtype(total, dtype)

    return ir.Pointwise.create(device=product.get_device(), dtype=dtype, inner_fn=inner_fn,
                               ranges=size)


def _addmm(inp: Any, mat1: Any, mat2: Any, *, alpha: Any = 1, beta: Any = 1, **_: Any) -> Any:
    _check_dtypes(mat1, mat2)
    return _scaled_sum(inp, mat1, mat2, alpha, beta)


def _bmm(mat1: Any, mat2: Any, out_dtype: Any = None, **_: Any) -> Any:
    return _mm(mat1, mat2, out_dtype)


def _biased_bmm(mat1: Any, mat2: Any, bias: Any = None) -> Any:
    """``spyre_rules.batchmatmul(a, b, bias)``: a batched linear's product plus its bias."""
    if bias is None:
        return _mm(mat1, mat2)
    _check_dtypes(mat1, mat2)
    return _scaled_sum(bias, mat1, mat2, 1, 1)


def _baddbmm(inp: Any, mat1: Any, mat2: Any, *, alpha: Any = 1, beta: Any = 1, **_: Any) -> Any:
    return _addmm(inp, mat1, mat2, alpha=alpha, beta=beta)


def _our_lowerings() -> dict[Any, Any]:
    import spyre_rules.backend.batch_matmul  # noqa: F401 - registers the custom op

    table: dict[Any, Any] = {}
    for packet, fn in ((aten.mm, _mm), (aten.bmm, _bmm), (aten.addmm, _addmm),
                       (aten.baddbmm, _baddbmm),
                       (torch.ops.spyre_rules.batchmatmul, _biased_bmm)):
        register_on_every_overload(packet, fn, table)
    return table


def batchmatmul_lowerings() -> contextlib.AbstractContextManager[None]:
    """Swap our matmul lowerings into Inductor's table; restore the originals after."""
    return lowerings_swapped(_our_lowerings())
