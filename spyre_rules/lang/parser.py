"""Grammar loading and parsing of ``.rules`` text into the typed AST.

* The LALR parser is built once per process from ``grammar/spyre_rules.lark``
  (lark's grammar-analysis cache lives in the system temp dir, so later
  processes load the tables instead of recomputing them).
* A lark Transformer, run inline while parsing, builds ``ast`` nodes directly.
* Syntax errors never stop at the first one: the driver feeds tokens to lark's
  interactive parser and, on an error, either inserts a missing ``;`` / ``}``
  or skips to the next ``;`` or item keyword and pops parser states until the
  parse can go on (panic-mode recovery).  Every error becomes a diagnostic.
"""

from __future__ import annotations

import sys
from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang.diagnostics import Diagnostic
from spyre_rules.resources import grammar_file

# Tokens at which a new item starts: recovery resumes there without skipping them.
_SYNC_KEEP = frozenset({
    "CONST", "EXTERN", "RECORD", "FACT",
    "ELIGIBILITY", "CANDIDATES", "LEGALITY", "SEARCH", "VALIDATION", "GROUPING",
    "LET", "SKIP", "REJECT", "PASS", "JOIN", "CONFORM", "START", "SINGLE", "REQUIRE",
    "SPLITS", "BOUND", "ORDER", "REQUIRED", "COST", "EXHAUSTED",
})
_ERROR_TOKENS = ("BAD_STRING", "BAD_CHAR")
# Token sequences tried (in order) as the repair for a missing terminator.
_QUIET_TOKENS = 3
_SEMI, _RBRACE = ("SEMICOLON", ";"), ("RBRACE", "}")
_INSERTIONS = ((_SEMI,), (_RBRACE,), (_SEMI, _RBRACE), (_RBRACE, _RBRACE), (_SEMI, _RBRACE, _RBRACE))
_EXPR_START = frozenset({"NAME", "INT", "STRING", "LPAR", "LSQB", "LBRACE", "MINUS", "NOT",
                         "TRUE", "FALSE", "CONFIG"})
_NAMED = {
    "NAME": "a name", "INT": "an integer", "STRING": "a string",
    "COMPARE": "a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`)", "$END": "end of file",
}
_OPERATOR_TEXT = frozenset({"or", "and", "in", "not", "subset", "is", "|", "&", "+", "-", "*", "//", "%", "."})


def _import_lark():
    # lark only uses the third-party `regex` module when asked to (regex=True);
    # keep its speculative import from costing ~20 ms of `spyre-rules check` startup.
    if "lark" in sys.modules:
        return sys.modules["lark"]
    blocked = "regex" not in sys.modules
    if blocked:
        sys.modules["regex"] = None  # type: ignore[assignment]
    try:
        import lark
    finally:
        if blocked:
            del sys.modules["regex"]
    return lark


lark = _import_lark()
Token = lark.Token


class _KeepErrorTokens(lark.lark.PostLex):
    """Keeps the error terminals (unused by any rule) in the lexer."""

    always_accept = _ERROR_TOKENS

    def process(self, stream):
        return stream


# ------------------------------------------------------------- transformer

def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    out = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            out.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class _ToAst(lark.Transformer):
    """Builds ``ast`` nodes while parsing (``keep_all_tokens``: children include
    keywords and punctuation, so spans cover them)."""

    def __init__(self) -> None:
        super().__init__(visit_tokens=False)
        self.file = "<string>"
        self.errors: list[Diagnostic] = []

    # -- helpers
    def tspan(self, t) -> A.Span:
        return A.Span(self.file, t.line, t.column, t.end_line, t.end_column)

    def span(self, children) -> A.Span:
        first = last = None
        for c in children:
            if c is not None:
                if first is None:
                    first = c
                last = c
        a = self.tspan(first) if isinstance(first, Token) else first.span
        b = self.tspan(last) if isinstance(last, Token) else last.span
        return a.to(b)

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
        return A.Str(self.tspan(t), _unescape(raw), raw)

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
        return A.SplitsItem(self.span(c), self.ident(c[1]), c[3])

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


# ----------------------------------------------------------------- parser

class _FastLexer:
    """One compiled regex built from the grammar's terminals (the same token
    stream as lark's basic lexer, several times faster).  Used only when every
    terminal is of a known kind; otherwise the parser uses lark's lexer."""

    REGEX_TERMINALS = ("NAME", "INT", "STRING", "COMMENT", "BAD_STRING", "BAD_CHAR", "COMPARE")

    def __init__(self, terminals, ignore) -> None:
        import re

        by_name = {t.name: t for t in terminals}
        self.keywords: dict[str, str] = {}
        punct: dict[str, str] = {}
        for t in terminals:
            if t.pattern.type == "str":
                if t.pattern.value.isidentifier():
                    self.keywords[t.pattern.value] = t.name
                else:
                    punct[t.pattern.value] = t.name
            elif t.name == "COMPARE":
                for op in ("==", "!=", "<=", ">=", "<", ">"):
                    punct[op] = "COMPARE"
            elif t.name not in self.REGEX_TERMINALS and t.name not in ignore:
                raise ValueError(f"unknown terminal kind {t.name}")
        ws = "|".join(by_name[n].pattern.to_regexp() for n in ignore if n != "COMMENT")
        ops = "|".join(re.escape(v) for v in sorted(punct, key=len, reverse=True))
        self.punct = punct
        self.regex = re.compile(
            f"(?P<WS>{ws})|(?P<COMMENT>{by_name['COMMENT'].pattern.to_regexp()})"
            f"|(?P<STRING>{by_name['STRING'].pattern.to_regexp()})"
            f"|(?P<BAD_STRING>{by_name['BAD_STRING'].pattern.to_regexp()})"
            f"|(?P<NAME>{by_name['NAME'].pattern.to_regexp()})|(?P<INT>{by_name['INT'].pattern.to_regexp()})"
            f"|(?P<PUNCT>{ops})|(?P<BAD_CHAR>.)", re.DOTALL)

    def lex(self, text: str):
        keywords, punct = self.keywords, self.punct
        make = Token._future_new  # Token(...) without the keyword-argument shim
        line, line_start = 1, 0
        for m in self.regex.finditer(text):
            kind = m.lastgroup
            value = m.group()
            pos = m.start()
            if kind == "WS" or kind == "COMMENT":
                n = value.count("\n")
                if n:
                    line += n
                    line_start = pos + value.rindex("\n") + 1
                continue
            if kind == "NAME":
                kind = keywords.get(value, "NAME")
            elif kind == "PUNCT":
                kind = punct[value]
            elif kind == "BAD_CHAR" and value == "\n":  # pragma: no cover - WS takes newlines
                continue
            col = pos - line_start + 1
            yield make(kind, value, pos, line, col, line, col + len(value), pos + len(value))


class _Parser:
    def __init__(self) -> None:
        grammar = grammar_file().read_text(encoding="utf-8")
        self.transformer = _ToAst()
        options: dict[str, Any] = dict(
            parser="lalr", lexer="basic", keep_all_tokens=True, maybe_placeholders=True,
            postlex=_KeepErrorTokens(), transformer=self.transformer,
        )
        try:
            self.lark = lark.Lark(grammar, cache=True, **options)
        except OSError:  # temp dir not writable: build without the cache
            self.lark = lark.Lark(grammar, **options)
        self.display = {}
        self.keywords = set()
        self.operators = {"COMPARE"}
        for term in self.lark.terminals:
            if term.pattern.type == "str":
                value = term.pattern.value
                self.display[term.name] = f"`{value}`"
                if value.isidentifier():
                    self.keywords.add(value)
                if value in _OPERATOR_TEXT:
                    self.operators.add(term.name)
        self.display.update(_NAMED)
        ignored = set(self.lark.lexer_conf.ignore)
        try:
            self.fast_lexer: _FastLexer | None = _FastLexer(self.lark.terminals, ignored)
        except (ValueError, KeyError):
            self.fast_lexer = None
        self.lark_lexer = self.lark.parser.lexer.lexer  # lark's BasicLexer (built once)
        table = self.lark.parser.parser.parser.parse_table
        self.states = table.states
        self.end_state = table.end_states["start"]
        self.terminal_names = sorted({t.name for t in self.lark.terminals} - set(_ERROR_TOKENS)
                                     - ignored) + ["$END"]
        from lark.parsers.lalr_analysis import Shift

        self.shift = Shift
        # rule -> (size, goto symbol, callback or None when the reduction keeps its one child)
        self.rules = {}
        for rule, callback in self.lark._callbacks.items():
            keep = rule.options.expand1 and not rule.alias and len(rule.expansion) == 1
            self.rules[rule] = (len(rule.expansion), rule.origin.name, None if keep else callback)

    def lex(self, text: str):
        if self.fast_lexer is not None:
            return self.fast_lexer.lex(text)
        return self.lark_lexer.lex(lark.lexer.LexerState(lark.lexer.TextSlice.cast_from(text)), None)

    # -- token descriptions
    def describe_found(self, tok) -> str:
        if tok.type == "$END":
            return "end of file"
        if tok.type == "NAME":
            return f"name `{tok}`"
        if tok.type == "INT":
            return f"integer `{tok}`"
        if tok.type == "STRING":
            return "a string"
        if str(tok) in self.keywords:
            return f"keyword `{tok}`"
        return f"`{tok}`"

    def describe_expected(self, names) -> str:
        names = {n for n in names if n not in _ERROR_TOKENS}
        if {"NAME", "INT", "STRING", "LPAR", "LSQB"} <= names:
            names -= _EXPR_START
            tail = ["an expression"]
        else:
            tail = []
        ops = names & self.operators
        if len(ops) >= 4:
            names -= ops
            tail.append("an operator")
        parts = sorted((self.display.get(n, n) for n in names), key=lambda s: (not s.startswith("`"), s))
        parts += tail
        if not parts:
            return "nothing more"
        if len(parts) > 8:
            parts = parts[:8] + ["..."]
        if len(parts) == 1:
            return parts[0]
        return ", ".join(parts[:-1]) + " or " + parts[-1]

    # -- parsing with recovery
    def parse(self, text: str, path: str) -> tuple[list, list[Diagnostic]]:
        tr = self.transformer
        tr.file = path
        tr.errors = diags = []
        tokens = []
        for tok in self.lex(text):
            if tok.type == "BAD_CHAR":
                diags.append(Diagnostic("E002", f"unexpected character {str(tok)!r}", tr.tspan(tok)))
            elif tok.type == "BAD_STRING":
                diags.append(Diagnostic("E003", "unterminated string (strings end on the same line)",
                                        tr.tspan(tok)))
                # Read it as if it were closed at the end of the line, so the
                # rest of the item still parses.
                tokens.append(Token("STRING", str(tok) + '"', tok.start_pos, tok.line, tok.column,
                                    tok.end_line, tok.end_column))
            else:
                tokens.append(tok)
        if tokens:
            last = tokens[-1]
            end = Token("$END", "", len(text), last.end_line, last.end_column, last.end_line, last.end_column + 1)
        else:
            end = Token("$END", "", 0, 1, 1, 1, 2)
        tokens.append(end)

        states, rules, shift, end_state = self.states, self.rules, self.shift, self.end_state
        stack = [self.lark.parser.parser.parser.parse_table.start_states["start"]]
        values: list = []
        quiet = 0  # after an error, report nothing until a few tokens are accepted again
        i = 0
        while True:
            tok = tokens[i]
            ttype = tok.type
            acts = states[stack[-1]]
            unchanged = True
            if ttype in acts:
                unchanged = False
                # shift, after as many reductions as the table asks for (lark's LALR loop,
                # without a call for the reductions that just pass their one child on)
                while True:
                    act = states[stack[-1]].get(ttype)
                    if act is None:
                        break  # an error found only after some reductions (merged lookaheads)
                    action, arg = act
                    if action is shift:
                        stack.append(arg)
                        values.append(tok)
                        break
                    size, origin, callback = rules[arg]
                    if callback is None:
                        del stack[-1]
                    else:
                        if size:
                            children = values[-size:]
                            del stack[-size:]
                            del values[-size:]
                        else:
                            children = []
                        values.append(callback(children))
                    stack.append(states[stack[-1]][origin][1])
                    if ttype == "$END" and stack[-1] == end_state:
                        return (values[-1] or []), diags
                else:  # pragma: no cover - the loop always breaks
                    pass
                if act is not None:
                    if quiet:
                        quiet -= 1
                    i += 1
                    continue
            if not quiet:
                diags.append(self._error(tok, stack))
            quiet = _QUIET_TOKENS
            if (unchanged and ttype != "NAME" and str(tok) in self.keywords
                    and self._shifts(stack, "NAME")):
                # A reserved word where a name belongs: read it as that name and go on.
                tokens[i] = Token("NAME", str(tok), tok.start_pos, tok.line, tok.column,
                                  tok.end_line, tok.end_column)
                continue
            i = self._recover(stack, values, tokens, i)

    def _shifts(self, stack, ttype: str) -> bool:
        """Would a token of type ``ttype`` be accepted from the state ``stack``?
        (Simulates the reductions on a copy of the state numbers only.)"""
        stack = list(stack)
        while True:
            act = self.states[stack[-1]].get(ttype)
            if act is None:
                return False
            action, arg = act
            if action is self.shift:
                return True
            size = len(arg.expansion)
            if size:
                del stack[-size:]
            stack.append(self.states[stack[-1]][arg.origin.name][1])
            if ttype == "$END" and stack[-1] == self.end_state:
                return True

    def expected(self, stack) -> set[str]:
        return {name for name in self.terminal_names if self._shifts(stack, name)}

    def _error(self, tok, stack) -> Diagnostic:
        expected = self.expected(stack)
        span = self.transformer.tspan(tok)
        found = self.describe_found(tok)
        want = self.describe_expected(expected)
        if tok.type == "$END":
            diag = Diagnostic("E005", f"unexpected end of file: expected {want}", span)
        else:
            diag = Diagnostic("E001", f"expected {want}, found {found}", span)
        if "NAME" in expected and tok.type != "NAME" and str(tok) in self.keywords:
            diag.notes.append(f"help: `{tok}` is a reserved word and cannot be used as a name")
        return diag

    def _feed_synthetic(self, stack, values, tok) -> None:
        """Feed a repair token that is known to be accepted (see ``_shifts``)."""
        while True:
            action, arg = self.states[stack[-1]][tok.type]
            if action is self.shift:
                stack.append(arg)
                values.append(tok)
                return
            size, origin, callback = self.rules[arg]
            if callback is None:
                del stack[-1]
            else:
                children = values[-size:] if size else []
                if size:
                    del stack[-size:]
                    del values[-size:]
                values.append(callback(children))
            stack.append(self.states[stack[-1]][origin][1])

    def _recover(self, stack, values, tokens, i) -> int:
        """Bring the parser back in step after an error at ``tokens[i]``;
        returns the index of the next token to feed."""
        tok = tokens[i]
        # 1. A missing `;` or `}` right before an item keyword, `}` or end of file.
        if tok.type in _SYNC_KEEP or tok.type in ("RBRACE", "$END"):
            for fills in _INSERTIONS:
                trial = list(stack)
                if all(self._shifts(trial, f) and self._advance(trial, f) for f, _ in fills) \
                        and self._shifts(trial, tok.type):
                    for f, v in fills:
                        self._feed_synthetic(stack, values, Token(f, v, tok.start_pos, tok.line, tok.column,
                                                                  tok.line, tok.column))
                    return i
        # 2. Panic mode: skip to a synchronising token, then pop states until it fits.
        j = i
        if tok.type == "SEMICOLON":
            j = i + 1
        elif tok.type not in _SYNC_KEEP and tok.type not in ("RBRACE", "$END"):
            j = i + 1
            while tokens[j].type not in _SYNC_KEEP and tokens[j].type not in ("SEMICOLON", "RBRACE", "$END"):
                j += 1
            if tokens[j].type == "SEMICOLON":
                j += 1
        while True:
            target = tokens[j].type
            for depth in range(len(stack), 0, -1):
                if self._shifts(stack[:depth], target):
                    del values[depth - 1:]
                    del stack[depth:]
                    return j
            j += 1  # nothing on the stack takes this token: drop it

    def _advance(self, stack: list, ttype: str) -> bool:
        """Apply the reductions and the shift of a ``ttype`` token to ``stack`` in place."""
        while True:
            action, arg = self.states[stack[-1]][ttype]
            if action is self.shift:
                stack.append(arg)
                return True
            size = len(arg.expansion)
            if size:
                del stack[-size:]
            stack.append(self.states[stack[-1]][arg.origin.name][1])


_PARSER: _Parser | None = None


def get_parser() -> _Parser:
    global _PARSER
    if _PARSER is None:
        _PARSER = _Parser()
    return _PARSER


_PARSED: dict[tuple[str, str], tuple[list, list[Diagnostic]]] = {}
_PARSED_MAX = 16


def parse_source(text: str, path: str) -> tuple[A.SourceFile, list[Diagnostic]]:
    """Parse one file's text.  Returns the (possibly partial) AST and the
    syntax diagnostics; never raises on bad input.

    The last few results are remembered (keyed by path and text): the checker
    never changes a tree, and re-checking a policy of which one file changed
    then parses only that file."""
    key = (path, text)
    hit = _PARSED.get(key)
    if hit is None:
        hit = get_parser().parse(text, path)
        if len(_PARSED) >= _PARSED_MAX:
            del _PARSED[next(iter(_PARSED))]
        _PARSED[key] = hit
    items, diags = hit
    return A.SourceFile(path, text, items, False), list(diags)


def keywords() -> set[str]:
    """Every reserved word of the language."""
    return set(get_parser().keywords)
