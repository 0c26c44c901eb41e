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
