"""Errors of the torch.compile backend (no torch import)."""

from __future__ import annotations

from spyre_rules.errors import SpyreRulesError, Unsupported, exception_chain

__all__ = ["UnsupportedGraph", "BackendCompileError", "find_cause", "find_unsupported"]


class UnsupportedGraph(Unsupported):
    """A graph needs something the spyre-rules pipeline cannot lower.

    The message names the op (buffer name and aten origins) and the reason; the
    backend turns it into an eager fallback (with a warning) or re-raises it,
    depending on ``config.fallback``.
    """


class BackendCompileError(SpyreRulesError, RuntimeError):
    """``config.fallback == 'error'`` and the graph cannot be compiled (names the reason)."""


def find_cause(exc: BaseException, cls: type) -> BaseException | None:
    """The first exception of type ``cls`` in the chain Dynamo/Inductor wrapped around ``exc``."""
    return next((cur for cur in exception_chain(exc) if isinstance(cur, cls)), None)


def find_unsupported(exc: BaseException) -> UnsupportedGraph | None:
    """The UnsupportedGraph at the root of ``exc`` (Inductor wraps errors it sees)."""
    return find_cause(exc, UnsupportedGraph)  # type: ignore[return-value]
