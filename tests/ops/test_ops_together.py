"""The ops of a GPT-2 / RoBERTa embedding block together, on one Spyre program."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ops_helpers import DTYPES, check, fresh_dims, named, randint, randn
from spyre_rules import config
from spyre_rules.hints import spyre_hint

V, S, H = 50, 16, 64


def gpt2_like(ids, wte, wpe, g, b):
    s = ids.shape[1]
    pos = torch.arange(s, dtype=torch.long)[None, :]
    h = wte[ids] + wpe[pos]  # token + position embedding (gathers)
    h = F.layer_norm(h, (h.shape[-1],), g, b)
    scores = h @ h.transpose(-1, -2) / 8.0
    causal = torch.ones(s, s, dtype=torch.bool).tril()
    scores = scores.masked_fill(~causal, torch.finfo(h.dtype).min)
    return h + F.gelu(h, approximate="tanh"), scores.softmax(-1)


def roberta_like(ids, wte, wpe):
    mask = ids.ne(1).int()
    pos = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + 1
    return F.embedding(ids, wte, padding_idx=1) + F.embedding(pos, wpe)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gpt2_like_embedding_block(dtype):
    compiled = check(gpt2_like, randint(0, V, 2, S), randn(V, H, dtype=dtype),
                     randn(S, H, dtype=dtype, seed=1), randn(H, dtype=dtype, seed=2),
                     randn(H, dtype=dtype, seed=3))
    ops = [s.op for s in compiled.op_specs()]
    assert ops.count("index") == 2  # both embedding reads are indirect OpSpecs
    assert sum(1 for s in compiled.op_specs() for a in s.args if a.indirect) == 2


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_roberta_like_position_ids(dtype):
    ids = randint(0, V, 2, S)
    ids[1, 10:] = 1  # padding
    check(roberta_like, ids, randn(V, H, dtype=dtype), randn(S + 2, H, dtype=dtype, seed=1))


def test_gpt2_like_block_with_the_sequence_dim_tiled():
    def fn(ids, wte, wpe, g, b):
        with spyre_hint(slices={"S": 4}):
            h = wte[ids] + wpe[:ids.shape[1]]
            return F.layer_norm(h, (h.shape[-1],), g, b) * 2

    fresh_dims()
    with config.patch(unroll_loops=False):
        compiled = check(fn, named(randint(0, V, 2, S), ["B", "S"]),
                         named(randn(V, H, dtype=torch.float16), ["V", "H"]),
                         named(randn(S, H, dtype=torch.float16, seed=1), ["S", "H"]),
                         randn(H, dtype=torch.float16, seed=2), randn(H, dtype=torch.float16, seed=3))
    assert [type(item).__name__ for item in compiled.kernels[0].specs] == ["LoopSpec"]
