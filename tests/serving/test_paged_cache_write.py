"""A paged KV cache's write on the program: the new tokens' keys go into their slots of
the flat cache with ``index_copy_`` (fallback='error', no host step), bitwise equal to
eager, call after call; only the written rows are copied to the caller's tensor."""

from __future__ import annotations

from unittest.mock import patch

import pytest
import torch

from spyre_rules import config
from spyre_rules.executor import runtime
from spyre_rules.executor.runtime import recent_kernels

BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM = 32, 16, 2, 64


def write_cache(flat_cache, slots, new):
    flat_cache.index_copy_(0, slots, new)
    return flat_cache.sum(0)  # a reader after the write sees the new rows


def test_paged_cache_write_runs_on_the_program_and_copies_back_only_written_rows():
    torch.manual_seed(0)
    cache = torch.randn(BLOCKS * BLOCK_SIZE, KV_HEADS, HEAD_DIM).half()
    expected_cache = cache.clone()
    mirrored = []
    original = runtime.mirror_writes

    def counting(memory, p, tensor, written, who):
        before = tensor.clone()
        original(memory, p, tensor, written, who)
        mirrored.append(int((tensor != before).any(-1).any(-1).sum()))

    torch._dynamo.reset()
    before = max((k.serial for k in recent_kernels()), default=-1)
    with torch.no_grad(), config.patch(fallback="error"), \
            patch.object(runtime, "mirror_writes", counting):
        compiled = torch.compile(write_cache, backend="spyre_rules", fullgraph=True)
        for step, slots in enumerate(([5, 300], [6, 301], [40, 7])):
            slots = torch.tensor(slots)
            new = torch.randn(2, KV_HEADS, HEAD_DIM).half()
            got = compiled(cache, slots, new)
            want = write_cache(expected_cache, slots, new)
            assert torch.equal(cache, expected_cache), step
            torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-2)
    writers = [k for k in recent_kernels() if k.serial > before and k.write_through]
    assert [k.calls for k in writers] == [3]
    assert mirrored == [2, 2, 2]  # two rows per step reach the host tensor


def test_a_host_step_after_an_in_place_write_of_an_input_reads_the_callers_tensor():
    # The write copies its elements to the caller's tensor, so that tensor is current:
    # the host step (cummax) reads it as it is, and the write after it still reaches it.
    def fn(cache, slots, new):
        cache.index_copy_(0, slots, new)
        peak = torch.cummax(cache, 0).values
        cache.index_copy_(0, slots + 1, new * 2)
        return peak * 2

    torch.manual_seed(1)
    cache, slots, new = torch.randn(16, 8), torch.tensor([2, 9]), torch.randn(2, 8)
    expected_cache = cache.clone()
    want = fn(expected_cache, slots, new)
    torch._dynamo.reset()
    with torch.no_grad(), pytest.warns(UserWarning, match="cummax"):
        got = torch.compile(fn, backend="spyre_rules", fullgraph=True)(cache, slots, new)
    assert torch.equal(got, want)
    assert torch.equal(cache, expected_cache)
