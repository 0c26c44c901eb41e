"""Simulated device memory (HBM): one flat, zero-initialised byte array.

Programs address it in bytes; the executor gathers and scatters through typed
views (element index = byte address / element size).  Every access is checked
against its allocation before memory is touched (``evaluate._Access``); a
violation raises ``DeviceMemoryError`` naming the op, the tensor and the first
bad byte address.
"""

from __future__ import annotations

import torch

from spyre_rules.errors import SpyreRulesError

__all__ = ["DeviceMemory", "DeviceMemoryError", "IndirectIndexError"]


class DeviceMemoryError(SpyreRulesError, IndexError):
    """An access falls outside its tensor's allocation (names op, tensor, address)."""


class IndirectIndexError(DeviceMemoryError):
    """An indirect index (embedding id, index_select / gather index) is outside the
    dim it indexes (names op, symbol, value, iteration point and index tensor)."""


#: strided views kept per memory (a bound, not a policy: past it they are made again)
_STRIDED_LIMIT = 4096


class DeviceMemory:
    """``total_bytes`` of zero-initialised device memory with typed element views."""

    def __init__(self, total_bytes: int) -> None:
        # Round up so every typed view (up to 8-byte elements) covers the whole map.
        self.total_bytes = int(total_bytes)
        self._bytes = torch.zeros(-(-self.total_bytes // 8) * 8, dtype=torch.uint8)
        self._views: dict[torch.dtype, torch.Tensor] = {}
        self._strided: dict[tuple, torch.Tensor] = {}
        #: while not None, every ``write`` / ``accumulate`` appends (element size, element
        #: indices): what a kernel wrote into a segment it mirrors to a host tensor
        self.log: list[tuple[int, torch.Tensor]] | None = None

    def strided(self, dtype: torch.dtype, sizes: tuple[int, ...], strides: tuple[int, ...],
                offset: int) -> torch.Tensor:
        """``view(dtype).as_strided(sizes, strides, offset)``, made once per memory: a
        counted loop asks for the same few views every iteration and call, and
        ``as_strided`` costs more than the lookup.  Callers never resize or re-stride
        a view they get (an ``out=`` of the very same shape leaves it as it is)."""
        key = (dtype, sizes, strides, offset)
        view = self._strided.get(key)
        if view is None:
            if len(self._strided) >= _STRIDED_LIMIT:
                self._strided.clear()
            view = self._strided[key] = self._view(dtype).as_strided(sizes, strides, offset)
        return view

    def clear(self) -> None:
        """Every byte back to zero (a scratchpad reused by the next run)."""
        self._bytes.zero_()

    def view(self, dtype: torch.dtype) -> torch.Tensor:
        """The whole memory as a flat tensor of ``dtype`` elements (structured views)."""
        return self._view(dtype)

    def _view(self, dtype: torch.dtype) -> torch.Tensor:
        view = self._views.get(dtype)
        if view is None:
            view = self._bytes.view(dtype)
            self._views[dtype] = view
        return view

    # index_select / index_copy_ rather than ``view[idx]``: advanced indexing costs
    # ~15 ms per call on CPU in torch 2.13, index_select microseconds.
    def read(self, elements: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Gather by element index of the ``dtype`` view (byte address / element size)."""
        flat = self._view(dtype).index_select(0, elements.reshape(-1))
        return flat.view(elements.shape)

    def write(self, elements: torch.Tensor, values: torch.Tensor) -> None:
        if values.untyped_storage().data_ptr() == self._bytes.untyped_storage().data_ptr():
            values = values.clone()  # a load's view of this memory: read it all first
        self._view(values.dtype).index_copy_(0, elements.reshape(-1), values.reshape(-1))
        if self.log is not None:
            self.log.append((values.element_size(), elements.reshape(-1)))

    def accumulate(self, elements: torch.Tensor, values: torch.Tensor) -> None:
        """Add ``values`` into the elements (repeats add up, in order)."""
        if values.untyped_storage().data_ptr() == self._bytes.untyped_storage().data_ptr():
            values = values.clone()
        self._view(values.dtype).index_put_((elements.reshape(-1),), values.reshape(-1),
                                            accumulate=True)
        if self.log is not None:
            self.log.append((values.element_size(), elements.reshape(-1)))

    def read_bytes(self, address: int, size: int) -> torch.Tensor:
        return self._bytes[address:address + size]

    def write_bytes(self, address: int, data: torch.Tensor) -> None:
        self._bytes[address:address + data.numel()] = data
