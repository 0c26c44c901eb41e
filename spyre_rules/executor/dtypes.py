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

A NaN an op stores in half-precision device storage is always the one canonical NaN
(``CANONICAL_NAN``: positive, quiet, no payload; ``canonical_stored``).  Torch's half conversions keep a
NaN's sign and payload in their vectorised loop and drop or replace them in their
scalar loop, and which elements take which loop follows the memory layout, so the
bits of a stored NaN would otherwise differ between the general and the structured
path (docs/architecture.md, "Stores").  A NaN's sign and payload are not values a
program computes with; whether an element is NaN does not depend on the layout.
Host transfers (stickify, unstickify) move bits and keep every NaN as it is.
"""

from __future__ import annotations

from typing import Any

import torch

from spyre_rules.facts.stick_layout import DataFormat

__all__ = [
    "CANONICAL_NAN",
    "DeviceOverflowError",
    "canonical_nans_",
    "canonical_stored",
    "has_nan",
    "compute_dtype",
    "host_dtype",
    "storage_dtype",
    "to_compute",
    "to_dtype",
    "to_storage",
    "from_storage",
]

_HALF = (torch.float16, torch.bfloat16)

#: the bits of the one NaN a half-precision device element holds (torch's own
#: ``float("nan")`` in that dtype)
CANONICAL_NAN = {torch.float16: 0x7E00, torch.bfloat16: 0x7FC0}


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


def canonical_stored(stored: torch.Tensor) -> torch.Tensor:
    """A computed value in its storage dtype, every NaN of half storage made canonical
    (a copy when any is replaced: ``stored`` may be a caller's tensor)."""
    if stored.dtype in CANONICAL_NAN and has_nan(stored):
        stored = stored.contiguous().clone()
        canonical_nans_(stored)
    return stored


def has_nan(value: torch.Tensor) -> bool:
    """Whether a float tensor holds a NaN.  A sum is NaN wherever a NaN was added; infs
    of both signs make it NaN too, a false alarm that only costs the caller a closer
    look.  Partial sums that overflow are infs, never NaN."""
    if value.dim() > 1:
        value = value.sum(dim=-1)
    total = value.sum().item()
    return total != total


def canonical_nans_(half: torch.Tensor) -> None:
    """Replace every NaN of a float16/bfloat16 tensor (any strides, no two elements
    sharing memory) by ``CANONICAL_NAN``, in place."""
    mask = torch.isnan(half)
    half.view(torch.int16).masked_fill_(mask, CANONICAL_NAN[half.dtype])


def from_storage(value: torch.Tensor, host: torch.dtype) -> torch.Tensor:
    if host == torch.bool:
        return value != 0
    return value.to(host)
