"""Public facade of the Spyre layout model (facts only).

``import spyre_rules.layout`` must not import torch: ``spyre-rules check`` and the
rule language use these facts.  ``FixedTiledLayout`` subclasses an Inductor class,
so it (and its constructor helper) is loaded on first attribute access.
"""

from __future__ import annotations

from spyre_rules._lazy import lazy_exports


from spyre_rules.facts.coordinates import device_coordinates, host_coordinates
from spyre_rules.facts.stick_layout import (
    BYTES_IN_STICK,
    DataFormat,
    DTypeInfo,
    ElementArrangement,
    SpyreTensorLayout,
    contiguous_strides,
    dtype_info,
    generic_stick_layout,
    resize_device_layout,
    restickify_layout,
    splits_stick,
    within_stick_host_dim,
)

_LAZY = {
    "FixedTiledLayout": "spyre_rules.facts.tiled_layout",
    "fixed_tiled_layout": "spyre_rules.facts.tiled_layout",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


__all__ = [
    "BYTES_IN_STICK",
    "DTypeInfo",
    "DataFormat",
    "ElementArrangement",
    "FixedTiledLayout",
    "SpyreTensorLayout",
    "contiguous_strides",
    "device_coordinates",
    "dtype_info",
    "fixed_tiled_layout",
    "generic_stick_layout",
    "host_coordinates",
    "resize_device_layout",
    "restickify_layout",
    "splits_stick",
    "within_stick_host_dim",
]
