"""Named example programs for ``spyre-rules explain`` (docs/layout_model.md §6 and the planner's other cases).

Each example is a small torch function, its input shapes and dtype, and the
span limit it is meant to be explained at (``None``: the configured limit).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["Example", "EXAMPLES", "example_inputs"]


@dataclasses.dataclass(frozen=True)
class Example:
    fn: Callable[..., Any]
    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    max_span_bytes: int | None
    about: str
    index_inputs: tuple[tuple[int, ...], ...] = ()  # int64 index tensors after the float inputs


def _add(x, y):
    return x + y


def _sum0(x):
    return x.sum(dim=0)


def _sum1(x):
    return x.sum(dim=1)


def _lm_head(x, weight):
    import torch.nn.functional as F

    return F.linear(x, weight)


def _plus_one(x):
    return x + 1


def _gather(x, index):
    return x[index] + 1


def _full_sum(x):
    return x.sum()


def _sum_last(x):
    return x.sum(dim=-1)


def _pointwise_chain(x):
    c = x + 1
    d = c[:, :, :8, :] * 2
    return c, d


def _lm_block(*args):
    from spyre_rules.examples.lm_block import lm_block

    return lm_block(*args)


#: ``spyre_rules.examples.lm_block.lm_block_shapes()`` (batch 1, seq 16, dim 64, hidden 128,
#: 4 heads), spelled out so that listing the examples does not import torch.
_LM_BLOCK_SHAPES = ((1, 16, 64), (64,), (64, 64), (64, 64), (64, 64), (64, 64), (64,),
                    (128, 64), (128, 64), (64, 128), (16, 16), (16, 16), (16, 16))


EXAMPLES: dict[str, Example] = {
    "pointwise_overflow": Example(_add, ((1, 8195, 256, 64), (1, 8195, 256, 64)), "float16", None,
                                  "x + y whose output coordinate spans 268,533,760 bytes (docs/layout_model.md §6.1)"),
    "reduction_input": Example(_sum0, ((2, 20, 16, 64),), "float16", 8192,
                               "x.sum(dim=0), input span controlled by an output dim (docs/layout_model.md §6.2)"),
    "reduction_output": Example(_sum1, ((20, 2, 16, 64),), "float16", 8192,
                                "x.sum(dim=1), the reduction output overflows"),
    "lm_head": Example(_lm_head, ((2, 64), (1024, 64)), "float16", 8192,
                       "F.linear -> restickify producer + BMM consumer sharing one loop (docs/layout_model.md §6.3)"),
    "stick_alignment": Example(_plus_one, ((8192, 49159),), "float16", None,
                               "every split would cut sticks or exceed the cap (docs/layout_model.md §6.5)"),
    "indirect_read": Example(_gather, ((8, 64),), "float16", 64,
                             "x[index] + 1: a gathered read, its indirect symbol over the whole indexed dim",
                             index_inputs=((4,),)),
    "scalar_reduction": Example(_full_sum, ((8, 64),), "float16", 256,
                                "x.sum(): a reduction level over the whole tensor, accumulated"),
    "reduction_controlled": Example(_sum_last, ((64, 8192),), "float16", 65536,
                                    "the overflowing input span is driven by the reduction (docs/layout_model.md §3.5)"),
    "pointwise_chain": Example(_pointwise_chain, ((1, 20, 16, 64),), "float16", 8192,
                               "a Pointwise run and a consumer that conforms to its split"),
    "lm_block": Example(_lm_block, _LM_BLOCK_SHAPES, "float16", 8192,
                        "a Llama-style decoder layer (RMSNorm, rotary, causal attention, "
                        "SiLU-gated MLP)"),
}


def example_inputs(shapes, dtype: str, index_shapes=()) -> list[Any]:
    """Input tensors of the given shapes (zeros: values never matter to the planner)."""
    import torch

    torch_dtype = getattr(torch, dtype)
    inputs = [torch.zeros(shape, dtype=torch_dtype) for shape in shapes]
    inputs += [torch.zeros(shape, dtype=torch.int64) for shape in index_shapes]
    return inputs
