"""The error users see for a wrong hint or dim name (no torch import)."""

from __future__ import annotations

from spyre_rules.errors import SpyreRulesError

__all__ = ["HintError"]


class HintError(SpyreRulesError, ValueError):
    """A ``spyre_hint`` / ``declare_tensor_dim`` / ``name_tensor_dims`` request is wrong.

    A user error, not an unsupported graph: the backend must not fall back to eager
    for it (that would hide the mistake), so this is deliberately *not* an
    ``Unsupported``.  The message names the dim, the count and, once known, the op.
    """
