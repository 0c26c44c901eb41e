"""``spyre_rules.softmax_values``: softmax attention's value sum as one reduction over the keys,
and its reduction level (flash-decoding's online-softmax accumulator: acc, max, sum).

Eagerly it is ``softmax(scores) @ values`` in float32; on the program, untiled and with its key
range tiled at a small limit (a reduction level whose accumulator carries the running max, sum and
value sum across key tiles), it equals eager within float32 rounding of another order
(docs/accumulation.md), including key tiles whose keys are all masked (first, middle and last)
and a row whose keys are all masked (0 / 0, NaN, as eager's softmax)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from spyre_rules import config
from spyre_rules.backend.softmax_values import softmax_values
from spyre_rules.executor import reductions


def _inputs(dtype=torch.float16, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(2, 3, 16, 8, generator=g) * 4   # (batch, heads, key blocks, pages)
    scores[0, 0, :8] = -math.inf                        # the first key blocks all masked
    scores[0, 1, 6:12] = -math.inf                      # middle blocks
    scores[1, 2, 8:] = -math.inf                        # the last blocks
    scores[1, 1] = -math.inf                            # every key masked: 0 / 0
    values = torch.randn(2, 3, 16, 8, 64, generator=g).to(dtype)
    return scores, values


def _fn(scores, values):
    return softmax_values(scores, values, 2)


def _reference(scores, values):
    p = torch.softmax(scores.double().flatten(-2), -1)
    return (p.unsqueeze(-2) @ values.double().flatten(-3, -2)).squeeze(-2)


def test_eager_is_softmax_times_values():
    scores, values = _inputs()
    got = _fn(scores, values)
    assert got.dtype == torch.float32
    assert torch.isnan(got[1, 1]).all()
    torch.testing.assert_close(got, _reference(scores, values).float(), equal_nan=True)


def test_chunks_merge_to_the_whole_reduction():
    # the executor's partial (acc, max, sum) of two halves merged equals the whole range's
    scores, values = _inputs(dtype=torch.float32)
    s = scores.reshape(6, 128)
    v = values.reshape(6, 128, 64).transpose(1, 2)             # (rows, d, keys)
    s = s[:, None, :].expand(6, 64, 128)
    whole = reductions.reduce_chunk("softmax_values", [s, v], [6, 64, 128], 1, 0)
    halves = [reductions.reduce_chunk("softmax_values", [s[..., i:i + 64], v[..., i:i + 64]],
                                      [6, 64, 64], 1, i) for i in (0, 64)]
    merged = reductions.combine("softmax_values", halves[0], halves[1])
    torch.testing.assert_close(reductions.finish("softmax_values", merged),
                               reductions.finish("softmax_values", whole), equal_nan=True)
    assert torch.equal(merged[1], whole[1])                    # the max is exact


@pytest.mark.parametrize("limit", [None, 16384])
def test_on_the_program_untiled_and_with_its_keys_tiled(tmp_path, limit):
    scores, values = _inputs()
    want = _fn(scores, values)
    torch._dynamo.reset()
    settings = dict(fallback="error", span_check="error", dump_dir=str(tmp_path))
    if limit:
        settings.update(max_span_bytes=limit, ignore_span_overflow_hints=False)
    with torch.no_grad(), config.patch(**settings):
        got = torch.compile(_fn, backend="spyre_rules", fullgraph=True)(scores, values)
    torch.testing.assert_close(got, want, equal_nan=True)
    records = json.loads(next(tmp_path.glob("graph_*/plan.json")).read_text())["ops"]
    assert all(r["span_check"]["status"] == "fits" for r in records if r.get("span_check"))
    (op,) = [r for r in records if "softmax_values" in r["description"]]
    if limit is None:
        assert op["levels"] == []
        return
    # the 64 KiB of values overflow: heads by 3, inside them the key blocks by 2, a reduction
    # level (its first tile all masked in row (0, 0), its last in row (1, 2))
    assert op["levels"] == [[1, 3], [0, 2]]
    assert op["loop"]["loop_tiled_reduction_dims"] == [[], [0]]
    acc = op["accumulator"]
    assert acc["combine"] == "online_softmax_combine"
    assert [(f["role"], f["identity"]) for f in acc["fields"]] == [
        ("acc", 0), ("max", -math.inf), ("sum", 0)]
