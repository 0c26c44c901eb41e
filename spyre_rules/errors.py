"""Exceptions shared by every stage.  No torch import here."""

from __future__ import annotations

from collections.abc import Iterator


class SpyreRulesError(Exception):
    """Base class of every error spyre-rules raises on purpose."""


class Unsupported(SpyreRulesError):
    """An op needs something the planner cannot provide safely.

    The message names the op and the reason; nothing is guessed.
    """


class LayoutError(SpyreRulesError, ValueError):
    """A layout request is invalid or its answer would be a guess (names the value)."""


class CoordinateError(SpyreRulesError, ValueError):
    """Device coordinates cannot be derived from an index (names the index and reason)."""


class VerifierError(SpyreRulesError, ValueError):
    """The independent span verifier refuses its input (e.g. a space too large to enumerate)."""


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception chained to it, each once: ``__cause__``,
    ``__context__`` and the ``inner_exception`` Dynamo / Inductor wrap errors in."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        cur = todo.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        yield cur
        todo.extend([getattr(cur, "inner_exception", None), cur.__cause__, cur.__context__])


#: Lines from which on an exception's text is a traceback or a debugging hint, not what
#: went wrong (torch.fx's "Original traceback:", Dynamo's user-code stack and hints).
_TEXT_ENDS = ("Original traceback:", "from user code:", "Set TORCHDYNAMO_VERBOSE",
              "For even more developer context")


def _essential_text(exc: BaseException) -> str:
    kept: list[str] = []
    for line in str(exc).splitlines():
        line = line.strip()
        if line.startswith(_TEXT_ENDS):
            break
        if line:
            kept.append(line)
    return " ".join(kept)


def cause_chain_text(exc: BaseException) -> str:
    """What went wrong, all of it, on one line: ``Type: text`` of ``exc`` and of each
    exception chained to it, outermost first, joined by ``" <- "``; a cause whose text
    the line already holds is left out (Dynamo's ``BackendCompilerFailed`` repeats the
    first line of the error it wraps, whose first line alone, ``backend=... raised:``,
    said nothing), and tracebacks and debugging hints are cut."""
    parts: list[str] = []
    for cur in exception_chain(exc):
        text = _essential_text(cur)
        if text and any(text in part for part in parts):
            continue
        parts.append(f"{type(cur).__name__}: {text}" if text else type(cur).__name__)
    return " <- ".join(parts)
