"""A small transformer-style block: layer norm, MLP with GELU, residual, softmax.

It exercises what the backend lowers: batchmatmul (with a restickified weight),
pointwise chains, broadcasting, reductions (layer norm, softmax) and shapes that
are not multiples of the stick size.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["MLPSoftmaxBlock", "mlp_softmax_example"]


class MLPSoftmaxBlock(nn.Module):
    def __init__(self, dim: int = 96, hidden: int = 150) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.down(nn.functional.gelu(self.up(self.norm(x))))
        return torch.softmax(x + h, dim=-1)


def mlp_softmax_example(
    batch: int = 37, dim: int = 96, hidden: int = 150, dtype: torch.dtype = torch.float32,
    seed: int = 0,
) -> tuple[MLPSoftmaxBlock, tuple[torch.Tensor]]:
    """``(model, (x,))`` with deterministic weights and input."""
    torch.manual_seed(seed)
    model = MLPSoftmaxBlock(dim, hidden).to(dtype).eval()
    x = torch.randn(batch, dim, dtype=dtype)
    return model, (x,)
