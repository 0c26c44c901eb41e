"""Public span facts: sound span bounds and the independent brute-force verifier.

The bounds are importable without torch (``spyre-rules check`` and the rule
tools must start fast); the verifier needs torch, so its names load on first use.
"""

from __future__ import annotations

from spyre_rules._lazy import lazy_exports


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


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


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
