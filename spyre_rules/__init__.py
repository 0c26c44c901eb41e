"""spyre-rules: declarative coarse-tiling rules for the IBM Spyre accelerator.

The package root is light on purpose: ``spyre-rules check`` and the language
tools never import torch.  Public names that need torch are loaded on first
use.  The ``spyre_rules`` torch.compile backend is registered here when torch
is already imported, and otherwise through the ``torch_dynamo_backends`` entry
point, which torch consults when the name is first looked up.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from spyre_rules.errors import Unsupported

__version__ = "0.1.0"

# public name -> module that defines it (imported lazily)
_LAZY: dict[str, str] = {
    "config": "spyre_rules.config",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'spyre_rules' has no attribute {name!r}")
    mod = importlib.import_module(module)
    value = mod if module.endswith("." + name) else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["Unsupported", "__version__", *_LAZY]
