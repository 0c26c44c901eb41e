"""One definition per fact: the ``@fact`` decorator and the registry the engine binds.

A fact is declared in ``rules/prelude.rules`` and defined once in Python as a
function marked ``@fact``.  Its language signature is derived from the
function's annotations, so nothing else spells it out again:

=====================================  ======================
Python annotation                      rules-language type
=====================================  ======================
``int``, ``bool``, ``str``             ``int``, ``bool``, ``str``
``T | None``                           ``T?``
``list[T]``                            ``list[T]``
``set[T]``, ``frozenset[T]``           ``set[T]``
``Op``, ``Sym``, ``Layout``, ``Tiling``  the extern type of that name
(markers defined here)
a dataclass (``Read``, ``Coord``, ...)  its class name (an ``extern record``)
=====================================  ======================

An annotation with no rules-language type is refused when the module is
imported (the error names the fact and the parameter), so a fact cannot reach
the engine with a signature nobody checked.

:class:`FactRegistry` maps fact names to their functions (``functions``) and
derived signatures (``signatures``, in the prelude's spelling).  The bundled
registry is ``spyre_rules.facts.op_facts.REGISTRY``, collected explicitly from
the fact modules listed there.  Extension point: ``REGISTRY.extended()`` is a
copy that more facts can be added to (``@registry.fact``) and handed to
``spyre_rules.engine.policy.load_policy(paths, facts=registry)``; the bundled
registry is left untouched.  The engine compares the signatures with the
prelude (``spyre_rules.engine.binding``) and refuses to load on any mismatch.

No torch import: the derivation needs only the annotation objects.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Iterable
from typing import Annotated, Any

__all__ = ["FactDefinitionError", "FactRegistry", "Layout", "Op", "Sym", "Tiling", "fact",
           "signature_of"]


class FactDefinitionError(TypeError):
    """A ``@fact`` function whose signature has no rules-language spelling."""


@dataclasses.dataclass(frozen=True)
class _Spelled:
    """Annotation metadata: the rules-language name of an otherwise untyped value."""

    name: str


#: An Inductor operation (any ``ir.Operation``; facts answer for any object).
Op = Annotated[Any, _Spelled("Op")]
#: An Inductor loop variable (a ``sympy.Symbol``).
Sym = Annotated[Any, _Spelled("Sym")]
#: A ``FixedTiledLayout``.
Layout = Annotated[Any, _Spelled("Layout")]
#: A split map (output host dim -> split count), as rules pass it.
Tiling = Annotated[Any, _Spelled("Tiling")]

_PRIMITIVES: dict[Any, str] = {int: "int", bool: "bool", str: "str"}
_ATTR = "__spyre_fact__"


def _named(tp: Any) -> str | None:
    """A dataclass is the ``extern record`` of its class name (``Read``, ``Coord``)."""
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return tp.__name__
    return None


def spelling(tp: Any) -> str:
    """The rules-language spelling of annotation ``tp`` (raises ``FactDefinitionError``)."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        for meta in tp.__metadata__:
            if isinstance(meta, _Spelled):
                return meta.name
        return spelling(typing.get_args(tp)[0])
    if tp in _PRIMITIVES:
        return _PRIMITIVES[tp]
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1 and len(args) == 2:
            return spelling(inner[0]) + "?"
        raise FactDefinitionError(f"`{tp}` is a union; only `T | None` (spelled `T?`) has a type")
    if origin is list:
        (elem,) = typing.get_args(tp)
        return f"list[{spelling(elem)}]"
    if origin in (set, frozenset):
        (elem,) = typing.get_args(tp)
        return f"set[{spelling(elem)}]"
    name = _named(tp)
    if name is None:
        raise FactDefinitionError(f"`{tp}` has no rules-language type")
    return name


@dataclasses.dataclass(frozen=True)
class FactSignature:
    params: tuple[tuple[str, str], ...]
    result: str

    def __str__(self) -> str:
        return "(" + ", ".join(f"{n}: {t}" for n, t in self.params) + f") -> {self.result}"


def signature_of(fn: Callable) -> FactSignature:
    """``fn``'s signature in the prelude's spelling, derived from its annotations."""
    name = getattr(fn, "__name__", repr(fn))
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - any unresolvable annotation is a definition error
        raise FactDefinitionError(f"fact `{name}`: its annotations do not resolve ({exc})") from exc

    params = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            raise FactDefinitionError(f"fact `{name}`: parameter `{param.name}` must be positional")
        if param.name not in hints:
            raise FactDefinitionError(f"fact `{name}`: parameter `{param.name}` has no annotation")
        try:
            params.append((param.name, spelling(hints[param.name])))
        except FactDefinitionError as exc:
            raise FactDefinitionError(f"fact `{name}`, parameter `{param.name}`: {exc}") from None
    if "return" not in hints:
        raise FactDefinitionError(f"fact `{name}`: no return annotation")
    try:
        result = spelling(hints["return"])
    except FactDefinitionError as exc:
        raise FactDefinitionError(f"fact `{name}`, return type: {exc}") from None
    return FactSignature(tuple(params), result)


def fact(fn: Callable) -> Callable:
    """Mark ``fn`` as the definition of the prelude fact of the same name.

    Returns ``fn`` itself (rules and Python callers call the very function); the
    signature is derived now, so a bad annotation fails at import.
    """
    setattr(fn, _ATTR, signature_of(fn))
    return fn


class FactRegistry:
    """Fact name -> function and derived signature (what the engine binds)."""

    def __init__(self, functions: Iterable[Callable] = ()) -> None:
        self.functions: dict[str, Callable] = {}
        self.signatures: dict[str, str] = {}
        for fn in functions:
            self.add(fn)

    @classmethod
    def from_modules(cls, *modules: types.ModuleType) -> FactRegistry:
        """Every ``@fact`` function defined in ``modules``, in definition order."""
        found = [value for module in modules for value in vars(module).values()
                 if hasattr(value, _ATTR) and getattr(value, "__module__", None) == module.__name__]
        return cls(found)

    def add(self, fn: Callable) -> None:
        signature = getattr(fn, _ATTR, None) or signature_of(fn)
        name = fn.__name__
        if name in self.functions and self.functions[name] is not fn:
            raise FactDefinitionError(f"fact `{name}` is defined twice "
                                      f"({self.functions[name].__module__} and {fn.__module__})")
        self.functions[name] = fn
        self.signatures[name] = str(signature)

    def fact(self, fn: Callable) -> Callable:
        """``@registry.fact``: mark ``fn`` (see :func:`fact`) and add it to this registry."""
        self.add(fact(fn))
        return fn

    def extended(self) -> FactRegistry:
        """A copy to add facts to; this registry does not change."""
        copy = FactRegistry()
        copy.functions = dict(self.functions)
        copy.signatures = dict(self.signatures)
        return copy
