"""Which host tensors' stickified bytes are still in their device segment this call.

Every kernel of a compiled graph that reads a graph input stickifies it into its
HBM segment (``TensorPlacement``) before running, so an input read by three
kernels was written three times per call.  ``ResidentInputs`` lets a write be
skipped when its bytes are provably there already (docs/architecture.md,
"Resident graph inputs"):

- only between ``begin()`` and ``end()`` (the generated wrapper brackets every
  call of the graph), so nothing carries over from one call to the next: the
  caller may change an input between calls in ways no counter sees -- except a
  graph input the program writes in place (a KV cache: ``write_through.py``),
  whose segment stays trusted across calls while the same tensor object keeps
  its data pointer and version counter (a change made outside torch, through a
  numpy view of its memory, is not seen: such a tensor must not be edited that
  way between calls);
- the same placement (everything but the buffer name) was written this call from
  the very same host tensor object (held by a weak reference, so a new tensor at
  a recycled address or id never matches), with the same data pointer, storage
  offset, shape, strides, dtype and ``_version``: every in-place change made
  through torch -- by a host step, by an unstickify into it, through any view of
  its storage -- bumps the version counter the views of one storage share;
- no device write since overlaps the segment's bytes: ``invalidate`` is called
  for every stickify and for every OpSpec store range before the store runs
  (LX is a separate memory and never overlaps HBM).

Anything else -- inference tensors (no version counter), zero-size segments,
calls without ``begin`` -- writes as before.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import torch

from spyre_rules.program.op_spec import TensorPlacement

__all__ = ["ResidentInputs", "placement_key"]


def placement_key(p: TensorPlacement) -> tuple:
    """What decides the bytes a stickify writes (the name does not)."""
    return (p.address, p.size_in_bytes, tuple(p.host_size), tuple(p.host_stride), p.host_dtype,
            tuple(p.device_size), tuple(p.stride_map), p.device_dtype)


#: subclasses may redefine what their data is: only these are trusted
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _fingerprint(tensor: torch.Tensor) -> tuple | None:
    if type(tensor) not in _PLAIN or tensor.is_inference() or tensor.device.type != "cpu":
        return None
    return (tensor._version, tensor.data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
            tuple(tensor.stride()), tensor.dtype)


class ResidentInputs:
    """The stickified host tensors whose bytes are intact in device memory."""

    def __init__(self) -> None:
        self.active = False
        #: placement_key -> (byte range, weak reference to the tensor, its fingerprint)
        self._entries: dict[tuple, tuple[tuple[int, int], Any, tuple]] = {}
        #: the keys of entries that outlive a call: segments a kernel writes through
        #: to their host tensor (executor/write_through.py)
        self._persistent: set[tuple] = set()
        #: persistent keys found intact right before a compiled call (``check_before_call``)
        self._checked: set[tuple] = set()

    def begin(self) -> None:
        self._drop_per_call()
        self._retake_checked()
        self.active = True

    def end(self) -> None:
        self._drop_per_call()
        self.active = False

    def forget(self) -> None:
        """Nothing is resident (the device memory was dropped)."""
        self._entries.clear()
        self._persistent.clear()
        self._checked = set()
        self.active = False

    @property
    def has_persistent(self) -> bool:
        return bool(self._persistent)

    def _drop_per_call(self) -> None:
        for key in [k for k in self._entries if k not in self._persistent]:
            del self._entries[key]

    def holds(self, p: TensorPlacement, tensor: Any) -> bool:
        """True when ``tensor``'s stickified bytes are in segment ``p`` already."""
        if not self.active or not isinstance(tensor, torch.Tensor):
            return False
        entry = self._entries.get(placement_key(p))
        if entry is None:
            return False
        _, ref, fingerprint = entry
        return ref() is tensor and _fingerprint(tensor) == fingerprint

    def record(self, p: TensorPlacement, tensor: torch.Tensor, persistent: bool = False) -> None:
        """``tensor`` was just stickified into ``p`` (after ``invalidate`` of its range),
        or a kernel wrote ``p`` and the same elements of ``tensor`` (``persistent``: the
        entry outlives the call)."""
        fingerprint = _fingerprint(tensor)
        if not self.active or fingerprint is None or p.size_in_bytes <= 0:
            return
        span = (int(p.address), int(p.address) + p.size_in_bytes)
        key = placement_key(p)
        self._entries[key] = (span, weakref.ref(tensor), fingerprint)
        if persistent:
            self._persistent.add(key)

    def check_before_call(self) -> None:
        """A compiled call is about to start, before AOT autograd's runtime wrapper bumps
        the version counter of every input the graph mutates in place (once, before the
        program runs; nothing else runs in between).  The persistent entries whose
        tensors are unchanged now are taken again by ``begin``, at the bumped version."""
        self._checked = {key for key in self._persistent if self._intact(key)}

    def _intact(self, key: tuple) -> bool:
        entry = self._entries.get(key)
        tensor = entry[1]() if entry is not None else None
        return tensor is not None and _fingerprint(tensor) == entry[2]

    def _retake_checked(self) -> None:
        for key in self._checked & self._persistent:
            span, ref, _ = self._entries[key]
            fingerprint = _fingerprint(ref()) if ref() is not None else None
            if fingerprint is not None:
                self._entries[key] = (span, ref, fingerprint)
        self._checked = set()

    def invalidate(self, ranges: Iterable[tuple[int, int]]) -> None:
        """Device bytes in these ``[start, end)`` ranges are (about to be) overwritten."""
        if not self._entries:
            return
        ranges = [r for r in ranges if r[0] < r[1]]
        stale = [key for key, ((lo, hi), _, _) in self._entries.items()
                 if any(start < hi and lo < end for start, end in ranges)]
        for key in stale:
            del self._entries[key]
            self._persistent.discard(key)

    def __len__(self) -> int:
        return len(self._entries)
