"""A float32 load and one unary op stored: computed from the load's view of device
memory straight into the store's view when torch then gives every element the
general path's bits (executor/vector_loops.py), else through a contiguous buffer.

The inputs are values whose result differs between torch's vectorised loop and its
scalar tail on this machine (found at test time), so a layout that moved a tail
onto other elements would change bytes."""

from __future__ import annotations

import pytest
import torch
from both_paths import both_path_memories
from test_store_buffers import _spec

from spyre_rules.executor import DeviceMemory, run_op_spec, scratch, stickify, vector_loops

_OPS = {"sigmoid": torch.sigmoid, "exp2": torch.exp2, "exp": torch.exp, "tanh": torch.tanh,
        "relu": torch.relu}


def _tail_sensitive(op: str, count: int) -> torch.Tensor:
    """``count`` values, preferring those whose ``op`` differs alone (scalar tail) and
    in a long tensor (vectorised body)."""
    pool = torch.randn(4096, generator=torch.Generator().manual_seed(11)) * 30
    fn = _OPS[op]
    vector = fn(pool).view(torch.int32)
    scalar = torch.stack([fn(pool[i:i + 1])[0] for i in range(len(pool))]).view(torch.int32)
    differ = pool[vector != scalar]
    chosen = differ if len(differ) else pool
    return chosen.repeat(-(-count // len(chosen)))[:count]


@pytest.fixture(params=[1, 2, 3], ids=["1-thread", "2-threads", "3-threads"])
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


# (rows, width) -> thread counts whose per-thread loop ranges end in a scalar tail.
# 5 x 6560 is 32,800 elements: two ranges of 16,400 = 512.5 vector steps each (the two
# tails hold the same elements in both orders: the middle of an odd grid stays put
# under its transpose); 5 x 13408 is 67,040: three ranges of 22,347, whose tails are
# other elements in memory order than in logical order.
_TAILED = {(5, 6560): {2, 3}, (5, 13408): {2, 3}, (64, 1024): set(), (5, 128): set()}


@pytest.mark.parametrize("shape", list(_TAILED))
@pytest.mark.parametrize("op", list(_OPS))
def test_unary_from_a_view_matches_the_general_path(op, shape, threads):
    rows, width = shape
    x = _tail_sensitive(op, rows * width).reshape(rows, width)
    spec, layout = _spec(op, rows, width)
    size = layout.size_in_bytes
    general, structured = both_path_memories(spec, 2 * size, [(0, x, layout)])
    assert torch.equal(general, structured)
    through_buffer = [k for k in scratch._BUFFERS if k[0] == ("store", 1)]
    copied_load = [k for k in scratch._BUFFERS if k[0] == 0]
    assert bool(through_buffer) == bool(copied_load) == (threads in _TAILED[shape])


def test_a_padded_stick_is_not_a_dense_view():
    spec, layout = _spec("exp", 4, 96 + 16)
    memory = DeviceMemory(2 * layout.size_in_bytes)
    x = torch.randn(4, 112, generator=torch.Generator().manual_seed(2))
    memory.write_bytes(0, stickify(x, layout).reshape(-1).view(torch.uint8))
    scratch.clear()
    run_op_spec(spec, memory)
    assert [k for k in scratch._BUFFERS if k[0] == 0]  # copied: no single dense view


@pytest.mark.parametrize(("n", "threads", "expected"), [
    (32, 1, True), (48, 1, False), (32800, 1, True), (32800, 2, False), (65536, 2, True),
    (32768 * 3, 2, True), (32 * 3001, 4, False), (32 * 3000, 4, True), (32 * 4096, 4, True), (32767 * 32, 1, True),
])
def test_tail_free(n, threads, expected):
    assert vector_loops.tail_free(n, threads) is expected


@pytest.mark.parametrize(("shape", "stride", "other", "expected"), [
    ((4, 8), (8, 1), (8, 1), True),
    ((4, 8), (1, 4), (1, 4), True),          # a permutation of a contiguous block
    ((1024, 32, 32), (32, 32768, 1), (32, 32768, 1), True),
    ((4, 8), (8, 1), (1, 4), False),         # same shape, other order
    ((4, 8), (16, 1), (16, 1), False),       # gaps
    ((4, 8), (0, 1), (0, 1), False),         # broadcast: elements repeat
    ((1, 8), (99, 1), (5, 1), True),         # a unit dimension's stride is never used
])
def test_dense_same_layout(shape, stride, other, expected):
    base = torch.zeros(1 << 20)
    a = base.as_strided(shape, stride)
    b = base.as_strided(shape, other)
    assert vector_loops.dense_same_layout(a, b) is expected
