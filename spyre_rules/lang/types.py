"""Types of the ``.rules`` language.

``int``, ``bool``, ``str``; opaque extern types (``Op``, ``Sym``, ...); records;
``list[T]``, ``set[T]``, tuples (keys such as a cost); ``T?`` (may be unknown).
``ANY`` is the element type of an empty ``[]`` / ``{}`` literal and ``ERROR``
the type of an expression that already has a diagnostic (it matches anything,
so one mistake is reported once).  Types are immutable values compared by
structure.
"""

from __future__ import annotations


class Type:
    __slots__ = ("_key",)

    def __init__(self, *key) -> None:
        object.__setattr__(self, "_key", (type(self).__name__, *key))

    def __eq__(self, other) -> bool:
        return isinstance(other, Type) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"<type {self}>"


class _Named(Type):
    """A type that is just its name."""
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return self.name


class Prim(_Named):
    """int, bool or str."""
    __slots__ = ()


class Opaque(_Named):
    """An `extern type` of the prelude (Op, Sym, Layout, Tiling)."""
    __slots__ = ()


class RecordT(_Named):
    __slots__ = ()


class ListT(Type):
    __slots__ = ("elem",)

    def __init__(self, elem: Type) -> None:
        super().__init__(elem)
        self.elem = elem

    def __str__(self) -> str:
        return f"list[{self.elem}]"


class SetT(Type):
    __slots__ = ("elem",)

    def __init__(self, elem: Type) -> None:
        super().__init__(elem)
        self.elem = elem

    def __str__(self) -> str:
        return f"set[{self.elem}]"


class TupleT(Type):
    __slots__ = ("items",)

    def __init__(self, items: tuple) -> None:
        super().__init__(*items)
        self.items = tuple(items)

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.items)) + ")"


class OptT(Type):
    """A value that may be unknown."""
    __slots__ = ("inner",)

    def __init__(self, inner: Type) -> None:
        super().__init__(inner)
        self.inner = inner

    def __str__(self) -> str:
        return f"{self.inner}?"


class _Special(Type):
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return self.name


INT = Prim("int")
BOOL = Prim("bool")
STR = Prim("str")
ANY = _Special("?any")      # element of an empty collection literal
ERROR = _Special("?error")  # already reported

PRIMITIVES = {"int": INT, "bool": BOOL, "str": STR}
GENERICS = {"list": ListT, "set": SetT}


def strip_opt(t: Type) -> Type:
    return t.inner if isinstance(t, OptT) else t


def is_collection(t: Type) -> bool:
    return isinstance(t, (ListT, SetT))


def compatible(a: Type, b: Type) -> bool:
    """May values of ``a`` and ``b`` be compared with ``==``?  (An unknown value
    compares unequal to everything, so ``T?`` and ``T`` are compatible.)"""
    return unify(strip_opt(a), strip_opt(b)) is not None


def unify(a: Type, b: Type) -> Type | None:
    """The common type of ``a`` and ``b`` (elements of a literal, both sides of
    ``==``, both sets of ``|``), or None."""
    if a is ERROR or b is ERROR:
        return ERROR
    if a is ANY:
        return b
    if b is ANY:
        return a
    if a == b:
        return a
    if type(a) is type(b):
        if isinstance(a, (ListT, SetT)):
            e = unify(a.elem, b.elem)
            return None if e is None else type(a)(e)
        if isinstance(a, OptT):
            e = unify(a.inner, b.inner)
            return None if e is None else OptT(e)
        if isinstance(a, TupleT) and len(a.items) == len(b.items):
            items = [unify(x, y) for x, y in zip(a.items, b.items)]
            return None if any(i is None for i in items) else TupleT(tuple(items))
    return None


def assignable(src: Type, dst: Type) -> bool:
    """Can a value of type ``src`` be used where ``dst`` is expected?"""
    if src is ERROR or dst is ERROR:
        return True
    if isinstance(dst, OptT) and not isinstance(src, OptT):
        return assignable(src, dst.inner)
    u = unify(src, dst)
    return u is not None and (u == dst or u is ERROR or _has_any(dst))


def _has_any(t: Type) -> bool:
    if t is ANY:
        return True
    if isinstance(t, (ListT, SetT)):
        return _has_any(t.elem)
    if isinstance(t, OptT):
        return _has_any(t.inner)
    if isinstance(t, TupleT):
        return any(_has_any(i) for i in t.items)
    return False


def orderable(t: Type) -> bool:
    """Can values of ``t`` be sorted (keys of `order`, `cost`, `sorted`)?
    Integers, booleans, strings, symbols, and tuples/lists of orderable values."""
    if t is ERROR or t is ANY:
        return True
    if t in (INT, BOOL, STR):
        return True
    if isinstance(t, Opaque) and t.name == "Sym":
        return True
    if isinstance(t, ListT):
        return orderable(t.elem)
    if isinstance(t, TupleT):
        return all(orderable(i) for i in t.items)
    return False
