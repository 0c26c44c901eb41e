"""``softmax_values``: softmax attention's normalised value sum as ONE reduction over the keys.

``spyre_rules.softmax_values(scores, values, key_dims)`` is

    softmax(scores over its last ``key_dims`` dims) @ values

with ``scores (*batch, *keys)`` (a masked key ``-inf``) and ``values (*batch, *keys, D)``,
computed in float32 (or wider): ``(*batch, D)``.  Its lowering is one Inductor Reduction of
type ``"softmax_values"`` over the key dims, whose per-point value is the pair (score,
value): the executor reduces it as ``sum exp(s - m) v / sum exp(s - m)`` with ``m`` the
keys' max (0 when every key is masked, so an empty range gives 0 / 0 like eager's
softmax of all ``-inf``).

Why one reduction: its partial result over a tile of the keys is the triple (running max
``m``, sum ``l = sum exp(s - m)``, unnormalised output ``acc = sum exp(s - m) v``), and two
such triples merge exactly (flash-decoding's online-softmax combine, ``passes/combine.py``),
so a reduction level over the keys carries ``(m, l, acc)`` across the key tiles in one loop
(``codegen/accumulate_fields.py``) and divides once after it.  Written as separate ops
(max, exponentials, sums), the exponentials would read the max inside its own reduction loop,
where it is not final (docs/accumulation.md, readers).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import torch
from torch._inductor import ir
from torch._inductor.virtualized import V, ops

from spyre_rules.backend.lowering_table import lowerings_swapped, register_on_every_overload

__all__ = ["SOFTMAX_VALUES", "softmax_values", "softmax_values_lowerings"]

#: the Reduction type of the lowering (passes/combine.py, executor/reductions.py)
SOFTMAX_VALUES = "softmax_values"


def _wide(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


@torch.library.custom_op("spyre_rules::softmax_values", mutates_args=())
def softmax_values(scores: torch.Tensor, values: torch.Tensor, key_dims: int) -> torch.Tensor:
    """``softmax(scores over the last key_dims dims) @ values`` in float32 (module doc)."""
    wide = _wide(scores.dtype)
    s = scores.to(wide).flatten(-key_dims) if key_dims > 1 else scores.to(wide)
    v = values.to(wide)
    if key_dims > 1:
        v = v.flatten(-key_dims - 1, -2)
    top = s.amax(-1, keepdim=True)
    top = torch.where(top == -math.inf, 0.0, top)
    weights = torch.exp(s - top)
    return (weights.unsqueeze(-2) @ v).squeeze(-2) / weights.sum(-1, keepdim=True)


@softmax_values.register_fake
def _(scores: torch.Tensor, values: torch.Tensor, key_dims: int) -> torch.Tensor:
    return scores.new_empty([*scores.shape[:-key_dims], values.shape[-1]],
                            dtype=_wide(scores.dtype))


def lower_softmax_values(scores: Any, values: Any, key_dims: int) -> Any:
    """One ``softmax_values`` Reduction over the key dims (module doc)."""
    size = list(scores.get_size())
    batch, keys = size[:-key_dims], size[-key_dims:]
    vsize = list(values.get_size())
    if len(vsize) != len(size) + 1 or not all(
            V.graph.sizevars.statically_known_equals(a, b) for a, b in zip(vsize, size)):
        raise ValueError(f"softmax_values: values {vsize} are not scores {size} plus a value dim")
    wide = _wide(scores.get_dtype())
    s_loader, v_loader = scores.make_loader(), values.make_loader()

    def inner_fn(index: Any, reduction_index: Any) -> Any:
        *point, d = index
        s, v = s_loader([*point, *reduction_index]), v_loader([*point, *reduction_index, d])
        if scores.get_dtype() != wide:
            s = ops.to_dtype(s, wide)
        if values.get_dtype() != wide:
            v = ops.to_dtype(v, wide)
        return (s, v)

    out = ir.TensorBox.create(ir.Reduction(
        device=scores.get_device(), dtype=wide, inner_fn=inner_fn, ranges=[*batch, vsize[-1]],
        reduction_ranges=keys, reduction_type=SOFTMAX_VALUES, src_dtype=wide,
        reduction_hint=ir.ReductionHint.DEFAULT,
    ))
    out.realize()
    return out


def softmax_values_lowerings() -> contextlib.AbstractContextManager[None]:
    """Our lowering of ``spyre_rules.softmax_values`` in Inductor's table while compiling."""
    table: dict[Any, Any] = {}
    register_on_every_overload(torch.ops.spyre_rules.softmax_values, lower_softmax_values, table)
    return lowerings_swapped(table)
