"""A read that keeps its stick but has the dim the op must split finely outermost
(backend/outer_order.py).

qwen3_next's ``k_beta = key * beta.unsqueeze(-1)``: the repeated key ``[1, 128, 16, 2, 128]``
fp32 is read transposed with the tokens outermost (16 KiB a token: at most 4 tokens a tile
at 64 KiB), while ``beta`` ``[1, 32, 128]`` is stuck on the tokens (whole sticks of 32).
Before, no split was legal (``Cannot auto-tile buf2 ... no combined split among host dims
[1, 2, 3]``).  The key is now read through an exact same-stick copy with the tokens just
outside the stick; untiled nothing changes.
"""

from __future__ import annotations

import json

import torch

from spyre_helpers import run_spyre

from spyre_rules import config


def _k_beta(key, beta):
    k = key.sigmoid().repeat_interleave(2, dim=2).transpose(1, 2)
    return k * beta.unsqueeze(-1)


def _auto_tiled_records(tmp_path, fn, *args):
    """``fn(*args)`` compiled at 64 KiB under automatic tiling: bitwise equal to eager;
    returns the plan's op records."""
    with config.patch(max_span_bytes=64 * 1024, ignore_span_overflow_hints=False,
                      span_check="error", fallback="error", dump_dir=str(tmp_path)):
        compiled = run_spyre(fn, *args)
    assert torch.equal(compiled.output, fn(*args))
    return json.loads((tmp_path / "graph_0" / "plan.json").read_text())["ops"]


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(1, 128, 16, 128, generator=g), torch.randn(1, 32, 128, generator=g)


def test_the_outermost_token_read_goes_through_a_reordered_copy(tmp_path):
    records = _auto_tiled_records(tmp_path, _k_beta, *_inputs())
    plans = {r["op"]: (r["kind"], r["levels"]) for r in records}
    assert plans == {"buf0": ("pointwise", [[1, 32]]),
                     "buf1": ("pointwise", [[1, 32], [2, 16], [3, 2]]),
                     "buf3": ("ReStickifyStageHBM", [[1, 32], [2, 16], [3, 2]]),
                     "buf2": ("pointwise", [[1, 32]])}, plans
    layouts = {r["op"]: r["layout"]["device_size"] for r in records}
    assert layouts["buf3"] == [1, 16, 2, 4, 128, 32]   # the tokens just outside the stick


def test_untiled_the_key_is_read_as_it_is(tmp_path):
    key, beta = _inputs()
    with config.patch(dump_dir=str(tmp_path)):
        compiled = run_spyre(_k_beta, key, beta)
    assert torch.equal(compiled.output, _k_beta(key, beta))
    records = json.loads((tmp_path / "graph_0" / "plan.json").read_text())["ops"]
    assert not [r for r in records if r["kind"].startswith("ReStickify")]


# Gemma 4's full-attention layers (head dim 512): ``softmax(q k^T) @ repeat_kv(v)`` where
# ``v`` is the value projection viewed ``[1, S, KV, D]`` and transposed.  The product
# reads ``v`` as laid out, the keys outermost: one key spans both kv heads (4 KiB), and
# the probabilities are stuck on the keys, so a split of the keys holds at least one stick
# of 32 (128 KiB of ``v``).  Before, no split fitted (``Cannot auto-tile buf1 ... no combined
# split among host dims [1, 2, 5, 3]``); ``v`` is now read through a copy with the keys
# just outside the stick (one key one stick row).

def _repeat_kv(x, n):
    b, h, s, d = x.shape
    return x[:, :, None].expand(b, h, n, s, d).reshape(b, h * n, s, d)


def _probabilities_times_values(p, v):
    return torch.matmul(p, _repeat_kv(v.sigmoid().transpose(1, 2), 2))


def _attention_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(1, 4, 128, 128, generator=g).softmax(-1),
            torch.randn(1, 128, 2, 512, generator=g))


def test_a_product_reads_its_values_through_a_reordered_copy(tmp_path):
    # no reduction level: each output tile is the untiled program's sum, bit for bit
    records = _auto_tiled_records(tmp_path, _probabilities_times_values, *_attention_inputs())
    plans = {r["op"]: (r["kind"], r["levels"]) for r in records}
    assert plans == {"buf0": ("pointwise", [[1, 8], [2, 2], [3, 4]]),
                     "buf2": ("ReStickifyStageHBM", [[1, 8], [2, 2], [3, 4]]),
                     "buf1": ("reduction:batchmatmul", [[1, 2], [2, 2], [3, 4], [4, 4]])}, plans
    layouts = {r["op"]: r["layout"]["device_size"] for r in records}
    assert layouts["buf2"] == [1, 2, 16, 128, 32]   # the keys just outside the stick
