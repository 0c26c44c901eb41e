"""Demo models whose spans overflow a small limit (``spyre-rules demo``).

The hardware limit is 256 MiB per core; a tensor that overflows it is several GB
and far too large for the CPU executor.  These models use (1, 40, 16, 64) fp16
tensors (80 KiB; device dim 0 spans 40 x 1024 x 2 = 81,920 bytes) and are meant
to be compiled at the demo limit ``DEMO_MAX_SPAN_BYTES`` = 8 KiB, where the same
planner decisions arise at a size that runs in well under a second.

``gated_residual`` shows every grouping outcome of rules/grouping.rules on one
graph: a run of Pointwise ops with the same split sharing one loop (``start`` /
``join``), an op whose own plan differs but conforms to the run (``conform``),
and a small reduction with no plan that reads the run's output after the loop.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["DEMO_MAX_SPAN_BYTES", "GatedResidual", "SeedAdd", "gated_residual_example",
           "seed_add_example"]

#: Span limit the demo compiles at (bytes): small enough for tensors of a few KiB
#: to overflow it, a power of two like the real 256 MiB.
DEMO_MAX_SPAN_BYTES = 8192


class GatedResidual(nn.Module):
    """``y = relu(x * sigmoid(gate)) + x``; ``y[..., :8, :] / 2``; a row sum of y."""

    def forward(self, x: torch.Tensor, gate: torch.Tensor):
        h = x * torch.sigmoid(gate)
        y = torch.relu(h) + x
        half = y[:, :, :8, :] * 0.5  # own plan {1: 5}; conforms to the run's {1: 10}
        rowsum = y[:, :2].sum(dim=-1)  # spans stay small: no plan, reads y after the loop
        return y, half, rowsum


class SeedAdd(nn.Module):
    """The ``x + y`` of docs/layout_model.md §6.1, on (1, 20, 16, 64) instead of (1, 8195, 256, 64)."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


def _inputs(shape: tuple[int, ...], count: int, seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=gen).to(torch.float16) for _ in range(count))


def gated_residual_example(seed: int = 0) -> tuple[GatedResidual, tuple[torch.Tensor, ...]]:
    return GatedResidual().eval(), _inputs((1, 40, 16, 64), 2, seed)


def seed_add_example(seed: int = 0) -> tuple[SeedAdd, tuple[torch.Tensor, ...]]:
    return SeedAdd().eval(), _inputs((1, 20, 16, 64), 2, seed)
