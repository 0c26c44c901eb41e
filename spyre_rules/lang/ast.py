"""Typed AST of the ``.rules`` language.

Every node carries a :class:`Span` (file, 1-based line/column of its first
character, and the line/column just past its last character).  Nodes are
plain slotted classes compared by identity: the checker keys side tables by
node.  ``_fields`` names a node's fields in order (as the standard library's
``ast.AST`` does); walkers read it.  The parser (``parser.py``) builds nodes
while it parses; nothing here imports lark or torch -- nor ``dataclasses``,
whose import and generated methods cost more at every start of ``spyre-rules
check`` than the check of the bundled rules (docs/rules_language.md, "Start-up
cost").
"""

from __future__ import annotations

from typing import NamedTuple, Union


class Node:
    """Base of every node class: ``__repr__`` from ``_fields``; equality is identity."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({inner})"


class Span(NamedTuple):
    file: str
    line: int
    col: int
    end_line: int
    end_col: int  # exclusive: the column just after the last character

    def to(self, other: "Span") -> "Span":
        """The span from the start of ``self`` to the end of ``other``."""
        return Span(self.file, self.line, self.col, other.end_line, other.end_col)


class Ident(Node):
    """A name as written (a declaration's name, a field, a binder)."""
    __slots__ = _fields = ("span", "name")
    span: Span
    name: str

    def __init__(self, span, name) -> None:
        self.span, self.name = span, name


# --------------------------------------------------------------- expressions

class Num(Node):
    __slots__ = _fields = ("span", "digits", "unit")
    span: Span
    digits: int
    unit: Ident | None  # e.g. MiB in `256 MiB`; checked against UNITS

    def __init__(self, span, digits, unit) -> None:
        self.span, self.digits, self.unit = span, digits, unit


class Str(Node):
    __slots__ = _fields = ("span", "value", "raw")
    span: Span
    value: str  # decoded text (escapes resolved)
    raw: str    # text between the quotes as written (for placeholder spans)

    def __init__(self, span, value, raw) -> None:
        self.span, self.value, self.raw = span, value, raw


class Bool(Node):
    __slots__ = _fields = ("span", "value")
    span: Span
    value: bool

    def __init__(self, span, value) -> None:
        self.span, self.value = span, value


class Name(Node):
    __slots__ = _fields = ("span", "id")
    span: Span
    id: str

    def __init__(self, span, id) -> None:
        self.span, self.id = span, id


class ConfigRef(Node):
    __slots__ = _fields = ("span", "name")
    span: Span
    name: Ident

    def __init__(self, span, name) -> None:
        self.span, self.name = span, name


class Field(Node):
    __slots__ = _fields = ("span", "obj", "name")
    span: Span
    obj: "Expr"
    name: Ident

    def __init__(self, span, obj, name) -> None:
        self.span, self.obj, self.name = span, obj, name


class Call(Node):
    __slots__ = _fields = ("span", "func", "args")
    span: Span
    func: Ident
    args: list["Expr"]

    def __init__(self, span, func, args) -> None:
        self.span, self.func, self.args = span, func, args


class CompFor(Node):
    __slots__ = _fields = ("span", "var", "iter", "conds")
    span: Span
    var: Ident
    iter: "Expr"
    conds: list["Expr"]

    def __init__(self, span, var, iter, conds) -> None:
        self.span = span
        self.var = var
        self.iter = iter
        self.conds = conds


class Comprehension(Node):
    """``[e for x in xs if c]`` (kind "list"), ``{...}`` ("set"), or the single
    argument of a call such as ``any(e for x in xs)`` (kind "list")."""
    __slots__ = _fields = ("span", "kind", "elt", "clauses")
    span: Span
    kind: str
    elt: "Expr"
    clauses: list[CompFor]

    def __init__(self, span, kind, elt, clauses) -> None:
        self.span = span
        self.kind = kind
        self.elt = elt
        self.clauses = clauses


class FieldInit(Node):
    __slots__ = _fields = ("span", "name", "value")
    span: Span
    name: Ident
    value: "Expr"

    def __init__(self, span, name, value) -> None:
        self.span, self.name, self.value = span, name, value


class RecordCtor(Node):
    __slots__ = _fields = ("span", "type_name", "fields")
    span: Span
    type_name: Ident
    fields: list[FieldInit]

    def __init__(self, span, type_name, fields) -> None:
        self.span, self.type_name, self.fields = span, type_name, fields


class TupleExpr(Node):
    __slots__ = _fields = ("span", "items")
    span: Span
    items: list["Expr"]

    def __init__(self, span, items) -> None:
        self.span, self.items = span, items


class ListExpr(Node):
    __slots__ = _fields = ("span", "items")
    span: Span
    items: list["Expr"]

    def __init__(self, span, items) -> None:
        self.span, self.items = span, items


class SetExpr(Node):
    __slots__ = _fields = ("span", "items")
    span: Span
    items: list["Expr"]

    def __init__(self, span, items) -> None:
        self.span, self.items = span, items


class Unary(Node):
    __slots__ = _fields = ("span", "op", "operand")
    span: Span
    op: str  # "not" | "-"
    operand: "Expr"

    def __init__(self, span, op, operand) -> None:
        self.span, self.op, self.operand = span, op, operand


class Binary(Node):
    """``op`` is one of: or and == != < <= > >= in "not in" subset | & + - * // %."""
    __slots__ = _fields = ("span", "op", "left", "right")
    span: Span
    op: str
    left: "Expr"
    right: "Expr"

    def __init__(self, span, op, left, right) -> None:
        self.span = span
        self.op = op
        self.left = left
        self.right = right


class IsKnown(Node):
    __slots__ = _fields = ("span", "operand", "known")
    span: Span
    operand: "Expr"
    known: bool  # False for `is unknown`

    def __init__(self, span, operand, known) -> None:
        self.span, self.operand, self.known = span, operand, known


Expr = Union[Num, Str, Bool, Name, ConfigRef, Field, Call, Comprehension, RecordCtor,
             TupleExpr, ListExpr, SetExpr, Unary, Binary, IsKnown]


# ------------------------------------------------------------ type syntax

class NamedType(Node):
    __slots__ = _fields = ("span", "name")
    span: Span
    name: str

    def __init__(self, span, name) -> None:
        self.span, self.name = span, name


class GenericType(Node):
    __slots__ = _fields = ("span", "name", "args")
    span: Span
    name: str
    args: list["TypeExpr"]

    def __init__(self, span, name, args) -> None:
        self.span, self.name, self.args = span, name, args


class OptionalType(Node):
    __slots__ = _fields = ("span", "inner")
    span: Span
    inner: "TypeExpr"

    def __init__(self, span, inner) -> None:
        self.span, self.inner = span, inner


TypeExpr = Union[NamedType, GenericType, OptionalType]


# ------------------------------------------------------------------ items

class ConstDecl(Node):
    __slots__ = _fields = ("span", "name", "value")
    span: Span
    name: Ident
    value: Expr

    def __init__(self, span, name, value) -> None:
        self.span, self.name, self.value = span, name, value


class TypeDecl(Node):
    __slots__ = _fields = ("span", "name")
    span: Span
    name: Ident

    def __init__(self, span, name) -> None:
        self.span, self.name = span, name


class FieldDecl(Node):
    __slots__ = _fields = ("span", "name", "type")
    span: Span
    name: Ident
    type: TypeExpr

    def __init__(self, span, name, type) -> None:
        self.span, self.name, self.type = span, name, type


class RecordDecl(Node):
    __slots__ = _fields = ("span", "name", "extern", "fields")
    span: Span
    name: Ident
    extern: bool
    fields: list[FieldDecl]

    def __init__(self, span, name, extern, fields) -> None:
        self.span = span
        self.name = name
        self.extern = extern
        self.fields = fields


class Param(Node):
    __slots__ = _fields = ("span", "name", "type")
    span: Span
    name: Ident
    type: TypeExpr

    def __init__(self, span, name, type) -> None:
        self.span, self.name, self.type = span, name, type


class FactDecl(Node):
    __slots__ = _fields = ("span", "name", "params", "result")
    span: Span
    name: Ident
    params: list[Param]
    result: TypeExpr

    def __init__(self, span, name, params, result) -> None:
        self.span = span
        self.name = name
        self.params = params
        self.result = result


class ConfigDecl(Node):
    __slots__ = _fields = ("span", "name", "type")
    span: Span
    name: Ident
    type: TypeExpr

    def __init__(self, span, name, type) -> None:
        self.span, self.name, self.type = span, name, type


class LetItem(Node):
    __slots__ = _fields = ("span", "name", "value")
    span: Span
    name: Ident
    value: Expr

    def __init__(self, span, name, value) -> None:
        self.span, self.name, self.value = span, name, value


class Decision(Node):
    """``ACTION name [when guard] [because "message"];`` (a first-match rule)."""
    __slots__ = _fields = ("span", "action", "name", "guard", "message")
    span: Span
    action: Ident  # skip | reject | pass | join | conform | refine | hoist | start | single
    name: Ident
    guard: Expr | None
    message: Str | None

    def __init__(self, span, action, name, guard, message) -> None:
        self.span = span
        self.action = action
        self.name = name
        self.guard = guard
        self.message = message


class Require(Node):
    __slots__ = _fields = ("span", "name", "cond", "message")
    span: Span
    name: Ident
    cond: Expr
    message: Str | None

    def __init__(self, span, name, cond, message) -> None:
        self.span = span
        self.name = name
        self.cond = cond
        self.message = message


class GenFor(Node):
    __slots__ = _fields = ("span", "var", "iter")
    span: Span
    var: Ident
    iter: Expr

    def __init__(self, span, var, iter) -> None:
        self.span, self.var, self.iter = span, var, iter


class GenIf(Node):
    __slots__ = _fields = ("span", "cond")
    span: Span
    cond: Expr

    def __init__(self, span, cond) -> None:
        self.span, self.cond = span, cond


class GenLet(Node):
    __slots__ = _fields = ("span", "name", "value")
    span: Span
    name: Ident
    value: Expr

    def __init__(self, span, name, value) -> None:
        self.span, self.name, self.value = span, name, value


GenClause = Union[GenFor, GenIf, GenLet]


class Generator(Node):
    __slots__ = _fields = ("span", "name", "clauses", "emit")
    span: Span
    name: Ident
    clauses: list[GenClause]
    emit: Expr

    def __init__(self, span, name, clauses, emit) -> None:
        self.span = span
        self.name = name
        self.clauses = clauses
        self.emit = emit


class SplitsItem(Node):
    """``splits VAR in EXPR;``, or with ``fallback`` ``otherwise splits VAR in EXPR;``
    (the counts tried only when none of the plain ones above 1 is legal)."""
    __slots__ = _fields = ("span", "var", "source", "fallback")
    span: Span
    var: Ident
    source: Expr
    fallback: bool

    def __init__(self, span, var, source, fallback=False) -> None:
        self.span, self.var, self.source, self.fallback = span, var, source, fallback


class BoundItem(Node):
    __slots__ = _fields = ("span", "name", "value")
    span: Span
    name: Ident
    value: Expr

    def __init__(self, span, name, value) -> None:
        self.span, self.name, self.value = span, name, value


class OrderItem(Node):
    __slots__ = _fields = ("span", "var", "key")
    span: Span
    var: Ident
    key: Expr

    def __init__(self, span, var, key) -> None:
        self.span, self.var, self.key = span, var, key


class RequiredItem(Node):
    __slots__ = _fields = ("span", "var", "value")
    span: Span
    var: Ident
    value: Expr

    def __init__(self, span, var, value) -> None:
        self.span, self.var, self.value = span, var, value


class CostItem(Node):
    __slots__ = _fields = ("span", "var", "key")
    span: Span
    var: Ident
    key: Expr

    def __init__(self, span, var, key) -> None:
        self.span, self.var, self.key = span, var, key


class ExhaustedItem(Node):
    __slots__ = _fields = ("span", "message")
    span: Span
    message: Str

    def __init__(self, span, message) -> None:
        self.span, self.message = span, message


SectionItem = Union[LetItem, Decision, Require, Generator, SplitsItem, BoundItem, OrderItem,
                    RequiredItem, CostItem, ExhaustedItem]


class Section(Node):
    __slots__ = _fields = ("span", "kind", "items")
    span: Span
    kind: Ident  # eligibility | candidates | legality | search | validation | grouping
    items: list[SectionItem]

    def __init__(self, span, kind, items) -> None:
        self.span, self.kind, self.items = span, kind, items


Declaration = Union[TypeDecl, RecordDecl, FactDecl, ConfigDecl]
Item = Union[ConstDecl, TypeDecl, RecordDecl, FactDecl, ConfigDecl, Section]


class SourceFile(Node):
    __slots__ = _fields = ("path", "text", "items", "is_prelude")
    path: str
    text: str
    items: list[Item]
    is_prelude: bool

    def __init__(self, path, text, items, is_prelude) -> None:
        self.path = path
        self.text = text
        self.items = items
        self.is_prelude = is_prelude


class _DataclassView:
    """Nodes still answer ``dataclasses.fields``, ``is_dataclass`` and ``replace``
    (tools and tests walk trees with them): the first look-up of a node class's
    ``__dataclass_fields__`` declares that class a dataclass without generated
    methods (its own ``__init__`` and ``__repr__`` stay), so only such a use
    imports ``dataclasses``, never the check."""

    def __get__(self, obj: object, cls: type) -> dict:
        import dataclasses

        dataclasses.dataclass(init=False, repr=False, eq=False)(cls)  # replaces this descriptor
        return cls.__dict__["__dataclass_fields__"]


def node_classes() -> list[type]:
    """Every concrete node class, in the order of this module."""
    return [cls for cls in globals().values() if isinstance(cls, type) and issubclass(cls, Node) and cls is not Node]


for _cls in node_classes():
    _cls.__doc__ = _cls.__doc__ or _cls.__name__
    _cls.__dataclass_fields__ = _DataclassView()  # type: ignore[attr-defined]
del _cls
