"""A matmul operand read through a view whose heads start inside a stick is copied under tiling.

Multi-head latent attention (DeepSeek-V2/V3) splits each head of one projection into a
key part and a value part: 48 columns a head, the values at column 16 of each, so the
values of head ``h`` start ``48 * h + 16`` columns into the projection's rows, a stick
and a half (float32: 32 elements a stick) per head.  The probabilities times values
spans one head per tile at 64 KiB, and a tile of one head would read its values at
another place in the stick than the first tile: legality refused every split of the
heads and the sweep's tiny DeepSeek models were refused.  Under automatic tiling the
lowering copies such an operand into a buffer of its own (``matmul._stick_aligned``);
untiled it is read in place, as before.
"""

from __future__ import annotations

import torch

from spyre_helpers import run_spyre

import spyre_rules
from spyre_rules import config
from spyre_rules.engine.api import plan_graph

KiB = 1024


def probs_times_latent_values(p, kv):
    values = kv.view(1, 128, 4, 48)[..., 16:].transpose(1, 2)  # [1, 4, 128, 32]
    return p @ values


def aligned_values(p, kv):
    values = kv.view(1, 128, 3, 64)[..., 32:].transpose(1, 2)  # heads 2 sticks apart
    return p[:, :3] @ values


def _inputs():
    g = torch.Generator().manual_seed(41)
    return torch.randn(1, 4, 128, 128, generator=g), torch.randn(1, 128, 192, generator=g)


def _plans(fn, automatic):
    with config.patch(max_span_bytes=64 * KiB, ignore_span_overflow_hints=not automatic):
        ops = spyre_rules.capture_operations(fn, *_inputs())
        return [(op.get_name(), None if d.plan is None else
                 [(lv.selected_host_dim, lv.split_count) for lv in d.plan.levels],
                 None if d.error is None else str(d.error).split(":")[0])
                for op, d in zip(ops, plan_graph(ops))]


def test_tiling_copies_the_misaligned_values_and_splits_the_heads():
    # the copy tiles its rows (its read of the projection spans 96 KiB), the product
    # one head a tile (one head of the probabilities is 64 KiB)
    assert _plans(probs_times_latent_values, automatic=True) == [
        ("buf0", [(2, 2)], None), ("buf1", [(1, 4)], None)]


def test_untiled_reads_the_view_in_place():
    # the one product: its plan would be refused, it is not asked for untiled
    assert [name for name, _, _ in _plans(probs_times_latent_values, automatic=False)] == ["buf0"]


def test_heads_on_whole_sticks_are_not_copied():
    assert [name for name, _, _ in _plans(aligned_values, automatic=True)] == ["buf0"]


def test_tiled_equals_eager():
    p, kv = _inputs()
    with config.patch(max_span_bytes=64 * KiB, ignore_span_overflow_hints=False):
        out = run_spyre(probs_times_latent_values, p, kv).output
    assert torch.equal(out, probs_times_latent_values(p, kv))
