"""spyre-rules: declarative coarse-tiling rules for the IBM Spyre accelerator.

The package root is light on purpose: ``spyre-rules check`` and the language
tools never import torch.  Public names that need torch are loaded on first
use.  The ``spyre_rules`` torch.compile backend is registered here when torch
is already imported, and otherwise through the ``torch_dynamo_backends`` entry
point, which torch consults when the name is first looked up.
"""

from __future__ import annotations

import sys
from typing import Any

from spyre_rules._lazy import lazy_exports
from spyre_rules.errors import Unsupported

__version__ = "0.1.0"

# public name -> module that defines it (imported lazily)
_LAZY: dict[str, str] = {
    "config": "spyre_rules.config",
    "capture_operations": "spyre_rules.backend.capture",
    "paged_decode_attention": "spyre_rules.backend.paged_attention",
    "spyre_rules_backend": "spyre_rules.backend.compile",
    "spyre_hint": "spyre_rules.hints",
    "name_tensor_dims": "spyre_rules.hints",
    "declare_tensor_dim": "spyre_rules.hints",
    # the package, not spyre_rules.passes.coarse_tile: a path ending in ".coarse_tile"
    # would make lazy_exports return the module instead of the function.
    "coarse_tile": "spyre_rules.passes",
    "plan_span_overflow_tile": "spyre_rules.engine",
    "span_overflow_groups": "spyre_rules.hints",
    "SpanOverflowTilePlan": "spyre_rules.engine",
    "SpanOverflowTileLevel": "spyre_rules.engine",
    "ChunkingInfo": "spyre_rules.engine",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


__all__ = ["Unsupported", "__version__", *_LAZY]


def _register_backend() -> None:
    """Register the "spyre_rules" torch.compile backend (torch already imported).

    When torch has already discovered our ``torch_dynamo_backends`` entry point,
    registering here too would make its lookup assert "duplicate name" (it loads
    the entry point, which imports this package, then registers); the entry point
    then serves the name.  Otherwise (e.g. running from a source tree) register
    a thin function that imports the backend on first use.
    """
    from torch._dynamo.backends import registry

    from spyre_rules.backend.logs import register

    register()  # TORCH_LOGS="spyre_rules" names our logger hierarchy
    name = "spyre_rules"
    if name in registry._COMPILER_FNS or registry._BACKENDS.get(name) is not None:
        return

    def spyre_rules(gm: Any, example_inputs: Any, options: Any = None) -> Any:
        from spyre_rules.backend import spyre_rules_backend

        return spyre_rules_backend(gm, example_inputs, options)

    registry.register_backend(compiler_fn=spyre_rules, name=name)


if "torch" in sys.modules:
    _register_backend()
