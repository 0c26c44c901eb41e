"""Lazy public names: a facade module lists ``name -> defining module`` and
imports the module only when the name is first used.

This keeps ``import spyre_rules`` (and the layout/spans facades) free of torch,
so ``spyre-rules check`` starts fast, while the public names stay where users
expect them.  No torch import here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(
    module_name: str, namespace: dict[str, Any], table: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for a module whose names in ``table`` load on first use.

    A table entry whose defining module ends with ``.<name>`` is that module
    itself (``spyre_rules.config``); otherwise the attribute of that name.
    """

    def __getattr__(name: str) -> Any:
        source = table.get(name)
        if source is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        mod = importlib.import_module(source)
        value = mod if source.endswith("." + name) else getattr(mod, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
