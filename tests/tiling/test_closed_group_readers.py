"""A reader of a closed automatic group reads its full buffer (issue 41).

The grouping rule ``reads_tiled_producer`` refused such a reader unless every read of
the closed buffer fit with the reader's own split, and it counted a coordinate that
takes one value within the reader's tile as spanning its whole inner extent; the
planner's validation (``input_reads_fit``) and the span verifier charge nothing for
it (it only picks the tile's base address).  A head-per-tile add reading a repeated
key/value-style mask (a (1, 2, 2, S, S) copy, tiled 2 x 2 and hoisted before the open
run) through ``floor(h / 2)`` and ``Mod(h, 2)`` was refused, sending tiny Doge at 64 KiB
and Falcon-7B at 32768 tokens (an amax behind such a producer) to eager.  Each case
here runs wholly on the program, span-checked as an error, and equals eager.
"""

from __future__ import annotations

import pytest
import torch

from spyre_rules import config

KiB = 1024


def _repeated(x):
    return (x * 2)[:, :, None].expand(1, 2, 2, *x.shape[2:]).reshape(1, 4, *x.shape[2:])


def add_of_hoisted_repeat(x, y):
    return y * 3 + _repeated(x)


def amax_behind_hoisted_repeat(x, y):
    s = y * 3
    return s, (s + _repeated(x)).amax(dim=-1)


def _groups_of(fn, x, y, limit):
    """The automatic groups, compiling and running under span_check="error"."""
    from spyre_rules.executor.runtime import recent_kernels
    from spyre_rules.program.op_spec import LoopSpec

    torch._dynamo.reset()
    before = max((k.serial for k in recent_kernels()), default=-1)
    with config.patch(fallback="error", span_check="error", max_span_bytes=limit,
                      ignore_span_overflow_hints=False), torch.no_grad():
        out = torch.compile(fn, backend="spyre_rules")(x, y)
    loops = [item.count for k in recent_kernels() if k.serial > before
             for item in k.specs if isinstance(item, LoopSpec)]
    return out, loops


@pytest.mark.parametrize("fn", [add_of_hoisted_repeat, amax_behind_hoisted_repeat])
@pytest.mark.parametrize("dtype,limit", [(torch.float32, 64 * KiB), (torch.float16, 32 * KiB)])
def test_reader_of_a_closed_group_runs_on_the_program(fn, dtype, limit):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, 2, 128, 128, generator=g).to(dtype)
    y = torch.randn(1, 4, 128, 128, generator=g).to(dtype)
    out, loops = _groups_of(fn, x, y, limit)
    expected = fn(x, y)
    out = out if isinstance(out, tuple) else (out,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for got, want in zip(out, expected):
        assert got.dtype == want.dtype and torch.equal(got, want)
    assert 4 in loops  # the reader's loop: one head per tile
