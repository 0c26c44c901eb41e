"""The one place lark is imported (fast: its optional ``regex`` import is skipped)."""

from __future__ import annotations

import sys

def _import_lark():
    # lark only uses the third-party `regex` module when asked to (regex=True);
    # keep its speculative import from costing ~20 ms of `spyre-rules check` startup.
    if "lark" in sys.modules:
        return sys.modules["lark"]
    blocked = "regex" not in sys.modules
    if blocked:
        sys.modules["regex"] = None  # type: ignore[assignment]
    try:
        import lark
    finally:
        if blocked:
            del sys.modules["regex"]
    return lark


lark = _import_lark()
Token = lark.Token
