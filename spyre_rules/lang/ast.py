"""Typed AST of the ``.rules`` language.

Every node carries a :class:`Span` (file, 1-based line/column of its first
character, and the line/column just past its last character).  Nodes are plain
slotted dataclasses compared by identity: the checker keys side tables by node.
The parser (``parser.py``) builds them with a lark Transformer; nothing here
imports lark or torch.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import NamedTuple, Union

_NODES: list[type] = []


def _node(cls: type) -> type:
    """``@dataclass`` without the per-class ``exec`` of generated methods (that
    costs ~0.3 ms a class at every start of `spyre-rules check`): the
    ``__init__`` of every node class is generated in one batch at the end of
    this module, and ``__repr__`` is shared."""
    cls.__doc__ = cls.__doc__ or cls.__name__
    cls = dataclass(init=False, repr=False, eq=False)(cls)
    _NODES.append(cls)
    return cls


class Span(NamedTuple):
    file: str
    line: int
    col: int
    end_line: int
    end_col: int  # exclusive: the column just after the last character

    def to(self, other: "Span") -> "Span":
        """The span from the start of ``self`` to the end of ``other``."""
        return Span(self.file, self.line, self.col, other.end_line, other.end_col)


@_node
class Ident:
    """A name as written (a declaration's name, a field, a binder)."""
    span: Span
    name: str


# --------------------------------------------------------------- expressions

@_node
class Num:
    span: Span
    digits: int
    unit: Ident | None  # e.g. MiB in `256 MiB`; checked against UNITS


@_node
class Str:
    span: Span
    value: str  # decoded text (escapes resolved)
    raw: str    # text between the quotes as written (for placeholder spans)


@_node
class Bool:
    span: Span
    value: bool


@_node
class Name:
    span: Span
    id: str


@_node
class ConfigRef:
    span: Span
    name: Ident


@_node
class Field:
    span: Span
    obj: "Expr"
    name: Ident


@_node
class Call:
    span: Span
    func: Ident
    args: list["Expr"]


@_node
class CompFor:
    span: Span
    var: Ident
    iter: "Expr"
    conds: list["Expr"]


@_node
class Comprehension:
    """``[e for x in xs if c]`` (kind "list"), ``{...}`` ("set"), or the single
    argument of a call such as ``any(e for x in xs)`` (kind "list")."""
    span: Span
    kind: str
    elt: "Expr"
    clauses: list[CompFor]


@_node
class FieldInit:
    span: Span
    name: Ident
    value: "Expr"


@_node
class RecordCtor:
    span: Span
    type_name: Ident
    fields: list[FieldInit]


@_node
class TupleExpr:
    span: Span
    items: list["Expr"]


@_node
class ListExpr:
    span: Span
    items: list["Expr"]


@_node
class SetExpr:
    span: Span
    items: list["Expr"]


@_node
class Unary:
    span: Span
    op: str  # "not" | "-"
    operand: "Expr"


@_node
class Binary:
    """``op`` is one of: or and == != < <= > >= in "not in" subset | & + - * // %."""
    span: Span
    op: str
    left: "Expr"
    right: "Expr"


@_node
class IsKnown:
    span: Span
    operand: "Expr"
    known: bool  # False for `is unknown`


Expr = Union[Num, Str, Bool, Name, ConfigRef, Field, Call, Comprehension, RecordCtor,
             TupleExpr, ListExpr, SetExpr, Unary, Binary, IsKnown]


# ------------------------------------------------------------ type syntax

@_node
class NamedType:
    span: Span
    name: str


@_node
class GenericType:
    span: Span
    name: str
    args: list["TypeExpr"]


@_node
class OptionalType:
    span: Span
    inner: "TypeExpr"


TypeExpr = Union[NamedType, GenericType, OptionalType]


# ------------------------------------------------------------------ items

@_node
class ConstDecl:
    span: Span
    name: Ident
    value: Expr


@_node
class TypeDecl:
    span: Span
    name: Ident


@_node
class FieldDecl:
    span: Span
    name: Ident
    type: TypeExpr


@_node
class RecordDecl:
    span: Span
    name: Ident
    extern: bool
    fields: list[FieldDecl]


@_node
class Param:
    span: Span
    name: Ident
    type: TypeExpr


@_node
class FactDecl:
    span: Span
    name: Ident
    params: list[Param]
    result: TypeExpr


@_node
class ConfigDecl:
    span: Span
    name: Ident
    type: TypeExpr


@_node
class LetItem:
    span: Span
    name: Ident
    value: Expr


@_node
class Decision:
    """``ACTION name [when guard] [because "message"];`` (a first-match rule)."""
    span: Span
    action: Ident  # skip | reject | pass | join | conform | start | single
    name: Ident
    guard: Expr | None
    message: Str | None


@_node
class Require:
    span: Span
    name: Ident
    cond: Expr
    message: Str | None


@_node
class GenFor:
    span: Span
    var: Ident
    iter: Expr


@_node
class GenIf:
    span: Span
    cond: Expr


@_node
class GenLet:
    span: Span
    name: Ident
    value: Expr


GenClause = Union[GenFor, GenIf, GenLet]


@_node
class Generator:
    span: Span
    name: Ident
    clauses: list[GenClause]
    emit: Expr


@_node
class SplitsItem:
    span: Span
    var: Ident
    source: Expr


@_node
class BoundItem:
    span: Span
    name: Ident
    value: Expr


@_node
class OrderItem:
    span: Span
    var: Ident
    key: Expr


@_node
class RequiredItem:
    span: Span
    var: Ident
    value: Expr


@_node
class CostItem:
    span: Span
    var: Ident
    key: Expr


@_node
class ExhaustedItem:
    span: Span
    message: Str


SectionItem = Union[LetItem, Decision, Require, Generator, SplitsItem, BoundItem, OrderItem,
                    RequiredItem, CostItem, ExhaustedItem]


@_node
class Section:
    span: Span
    kind: Ident  # eligibility | candidates | legality | search | validation | grouping
    items: list[SectionItem]


Declaration = Union[TypeDecl, RecordDecl, FactDecl, ConfigDecl]
Item = Union[ConstDecl, TypeDecl, RecordDecl, FactDecl, ConfigDecl, Section]


@_node
class SourceFile:
    path: str
    text: str
    items: list[Item]
    is_prelude: bool


def _repr(self) -> str:
    inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))
    return f"{type(self).__name__}({inner})"


def _install_inits() -> None:
    source = []
    for i, cls in enumerate(_NODES):
        names = [f.name for f in fields(cls)]
        body = "".join(f"    self.{n} = {n}\n" for n in names) or "    pass\n"
        source.append(f"def init_{i}(self, {', '.join(names)}):\n{body}")
    namespace: dict = {}
    exec(compile("\n".join(source), __name__ + ".<inits>", "exec"), namespace)
    for i, cls in enumerate(_NODES):
        init = namespace[f"init_{i}"]
        init.__qualname__ = f"{cls.__name__}.__init__"
        cls.__init__ = init
        cls.__repr__ = _repr


_install_inits()
