"""The plan record: what compilation decided for one op, as ``plan.json`` shows it.

``graph_state(graph).plan`` maps op name -> :class:`OpPlanRecord`.  A record is
immutable: a writer replaces it with ``record.with_<field>(...)``.  Each field
has exactly one writer (:data:`FIELD_WRITERS`, checked by
tests/passes/test_plan_record.py), so "who says this about the op" has one answer:

===================  ==========================================  ===============================
field                meaning                                     written by
===================  ==========================================  ===============================
op                   the op (buffer) name                        backend.pre_scheduling (open)
description          ``op_description`` of the op                backend.pre_scheduling (open)
kind                 "pointwise", "reduction:sum", "copy", ...   backend.pre_scheduling (open)
writes_region_of     the concatenation whose region it writes    backend.pre_scheduling (open)
host_step            the op runs on the host                     backend.pre_scheduling (open)
decision             :class:`Decision`: what runs and why        passes.pipeline
split_at_host_steps  host steps that cut the op's group          passes.host_boundaries
graph_error          the engine's refusal of the whole graph     passes.pipeline
loop                 :class:`LoopRecord`: the op's tile loop     passes.tiling_propagation
scratchpad           LX placement, or why the buffer stays HBM   passes.scratchpad
layout               the op's layout with its HBM address        backend.pre_scheduling
span_check           the generated code's span check result      codegen.span_check
===================  ==========================================  ===============================

Three constructors open a record, each with its one caller: ``open`` (a Spyre
op; no decision yet), ``open_host_step`` (a host step: its decision is "host"
with the reason, fixed when it is opened; backend.pre_scheduling) and
``copied_as`` (the copy op tiling propagation inserts: the tiled op's decision
without its rule trace, since the rules never saw the copy;
passes.tiling_propagation).

:meth:`OpPlanRecord.as_dict` is the one serialiser (``plan.json``, the tests'
view of a record); a field that was never written is left out, as is a
:class:`Decision` field its writer does not speak to (:data:`UNSET`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from spyre_rules.engine.records import NO_PLAN

__all__ = ["COLLECTIVE_STEP_KIND", "HOST_STEP_KIND", "CONSTRUCTORS", "COPY_WRITER", "Decision", "FIELD_WRITERS", "WRITER_METHODS", "LoopRecord", "NO_PLAN", "OpPlanRecord", "UNSET"]


class _Unset:
    """A field its writer leaves out of ``plan.json`` (not the same as ``null``)."""

    _instance: "_Unset | None" = None

    def __new__(cls) -> "_Unset":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Any = _Unset()

HOST_STEP_KIND = "host step"
COLLECTIVE_STEP_KIND = "collective step"  # backend/collectives.py

#: field -> the one module that writes it (constructing a record writes op/description/kind).
FIELD_WRITERS: dict[str, str] = {
    "op": "spyre_rules.backend.pre_scheduling",
    "description": "spyre_rules.backend.pre_scheduling",
    "kind": "spyre_rules.backend.pre_scheduling",
    "writes_region_of": "spyre_rules.backend.pre_scheduling",
    "host_step": "spyre_rules.backend.pre_scheduling",
    "decision": "spyre_rules.passes.pipeline",
    "split_at_host_steps": "spyre_rules.passes.host_boundaries",
    "graph_error": "spyre_rules.passes.pipeline",
    "loop": "spyre_rules.passes.tiling_propagation",
    "accumulator": "spyre_rules.passes.accumulators",
    "accumulator_scratchpad": "spyre_rules.passes.scratchpad",
    "scratchpad": "spyre_rules.passes.scratchpad",
    "layout": "spyre_rules.backend.pre_scheduling",
    "span_check": "spyre_rules.codegen.span_check",
}

#: writer method -> the fields it writes.
WRITER_METHODS: dict[str, tuple[str, ...]] = {
    "open": ("op", "description", "kind", "writes_region_of"),
    "open_host_step": ("host_step",),
    "with_decision": ("decision",),
    "with_split_at_host_steps": ("split_at_host_steps",),
    "with_graph_error": ("graph_error",),
    "with_loop": ("loop",),
    "with_accumulator": ("accumulator",),
    "with_accumulator_scratchpad": ("accumulator_scratchpad",),
    "with_scratchpad": ("scratchpad",),
    "with_layout": ("layout",),
    "with_span_check": ("span_check",),
}
#: constructors other than ``open`` -> their one caller (the fields they set are
#: written by that caller alone for the records it makes).
CONSTRUCTORS: dict[str, str] = {
    "open_host_step": "spyre_rules.backend.pre_scheduling",
    "copied_as": "spyre_rules.passes.tiling_propagation",
}
COPY_WRITER = CONSTRUCTORS["copied_as"]


def _lists(value: Any) -> Any:
    """Tuples (how a record stores sequences) as JSON lists, recursively."""
    if isinstance(value, (tuple, list)):
        return [_lists(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class Decision:
    """What the op runs and why (the ``decision`` writer's part of ``plan.json``).

    ``decision``: "plan" / "no plan" / "unsupported" / "user hint";
    ``rule_trace``: every rule that fired (``TraceStep.recorded()``, or its ``as_dict``),
    planner then grouping;
    ``source``: "automatic" / "user hint" / None; ``levels``: ``((host_dim, tiles), ...)``
    the op's loop really runs; ``own_plan``: the planner's splits for the op alone;
    ``hint_ids``: the ids of its automatic levels; ``reason``; ``rule`` and
    ``rule_message``: the rule that decided.  :data:`UNSET` fields are not shown.
    """

    decision: str = NO_PLAN
    rule_trace: tuple[Any, ...] = ()  # RecordedStep (or its dict)
    source: Any = UNSET
    levels: Any = UNSET
    own_plan: Any = UNSET
    hint_ids: Any = UNSET
    reason: Any = UNSET
    rule: Any = UNSET
    rule_message: Any = UNSET

    def as_dict(self) -> dict[str, Any]:
        out = {"decision": self.decision,
               "rule_trace": [s if isinstance(s, dict) else s.as_dict() for s in self.rule_trace]}
        for f in dataclasses.fields(self)[2:]:
            value = getattr(self, f.name)
            if value is not UNSET:
                out[f.name] = _lists(value)
        return out


@dataclasses.dataclass(frozen=True)
class LoopRecord:
    """The op's tile loop after coarse tiling and what propagation did with its buffer."""

    loop_group_id: tuple[int, ...]
    loop_count: tuple[int, ...]
    loop_tiled_dims: tuple[tuple[int, ...], ...]
    loop_tiled_reduction_dims: tuple[tuple[int, ...], ...]
    propagation: str
    #: per level, ``(dim, tile, last tile)`` of each dim with a shorter last tile
    #: (a remainder tile, docs/layout_model.md §5.2); empty when every tile is whole
    loop_last_tiles: tuple[tuple[tuple[int, int, int], ...], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out = {"loop_group_id": list(self.loop_group_id), "loop_count": list(self.loop_count),
               "loop_tiled_dims": _lists(self.loop_tiled_dims),
               "loop_tiled_reduction_dims": _lists(self.loop_tiled_reduction_dims),
               "propagation": self.propagation}
        if any(self.loop_last_tiles):
            out["loop_last_tiles"] = [[{"dim": d, "tile": t, "last": r} for d, t, r in level]
                                      for level in self.loop_last_tiles]
        return out


@dataclasses.dataclass(frozen=True)
class OpPlanRecord:
    """One op's plan record (module doc: fields and their writers)."""

    op: str
    description: str
    kind: str
    writes_region_of: Any = UNSET   # the concatenation buffer (backend/concat.py)
    host_step: Any = UNSET          # True: a host step (backend/host_steps.py)
    decision: Decision = Decision()
    split_at_host_steps: Any = UNSET  # names of the host steps that cut its group
    graph_error: Any = UNSET
    loop: Any = UNSET           # LoopRecord
    accumulator: Any = UNSET    # passes.accumulators.Accumulator.record() of a reduction level
    accumulator_scratchpad: Any = UNSET  # where the accumulator went (plan.json: accumulator.scratchpad)
    scratchpad: Any = UNSET     # {"lx": offset, "size_bytes": n} or why it stays in HBM
    layout: Any = UNSET         # backend.pre_scheduling.layout_record
    span_check: Any = UNSET     # codegen.span_check result

    # ------------------------------------------------------------ writers
    @classmethod
    def open(cls, op: str, description: str, kind: str,
             writes_region_of: str | None = None) -> "OpPlanRecord":
        """A new op's record: no decision yet ("no plan", empty trace)."""
        return cls(op, description, kind,
                   writes_region_of=UNSET if writes_region_of is None else writes_region_of)

    @classmethod
    def open_host_step(cls, op: str, description: str, reason: str,
                       kind: str = HOST_STEP_KIND) -> "OpPlanRecord":
        """A host step's record: it runs on the host, for ``reason``.  A collective step
        (backend/collectives.py) runs outside the kernels too: decision "collective"."""
        decision = "host" if kind == HOST_STEP_KIND else "collective"
        return cls(op, description, kind, host_step=True,
                   decision=Decision(decision=decision, reason=reason))

    def with_split_at_host_steps(self, names: list[str]) -> "OpPlanRecord":
        return dataclasses.replace(self, split_at_host_steps=tuple(names))

    def with_decision(self, decision: Decision) -> "OpPlanRecord":
        return dataclasses.replace(self, decision=decision)

    def with_graph_error(self, message: str) -> "OpPlanRecord":
        return dataclasses.replace(self, graph_error=message)

    def with_loop(self, loop: LoopRecord) -> "OpPlanRecord":
        return dataclasses.replace(self, loop=loop)

    def with_accumulator(self, accumulator: dict[str, Any]) -> "OpPlanRecord":
        return dataclasses.replace(self, accumulator=accumulator)

    def with_accumulator_scratchpad(self, placement: Any) -> "OpPlanRecord":
        return dataclasses.replace(self, accumulator_scratchpad=placement)

    def with_scratchpad(self, placement: Any) -> "OpPlanRecord":
        return dataclasses.replace(self, scratchpad=placement)

    def with_layout(self, layout: dict[str, Any]) -> "OpPlanRecord":
        return dataclasses.replace(self, layout=layout)

    def with_span_check(self, result: dict[str, Any]) -> "OpPlanRecord":
        return dataclasses.replace(self, span_check=result)

    def copied_as(self, name: str, description: str, kind: str) -> "OpPlanRecord":
        """The record of the copy op ``name`` of this (tiled) op's tile: the op's
        decision without the rule trace; nothing yet about its own loop or layout."""
        return dataclasses.replace(self, op=name, description=description, kind=kind,
                                   decision=dataclasses.replace(self.decision, rule_trace=()))

    # --------------------------------------------------------- serialiser
    def as_dict(self) -> dict[str, Any]:
        """The record as ``plan.json`` shows it."""
        out: dict[str, Any] = {"op": self.op, "description": self.description, "kind": self.kind}
        decision = self.decision.as_dict()
        if self.host_step is True:  # decision, reason, host_step, then the (empty) trace
            out.update(decision=decision.pop("decision"), reason=decision.pop("reason"),
                       host_step=True)
            out.update(decision)
        else:
            out.update(decision=decision.pop("decision"), rule_trace=decision.pop("rule_trace"))
            if self.writes_region_of is not UNSET:
                out["writes_region_of"] = self.writes_region_of
            out.update(decision)
        if self.split_at_host_steps is not UNSET:
            out["split_at_host_steps"] = list(self.split_at_host_steps)
        for name in ("graph_error", "loop", "accumulator", "scratchpad", "layout", "span_check"):
            value = getattr(self, name)
            if value is not UNSET:
                out[name] = value.as_dict() if isinstance(value, LoopRecord) else value
        if self.accumulator is not UNSET and self.accumulator_scratchpad is not UNSET:
            out["accumulator"] = {**self.accumulator, "scratchpad": self.accumulator_scratchpad}
        return out
