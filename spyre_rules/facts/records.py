"""Records the op facts return, and the tiling key they are measured under.

These are the Python side of the ``extern record`` declarations in
``rules/prelude.rules`` (``Read``, ``Coord``, ``HostCoord``): their dataclass
fields are exactly the prelude's fields, in the prelude's order, so the engine
can expose them to rules field by field.  Anything a rule must not see (which
MemoryDep a ``Read`` came from) is kept out of the dataclass fields.

No torch import: ``spyre-rules check`` and the rule tools load this module.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import sympy

from spyre_rules.errors import SpyreRulesError

__all__ = ["Coord", "FactError", "HostCoord", "Read", "TilingKey", "as_int", "by_str", "tiling_key"]


class FactError(SpyreRulesError, ValueError):
    """A fact was asked something it cannot measure (names the op and the reason).

    Raised for caller bugs (a tiling that is not a split map, a ``Read`` that
    belongs to no current read of the op), never for "the IR is unusual": those
    answers are typed (``None``, ``False``, ``[]``, :class:`CannotRebuild`).
    """


@dataclasses.dataclass(frozen=True)
class Read:
    """An input op reads through a direct MemoryDep of a buffer with a static layout.

    ``_dep`` (the MemoryDep) and ``_position`` (its place in the op's reads) are
    plain attributes, not fields: rules see ``buffer`` and ``layout`` only, while
    ``read_coords`` still knows *which* access is meant when an op reads the same
    buffer through two different indices.
    """

    buffer: str
    layout: Any

    @classmethod
    def of(cls, buffer: str, layout: Any, dep: Any, position: int) -> Read:
        read = cls(buffer, layout)
        object.__setattr__(read, "_dep", dep)
        object.__setattr__(read, "_position", position)
        return read

    @property
    def index(self) -> Any:
        """The read's index expression (None for a Read built without one)."""
        dep = getattr(self, "_dep", None)
        return None if dep is None else dep.index


@dataclasses.dataclass(frozen=True)
class Coord:
    """One device coordinate of an access and its measured span (docs/layout_model.md §3.2).

    ``span_elems`` is a sound upper bound on the number of values the coordinate
    takes over the (per-tile) ranges, or None when no bound is proven.
    ``inner_elems`` is what one step of it covers: ``prod(device_size[dim+1:])``
    (reads and writes alike; see ``per_tile.tile_access_coords`` for why not the
    reference's tile-aware input extent).  ``span_bytes`` is their product times the host
    itemsize (None if either is None).  ``total_bytes`` is the whole device tensor
    the coordinates address (the per-tile tensor for a tiled output).
    """

    buffer: str
    dim: int
    is_stick: bool
    expr: str
    symbols: frozenset
    span_elems: int | None
    inner_elems: int | None
    span_bytes: int | None
    total_bytes: int
    stick_elems: int


@dataclasses.dataclass(frozen=True)
class HostCoord:
    """Which loop symbols drive host dim ``dim`` of an input access."""

    dim: int
    symbols: frozenset


#: A normalised tiling: ``((host_dim, split), ...)`` sorted by dim, splits > 1 only.
TilingKey = tuple[tuple[int, int], ...]


def as_int(value: Any) -> int | None:
    """``value`` as a Python int if it is an integer (sympy included, bool excluded)."""
    kind = type(value)
    if kind is int:  # the common cases first: ``numbers.Integral`` is a slow ABC check
        return value
    if kind is bool:
        return None
    if isinstance(value, sympy.Integer):
        return int(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, sympy.Expr) and value.is_Integer:
        return int(value)
    return None


def by_str(value: Any) -> str:
    """``str(value)``, the sort key of symbols; a plain Symbol's str is its name, read
    without sympy's printer (which costs more than the sort it keys)."""
    if type(value) is sympy.Symbol:
        return value.name
    return str(value)


def tiling_key(tiling: Any) -> TilingKey:
    """Normalise a split map (``{1: 5}``, pairs, or None) into a hashable key.

    A split of 1 does not tile anything, so it is dropped: ``{0: 1}`` and ``{}``
    describe the same (untiled) view and share one cache entry.  Anything that is
    not a map of integer host dims to positive integer splits is a caller bug.
    """
    if tiling is None:
        return ()
    if isinstance(tiling, tuple) and _normal(tiling):
        return tuple(tiling)  # already a key (a plan's Tiling, asked thousands of times)
    return _tiling_key(tiling)


def _normal(tiling: tuple) -> bool:
    """Pairs of plain ints, dims strictly ascending, every split > 1: its own key."""
    last = -1
    for pair in tiling:
        if type(pair) is not tuple or len(pair) != 2:
            return False
        dim, k = pair
        if type(dim) is not int or type(k) is not int or dim <= last or k <= 1:
            return False
        last = dim
    return True


def _tiling_key(tiling: Any) -> TilingKey:
    if isinstance(tiling, tuple) and all(isinstance(p, tuple) for p in tiling):
        items: Iterable[Any] = tiling
    elif isinstance(tiling, Mapping):
        items = tiling.items()
    elif hasattr(tiling, "items"):
        items = tiling.items()
    else:
        try:
            items = list(tiling)
        except TypeError:
            raise FactError(f"tiling {tiling!r} is not a split map (host dim -> split)") from None
    out: dict[int, int] = {}
    for pair in items:
        try:
            raw_dim, raw_k = pair
        except (TypeError, ValueError):
            raise FactError(f"tiling {tiling!r} is not a split map (host dim -> split)") from None
        dim, k = as_int(raw_dim), as_int(raw_k)
        if dim is None or k is None or k < 1:
            raise FactError(
                f"tiling {tiling!r}: entry {raw_dim!r}: {raw_k!r} is not host dim -> positive split"
            )
        if dim in out and out[dim] != k:
            raise FactError(f"tiling {tiling!r} splits host dim {dim} twice")
        out[dim] = k
    return tuple(sorted((d, k) for d, k in out.items() if k > 1))
