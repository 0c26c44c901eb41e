"""Message templates: ``"Cannot auto-tile {op}: it reads {producers}"``.

Every string literal is a template.  ``{path}`` is a placeholder naming a value
in scope: a binding, a constant, ``config.NAME``, or a field path such as
``{r.buffer}``.  ``{{`` and ``}}`` stand for literal braces.  The engine renders
values as documented in docs/rules_language.md ("Message rendering").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spyre_rules.lang.ast import Span, Str

_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


@dataclass(slots=True)
class Placeholder:
    path: tuple[str, ...]  # ("r", "buffer"); ("config", "max_span_bytes")
    span: Span


@dataclass(slots=True)
class TemplateError:
    message: str
    span: Span


def parse_template(s: Str) -> tuple[list[Placeholder], list[TemplateError]]:
    """Placeholders of a string literal and any malformed braces.

    Positions come from the raw text (the literal is on one line; its first
    character after the opening quote is at column ``span.col + 1``)."""
    raw = s.raw
    base_line, base_col = s.span.line, s.span.col + 1
    holders: list[Placeholder] = []
    errors: list[TemplateError] = []

    def span_of(a: int, b: int) -> Span:
        return Span(s.span.file, base_line, base_col + a, base_line, base_col + b)

    i = 0
    n = len(raw)
    while i < n:
        ch = raw[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            if i + 1 < n and raw[i + 1] == "{":
                i += 2
                continue
            close = raw.find("}", i + 1)
            nxt_open = raw.find("{", i + 1)
            if close < 0 or (0 <= nxt_open < close):
                errors.append(TemplateError("`{` opens a placeholder that is never closed "
                                            "(write `{{` for a literal brace)", span_of(i, i + 1)))
                i += 1
                continue
            body = raw[i + 1:close]
            if not _PATH.match(body):
                what = "an empty placeholder" if not body else f"placeholder `{{{body}}}` is not a name or field path"
                errors.append(TemplateError(f"{what} (write `{{{{` for a literal brace)", span_of(i, close + 1)))
            else:
                holders.append(Placeholder(tuple(body.split(".")), span_of(i, close + 1)))
            i = close + 1
            continue
        if ch == "}":
            if i + 1 < n and raw[i + 1] == "}":
                i += 2
                continue
            errors.append(TemplateError("`}` without a matching `{` (write `}}` for a literal brace)",
                                        span_of(i, i + 1)))
        i += 1
    return holders, errors
