"""The PATH arguments of ``check`` and ``fmt``: ``.rules`` files or directories of them.

Both commands resolve them the same way (``lang.driver``) and answer a usage
error the same way: ``spyre-rules COMMAND: error: ...`` on stderr, exit code 2.
No torch import.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["USAGE_EXIT", "add_paths_argument", "resolve_or_report"]

USAGE_EXIT = 2
T = TypeVar("T")


def add_paths_argument(parser: Any, help_text: str) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH", help=help_text)


def resolve_or_report(command: str, resolve: Callable[[list[str]], T], paths: list[str]) -> T | None:
    """``resolve(paths)``, or None after reporting its ``UsageError`` for ``command``."""
    from spyre_rules.lang.files import UsageError

    try:
        return resolve(paths)
    except UsageError as err:
        print(f"spyre-rules {command}: error: {err}", file=sys.stderr)
        return None
