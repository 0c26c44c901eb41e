"""Runtime values of the ``.rules`` language and how they print.

The checker has already proven every expression well typed, so values are
plain Python objects:

* ``int`` / ``bool`` / ``str``; **unknown** is ``None`` (facts return ``None``
  for "cannot be measured"); ``list`` (ordered), ``frozenset`` (a ``set``,
  iterated in ascending order: see :func:`iteration_order`), ``tuple`` (keys);
* opaque handles: ``Op`` is the Inductor operation, ``Sym`` a sympy Symbol,
  ``Layout`` a FixedTiledLayout, ``Tiling`` a :class:`Tiling`;
* extern records built by the engine (``DimGroup``, ``Combo``, ``Level``,
  ``Plan``, ``Run`` below) or by facts (``Coord``, ``Read``, ``HostCoord`` in
  ``spyre_rules.facts.records``), and plain records the rules build (a
  dataclass made per policy from the prelude's declaration).

Rendering (docs/rules_language.md §7) lives here too, so traces, messages and
``spyre-rules explain`` print values one way.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Iterable, Iterator, Set
from typing import Any

import sympy

from spyre_rules.ir.op_identity import op_name
from spyre_rules.lang.builtins import sort_key
from spyre_rules.lang.consts import int_text

__all__ = [
    "Carry", "Chunking", "Combo", "DimGroup", "Level", "NameLog", "NamesSoFar", "PlanRecord", "Run", "Tiling",
    "DeferredText", "ENGINE_RECORDS", "SET_TYPES", "as_set", "iteration_order", "recorded_text",
    "render", "sort_key",
]


class Tiling(tuple):
    """A split map ``((host_dim, split), ...)``: sorted by dim, splits > 1 only.

    A tuple of pairs, so the facts' ``tiling_key`` accepts it as it is; it prints
    as ``{1: 5, 2: 8}``.
    """

    __slots__ = ()

    @classmethod
    def of(cls, pairs: Iterable[tuple[int, int]]) -> "Tiling":
        return cls(sorted((int(d), int(k)) for d, k in pairs if int(k) > 1))

    def as_dict(self) -> dict[int, int]:
        return dict(self)

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{d}: {k}" for d, k in self) + "}"


# ------------------------------------------------------------- growing sets


class NamesSoFar(Set):
    """A ``set[str]`` value: the first ``n`` names of a :class:`NameLog`.

    Immutable like a frozenset (the log only grows, so its first ``n`` names never
    change), but made in O(1): grouping hands rules the set of the open run's
    members (and of every auto-tiled op) at every visit, and copying it into a
    frozenset each time made grouping quadratic in the length of a run.
    Operations that build a new set give a frozenset; ``x & s`` and ``x - s``
    iterate the other operand only (``as_set`` keeps the view as it is).
    """

    __slots__ = ("_log", "_names", "_position", "_n", "_hash", "_text")

    def __init__(self, log: "NameLog", n: int) -> None:
        self._log, self._names, self._position, self._n = log, log._names, log._position, n
        self._hash: int | None = None
        self._text: str | None = None

    @classmethod
    def _from_iterable(cls, values: Iterable[Any]) -> frozenset:
        return frozenset(values)

    def __contains__(self, name: object) -> bool:
        at = self._position.get(name)  # type: ignore[call-overload]
        return at is not None and at < self._n

    def __iter__(self) -> Iterator[str]:
        return itertools.islice(self._names, self._n)

    def __len__(self) -> int:
        return self._n

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self))  # equal sets hash alike, frozensets included
        return self._hash

    def __repr__(self) -> str:
        return f"NamesSoFar({sorted(self)!r})"

    def text(self) -> str:
        """``render`` of the set (kept: traces render a run's members once per step)."""
        if self._text is None:
            if self._log.all_str:
                self._text = "{" + ", ".join(map(repr, self._log.sorted_prefix(self._n))) + "}"
            else:
                self._text = "{" + ", ".join(render(v, False) for v in iteration_order(self)) + "}"
        return self._text


class NameLog:
    """An append-only list of distinct names whose :meth:`so_far` is a set value."""

    __slots__ = ("_names", "_position", "_sorted", "_sorted_n", "all_str")

    def __init__(self) -> None:
        self._names: list[str] = []
        self._position: dict[str, int] = {}
        self.all_str = True  # every name a str: rendered as repr(name), ordered as text
        # the first _sorted_n names in order: the views are rendered oldest first
        # (one per op of a run), each from the last by inserting the names after it
        self._sorted: list[str] = []
        self._sorted_n = 0

    def add(self, name: str) -> None:
        if name not in self._position:
            self._position[name] = len(self._names)
            self._names.append(name)
            self.all_str = self.all_str and type(name) is str

    def __len__(self) -> int:
        return len(self._names)

    def so_far(self) -> NamesSoFar:
        return NamesSoFar(self, len(self._names))

    def sorted_prefix(self, n: int) -> list[str]:
        """The first ``n`` names in the order of ``iteration_order`` (do not edit)."""
        if n < self._sorted_n or not self.all_str:
            return sorted(self._names[:n], key=sort_key)
        if n > self._sorted_n:
            merged = list(self._sorted)
            for name in self._names[self._sorted_n:n]:
                bisect.insort(merged, name)
            self._sorted, self._sorted_n = merged, n
        return self._sorted


#: The runtime types of a ``set[T]`` value.
SET_TYPES = (frozenset, set, NamesSoFar)


def as_set(value: Any) -> Any:
    """``value`` as a set operand: a frozenset or a :class:`NamesSoFar` as it is (no copy)."""
    return value if isinstance(value, (frozenset, NamesSoFar)) else frozenset(value)


# ------------------------------------------------------------- engine records
# Field names and order are the prelude's (the engine refuses to load a
# prelude whose extern records disagree with these).


@dataclasses.dataclass(frozen=True)
class DimGroup:
    """search: every candidate of one output host dim."""

    dim: int
    max_span_bytes: int
    first_index: int
    spans: list


@dataclasses.dataclass(frozen=True)
class Combo:
    """search: one combination of split counts, aligned with the ordered dims."""

    dims: list
    counts: list


@dataclasses.dataclass(frozen=True)
class Level:
    """A plan level: split output host dim ``host_dim`` into ``split`` tiles."""

    host_dim: int
    split: int
    is_reduction: bool


@dataclasses.dataclass(frozen=True)
class PlanRecord:
    """The planner's answer for one op as rules see it (prelude ``Plan``)."""

    RULES_NAME = "Plan"  # not a field: the record's name in the language

    levels: list
    tiling: Tiling
    reason: str


@dataclasses.dataclass(frozen=True)
class Run:
    """grouping: the open run of ops sharing one loop (``levels`` as its first op runs them)."""

    is_open: bool
    members: frozenset | NamesSoFar
    levels: list
    tiling: Tiling


@dataclasses.dataclass(frozen=True)
class Carry:
    """grouping: the open run's split on one op's own output dims (prelude ``Carry``)."""

    levels: list       # loop order, outer to inner
    tiling: Tiling
    through: frozenset  # the run members the op reads


@dataclasses.dataclass(frozen=True)
class RunMember:
    """grouping: a tiled run member and its split under a refined loop (prelude ``RunMember``)."""

    op: Any
    tiling: Tiling


@dataclasses.dataclass(frozen=True)
class Refine:
    """grouping: an op's own plan carried back onto the open run (prelude ``Refine``)."""

    levels: list        # loop order, outer to inner: the op's own dims
    tiling: Tiling
    members: list       # RunMember per tiled member that takes the refined loop, in run order
    closed: frozenset   # the members before them: they keep the run's split in a loop of their own


@dataclasses.dataclass(frozen=True)
class Chunking:
    """collectives: host dim ``dim`` of a collective's buffers cut into runs of ``length``
    elements (the last one shorter), one collective call per run: ``count`` calls."""

    dim: int
    length: int
    count: int

    def as_dict(self) -> dict[str, int]:
        return {"host_dim": self.dim, "length": self.length, "count": self.count}


#: prelude record name -> the engine's dataclass
ENGINE_RECORDS: dict[str, type] = {
    "DimGroup": DimGroup, "Combo": Combo, "Level": Level, "Plan": PlanRecord, "Run": Run,
    "Carry": Carry, "Refine": Refine, "RunMember": RunMember, "Chunking": Chunking,
}


# ------------------------------------------------------------------ ordering

# ``sort_key`` (the language's order of orderable values) is the ``sorted`` builtin's, defined
# once with the builtins.


def iteration_order(values: Any) -> list:
    """Elements of a list as they are; of a set in ascending order.  A list is
    returned itself, not copied (the evaluator only iterates it): do not edit it."""
    if type(values) is list:
        return values
    if isinstance(values, SET_TYPES):
        return sorted(values, key=sort_key)
    return list(values)


# ----------------------------------------------------------------- rendering


def _op_name(value: Any) -> str | None:
    """An IR node's name (``op_name``); None for a value that is not an op."""
    return op_name(value) if callable(getattr(value, "get_name", None)) else None


def _layout_text(value: Any) -> str | None:
    device_layout = getattr(value, "device_layout", None)
    if device_layout is None or not hasattr(value, "size"):
        return None
    size = [int(s) if getattr(s, "is_Integer", True) else str(s) for s in value.size]
    return f"Layout(size={size}, device_size={list(device_layout.device_size)})"


def render(value: Any, top: bool = True) -> str:
    """The text of a value in messages and traces (docs/rules_language.md §7)."""
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return int_text(value)
    if isinstance(value, str):
        return value if top else repr(value)
    if isinstance(value, sympy.Symbol):
        return value.name
    if isinstance(value, sympy.Integer):
        return int_text(int(value))
    if isinstance(value, Tiling):
        return repr(value)
    if isinstance(value, NamesSoFar):
        return value.text()
    if isinstance(value, SET_TYPES):
        return "{" + ", ".join(render(v, False) for v in iteration_order(value)) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(render(v, False) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(render(v, False) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    # Ops and layouts before records: Inductor IR nodes are dataclasses too.
    name = _op_name(value)
    if name is not None:
        return name
    text = _layout_text(value)
    if text is not None:
        return text
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ", ".join(f"{f.name}={render(getattr(value, f.name), False)}"
                           for f in dataclasses.fields(value))
        name = getattr(type(value), "RULES_NAME", type(value).__name__)
        return f"{name}({fields})"
    return str(value)


# ------------------------------------------------------------ kept texts


class DeferredText:
    """The :func:`render` text of a value that can never change, made when first read.

    A plan record keeps every rule's values as text, rendered when the rule fired,
    because most values are live IR (a layout tiling later resizes).  A grouping
    step's ``run`` holds the run's members, so its text grows with the run: made
    per op, the records of one long run were quadratic in time and memory though
    only ``plan.json`` ever reads them.  A :class:`Run` and a :class:`NamesSoFar`
    are immutable (a view of an append-only log), so their text is the same
    whenever it is made.
    """

    __slots__ = ("_value", "_text")

    def __init__(self, value: Any) -> None:
        self._value = value
        self._text: str | None = None

    def __str__(self) -> str:
        if self._text is None:
            self._text = render(self._value)
            self._value = None
        return self._text

    def __repr__(self) -> str:
        return f"DeferredText({str(self)!r})"


def recorded_text(value: Any) -> "str | DeferredText":
    """``render(value)`` for a record: now, or deferred when the value cannot change."""
    if isinstance(value, (Run, NamesSoFar)):
        return DeferredText(value)
    return render(value)
