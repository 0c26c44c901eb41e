"""Attention over one fused q/k/v projection at a sequence length that is no multiple of a
stick (issue 41: gpt_neox and bloom at 77 tokens, hidden 256, 8 heads).

* GPT-NeoX's values are read by ``probs @ v`` straight out of the projection ``[1, S, 3H]``,
  the tokens (the product's reduction dim k) outermost: one token spans a whole projection
  row, 1.5 KiB here.  The probabilities are stuck on k, so a reduction tile of k must hold
  whole sticks of 32 tokens, far more than the limit allows.  Before: ``Cannot auto-tile
  buf.. no combined split among host dims [1, 4, 2] ... (the last: a reduction-controlled
  input span ...)``.  Now the values are read through an exact same-stick copy with the
  tokens just outside the stick (backend/outer_order.py, batchmatmul operands too).
* Bloom's scores ``q @ k^T`` read q and k both from the projection: k^T needs a copy stuck
  on the tokens, and that copy served q's loads too, stuck on its rows m, so a tile of m
  had to hold whole sticks of tokens.  Before: ``... no combined split among host dims
  [0, 3, 1] ... (the last: writing tile ... into its full output buffer ...)``.  Now k^T
  is copied into a buffer of its own when it is lowered (backend/matmul.py _own_buffers).

Untiled both programs are unchanged; tiled each equals the untiled program bitwise (no
reduction dim is tiled: every sum runs in the same order) and eager within float32
summation order (docs/accumulation.md).
"""

from __future__ import annotations

import json

import torch

from spyre_helpers import run_spyre

from spyre_rules import config

S, HEADS, HEAD_DIM = 40, 4, 32
HIDDEN = HEADS * HEAD_DIM
LIMIT = 16 * 1024


def _neox_attention(qkv):
    q, k, v = qkv.view(1, S, HEADS, 3 * HEAD_DIM).transpose(1, 2).chunk(3, dim=-1)
    return torch.nn.functional.scaled_dot_product_attention(q.sin(), k.cos(), v)


def _bloom_scores(qkv, alibi):
    fused = qkv.view(1, S, HEADS, 3, HEAD_DIM)
    q = fused[..., 0, :].transpose(1, 2).reshape(HEADS, S, HEAD_DIM)
    k = fused[..., 1, :].transpose(1, 2).reshape(HEADS, S, HEAD_DIM).transpose(-1, -2)
    return alibi.baddbmm(q, k, beta=1.0, alpha=HEAD_DIM ** -0.5)


def _projection(x):
    # a computed buffer (a graph input's layout is chosen for its readers:
    # backend/input_layouts.py), with no reduction that tiling could reorder
    return x.sin()


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(1, S, 3 * HIDDEN, generator=g), torch.randn(HEADS, 1, S, generator=g)


def _run(fn, tmp_path, *inputs, tiled):
    settings = dict(max_span_bytes=LIMIT, ignore_span_overflow_hints=False,
                    span_check="error") if tiled else {}
    with config.patch(dump_dir=str(tmp_path), **settings):
        out = run_spyre(fn, *inputs).output
    records = json.loads((tmp_path / "graph_0" / "plan.json").read_text())["ops"]
    return out, {r["op"]: (r["kind"], r["levels"]) for r in records}, records


def test_neox_values_are_read_through_a_token_ordered_copy(tmp_path):
    x, _ = _inputs()

    def fn(x):
        return _neox_attention(_projection(x))

    tiled, plans, records = _run(fn, tmp_path / "tiled", x, tiled=True)
    untiled, untiled_plans, _ = _run(fn, tmp_path / "untiled", x, tiled=False)
    assert torch.equal(tiled, untiled)
    torch.testing.assert_close(tiled, fn(x), atol=1e-6, rtol=1e-5)
    # the projection [1, 40, 384] is [40 tokens, 12 sticks, 32]; its copy read by
    # probs @ v is [12 sticks, 40 tokens, 32]: one token one stick
    layouts = {r["op"]: r["layout"]["device_size"] for r in records}
    assert (layouts["buf0"], layouts["buf21"]) == ([40, 12, 1, 32], [1, 12, 40, 32])
    assert plans["buf21"] == ("ReStickifyStageHBM", [[1, 4], [2, 4]])
    assert plans["buf17"] == ("reduction:batchmatmul", [[1, 4]])    # heads only, k whole
    assert all(levels for kind, levels in plans.values()), plans
    assert "ReStickifyStageHBM" not in {kind for kind, _ in untiled_plans.values()}


def test_bloom_keys_get_a_buffer_of_their_own(tmp_path):
    x, alibi = _inputs()

    def fn(x, alibi):
        return _bloom_scores(_projection(x), alibi)

    tiled, plans, records = _run(fn, tmp_path / "tiled", x, alibi, tiled=True)
    untiled, untiled_plans, _ = _run(fn, tmp_path / "untiled", x, alibi, tiled=False)
    assert torch.equal(tiled, untiled)
    torch.testing.assert_close(tiled, fn(x, alibi), atol=1e-6, rtol=1e-5)
    # buf1 is k^T's own copy [4, 32, 40] stuck on the keys (through the projection's
    # restickify buf4 and its stage; since the mamba and sizes merges it needs no stage of
    # its own, one copy fewer); the scores read q from the projection as it is
    assert plans == {
        "buf0": ("pointwise", [[1, 4], [2, 4]]),
        "buf6": ("copy", [[1, 4], [2, 4]]),
        "buf5": ("ReStickifyStageHBM", [[1, 4], [2, 4]]),
        "buf4": ("ReStickifyOpHBM", [[2, 6]]),
        "buf1": ("pointwise", [[0, 4]]),
        "buf2": ("reduction:batchmatmul", [[0, 2], [1, 4]]),
        "buf3": ("pointwise", [[0, 2], [1, 4]]),
    }, plans
    # untiled nothing changes: one restickify of the projection serves both reads
    assert untiled_plans == {"buf0": ("pointwise", []), "buf3": ("ReStickifyOpHBM", []),
                             "buf1": ("reduction:batchmatmul", []),
                             "buf2": ("pointwise", [])}, untiled_plans
