"""Public span facts: sound span bounds and the independent brute-force verifier.

The bounds are importable without torch (``spyre-rules check`` and the rule
tools must start fast); the verifier needs torch, so its names load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from spyre_rules.facts.spans import (
    DimSpan,
    SpanBound,
    coordinate_span_bound,
    coordinate_span_elems,
    coordinate_spans,
    input_per_core_span_bytes,
    per_core_span_bytes,
    tile_aware_inner_extent_elems,
)

_LAZY = {
    "verify_spans": "spyre_rules.facts.verifier",
    "SpanReport": "spyre_rules.facts.verifier",
    "DimTrueSpan": "spyre_rules.facts.verifier",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'spyre_rules.spans' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "DimSpan",
    "DimTrueSpan",
    "SpanBound",
    "SpanReport",
    "coordinate_span_bound",
    "coordinate_span_elems",
    "coordinate_spans",
    "input_per_core_span_bytes",
    "per_core_span_bytes",
    "tile_aware_inner_extent_elems",
    "verify_spans",
]
