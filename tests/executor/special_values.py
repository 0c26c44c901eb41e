"""Inputs salted with the values an executor fast path most easily gets wrong."""

from __future__ import annotations

import itertools

import torch

#: inf, -inf, NaN, both zeros, an fp32 subnormal and float16's largest finite value
SPECIALS = (float("inf"), -float("inf"), float("nan"), 0.0, -0.0, 1e-40, 65504.0)


def with_specials(shape, dtype, seed):
    """``randn(shape)`` in ``dtype`` with 40 elements set to ``SPECIALS`` in turn."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g).to(dtype)
    flat = x.view(-1)
    picks = torch.randint(0, flat.numel(), (40,), generator=g)
    for i, value in zip(picks.tolist(), itertools.cycle(SPECIALS)):
        flat[i] = value
    return x
