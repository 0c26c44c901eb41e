"""What the checker hands the engine: every name resolved, every template parsed.

The checker resolves each name once, where it checks it; the engine compiles
from this table and resolves nothing itself (it has no scopes and never reads a
template's text).  Tables are keyed by the ``id`` of the checked AST node (the
AST lives as long as the check result that holds both):

* ``names``      -- each :class:`~spyre_rules.lang.ast.Name` -> what it names: a
  :class:`~spyre_rules.lang.scope.Binding` (its ``slot`` is the engine's env key:
  the name itself for a binding the engine makes, a unique int for one the rules
  make), a :class:`ConstRef` or a :class:`GeneratorRef` (validation only);
* ``declared``   -- the :class:`~spyre_rules.lang.ast.Ident` of each ``let``,
  ``for`` variable, split variable and binder -> its Binding;
* ``templates``  -- each string literal -> its :class:`Template` (literal text and
  resolved placeholders), parsed once by the checker;
* ``watch``      -- each rule / requirement -> the bindings its condition reads, in
  the order first read (the values its trace step shows);
* ``bounds``     -- each search bound -> its constant value.
"""

from __future__ import annotations

import itertools
from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang.slotted import Frozen, frozen_init

__all__ = ["ConfigValue", "ConstRef", "GeneratorRef", "Placeholder", "Resolution", "Template",
           "names_read"]


class ConstRef(Frozen):
    """A constant; ``info`` is the checker's ConstInfo (its ``value`` once computed)."""

    __slots__ = _fields = ("info",)
    info: Any

    def __init__(self, info: Any) -> None:
        frozen_init(self, info)

    @property
    def value(self) -> Any:
        return self.info.value


class GeneratorRef(Frozen):
    """A candidates generator's name in validation: the candidates it emits."""

    __slots__ = _fields = ("name",)
    name: str

    def __init__(self, name: str) -> None:
        frozen_init(self, name)


class ConfigValue(Frozen):
    """``config.NAME`` in a placeholder."""

    __slots__ = _fields = ("name",)
    name: str

    def __init__(self, name: str) -> None:
        frozen_init(self, name)


class Placeholder(Frozen):
    """``{head.field...}``: ``label`` as written, ``ref`` what ``head`` names."""

    __slots__ = _fields = ("label", "ref", "fields")
    label: str
    ref: Any               # Binding | ConstRef | GeneratorRef | ConfigValue
    fields: tuple[str, ...]

    def __init__(self, label: str, ref: Any, fields: tuple[str, ...]) -> None:
        frozen_init(self, label, ref, fields)


class Template(Frozen):
    """A string literal: decoded literal text and placeholders, in order."""

    __slots__ = _fields = ("pieces",)
    pieces: tuple[str | Placeholder, ...]

    def __init__(self, pieces: tuple[str | Placeholder, ...]) -> None:
        frozen_init(self, pieces)

    @property
    def placeholders(self) -> list[Placeholder]:
        return [p for p in self.pieces if isinstance(p, Placeholder)]


class Resolution:
    """The checker's resolution of one policy (module doc)."""

    def __init__(self) -> None:
        self.names: dict[int, Any] = {}
        self.declared: dict[int, Any] = {}
        self.templates: dict[int, Template] = {}
        self.watch: dict[int, list[tuple[str, Any]]] = {}
        self.bounds: dict[str, int] = {}
        self._slots = itertools.count()

    def new_slot(self) -> int:
        return next(self._slots)

    # what the engine asks
    def name(self, e: A.Name) -> Any:
        return self.names[id(e)]

    def binding(self, ident: A.Ident) -> Any:
        return self.declared[id(ident)]

    def template(self, s: A.Str) -> Template:
        return self.templates[id(s)]


def names_read(e: A.Expr | None) -> list[str]:
    """Names an expression reads, each once, in the order the engine has always
    listed them for "the values a rule saw"."""
    out: list[str] = []
    if e is None:
        return out
    stack: list[Any] = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, A.Name):
            if x.id not in out:
                out.append(x.id)
            continue
        fields = _child_fields(type(x))
        for name in fields:
            v = getattr(x, name)
            if isinstance(v, list):
                stack.extend(reversed(v))
            elif not isinstance(v, A.Ident) and _child_fields(type(v)):
                stack.append(v)
    return out


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(cls: type) -> tuple[str, ...]:
    """The fields of an AST node class other than its span (``()`` for a value
    that is not a node); looked up once per class."""
    found = _CHILD_FIELDS.get(cls)
    if found is None:
        found = tuple(name for name in cls._fields if name != "span") if issubclass(cls, A.Node) else ()
        _CHILD_FIELDS[cls] = found
    return found
