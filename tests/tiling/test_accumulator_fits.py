"""A reduction level's accumulator is planned like any other access (rules/planner.rules
validation accumulator_fits): one output tile in the accumulation dtype, fp32 for a half
output, so it spans twice the fp16 output tile.  Without the rule the planner accepted
c.sum(dim=1) on (1, 19, 128, 64) fp16 at 8 KiB with 2 output tiles, and the span check
found the accumulator's 16 KiB write (the accepted plan was not span-safe)."""

from __future__ import annotations

import torch

import spyre_rules  # noqa: F401  (registers the backend)
from spyre_rules import config
from spyre_rules.facts.reduction_facts import accumulator_span_bytes


def _sum_over_the_run_dim(x):
    c = x + 1
    return c, c.sum(dim=1)


def test_the_sum_after_the_run_compiles_span_safe_and_equals_eager():
    x = torch.randn(1, 19, 128, 64).half()
    torch._dynamo.reset()
    with torch.no_grad(), config.patch(ignore_span_overflow_hints=False, max_span_bytes=8192,
                                       span_check="error", fallback="error"):
        out = torch.compile(_sum_over_the_run_dim, backend="spyre_rules", fullgraph=True)(x)
    torch._dynamo.reset()
    for got, want in zip(out, _sum_over_the_run_dim(x)):
        assert torch.equal(got, want)


def test_the_accumulator_span_follows_the_accumulation_dtype_and_the_output_tile():
    ops = spyre_rules.capture_operations(lambda x: x.sum(dim=1), torch.randn(1, 19, 128, 64).half())
    (op,) = ops
    # output (1, 128, 64): fp32 accumulator [2 sticks, 128 rows, 32]; a split of host dim 1
    # divides the rows; no reduction level, no accumulator
    assert accumulator_span_bytes(op, {1: 2, 3: 19}) == 2 * 64 * 32 * 4
    assert accumulator_span_bytes(op, {1: 4, 3: 19}) == 2 * 32 * 32 * 4
    assert accumulator_span_bytes(op, {1: 2}) == 0
    # 3 tiles of 128 rows: a remainder split (48, 48 and 32 rows) measures its whole tile
    assert accumulator_span_bytes(op, {1: 3, 3: 19}) == 2 * 48 * 32 * 4
    assert accumulator_span_bytes(op, {1: 127, 3: 19}) is None  # 127 tiles of 128: one empty
    (argmax,) = spyre_rules.capture_operations(lambda x: x.argmax(dim=1),
                                               torch.randn(1, 19, 128, 64).half())
    # the int64 index field is the widest: 16 per stick, [4 sticks, 32 rows, 16] x 8 bytes
    assert accumulator_span_bytes(argmax, {1: 4, 3: 19}) == 4 * 32 * 16 * 8
