"""Message templates: ``"Cannot auto-tile {op}: it reads {producers}"``.

Every string literal is a template.  ``{path}`` is a placeholder naming a value
in scope: a binding, a constant, ``config.NAME``, or a declared record field
path such as ``{r.buffer}``.  ``{{`` / ``}}`` stand for literal braces; a
backslash before a brace (``\\{``) is refused (E032), so there is one way to
write a literal brace.  The engine renders values as documented in
docs/rules_language.md ("Message rendering").

One function, :func:`split_template`, reads the *raw* text of a literal (as
written between the quotes) into literal text and placeholders.  Only the
checker calls it, once per literal; it hands the engine the parsed template
with its placeholders resolved (``lang/resolved.py``), so a template means the
same thing to both, and no decoded text is ever split again.
"""

from __future__ import annotations

import re

from spyre_rules.lang.ast import Span, Str
from spyre_rules.lang.slotted import Plain

_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_ESCAPES = {"n": "\n", "t": "\t"}
_SPECIAL = re.compile(r"[\\{}]")  # the characters split_template acts on


def is_reserved_name(name: str) -> bool:
    """``__x__``-style names belong to the implementation (Python attributes):
    no record field and no placeholder may use one."""
    return name.startswith("__")


def unescape(raw: str) -> str:
    r"""The text of a string literal: ``\n`` and ``\t`` are a newline and a tab,
    ``\X`` is ``X`` for any other character."""
    if "\\" not in raw:
        return raw
    out = []
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch == "\\" and i + 1 < n:
            out.append(_ESCAPES.get(raw[i + 1], raw[i + 1]))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class Placeholder(Plain):
    __slots__ = _fields = ("path", "start", "end")
    path: tuple[str, ...]  # ("r", "buffer"); ("config", "max_span_bytes")
    start: int             # offsets of `{` and one past `}` in the raw text
    end: int

    def __init__(self, path: tuple[str, ...], start: int, end: int) -> None:
        self.path, self.start, self.end = path, start, end


class TemplateError(Plain):
    __slots__ = _fields = ("message", "start", "end")
    message: str
    start: int
    end: int

    def __init__(self, message: str, start: int, end: int) -> None:
        self.message, self.start, self.end = message, start, end


def split_template(raw: str) -> tuple[list[str | Placeholder], list[TemplateError]]:
    """Literal text (decoded) and placeholders of the raw text of a literal, in
    order, and any malformed braces.  Linear in the length of ``raw``."""
    pieces: list[str | Placeholder] = []
    errors: list[TemplateError] = []
    buf: list[str] = []
    i, n = 0, len(raw)
    # next `{` / `}` after the current position, found once each (not per brace: linear)
    next_open = next_close = -2
    while i < n:
        # copy the literal run up to the next backslash or brace in one slice
        m = _SPECIAL.search(raw, i)
        if m is None:
            buf.append(raw[i:])
            break
        if m.start() > i:
            buf.append(raw[i:m.start()])
            i = m.start()
        ch = raw[i]
        if ch == "\\" and i + 1 < n:
            if raw[i + 1] in "{}":
                # One way to write a literal brace: a backslash before one is refused, so
                # no reader of the template can take it for an escape and another for a brace.
                brace = raw[i + 1]
                errors.append(TemplateError(f"`\\{brace}` is not an escape in a message: write `{brace}{brace}` "
                                            f"for a literal `{brace}`", i, i + 2))
            buf.append(_ESCAPES.get(raw[i + 1], raw[i + 1]))
            i += 2
            continue
        if ch in "{}" and i + 1 < n and raw[i + 1] == ch:
            buf.append(ch)
            i += 2
            continue
        if ch == "{":
            if next_close != -1 and next_close <= i:
                next_close = raw.find("}", i + 1)
            if next_open != -1 and next_open <= i:
                next_open = raw.find("{", i + 1)
            close = next_close
            if close < 0 or (0 <= next_open < close):
                errors.append(TemplateError("`{` opens a placeholder that is never closed "
                                            "(write `{{` for a literal brace)", i, i + 1))
                buf.append(ch)
                i += 1
                continue
            body = raw[i + 1:close]
            if not _PATH.match(body):
                what = "an empty placeholder" if not body else \
                    f"placeholder `{{{_clip(body)}}}` is not a name or field path"
                errors.append(TemplateError(f"{what} (write `{{{{` for a literal brace)", i, close + 1))
            else:
                if buf:
                    pieces.append("".join(buf))
                    buf = []
                pieces.append(Placeholder(tuple(body.split(".")), i, close + 1))
            i = close + 1
            continue
        if ch == "}":
            errors.append(TemplateError("`}` without a matching `{` (write `}}` for a literal brace)", i, i + 1))
        buf.append(ch)
        i += 1
    if buf:
        pieces.append("".join(buf))
    return pieces, errors


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


class CheckedPlaceholder(Plain):
    __slots__ = _fields = ("path", "span")
    path: tuple[str, ...]
    span: Span

    def __init__(self, path: tuple[str, ...], span: Span) -> None:
        self.path, self.span = path, span


class CheckedError(Plain):
    __slots__ = _fields = ("message", "span")
    message: str
    span: Span

    def __init__(self, message: str, span: Span) -> None:
        self.message, self.span = message, span


def parse_template_pieces(s: Str) -> tuple[list[str | CheckedPlaceholder], list[CheckedError]]:
    """Literal text and placeholders of a string literal, in order, and any
    malformed braces, with source spans (the literal is on one line; its first
    character after the opening quote is at column ``span.col + 1``)."""
    base_line, base_col = s.span.line, s.span.col + 1

    def span_of(a: int, b: int) -> Span:
        return Span(s.span.file, base_line, base_col + a, base_line, base_col + b)

    pieces, errors = split_template(s.raw)
    checked = [CheckedPlaceholder(p.path, span_of(p.start, p.end)) if isinstance(p, Placeholder) else p
               for p in pieces]
    return checked, [CheckedError(e.message, span_of(e.start, e.end)) for e in errors]


def parse_template(s: Str) -> tuple[list[CheckedPlaceholder], list[CheckedError]]:
    """Placeholders of a string literal and any malformed braces, with source spans."""
    pieces, errors = parse_template_pieces(s)
    return [p for p in pieces if isinstance(p, CheckedPlaceholder)], errors
