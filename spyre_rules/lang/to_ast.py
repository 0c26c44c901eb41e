"""The lark Transformer that turns parse trees into the typed AST (``ast.py``).

It runs inline while the LALR parser reduces (``parser.py``), so every node is
built once, with its source span, and no intermediate tree is kept.
"""

from __future__ import annotations

from functools import partial

from spyre_rules.lang import ast as A
from spyre_rules.lang.diagnostics import Diagnostic
from spyre_rules.lang.lark_support import Token
from spyre_rules.lang.templates import unescape

# A.Span(...) without the Python-level __new__ of a named tuple (a span per node and token)
_span = partial(tuple.__new__, A.Span)


class _ToAst:
    """Builds ``ast`` nodes while parsing (``keep_all_tokens``: children include
    keywords and punctuation, so spans cover them)."""

    def __init__(self) -> None:
        self.file = "<string>"
        self.errors: list[Diagnostic] = []

    # -- helpers
    def tspan(self, t) -> A.Span:
        return _span((self.file, t.line, t.column, t.end_line, t.end_column))

    def span(self, children) -> A.Span:
        """From the start of the first child to the end of the last (absent
        optional parts, None, skipped)."""
        first, last = children[0], children[-1]
        if first is None or last is None:
            first = last = None
            for c in children:
                if c is not None:
                    if first is None:
                        first = c
                    last = c
        if first.__class__ is Token:
            file, line, col = self.file, first.line, first.column
        else:
            file, line, col, _, _ = first.span
        if last.__class__ is Token:
            return _span((file, line, col, last.end_line, last.end_column))
        end = last.span
        return _span((file, line, col, end[3], end[4]))

    def ident(self, t) -> A.Ident:
        return A.Ident(self.tspan(t), str(t))

    @staticmethod
    def nodes(children) -> list:
        return [c for c in children if c is not None and not isinstance(c, Token)]

    @staticmethod
    def tokens(children, type_: str) -> list:
        return [c for c in children if isinstance(c, Token) and c.type == type_]

    # -- file
    def start(self, children):
        return [c for c in children if c is not None and not isinstance(c, Token)]

    # -- declarations
    def const_decl(self, c):
        return A.ConstDecl(self.span(c), self.ident(c[1]), c[3])

    def type_decl(self, c):
        return A.TypeDecl(self.span(c), self.ident(c[2]))

    def record_decl(self, c):
        name = self.tokens(c, "NAME")[0]
        return A.RecordDecl(self.span(c), self.ident(name), bool(self.tokens(c, "EXTERN")),
                            [n for n in self.nodes(c) if isinstance(n, A.FieldDecl)])

    def field_decl(self, c):
        return A.FieldDecl(self.span(c), self.ident(c[0]), c[2])

    def fact_decl(self, c):
        params = [n for n in self.nodes(c) if isinstance(n, A.Param)]
        return A.FactDecl(self.span(c), self.ident(c[1]), params, c[-2])

    def param(self, c):
        return A.Param(self.span(c), self.ident(c[0]), c[2])

    def config_decl(self, c):
        return A.ConfigDecl(self.span(c), self.ident(c[1]), c[3])

    def named_type(self, c):
        return A.NamedType(self.span(c), str(c[0]))

    def generic_type(self, c):
        return A.GenericType(self.span(c), str(c[0]), self.nodes(c))

    def optional_type(self, c):
        return A.OptionalType(self.span(c), c[0])

    # -- sections
    def section(self, c):
        return A.Section(self.span(c), c[0], self.nodes(c[1:]))

    def section_kind(self, c):
        return self.ident(c[0])

    def action(self, c):
        return self.ident(c[0])

    def let_item(self, c):
        return A.LetItem(self.span(c), self.ident(c[1]), c[3])

    def str_node(self, t) -> A.Str:
        raw = str(t)[1:-1]
        return A.Str(self.tspan(t), unescape(raw), raw)

    def _after(self, c, type_: str):
        for i, x in enumerate(c[:-1]):
            if isinstance(x, Token) and x.type == type_:
                return c[i + 1]
        return None

    def decision(self, c):
        message = self._after(c, "BECAUSE")
        return A.Decision(self.span(c), c[0], self.ident(c[1]), self._after(c, "WHEN"),
                          self.str_node(message) if message is not None else None)

    def require_item(self, c):
        message = self._after(c, "BECAUSE")
        return A.Require(self.span(c), self.ident(c[1]), c[3],
                         self.str_node(message) if message is not None else None)

    def generator(self, c):
        clauses = [n for n in self.nodes(c[2:-3])]
        return A.Generator(self.span(c), self.ident(c[0]), clauses, c[-2])

    def gen_for(self, c):
        return A.GenFor(self.span(c), self.ident(c[1]), c[3])

    def gen_if(self, c):
        return A.GenIf(self.span(c), c[1])

    def gen_let(self, c):
        return A.GenLet(self.span(c), self.ident(c[1]), c[3])

    def splits_item(self, c):
        return A.SplitsItem(self.span(c), self.ident(self.tokens(c, "NAME")[0]), c[-2],
                            bool(self.tokens(c, "OTHERWISE")))

    def bound_item(self, c):
        return A.BoundItem(self.span(c), self.ident(c[1]), c[3])

    def order_item(self, c):
        return A.OrderItem(self.span(c), self.ident(c[2]), c[4])

    def required_item(self, c):
        return A.RequiredItem(self.span(c), self.ident(c[1]), c[3])

    def cost_item(self, c):
        return A.CostItem(self.span(c), self.ident(c[1]), c[3])

    def exhausted_item(self, c):
        return A.ExhaustedItem(self.span(c), self.str_node(c[2]))

    # -- expressions
    def _bin(op):  # noqa: N805 - builds methods
        def method(self, c):
            return A.Binary(self.span(c), op, c[0], c[-1])
        return method

    or_op = _bin("or")
    and_op = _bin("and")
    in_op = _bin("in")
    not_in_op = _bin("not in")
    subset_op = _bin("subset")
    union_op = _bin("|")
    inter_op = _bin("&")
    add_op = _bin("+")
    sub_op = _bin("-")
    mul_op = _bin("*")
    floordiv_op = _bin("//")
    mod_op = _bin("%")
    del _bin

    def compare(self, c):
        return A.Binary(self.span(c), str(c[1]), c[0], c[2])

    def not_op(self, c):
        return A.Unary(self.span(c), "not", c[1])

    def neg_op(self, c):
        return A.Unary(self.span(c), "-", c[1])

    def is_known(self, c):
        return A.IsKnown(self.span(c), c[0], True)

    def is_unknown(self, c):
        return A.IsKnown(self.span(c), c[0], False)

    def field(self, c):
        return A.Field(self.span(c), c[0], self.ident(c[2]))

    def number(self, c):
        text = str(c[0]).replace("_", "")
        try:
            digits = int(text) if len(text) <= 4000 else 0
        except ValueError:  # pragma: no cover - the INT pattern only admits digits
            digits = 0
        if len(text) > 4000:
            self.errors.append(Diagnostic("E001", "number literal is too long", self.tspan(c[0])))
        unit = self.ident(c[1]) if len(c) > 1 and c[1] is not None else None
        return A.Num(self.span(c), digits, unit)

    def string(self, c):
        return self.str_node(c[0])

    def true(self, c):
        return A.Bool(self.span(c), True)

    def false(self, c):
        return A.Bool(self.span(c), False)

    def name(self, c):
        return A.Name(self.span(c), str(c[0]))

    def config_ref(self, c):
        return A.ConfigRef(self.span(c), self.ident(c[2]))

    def call(self, c):
        return A.Call(self.span(c), self.ident(c[0]), self.nodes(c[1:]))

    def call_gen(self, c):
        comp_span = self.span(c[2:-1])
        fors = [n for n in c[3:-1] if isinstance(n, A.CompFor)]
        comp = A.Comprehension(comp_span, "list", c[2], fors)
        return A.Call(self.span(c), self.ident(c[0]), [comp])

    def record_ctor(self, c):
        return A.RecordCtor(self.span(c), self.ident(c[0]),
                            [n for n in self.nodes(c[1:]) if isinstance(n, A.FieldInit)])

    def field_init(self, c):
        return A.FieldInit(self.span(c), self.ident(c[0]), c[2])

    def atom(self, c):  # "(" expr ")": keep the inner node, widen nothing
        return c[1]

    def tuple(self, c):
        return A.TupleExpr(self.span(c), self.nodes(c))

    def list(self, c):
        return A.ListExpr(self.span(c), self.nodes(c))

    def set(self, c):
        return A.SetExpr(self.span(c), self.nodes(c))

    def list_comp(self, c):
        return A.Comprehension(self.span(c), "list", c[1], [n for n in c[2:-1] if isinstance(n, A.CompFor)])

    def set_comp(self, c):
        return A.Comprehension(self.span(c), "set", c[1], [n for n in c[2:-1] if isinstance(n, A.CompFor)])

    def comp_for(self, c):
        conds = [n.cond for n in c[4:] if isinstance(n, A.GenIf)]
        return A.CompFor(self.span(c), self.ident(c[1]), c[3], conds)

    def comp_if(self, c):
        return A.GenIf(self.span(c), c[1])
