"""Host dtypes, their device storage, and the compute form of values.

Device storage (what the simulated HBM holds per element; the element width is
``128 // elems_per_stick`` bytes, docs/layout_model.md §1.2):

=============  ===========  ==========================================
host dtype     device fmt   storage in the simulated HBM
=============  ===========  ==========================================
float16        SEN169_FP16  float16
bfloat16       SEN169_FP16  bfloat16 bits (lossless stand-in, 2 bytes)
bool           SEN169_FP16  float16 0.0 / 1.0
float32        IEEE_FP32    float32
int32          IEEE_INT32   int32
int64          IEEE_INT32   int32; a store of a value outside int32 raises
float8_e4m3fn  SEN143_FP8   float8_e4m3fn
=============  ===========  ==========================================

Compute form: half-precision values (float16/bfloat16) are carried as float32
tensors holding already-rounded values; every op computes in float32 and the
result is rounded when converted (``to_dtype``) or stored.  This is what
Inductor's CPU kernels and eager's vectorized CPU kernels do for one aten op.
"""

from __future__ import annotations

from typing import Any

import torch

from spyre_rules.facts.stick_layout import DataFormat

__all__ = [
    "DeviceOverflowError",
    "compute_dtype",
    "host_dtype",
    "storage_dtype",
    "to_compute",
    "to_dtype",
    "to_storage",
    "from_storage",
]

_HALF = (torch.float16, torch.bfloat16)


class DeviceOverflowError(OverflowError):
    """A value cannot be represented in its device storage format."""


def host_dtype(name: str | torch.dtype) -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype name {name!r}")
    return dtype


def storage_dtype(device_dtype: DataFormat, host: torch.dtype) -> torch.dtype:
    if device_dtype is DataFormat.SEN169_FP16:
        return torch.bfloat16 if host == torch.bfloat16 else torch.float16
    if device_dtype is DataFormat.IEEE_FP32:
        return torch.float32
    if device_dtype is DataFormat.IEEE_INT32:
        return torch.int32
    if device_dtype is DataFormat.SEN143_FP8:
        return torch.float8_e4m3fn
    raise ValueError(f"no storage for device format {device_dtype}")


def compute_dtype(host: torch.dtype) -> torch.dtype:
    """The dtype of a host dtype's compute form."""
    return torch.float32 if host in _HALF else host


def to_compute(value: torch.Tensor) -> torch.Tensor:
    """Host-dtype tensor -> compute form (half precision widened to float32)."""
    return value.float() if value.dtype in _HALF else value


def to_dtype(value: Any, dtype: torch.dtype) -> Any:
    """Convert to ``dtype`` (rounding half precision) and return the compute form."""
    if not isinstance(value, torch.Tensor):
        value = torch.tensor(value)
    return to_compute(value.to(dtype))


def to_storage(value: torch.Tensor, host: torch.dtype, storage: torch.dtype, where: str) -> torch.Tensor:
    value = value.to(host)
    if host == torch.int64 and storage == torch.int32 and value.numel():
        lo, hi = torch.iinfo(torch.int32).min, torch.iinfo(torch.int32).max
        if int(value.min()) < lo or int(value.max()) > hi:
            raise DeviceOverflowError(
                f"{where}: int64 value outside the int32 range of device format IEEE_INT32"
            )
    return value.to(storage)


def from_storage(value: torch.Tensor, host: torch.dtype) -> torch.Tensor:
    if host == torch.bool:
        return value != 0
    return value.to(host)
