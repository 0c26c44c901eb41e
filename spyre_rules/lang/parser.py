"""Grammar loading and parsing of ``.rules`` text into the typed AST.

* The LALR tables of ``grammar/spyre_rules.lark`` are built by lark once per
  grammar text and cached (``lark_support.py``); parsing itself runs this
  module's LALR loop on them, without importing lark.
* The transformer (``to_ast.py``), run inline while parsing (as a lark
  Transformer would be), builds ``ast`` nodes directly.
* Syntax errors never stop at the first one: on an error the parse loop
  either inserts a missing ``;`` / ``}`` or skips to the next ``;`` or item keyword and pops parser states until the
  parse can go on (panic-mode recovery).  Every error becomes a diagnostic.
"""

from __future__ import annotations

from spyre_rules.lang import ast as A
from spyre_rules.lang.diagnostics import Diagnostic
from spyre_rules.lang.lark_support import (ERROR_TOKENS, SHIFT, Token, Tree, build_lark, import_lark,
                                           load_tables)
from spyre_rules.lang.limits import MAX_ITEM_TOKENS, MAX_PARSE_DEPTH, MAX_TOKENS
from spyre_rules.lang.to_ast import _ToAst
from spyre_rules.resources import grammar_file

# Tokens at which a new item starts: recovery resumes there without skipping them.
_SYNC_KEEP = frozenset({
    "CONST", "EXTERN", "RECORD", "FACT",
    "ELIGIBILITY", "CANDIDATES", "LEGALITY", "SEARCH", "VALIDATION", "GROUPING",
    "LET", "SKIP", "REJECT", "PASS", "JOIN", "CONFORM", "START", "SINGLE", "REQUIRE",
    "OTHERWISE", "SPLITS", "BOUND", "ORDER", "REQUIRED", "COST", "EXHAUSTED",
})
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




# ----------------------------------------------------------------- parser

class _FastLexer:
    """One compiled regex built from the grammar's terminals (the same token
    stream as lark's basic lexer, several times faster).  Used only when every
    terminal is of a known kind; otherwise the parser uses lark's lexer."""

    REGEX_TERMINALS = ("NAME", "INT", "STRING", "COMMENT", "BAD_STRING", "BAD_CHAR", "COMPARE")

    def __init__(self, terminals, ignore) -> None:
        """``terminals``: (name, pattern kind, pattern value, regexp) of each terminal."""
        import re

        by_name = {name: regexp for name, _, _, regexp in terminals}
        self.keywords: dict[str, str] = {}
        punct: dict[str, str] = {}
        for name, kind, value, _ in terminals:
            if kind == "str":
                if value.isidentifier():
                    self.keywords[value] = name
                else:
                    punct[value] = name
            elif name == "COMPARE":
                for op in ("==", "!=", "<=", ">=", "<", ">"):
                    punct[op] = "COMPARE"
            elif name not in self.REGEX_TERMINALS and name not in ignore:
                raise ValueError(f"unknown terminal kind {name}")
        ws = "|".join(by_name[n] for n in ignore if n != "COMMENT")
        ops = "|".join(re.escape(v) for v in sorted(punct, key=len, reverse=True))
        self.punct = punct
        # One match per token: the blanks and comments before it are skipped by a
        # possessive prefix (no backtracking into it, so trailing blanks cannot
        # become a BAD_CHAR and every position is scanned once); the token is
        # optional so that the blanks after the last token end the scan.
        self.regex = re.compile(
            f"(?:{ws}|{by_name['COMMENT']})*+"
            f"(?:(?P<STRING>{by_name['STRING']})"
            f"|(?P<BAD_STRING>{by_name['BAD_STRING']})"
            f"|(?P<NAME>{by_name['NAME']})|(?P<INT>{by_name['INT']})"
            f"|(?P<PUNCT>{ops})|(?P<BAD_CHAR>.))?", re.DOTALL)

    def lex(self, text: str):
        keywords, punct = self.keywords, self.punct
        make = Token
        count, rindex = text.count, text.rindex
        line, line_start = 1, 0
        for m in self.regex.finditer(text):
            kind = m.lastgroup
            if kind is None:
                break  # only blanks and comments were left
            pos = m.start(kind)
            skipped = m.start()
            if skipped != pos:  # lines end only in the skipped blanks and comments
                n = count("\n", skipped, pos)
                if n:
                    line += n
                    line_start = rindex("\n", skipped, pos) + 1
            value = m.group(kind)
            if kind == "NAME":
                kind = keywords.get(value, "NAME")
            elif kind == "PUNCT":
                kind = punct[value]
            col = pos - line_start + 1
            yield make(kind, value, pos, line, col, line, col + len(value), pos + len(value))


def _callback(transformer, name: str, to_include, append_none: int, expand1: bool):
    """The reduction callback of one rule, as lark's tree builder composes it:
    the transformer method (or a ``Tree`` for a rule without one), wrapped in
    ``ExpandSingleChild`` and then ``ChildFilterLALR`` (``_rule`` children
    spliced in, Nones for absent ``[optional]`` parts)."""
    f = getattr(transformer, name, None)
    if f is None:
        def f(children, name=name):
            return Tree(name, children)
    if expand1:
        inner = f

        def f(children):
            return children[0] if len(children) == 1 else inner(children)
    if to_include is None:
        return f
    builder = f

    def filtered_callback(children):
        filtered = []
        for i, to_expand, add_none in to_include:
            if add_none:
                filtered += [None] * add_none
            if to_expand:
                if filtered:
                    filtered += children[i].children
                else:  # as lark: reuse the left-recursive child's list
                    filtered = children[i].children
            else:
                filtered.append(children[i])
        if append_none:
            filtered += [None] * append_none
        return builder(filtered)

    return filtered_callback


class _Parser:
    def __init__(self) -> None:
        self.grammar = grammar_file().read_text(encoding="utf-8")
        tables = load_tables(self.grammar)
        self.transformer = _ToAst()
        terminals = tables["terminals"]
        self.display = {}
        self.keywords = set()
        self.operators = {"COMPARE"}
        for name, kind, value, _ in terminals:
            if kind == "str":
                self.display[name] = f"`{value}`"
                if value.isidentifier():
                    self.keywords.add(value)
                if value in _OPERATOR_TEXT:
                    self.operators.add(name)
        self.display.update(_NAMED)
        ignored = set(tables["ignore"])
        try:
            self.fast_lexer: _FastLexer | None = _FastLexer(terminals, ignored)
        except (ValueError, KeyError):
            self.fast_lexer = None
        self._lark_lexer = None
        self.terminal_names = sorted({t[0] for t in terminals} - set(ERROR_TOKENS) - ignored) + ["$END"]
        self.shift = SHIFT
        # The cached tables as they are: state -> {symbol: (SHIFT, state) | (REDUCE, rule)}.
        self.states = tables["states"]
        # Per rule: (size, goto symbol, callback or None when the reduction keeps its one child).
        self.reductions = [
            (size, origin, None if keep else _callback(self.transformer, name, to_include, append_none, expand1))
            for size, origin, name, to_include, append_none, expand1, keep in tables["rules"]
        ]
        self.start_state = tables["start"]
        self.end_state = tables["end"]
        # (state beneath, top state, terminal) -> top state after the run of pass-on reductions
        self.unit_runs: dict[tuple, int] = {}

    @property
    def lark_lexer(self):
        """lark's own lexer for the grammar (imports lark; for the fallback and for tests)."""
        if self._lark_lexer is None:
            self._lark_lexer = build_lark(self.grammar).parser.lexer.lexer
        return self._lark_lexer

    def lex(self, text: str):
        if self.fast_lexer is not None:
            return self.fast_lexer.lex(text)
        lark = import_lark()
        stream = self.lark_lexer.lex(lark.lexer.LexerState(lark.lexer.TextSlice.cast_from(text)), None)
        return (Token(t.type, str(t), t.start_pos, t.line, t.column, t.end_line, t.end_column, t.end_pos)
                for t in stream)

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
        names = {n for n in names if n not in ERROR_TOKENS}
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
        run = 0  # tokens since the last `;`
        for tok in self.lex(text):
            if len(tokens) >= MAX_TOKENS:
                diags.append(Diagnostic("E043", f"the file has more than {MAX_TOKENS} tokens; it was not checked "
                                        "(split it into several files)", tr.tspan(tok)))
                return [], diags
            run = 0 if tok.type == "SEMICOLON" else run + 1
            if run == MAX_ITEM_TOKENS:
                diags.append(Diagnostic("E043", f"an item longer than {MAX_ITEM_TOKENS} tokens (no `;` since "
                                        "then); split it with `let` or constants", tr.tspan(tok)))
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

        states, reductions, shift, end_state = self.states, self.reductions, self.shift, self.end_state
        unit_runs = self.unit_runs
        stack = [self.start_state]
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
                    top = stack[-1]
                    act = states[top].get(ttype)
                    if act is None:
                        break  # an error found only after some reductions (merged lookaheads)
                    action, arg = act
                    if action == shift:
                        stack.append(arg)
                        values.append(tok)
                        break
                    size, origin, callback = reductions[arg]
                    if callback is None:
                        if ttype != "$END":
                            # a run of reductions that pass their one child on
                            # (`x` up the ladder of expression precedences): one step
                            key = (stack[-2], top, ttype)
                            end = unit_runs.get(key)
                            if end is None:
                                end = unit_runs[key] = self._unit_run(key)
                            stack[-1] = end
                            continue
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
                    if len(stack) > MAX_PARSE_DEPTH:
                        diags.append(Diagnostic("E040", f"nested more than {MAX_PARSE_DEPTH} levels deep (open "
                                                "brackets and operators); the rest of the file was not checked",
                                                tr.tspan(tok)))
                        return [], diags
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

    def _unit_run(self, key: tuple[int, int, str]) -> int:
        """The state on top after the run of one-child pass-on reductions that a
        ``ttype`` token starts from state ``top`` above ``beneath`` (each such
        reduction replaces the top state and leaves ``beneath`` in place, so the
        run depends on these three only)."""
        beneath, top, ttype = key
        states, reductions, shift = self.states, self.reductions, self.shift
        while True:
            act = states[top].get(ttype)
            if act is None or act[0] == shift:
                return top
            _, origin, callback = reductions[act[1]]
            if callback is not None:
                return top
            top = states[beneath][origin][1]

    def _shifts(self, stack, ttype: str) -> bool:
        """Would a token of type ``ttype`` be accepted from the state ``stack``?
        (Simulates the reductions on a copy of the state numbers only.)"""
        return self._shifts_at(stack, len(stack), ttype)

    def _shifts_at(self, stack, depth: int, ttype: str) -> bool:
        """``_shifts(stack[:depth], ttype)`` without copying the stack: the
        simulated reductions pop from ``pushed`` first, then lower ``depth``."""
        states, reductions, shift = self.states, self.reductions, self.shift
        pushed: list = []
        top = stack[depth - 1]
        while True:
            act = states[top].get(ttype)
            if act is None:
                return False
            action, arg = act
            if action == shift:
                return True
            size, origin, _ = reductions[arg]
            if size:
                mine = min(size, len(pushed))
                if mine:
                    del pushed[-mine:]
                depth -= size - mine
            top = pushed[-1] if pushed else stack[depth - 1]
            top = states[top][origin][1]
            pushed.append(top)
            if ttype == "$END" and top == self.end_state:
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
            if action == self.shift:
                stack.append(arg)
                values.append(tok)
                return
            size, origin, callback = self.reductions[arg]
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
                if target in self.states[stack[depth - 1]] and self._shifts_at(stack, depth, target):
                    del values[depth - 1:]
                    del stack[depth:]
                    return j
            j += 1  # nothing on the stack takes this token: drop it

    def _advance(self, stack: list, ttype: str) -> bool:
        """Apply the reductions and the shift of a ``ttype`` token to ``stack`` in place."""
        while True:
            action, arg = self.states[stack[-1]][ttype]
            if action == self.shift:
                stack.append(arg)
                return True
            size, origin, _ = self.reductions[arg]
            if size:
                del stack[-size:]
            stack.append(self.states[stack[-1]][origin][1])


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
