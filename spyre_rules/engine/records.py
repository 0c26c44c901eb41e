"""What the engine returns: plans (the public plan records), decisions, traces, groups.

``SpanOverflowTilePlan`` / ``SpanOverflowTileLevel`` / ``ChunkingInfo`` are the
public contract of docs/layout_model.md §4.1.  ``OpDecision`` is one op's
answer with the trace of every rule that fired; ``spyre-rules explain`` and
the dump's ``plan.json`` print it.

A coarse-tile group has one representation, :class:`TileGroup` (its levels
:class:`GroupLevel`): the engine's grouping returns them, the hint pass builds
them from user hints (``hints.hints_to_coarse_tile_groups``) and ``coarse_tile``
consumes them.  Both are tuples, so a group still reads as the public form
``(ops, [(hint_id, split, is_reduction), ...])``.  Which op dim a level splits
is the op's ``DimHint`` of that hint id; for automatic groups the engine decides
it and returns it as :class:`AutoHint` -- the engine itself writes nothing into
the IR (``hints/automatic.py`` stamps them).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from spyre_rules.engine.values import DeferredText, recorded_text, render

__all__ = [
    "ChunkingInfo", "SpanOverflowTileLevel", "SpanOverflowTilePlan", "TraceStep", "RecordedStep",
    "OpDecision",
    "PLAN", "NO_PLAN", "UNSUPPORTED", "AutoHint", "GroupLevel", "TileGroup",
]

PLAN = "plan"
NO_PLAN = "no plan"
UNSUPPORTED = "unsupported"


@dataclasses.dataclass(frozen=True)
class ChunkingInfo:
    """One overflowing span the plan answers (an emitted candidate)."""

    total_bytes: int | None
    per_core_span: int
    core_split_estimate: int
    selected_device_dim_size: int | None
    selected_device_span_stride_elems: int | None
    selected_host_dim: int
    stick_elems: int | None
    reason: str | None = None


@dataclasses.dataclass(frozen=True)
class SpanOverflowTileLevel:
    """Split dim ``selected_host_dim`` into ``split_count`` tiles: an output host dim,
    or (``is_reduction``) reduction dim ``selected_host_dim - rank`` of the op."""

    selected_host_dim: int
    split_count: int
    is_reduction: bool = False


@dataclasses.dataclass(frozen=True)
class SpanOverflowTilePlan:
    """Levels sorted by host dim (outer to inner); the spans they answer; why."""

    levels: tuple[SpanOverflowTileLevel, ...]
    chunking_infos: tuple[ChunkingInfo, ...]
    reason: str | None = None

    @property
    def splits(self) -> tuple[tuple[int, int], ...]:
        """``((host_dim, split_count), ...)``: the plan in one line."""
        return tuple((lv.selected_host_dim, lv.split_count) for lv in self.levels)


@dataclasses.dataclass(repr=False)
class TraceStep:
    """A rule that fired (or a phase result), with the values it saw.

    ``values`` holds the raw values (rendered on demand: recording stays cheap).
    """

    section: str
    rule: str
    outcome: str
    message: str | None = None
    values: dict[str, Any] = dataclasses.field(default_factory=dict)

    def rendered_values(self) -> dict[str, str]:
        return {k: render(v) for k, v in self.values.items()}

    def __repr__(self) -> str:
        # values rendered as rules see them (an op by its name): readable, and safe
        # outside a graph context, unlike an IR op's own repr
        return f"TraceStep({self.text()!r})"

    def as_dict(self) -> dict[str, Any]:
        return {"section": self.section, "rule": self.rule, "outcome": self.outcome,
                "message": self.message, "values": self.rendered_values()}

    def recorded(self) -> "RecordedStep":
        """The step as a plan record keeps it: its values' texts as of now
        (``recorded_text``: the text of an immutable value is made when read)."""
        return RecordedStep(self.section, self.rule, self.outcome, self.message,
                            {k: recorded_text(v) for k, v in self.values.items()})

    def text(self) -> str:
        head = f"{self.section}.{self.rule}: {self.outcome}"
        if self.message:
            head += f" -- {self.message}"
        values = self.rendered_values()
        if values:
            head += "  [" + ", ".join(f"{k}={v}" for k, v in values.items()) + "]"
        return head


@dataclasses.dataclass(frozen=True)
class RecordedStep:
    """A :class:`TraceStep` with its values as text; ``as_dict`` is ``TraceStep.as_dict``
    of the step when it was recorded."""

    section: str
    rule: str
    outcome: str
    message: str | None
    values: dict[str, "str | DeferredText"]

    def as_dict(self) -> dict[str, Any]:
        return {"section": self.section, "rule": self.rule, "outcome": self.outcome,
                "message": self.message, "values": {k: str(v) for k, v in self.values.items()}}


@dataclasses.dataclass
class OpDecision:
    """One op's answer: ``decision`` is "plan", "no plan" or "unsupported"."""

    op: str
    kind: str
    decision: str
    plan: SpanOverflowTilePlan | None
    reason: str | None
    trace: list[TraceStep]
    error: Exception | None = None

    def as_dict(self) -> dict[str, Any]:
        plan = None
        if self.plan is not None:
            plan = {
                "levels": [dataclasses.asdict(lv) for lv in self.plan.levels],
                "chunking_infos": [dataclasses.asdict(ci) for ci in self.plan.chunking_infos],
                "reason": self.plan.reason,
            }
        return {"op": self.op, "kind": self.kind, "decision": self.decision, "plan": plan,
                "reason": self.reason, "trace": [s.as_dict() for s in self.trace]}


class GroupLevel(NamedTuple):
    """One loop level of a group: its hint id, trip count (a sympy Integer from the
    engine and the hint pass) and whether it splits a reduction dim of any member."""

    hint_id: int
    split: Any
    is_reduction: bool = False


class TileGroup(NamedTuple):
    """Ops sharing one tile loop nest (contiguous in graph order), outermost level first."""

    ops: list[Any]
    levels: list[GroupLevel]

    def __repr__(self) -> str:
        # ops by name: an IR op's own repr runs its inner_fn, which needs a graph
        # context (a restickify's loads fail under Inductor's NullHandler)
        levels = ", ".join(f"GroupLevel(hint_id={lv.hint_id}, split={lv.split}, "
                           f"is_reduction={lv.is_reduction})" for lv in self.levels)
        return f"TileGroup(ops={[_name(op) for op in self.ops]}, levels=[{levels}])"


def _name(op: Any) -> str:
    get = getattr(op, "get_name", None)
    return get() if callable(get) else str(op)


@dataclasses.dataclass(frozen=True)
class AutoHint:
    """The engine's decision for one member of an automatic group at one level:
    split output host dim ``host_dim`` (loop variable ``loop_var``) into ``split``;
    both None for a loop-invariant member (it runs whole in every iteration)."""

    hint_id: int
    host_dim: int | None
    split: int
    loop_var: Any
    is_reduction: bool = False
