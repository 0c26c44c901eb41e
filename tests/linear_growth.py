"""Shared set-up for the "work per op is constant" tests: chains of overflowing ops.

Those tests count work (calls, rendered characters) instead of timing it: on chains of
20, 40 and 60 ops a linear cost grows by the same amount for every 20 ops, so its second
difference is 0; a copy of a growing run per op makes it grow quadratically.  (tests/ is
on sys.path through tests/conftest.py, so any test imports this module by name.)
"""

from __future__ import annotations

SIZES = (20, 40, 60)


def chain(n_ops: int):
    """A program of ``n_ops`` pointwise ops, each reading the one before."""
    def program(x):
        for _ in range(n_ops):
            x = x + 1
        return x
    return program


def assert_linear(what: str, small: int, middle: int, large: int) -> None:
    """Counts at SIZES grow by the same amount per step (and measure something)."""
    assert small > 0, (what, small)
    assert (large - middle) - (middle - small) == 0, (what, small, middle, large)
