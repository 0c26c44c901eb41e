"""Diagnostics of the ``.rules`` checker: codes, the record, text/JSON rendering.

Text form (one per diagnostic, then a summary line)::

    rules/x.rules:3:15: error[E010]: unknown name `opp`
        3 |   skip a when opp(op)
          |               ^^^
          = help: did you mean `op`?

Codes are stable: ``E0xx`` are errors, ``W0xx`` warnings (errors under
``--strict``, which keeps the code and changes the severity).
"""

from __future__ import annotations

from spyre_rules.lang.ast import Span
from spyre_rules.lang.slotted import Plain

# code -> one-line meaning (docs/rules_language.md has the same table; a test checks it)
CODES: dict[str, str] = {
    "E001": "syntax error: unexpected token (the message says what was expected)",
    "E002": "syntax error: a character the language does not use",
    "E003": "syntax error: unterminated string",
    "E004": "the file is not valid UTF-8",
    "E005": "syntax error: unexpected end of file",
    "E006": "unknown unit after a number",
    "E010": "unknown name",
    "E011": "unknown function (neither a declared fact nor a builtin)",
    "E012": "unknown field of a record",
    "E013": "unknown config value",
    "E014": "unknown type",
    "E015": "the prelude lacks a declaration the language needs",
    "E016": "duplicate name (constant, rule, generator, declaration, field or bound)",
    "E017": "duplicate section (each section kind appears once per policy)",
    "E018": "missing sections (a policy needs one section of each kind)",
    "E019": "construct not allowed here (item, decision, declaration or builtin in the wrong place)",
    "E020": "operator applied to operands of the wrong types",
    "E021": "wrong number of arguments",
    "E022": "value of the wrong type (argument, field, emit, bound, key)",
    "E023": "condition is not a boolean (guard, requirement, filter)",
    "E024": "a value that may be unknown is used without an `is known` check",
    "E025": "sort or cost key is not orderable",
    "E026": "record construction is incomplete or constructs an extern record",
    "E027": "`is known` / `is unknown` on a value that is never unknown",
    "E030": "reject without a message",
    "E031": "message placeholder names nothing in scope",
    "E032": "malformed message template",
    "E033": "bound is not a positive integer",
    "E034": "unknown or missing search bound",
    "E035": "constant is not computable from literals and other constants",
    "E036": "constants depend on each other in a cycle",
    "E037": "a required item of a section is missing",
    "E038": "item out of order within its section",
    "E039": "malformed type expression",
    "E040": "expression nested too deeply",
    "E041": "a record field has a name reserved by the implementation (`__x__` or a Python keyword)",
    "E042": "integer out of range (literals and constants lie within +/-(2**63 - 1))",
    "E043": "input too large (file size, tokens, item length or number of items)",
    "E044": "misplaced `otherwise splits` (not right after `splits`, a second one, or another split variable)",
    "W001": "unused constant",
    "W002": "unused binding (let, for, splits or key binder)",
    "W003": "rule can never fire: an earlier rule in the same first-match section always fires",
    "W004": "rule shadowed: its guard implies an earlier guard (or it repeats an earlier requirement)",
    "W005": "binding shadows another name",
    "W006": "rule can never fire: its guard is always false",
    "W007": "too many rules in a section to check them all for shadowing",
}


class Diagnostic(Plain):
    __slots__ = _fields = ("code", "message", "span", "notes")
    code: str
    message: str
    span: Span
    notes: list[str]  # "help: ..." / "note: ..." lines

    def __init__(self, code: str, message: str, span: Span, notes: list[str] | None = None) -> None:
        self.code, self.message, self.span = code, message, span
        self.notes = [] if notes is None else notes

    @property
    def is_warning(self) -> bool:
        return self.code.startswith("W")

    def severity(self, strict: bool = False) -> str:
        return "warning" if self.is_warning and not strict else "error"


def sort_key(diag: Diagnostic, file_order: dict[str, int]):
    s = diag.span
    return (file_order.get(s.file, len(file_order)), s.file, s.line, s.col, diag.code, diag.message)


_CONTROLS = {c: " " for c in [*range(32), 0x7f]}


def _display(line: str) -> str:
    # One display column per character so the caret lines up (tabs and control
    # characters become spaces); str.translate keeps a 1 MB line fast.
    return line.translate(_CONTROLS)


def source_line(text: str | None, line: int) -> str | None:
    if text is None or line < 1:
        return None
    lines = text.split("\n")
    if line > len(lines):
        return None
    return lines[line - 1].rstrip("\r")


def render_text(diag: Diagnostic, text: str | None, strict: bool = False) -> str:
    s = diag.span
    out = [f"{s.file}:{s.line}:{s.col}: {diag.severity(strict)}[{diag.code}]: {diag.message}"]
    src = source_line(text, s.line)
    gutter = len(str(s.line))
    pad = " " * gutter
    if src is not None:
        shown = _display(src)
        start = max(1, s.col)
        if s.end_line == s.line:
            width = max(1, s.end_col - start)
        else:
            width = max(1, len(shown) - start + 1)
        out.append(f"    {s.line} | {shown}".rstrip())
        out.append(f"    {pad} | {' ' * (start - 1)}{'^' * width}")
    for note in diag.notes:
        out.append(f"    {pad} = {note}")
    return "\n".join(out)


def summary(n_files: int, n_errors: int, n_warnings: int) -> str:
    files = f"{n_files} file{'s' if n_files != 1 else ''}"
    if not n_errors and not n_warnings:
        return f"checked {files}: no problems"

    def plural(n: int, word: str) -> str:
        return f"{n} {word}{'s' if n != 1 else ''}"

    return f"checked {files}: {plural(n_errors, 'error')}, {plural(n_warnings, 'warning')}"


def to_json_obj(diag: Diagnostic, text: str | None, strict: bool = False) -> dict:
    s = diag.span
    return {
        "file": s.file,
        "line": s.line,
        "col": s.col,
        "end_line": s.end_line,
        "end_col": s.end_col,
        "severity": diag.severity(strict),
        "code": diag.code,
        "message": diag.message,
        "notes": list(diag.notes),
        "source_line": source_line(text, s.line),
    }
