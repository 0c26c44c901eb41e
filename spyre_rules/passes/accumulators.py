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

A reduction whose partial result is a tuple (argmax / argmin, welford;
``combine.FIELDS``) has one accumulator buffer per field (``AccField``), each
with its own dtype and identity: value (compute dtype of the input; -inf / +inf
or the integer extreme), index (int64, 0), count (int64, 0) for the index
reductions; mean, m2, weight (float32, 0) for welford; acc (0), max (-inf), sum
(0), float32, for softmax_values (flash-decoding's running state).  ``index_map`` records the
per-tile reduction geometry codegen needs to turn a tile's local index into the
index over the whole reduction range.

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
import math
from typing import Any

import torch

from spyre_rules.errors import LayoutError
from spyre_rules.facts.reduction_facts import accumulation_dtype
from spyre_rules.facts.tiled_layout import FixedTiledLayout, fixed_tiled_layout
from spyre_rules.ir.graph_state import graph_state
from spyre_rules.ir.ir_edit import op_description
from spyre_rules.ir.loop_stamp import loop_count, loop_tiled_reduction_dims
from spyre_rules.passes.coarse_tile import CoarseTileError
from spyre_rules.passes.combine import COMBINE, FIELD_COMBINE, FIELDS

__all__ = [
    "ACCUMULATOR_ATTR",
    "COMBINE",
    "AccField",
    "Accumulator",
    "accumulation_dtype",
    "attach_accumulators",
    "identity",
    "reduction_levels",
]

ACCUMULATOR_ATTR = "accumulator"



class AccumulatorError(CoarseTileError):
    """An accumulator cannot be laid out for a reduction level (names the op)."""


@dataclasses.dataclass(frozen=True)
class AccField:
    """One buffer of an accumulator (``combine.FIELDS``; a one-field accumulator: "value")."""

    role: str  # "value", "index", "count", "mean", "m2", "weight", "acc", "max", "sum"
    name: str  # device buffer name
    dtype: torch.dtype
    identity: Any  # what the init step writes
    layout: FixedTiledLayout  # per-tile, per_tile_fixed

    def record(self) -> dict[str, Any]:
        return {"role": self.role, "name": self.name, "identity": self.identity,
                "dtype": str(self.dtype).removeprefix("torch.")}


@dataclasses.dataclass(frozen=True)
class IndexMap:
    """Per-tile reduction geometry of an index reduction tiled on reduction dim ``r``.

    The local index ``i`` of a tile is row-major over the per-tile reduction
    ranges; with ``block`` = the per-tile extent of dims ``r..`` and ``tile`` = the
    points of one tile, the index over the whole range is
    ``(i // block) * whole + count // outer + i % block`` where ``count`` is the
    number of points combined before this tile (tile ``t`` of the loops over dim
    ``r``: ``t * tile``), ``outer = tile // block`` and ``whole`` the full extent of
    dims ``r..``.  With ``outer == 1`` (``r`` the outermost reduction dim) that is
    ``i + count``.
    """

    block: int
    whole: int
    tile: int

    @property
    def outer(self) -> int:
        return self.tile // self.block


@dataclasses.dataclass(frozen=True)
class Accumulator:
    """The accumulator of one op's reduction level(s)."""

    op: str  # the reduction op it belongs to
    reduction: str  # reduction type
    combine: str  # pointwise op name (COMBINE) or the tuple merge (FIELD_COMBINE)
    fields: tuple[AccField, ...]  # one buffer per field; the first is the primary
    first_level: int  # outermost reduction level: init before, finalise after it
    index_map: IndexMap | None = None  # argmax / argmin only

    @property
    def name(self) -> str:
        return self.fields[0].name

    @property
    def dtype(self) -> torch.dtype:
        return self.fields[0].dtype

    @property
    def identity(self) -> Any:
        return self.fields[0].identity

    @property
    def layout(self) -> FixedTiledLayout:
        return self.fields[0].layout

    def field(self, role: str) -> AccField:
        return next(f for f in self.fields if f.role == role)

    def record(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "reduction": self.reduction,
            "combine": self.combine,
            "identity": self.identity,
            "dtype": str(self.dtype).removeprefix("torch."),
            "size": [int(s) for s in self.layout.size],
            "first_level": self.first_level,
        }
        if len(self.fields) > 1:
            out["fields"] = [f.record() for f in self.fields]
        return out


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


def _extreme(reduction: str, dtype: torch.dtype) -> Any:
    return identity("max" if reduction == "argmax" else "min", dtype)


def _fields(op: Any, kind: str, name: str) -> tuple[AccField, ...]:
    """The accumulator buffers of ``op`` (module doc)."""
    if kind not in FIELDS:
        dtype = accumulation_dtype(op.get_dtype())
        return (AccField("value", name, dtype, identity(kind, dtype), _layout(op, dtype)),)
    out = []
    for role in FIELDS[kind]:
        if role == "value":
            dtype = accumulation_dtype(op.data.src_dtype)
            start = _extreme(kind, dtype)
        elif role in ("index", "count"):
            dtype, start = torch.int64, 0
        elif role == "max":  # softmax_values' running max of the scores
            dtype, start = accumulation_dtype(op.get_dtype()), float("-inf")
        else:  # welford's mean, m2, weight
            dtype, start = accumulation_dtype(op.get_dtype()), 0
            if not dtype.is_floating_point:
                dtype = torch.float32
        suffix = "" if not out else f"_{role}"
        out.append(AccField(role, f"{name}{suffix}", dtype, start, _layout(op, dtype)))
    return tuple(out)


def _index_map(op: Any, levels: list[int]) -> IndexMap:
    red = [int(r) for r in op.data.reduction_ranges]  # per tile (coarse_tile divided them)
    dims = {r for level in levels for r in loop_tiled_reduction_dims(op)[level]}
    (r,) = dims  # coarse_tile refuses an index reduction tiled on two reduction dims
    count = 1
    for level in levels:
        count *= int(loop_count(op)[level])
    block = math.prod(red[r:])
    return IndexMap(block=block, whole=block * count, tile=math.prod(red))


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
        acc = Accumulator(
            op=op.get_name(), reduction=kind,
            combine=COMBINE[kind] if kind in COMBINE else FIELD_COMBINE[kind],
            fields=_fields(op, kind, f"{op.get_name()}_acc"), first_level=levels[0],
            index_map=_index_map(op, levels) if "index" in FIELDS.get(kind, ()) else None,
        )
        setattr(op, ACCUMULATOR_ATTR, acc)
        for field in acc.fields:
            state.layouts[field.name] = field.layout
        record = state.plan.get(op.get_name())
        if record is not None:
            state.plan[op.get_name()] = record.with_accumulator(acc.record())
        done[op.get_name()] = acc
    return done


def accumulators(graph: Any) -> list[Accumulator]:
    """Every accumulator of the graph's ops, in operation order."""
    return [acc for op in graph.operations
            if (acc := getattr(op, ACCUMULATOR_ATTR, None)) is not None]
