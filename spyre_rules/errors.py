"""Exceptions shared by every stage.  No torch import here."""

from __future__ import annotations


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
