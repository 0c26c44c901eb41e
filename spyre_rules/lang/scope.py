"""Scopes of the checker: what a name means at one point of a policy.

A :class:`Scope` maps names to :class:`Binding`s and remembers which value keys
an ``is known`` test has proven (narrowing, see ``checker.py``).
"""

from __future__ import annotations

from spyre_rules.lang import ast as A
from spyre_rules.lang import types as T

MAX_DEPTH = 100  # nesting levels of one expression


class Binding:
    """One name a scope binds.  ``slot`` is where the engine keeps its value: the
    name itself for an ``implicit`` binding (the engine binds it under its name),
    an int unique in the policy for a binding the rules make (lang/resolved.py)."""

    __slots__ = ("name", "type", "span", "kind", "used", "slot")

    def __init__(self, name: str, type_: T.Type, span: A.Span | None, kind: str,
                 slot: str | int | None = None) -> None:
        self.name = name
        self.type = type_
        self.span = span
        self.kind = kind  # implicit | let | for | splits | binder
        self.used = False
        self.slot = name if slot is None else slot


class Scope:
    __slots__ = ("names", "parent", "known")

    def __init__(self, parent: "Scope | None" = None) -> None:
        self.names: dict[str, Binding] = {}
        self.parent = parent
        self.known: set = set()

    def lookup(self, name: str) -> Binding | None:
        s = self
        while s is not None:
            b = s.names.get(name)
            if b is not None:
                return b
            s = s.parent
        return None

    def is_known(self, key) -> bool:
        s = self
        while s is not None:
            if key in s.known:
                return True
            s = s.parent
        return False

    def child(self, known=()) -> "Scope":
        c = Scope(self)
        c.known.update(known)
        return c

    def bindings(self) -> list[Binding]:
        return list(self.names.values())


def where(span: A.Span | None) -> str:
    return f"{span.file}:{span.line}:{span.col}" if span else "?"
