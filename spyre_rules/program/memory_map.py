"""The simulated HBM memory map: one byte segment per device tensor.

Rule (deliberately simple): segments are packed in allocation order starting at
byte address 0; each starts at a multiple of 128 bytes (one stick) and is
exactly ``device_layout.size_in_bytes`` long, so a stick never straddles two
tensors.  Graph inputs and constants come first (placeholder order), then every
ComputedBuffer in operation order.  There is no reuse: every buffer keeps its
own segment for the whole program, so a stale read can never alias another
tensor's bytes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["ALIGNMENT", "Segment", "MemoryMap"]

ALIGNMENT = 128


@dataclasses.dataclass(frozen=True)
class Segment:
    name: str
    address: int
    size_bytes: int

    @property
    def end(self) -> int:
        return self.address + self.size_bytes


@dataclasses.dataclass
class MemoryMap:
    segments: dict[str, Segment] = dataclasses.field(default_factory=dict)
    total_bytes: int = 0

    def allocate(self, name: str, size_bytes: int) -> Segment:
        if name in self.segments:
            raise ValueError(f"{name} already has an HBM segment {self.segments[name]}")
        address = -(-self.total_bytes // ALIGNMENT) * ALIGNMENT
        seg = Segment(name, address, int(size_bytes))
        self.segments[name] = seg
        self.total_bytes = seg.end
        return seg

    def to_json(self) -> dict[str, Any]:
        return {
            "alignment": ALIGNMENT,
            "total_bytes": self.total_bytes,
            "segments": [dataclasses.asdict(s) for s in self.segments.values()],
        }
