"""Accumulators of reduction levels: a loop over a reduction dim combines partial results.

A *reduction level* is a counted loop that tiles a reduction dim of an op (a
manual ``spyre_hint`` on a reduction dim, or an automatic reduction candidate).
Each iteration reduces one tile of the reduction range; the partial results are
combined in an *accumulator*, a device buffer of one output tile:

* **init** -- before the (outermost) reduction loop the accumulator is filled
  with the reduction's identity (0 for sum, 1 for prod, -inf / +inf for max /
  min, False for any); nested under an output level this happens once per outer
  tile;
* **combine** -- inside the loop the op reduces its tile and combines the
  partial result into the accumulator (``COMBINE``: add, mul, maximum, minimum,
  logical_or);
* **finalise** -- after the loop the accumulator is converted to the op's dtype
  and stored into the op's own output buffer (what every reader sees).  Anything
  after the reduction (mean's divide) is a separate op and runs after the loop.

The accumulator holds the reduction's *compute* dtype, the one the whole
reduction would accumulate in: float32 for float16/bfloat16 (and float32), the
op's dtype otherwise (int64 for integer sums).  So a tiled fp16 sum rounds once,
at the finalise step, like the untiled reduction and eager.

The accumulator is sized like the op's per-tile output (every output level
divides it), is ``per_tile_fixed`` (the same address in every iteration), lives
in HBM or, under ``config.lx_planning`` when it fits, in the LX scratchpad
(``passes/scratchpad.py``).  It is not an Inductor buffer: the pre-scheduling
state knows its layout under ``Accumulator.name`` (memory planning gives it a
segment), the op carries it as ``op.accumulator``, and codegen
(``codegen/accumulate.py``) emits the three steps.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from spyre_rules.errors import LayoutError
from spyre_rules.facts.tiled_layout import FixedTiledLayout, fixed_tiled_layout
from spyre_rules.ir.graph_state import graph_state
from spyre_rules.ir.ir_edit import op_description
from spyre_rules.ir.loop_stamp import loop_tiled_reduction_dims
from spyre_rules.passes.coarse_tile import CoarseTileError
from spyre_rules.passes.combine import COMBINE

__all__ = [
    "ACCUMULATOR_ATTR",
    "COMBINE",
    "Accumulator",
    "accumulation_dtype",
    "attach_accumulators",
    "identity",
    "reduction_levels",
]

ACCUMULATOR_ATTR = "accumulator"

_HALF = (torch.float16, torch.bfloat16)


class AccumulatorError(CoarseTileError):
    """An accumulator cannot be laid out for a reduction level (names the op)."""


@dataclasses.dataclass(frozen=True)
class Accumulator:
    """The accumulator of one op's reduction level(s)."""

    name: str  # device buffer name (``<op>_acc``)
    op: str  # the reduction op it belongs to
    reduction: str  # reduction type
    combine: str  # pointwise op name (COMBINE)
    identity: Any  # value the init step writes
    dtype: torch.dtype  # accumulation dtype
    layout: FixedTiledLayout  # per-tile, per_tile_fixed
    first_level: int  # outermost reduction level: init before, finalise after it

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "reduction": self.reduction,
            "combine": self.combine,
            "identity": self.identity,
            "dtype": str(self.dtype).removeprefix("torch."),
            "size": [int(s) for s in self.layout.size],
            "first_level": self.first_level,
        }


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a reduction producing ``dtype`` accumulates in (its compute form)."""
    return torch.float32 if dtype in _HALF else dtype


def identity(reduction: str, dtype: torch.dtype) -> Any:
    """The value the accumulator starts from (combine(identity, x) == x)."""
    if reduction in ("sum", "batchmatmul"):
        return False if dtype == torch.bool else 0
    if reduction == "prod":
        return True if dtype == torch.bool else 1
    if reduction == "any":
        return False
    if reduction in ("max", "min"):
        if dtype == torch.bool:
            return reduction == "min"
        if dtype.is_floating_point:
            return float("-inf") if reduction == "max" else float("inf")
        # int64 lives in int32 device storage: its values stay in the int32 range
        info = torch.iinfo(torch.int32 if dtype == torch.int64 else dtype)
        return info.min if reduction == "max" else info.max
    raise ValueError(f"no accumulation identity for reduction {reduction!r}")


def reduction_levels(op: Any) -> list[int]:
    """The loop levels of ``op`` that tile one of its reduction dims (outermost first)."""
    return [level for level, dims in enumerate(loop_tiled_reduction_dims(op)) if dims]


def _layout(op: Any, dtype: torch.dtype) -> FixedTiledLayout:
    size = [int(r) for r in op.data.ranges]
    try:
        # the generic stick layout (stick on the last dim), whatever the op's own
        layout = fixed_tiled_layout(op.layout.device, dtype, size)
    except LayoutError as exc:
        raise AccumulatorError(
            f"accumulator of {op_description(op)} (per-tile output {size}, {dtype}) has no "
            f"Spyre stick layout: {exc}"
        ) from None
    layout.per_tile_fixed = True
    return layout


def attach_accumulators(graph: Any, ops: list[Any]) -> dict[str, Accumulator]:
    """Give every op with a reduction level its accumulator (module doc).

    Registers the accumulator's layout in the graph state (memory planning gives it
    an HBM segment unless the scratchpad planner puts it in LX) and records it in
    the op's plan record.  Returns ``{op name: Accumulator}``.
    """
    state = graph_state(graph)
    done: dict[str, Accumulator] = {}
    for op in ops:
        levels = reduction_levels(op)
        if not levels:
            continue
        kind = str(op.data.reduction_type)
        dtype = accumulation_dtype(op.get_dtype())
        name = f"{op.get_name()}_acc"
        acc = Accumulator(
            name=name, op=op.get_name(), reduction=kind, combine=COMBINE[kind],
            identity=identity(kind, dtype), dtype=dtype, layout=_layout(op, dtype),
            first_level=levels[0],
        )
        setattr(op, ACCUMULATOR_ATTR, acc)
        state.layouts[name] = acc.layout
        record = state.plan.get(op.get_name())
        if record is not None:
            state.plan[op.get_name()] = record.with_accumulator(acc.record())
        done[op.get_name()] = acc
    return done


def accumulators(graph: Any) -> list[Accumulator]:
    """Every accumulator of the graph's ops, in operation order."""
    return [acc for op in graph.operations
            if (acc := getattr(op, ACCUMULATOR_ATTR, None)) is not None]
