"""The canonical layout of a ``.rules`` file (``spyre-rules fmt``).

Layout carries no meaning in the language (grammar/spyre_rules.lark), so the
formatter works on tokens and never changes one: it only chooses the
whitespace between them.  The canonical layout:

* every top-level item and every section item starts on its own line; a
  section's ``{`` ends its line and its ``}`` stands alone;
* indentation: section items 2 spaces, an item's continuation lines (``when``,
  ``because``, generator clauses, a long condition) 2 more; inside brackets,
  a line continues 2 spaces deeper than the line that opened the bracket when
  the opener ends its line, else it aligns just after the opener (visual
  indent); a closing bracket that starts a line goes back to its opener's line;
* spacing: one space around binary operators, ``=``, ``->`` and after ``,`` /
  ``:``; none inside ``( )`` / ``[ ]`` / set braces, before ``, ; : . ?``,
  around ``.``, after a unary ``-``, between a function or type name and its
  ``(`` / ``[``; record braces ``Name { a: 1 }`` keep a space inside;
* the author's line breaks inside an item are kept (they are the one choice a
  formatter cannot make better), runs of blank lines become one, blank lines
  right after a section's ``{`` or before its ``}`` go, trailing spaces go,
  the file ends with one newline;
* every comment stays where it is: a comment on its own line keeps its line,
  indented like the code it precedes; an end-of-line comment stays on its
  line, at its original column when the code leaves room (aligned comments
  stay aligned), else two spaces after the code.

The formatter is idempotent.  It reads its own tokens (the lexer's token
stream drops comments) and needs a file without syntax errors: the caller
checks that first (``spyre-rules fmt`` does).
"""

from __future__ import annotations

import dataclasses
import re

from spyre_rules.lang.ast import Node
from spyre_rules.lang.sections import SECTION_KINDS

__all__ = ["FormatError", "SECTION_KINDS", "format_text"]


_TOKEN = re.compile(r'(?P<comment>#[^\n]*)|(?P<string>"(?:[^"\\\n]|\\.)*")|(?P<name>[A-Za-z_][A-Za-z0-9_]*)'
                    r'|(?P<int>[0-9][0-9_]*)|(?P<op>//|==|!=|<=|>=|->|[;:,.?=<>+\-*%|&(){}\[\]])'
                    r'|(?P<newline>\n)|(?P<space>[ \t\f\r]+)|(?P<bad>.)')

# Words after which a bracket starts a sub-expression, not a call or a type argument.
_KEYWORDS = frozenset({
    "const", "extern", "type", "record", "fact", "config", "let", "when", "because", "require",
    "emit", "for", "in", "if", "otherwise", "splits", "bound", "order", "by", "required", "cost", "exhausted",
    "or", "and", "not", "subset", "is", "known", "unknown", "true", "false",
    "skip", "reject", "pass", "join", "conform", "refine", "hoist", "start", "single", "stage", "take", *SECTION_KINDS,
})
_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = frozenset(_OPENERS.values())
_NO_SPACE_BEFORE = frozenset({";", ",", ")", "]", ".", "?", ":"})
_NO_SPACE_AFTER = frozenset({"(", "[", "."})
# After these a `-` is unary.
_UNARY_CONTEXT = frozenset({"(", "[", "{", ",", ":", "=", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*",
                            "//", "%", "|", "&", "->"})
_COMMENT_GAP = 2
_GUARDS = frozenset({"when", "if"})
_CLAUSES = frozenset({"when", "because", "for", "if", "let", "emit"})
_CONTINUING = frozenset({"and", "or"})


class FormatError(ValueError):
    """Text the formatter cannot lay out (a character or string the language does not have)."""


@dataclasses.dataclass
class _Tok:
    kind: str     # comment, string, name, int, op
    text: str
    line: int     # 1-based source line
    col: int      # 0-based source column


@dataclasses.dataclass
class _Bracket:
    char: str
    kind: str            # "paren", "list", "set", "record", "section"
    line_indent: int     # indentation of the output line holding the opener
    visual: int | None   # column just after the opener, once a token follows it on its line
    or_operand: int | None = None  # column of the operand of a line that starts with `or`


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    line, line_start = 1, 0
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == "newline":
            line += 1
            line_start = m.end()
        elif kind == "bad":
            raise FormatError(f"line {line}: unexpected character {m.group()!r}")
        elif kind != "space":
            out.append(_Tok(kind, m.group().rstrip(), line, m.start() - line_start))
    return out


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.current: list[str] = []
        self.width = 0

    def start_line(self, indent: int, blank_before: bool) -> None:
        self.flush()
        if blank_before and self.lines and self.lines[-1] != "":
            self.lines.append("")
        self.current = [" " * indent]
        self.width = indent

    def add(self, text: str, space: bool) -> int:
        """Append ``text`` (after one space if ``space``); its start column."""
        if space:
            self.current.append(" ")
            self.width += 1
        col = self.width
        self.current.append(text)
        self.width += len(text)
        return col

    def add_comment(self, text: str, source_col: int) -> None:
        col = max(self.width + _COMMENT_GAP, source_col)
        self.current.append(" " * (col - self.width) + text)
        self.width = col + len(text)

    def current_has_code(self) -> bool:
        return bool("".join(self.current).strip())

    def flush(self) -> None:
        if self.current:
            self.lines.append("".join(self.current).rstrip())
        self.current = []
        self.width = 0

    def text(self) -> str:
        self.flush()
        while self.lines and self.lines[-1] == "":
            self.lines.pop()
        while self.lines and self.lines[0] == "":
            self.lines.pop(0)
        return "\n".join(self.lines) + "\n" if self.lines else ""


class _Formatter:
    def __init__(self, tokens: list[_Tok]) -> None:
        self.tokens = tokens
        self.out = _Writer()
        self.stack: list[_Bracket] = []
        self.in_item = False          # inside an item (its first token was written)
        self.prev: _Tok | None = None  # previous code token
        self.prev_unary = False       # the previous token is a unary minus
        self.line_indent = 0
        self.pending_visual: _Bracket | None = None
        self.break_next = False       # the next code token must start a line
        self.index = 0                # position of the token being laid out
        self.guard_col: int | None = None   # column after `when` / `if` of the current clause
        self.or_operand: int | None = None  # as _Bracket.or_operand, outside brackets
        self.pending_guard = False

    # ------------------------------------------------------------ structure
    def _section_depth(self) -> int:
        return sum(1 for b in self.stack if b.kind == "section")

    def _inner(self) -> list[_Bracket]:
        """Brackets open inside the current item (the section braces excluded)."""
        return [b for b in self.stack if b.kind != "section"]

    def _indent(self, tok: _Tok) -> int:
        base = 2 * self._section_depth()
        if tok.kind == "op" and tok.text == "}" and self.stack and self.stack[-1].kind == "section":
            return base - 2
        if not self.in_item:
            return base
        inner = self._inner()
        # `and` binds tighter than `or`: a line `and ...` after a line `or ...`
        # continues the `or`'s operand, so it aligns with that operand.
        or_operand = inner[-1].or_operand if inner else self.or_operand
        if tok.kind == "name" and tok.text == "and" and or_operand is not None:
            return or_operand
        if not inner:
            # `and` / `or` continuing a `when` / `if` guard align with the guard
            if tok.kind == "name" and tok.text in _CONTINUING and self.guard_col is not None:
                return self.guard_col
            return base + 2
        top = inner[-1]
        if tok.kind == "op" and tok.text in _CLOSERS:
            return top.line_indent if top.visual is None else top.visual - 1 - (top.kind == "record")
        return top.line_indent + 2 if top.visual is None else top.visual

    def _brace_kind(self) -> str:
        prev = self.prev
        if prev is not None and prev.kind == "name" and prev.text in SECTION_KINDS and not self._inner():
            return "section"
        if prev is not None and prev.kind == "name" and prev.text not in _KEYWORDS:
            return "record"
        return "set"

    def _space(self, tok: _Tok) -> bool:
        prev = self.prev
        if prev is None:
            return False
        t, p = tok.text, prev.text
        if tok.kind == "op" and t in _NO_SPACE_BEFORE:
            return False
        if prev.kind == "op" and p in _NO_SPACE_AFTER:
            return False
        if self.prev_unary:
            return False
        if prev.kind == "op" and p == "{" and self.stack and self.stack[-1].kind == "set":
            return False
        if tok.kind == "op" and t == "}":
            if prev.kind == "op" and p == "{":
                return False
            return bool(self.stack) and self.stack[-1].kind in ("record", "section")
        if tok.kind == "op" and t in ("(", "[") and prev.kind == "name" and p not in _KEYWORDS:
            return False
        return True

    # ---------------------------------------------------------------- emit
    def _new_line(self, tok: _Tok, blank: bool) -> None:
        indent = self._indent(tok)
        closing_section = tok.kind == "op" and tok.text == "}" and bool(self.stack) \
            and self.stack[-1].kind == "section"
        opened_section = self.prev is not None and self.prev.text == "{" and bool(self.stack) \
            and self.stack[-1].kind == "section" and not self.in_item
        self.out.start_line(indent, blank and not closing_section and not opened_section)
        self.line_indent = indent

    def _code(self, tok: _Tok, gap: int) -> None:
        starts_line = self.break_next or gap > 0 or self.prev is None
        if tok.kind == "op" and tok.text == ";" and self.prev is not None:
            starts_line = False  # a terminator stays with what it ends
        if starts_line:
            self._new_line(tok, gap > 1)
            self._note_line_start(tok)
        self.break_next = False
        space = False if starts_line else self._space(tok)
        col = self.out.add(tok.text, space)
        if self.pending_visual is not None:
            self.pending_visual.visual = col
            self.pending_visual = None
        if self.pending_guard:
            self.guard_col = col
            self.pending_guard = False
        if tok.kind == "name" and tok.text in _CLAUSES and not self._inner():
            self.guard_col = None
            self.or_operand = None
            self.pending_guard = tok.text in _GUARDS
        self._after(tok)

    def _note_line_start(self, tok: _Tok) -> None:
        operand = None
        if tok.kind == "name" and tok.text == "or":
            operand = self.line_indent + len("or ")
        elif tok.kind == "name" and tok.text == "and":
            return  # an `and` chain keeps the `or` operand it continues
        inner = self._inner()
        if inner:
            inner[-1].or_operand = operand
        else:
            self.or_operand = operand

    def _after(self, tok: _Tok) -> None:
        t = tok.text
        unary = (tok.kind == "op" and t == "-" and (self.prev is None or (
            self.prev.kind == "op" and self.prev.text in _UNARY_CONTEXT and self.prev.text not in _CLOSERS)
            or (self.prev.kind == "name" and self.prev.text in _KEYWORDS
                and self.prev.text not in ("true", "false", "known", "unknown"))))
        if tok.kind == "op" and t in _OPENERS:
            kind = {"(": "paren", "[": "list"}.get(t) or self._brace_kind()
            bracket = _Bracket(t, kind, self.line_indent, None)
            self.stack.append(bracket)
            if kind == "section":
                self.in_item = False
                self.break_next = True
            else:
                self.in_item = True
                self.pending_visual = bracket
        elif tok.kind == "op" and t in _CLOSERS:
            if self.pending_visual is not None and self.stack and self.pending_visual is self.stack[-1]:
                self.pending_visual = None
            closed = self.stack.pop() if self.stack else None
            if closed is not None and closed.kind == "section":
                self.in_item = False
                self.break_next = True
            elif closed is not None and closed.kind == "record" and not self.stack:
                # a top-level `record Name { ... }` is an item that ends with its brace
                self.in_item = False
                self.break_next = True
        elif tok.kind == "op" and t == ";" and not self._inner():
            self.in_item = False
            self.break_next = True
            self.guard_col = None
            self.pending_guard = False
            self.or_operand = None
        else:
            self.in_item = True
        self.prev = tok
        self.prev_unary = unary

    def _comment(self, tok: _Tok, gap: int) -> None:
        if gap == 0 and self.out.current_has_code():
            self.out.add_comment(tok.text, tok.col)
            return
        # A comment on its own line: indented like the code line that follows it
        # (an item's continuation, the next item, or the items of its section).
        nxt = next((t for t in self.tokens[self.index + 1:] if t.kind != "comment"), None)
        closes_section = (nxt is not None and nxt.kind == "op" and nxt.text == "}"
                          and bool(self.stack) and self.stack[-1].kind == "section")
        if nxt is None or closes_section:
            indent = 2 * self._section_depth()
        else:
            indent = self._indent(nxt)
        after_opener = (self.prev is not None and self.prev.text == "{" and bool(self.stack)
                        and self.stack[-1].kind == "section" and not self.in_item)
        self.out.start_line(indent, gap > 1 and not after_opener)
        self.line_indent = indent
        self.out.add(tok.text, False)

    def run(self) -> str:
        last_line = None
        for self.index, tok in enumerate(self.tokens):
            gap = 0 if last_line is None else tok.line - last_line
            if tok.kind == "comment":
                self._comment(tok, 1 if last_line is None else gap)
            else:
                self._code(tok, gap)
            last_line = tok.line
        return self.out.text()


def format_text(text: str) -> str:
    """The canonical layout of one ``.rules`` file's text (see the module doc)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    formatter = _Formatter(_tokens(text.replace("\r\n", "\n")))
    return formatter.run()


def _shape(node: object) -> object:
    """A syntax tree as nested tuples, spans dropped (for comparisons)."""
    if isinstance(node, Node):
        return (type(node).__name__,) + tuple(
            _shape(getattr(node, name)) for name in node._fields if name not in ("span", "path", "text"))
    if isinstance(node, (list, tuple)):
        return tuple(_shape(x) for x in node)
    return node


def same_meaning(before: str, after: str, name: str = "<rules>") -> bool:
    """Whether two texts parse to the same syntax tree (spans aside) without errors."""
    from spyre_rules.lang.parser import parse_source

    a, a_diags = parse_source(before, name)
    b, b_diags = parse_source(after, name)
    return not a_diags and not b_diags and _shape(a.items) == _shape(b.items)
