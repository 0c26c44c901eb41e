"""A hoisted buffer that a run later writes in place is not ready before that run.

JetMoE's experts sum their tokens into zeros (``zeros.index_add(0, idx, out)``) and add a
bias.  The zeros, independent of the run open when they are visited, are hoisted before
its loop; the index_add then writes them in place inside a later run.  Grouping let the
bias add run before that run too ("reads nothing computed since the run began, except
hoisted ops"), and the program added the bias to the bare zeros: a wrong result at
64 KiB (18.3 off here, on 3402992).  A hoisted op's buffer now counts as ready only when
no later op writes it (engine/grouping.py ``independent``).
"""

from __future__ import annotations

import torch

from tiling_helpers import run_spyre
from spyre_rules import config


def routed_sum(x, r, idx, gates, bias):
    a = x.exp()                              # opens a run (128 KiB at 64 KiB)
    out = torch.zeros(128, 128)              # independent of that run: hoisted before it
    routed = (r * gates[:, None]).t()        # another split: a new run
    summed = out.index_add(0, idx, routed)   # writes the zeros in place inside that run
    return a, summed + bias                  # reads them after it


def test_a_reader_of_zeros_written_in_place_waits_for_the_write():
    g = torch.Generator().manual_seed(0)
    inputs = (torch.randn(256, 128, generator=g), torch.randn(128, 256, generator=g),
              torch.randint(0, 128, (256,), generator=g), torch.randn(128, generator=g),
              torch.randn(128, generator=g))
    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=65536):
        compiled = run_spyre(routed_sum, *inputs)
    for out, ref in zip(compiled.output, routed_sum(*inputs)):
        assert torch.equal(out, ref)
    # the add is the last kernel: after the in-place write's loop
    assert [spec.op for spec in compiled.kernels[-1].specs] == ["add"]
