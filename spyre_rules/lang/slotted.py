"""Value classes without ``dataclasses``: what ``@dataclass`` would generate, written once.

``spyre-rules check`` must start fast, and importing :mod:`dataclasses` (it
imports :mod:`inspect`) and generating each class's methods cost more at
every start than the check of the bundled rules itself.  So the classes of the
check path are plain slotted classes listing their fields in ``_fields`` (in
order) and writing their own ``__init__``; these bases add the methods a
dataclass of the same fields would have, with the same results:

* :class:`Plain` -- ``@dataclass``: ``__eq__`` compares the field tuples of two
  instances of the same class (``NotImplemented`` otherwise), ``__repr__`` is
  ``Name(field=value, ...)``, instances are unhashable;
* :class:`Frozen` -- ``@dataclass(frozen=True)``: the same, plus ``__hash__``
  of the field tuple, and assigning or deleting a field raises
  ``AttributeError`` (``__init__`` sets fields with :func:`object.__setattr__`,
  through :func:`frozen_init`).
"""

from __future__ import annotations

__all__ = ["Frozen", "Plain", "frozen_init"]


class Plain:
    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def _astuple(self) -> tuple:
        return tuple([getattr(self, name) for name in self._fields])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._astuple() == other._astuple()  # type: ignore[attr-defined]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as a dataclass with eq and not frozen

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__qualname__}({inner})"


class Frozen(Plain):
    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._astuple())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")


_set = object.__setattr__


def frozen_init(self: Frozen, *values: object) -> None:
    """Set the fields of a :class:`Frozen` instance, in ``_fields`` order."""
    for name, value in zip(self._fields, values):
        _set(self, name, value)
