"""A paged decode step on the program under fallback='error' and span_check='error': the new
tokens' keys and values written into the flat caches with index_copy_ (in place, no host
step), then ``paged_decode_attention`` over the caches' pages.  Untiled and at 16 KiB (the caches are 32 KiB each, the gathered pages 32 KiB): the caches equal eager's
bitwise after every step and the output equals eager's within one rounding of float32
sums in another order; at 16 KiB the writes are tiled over heads and each gather inside
its key loop."""

from __future__ import annotations

import json

import pytest
import torch

from spyre_rules import config, paged_decode_attention

BLOCKS, BLOCK, KV_HEADS, DIM = 8, 16, 2, 64


def step(q, k_flat, v_flat, slots, k_new, v_new, table, lens):
    k_flat.index_copy_(0, slots, k_new)
    v_flat.index_copy_(0, slots, v_new)
    pools = (c.view(-1, BLOCK, KV_HEADS, DIM) for c in (k_flat, v_flat))
    return paged_decode_attention(q, *pools, table, lens)


def _caches():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(BLOCKS * BLOCK, KV_HEADS, DIM, generator=g).half() for _ in range(2)]


def _step_inputs(table, position, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 4, DIM, generator=g).half()
    new = [torch.randn(2, KV_HEADS, DIM, generator=g).half() for _ in range(2)]
    page, offset = divmod(position, BLOCK)
    slots = table[:, page] * BLOCK + offset
    return q, slots, new, torch.tensor([position + 1, position - 20])


@pytest.mark.parametrize("limit", [None, 16384])  # 64 KiB: test_paged_attention_tiling.py
def test_paged_decode_steps_write_and_attend_on_the_program(tmp_path, limit):
    table = torch.tensor([[5, 0, 7, 2], [3, 6, 1, 4]])
    want_k, want_v = _caches()
    got_k, got_v = _caches()
    settings = dict(fallback="error", span_check="error", dump_dir=str(tmp_path))
    if limit:
        settings.update(max_span_bytes=limit, ignore_span_overflow_hints=False)
    torch._dynamo.reset()
    with torch.no_grad(), config.patch(**settings):
        compiled = torch.compile(step, backend="spyre_rules", fullgraph=True)
        for position, seed in ((40, 1), (41, 2)):
            q, slots, (k_new, v_new), lens = _step_inputs(table, position, seed)
            want = step(q, want_k, want_v, slots, k_new, v_new, table, lens)
            got = compiled(q, got_k, got_v, slots, k_new, v_new, table, lens)
            assert torch.equal(got_k, want_k) and torch.equal(got_v, want_v), position
            torch.testing.assert_close(got, want)
    graphs = sorted(tmp_path.glob("graph_*/plan.json"))
    assert len(graphs) == 1  # compiled once, run for both steps
    plan = json.loads(graphs[0].read_text())
    assert plan["host_steps"] in ({}, [])
    records = plan["ops"]
    assert all(r["span_check"]["status"] == "fits" for r in records if r.get("span_check"))
    levels = {r["op"]: r["levels"] for r in records}
    writes = [r["op"] for r in records if "index_put_" in r["description"]]
    gathers = [r["op"] for r in records if "index.Tensor" in r["description"]]
    if limit == 16384:
        assert [levels[w] for w in writes] == [[[1, 2]], [[1, 2]]]  # over heads, in place
        assert all(levels[g][0][0] == 1 for g in gathers)  # over the key blocks
    elif limit is None:
        assert all(levels[op] == [] for op in writes + gathers)
