"""Dead ops (nothing reads them) are dropped before planning (backend/dead_ops.py), and the
ops our passes add afterwards keep unique names."""

from __future__ import annotations

import torch

from spyre_helpers import run_spyre


def test_ops_added_after_dropping_dead_ones_keep_unique_names():
    """fuzz 2912:1550 (untiled): var() is a Welford reduction whose mean and count outputs
    are dead and dropped; the restickify of the permuted read added afterwards was named
    after the shorter op list (Inductor names ``op{len(operations)}``), took a live op's
    name, and the Scheduler failed with KeyError: 'op1'."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(8, 96, generator=g), torch.randn(8, 96, generator=g)

    def f(a, b):
        return ((a * 2.0 - b).permute(1, 0) * 2.0).var()

    compiled = run_spyre(f, x, y)
    torch.testing.assert_close(compiled.output, f(x, y), rtol=1e-5, atol=1e-6)
