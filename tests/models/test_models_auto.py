"""Transformer models with automatic span-overflow tiling (issue 13): GPT-2, Llama,
BERT of the model tests, each at max_span_bytes 16 KiB and 64 KiB -- no
Unsupported, equal to eager, no host step, the span check clean on every access
(the embeddings' gathered reads included), the independent verifier agreeing at
every loop iteration, and the plan tiles what overflows.

Each case recompiles the graph ``test_models.py`` traced (``model_helpers.traced``)
with automatic tiling on, both attention implementations and dtypes among them: at
16 KiB the fp32 weights of 64 x 128 and wider overflow (restickify + matmul tile),
as does the fp32 token embedding's table read (split along the hidden dim);
fp16 halves every span (GPT-2's 64 x 192 attention weight still tiles).  At 64 KiB
every access of these models fits: automatic tiling adds no loop and changes no
result.
"""

from __future__ import annotations

import pytest
import torch

from model_helpers import TOLERANCE, traced

from spyre_rules.program.op_spec import LoopSpec

pytest.importorskip("transformers")

KiB = 1024

#: (model, attention, dtype, max_span_bytes) -> how many ops the plan tiles
#: (a loop level of their own), and how many embeddings' table reads it tiles.
#: A tiled Reduction / BMM opens a run its consumers join tile by tile (GPT-2's
#: fused qkv addmm: the attention after it shares its loop), so more ops are tiled
#: than overflow on their own.
CASES = {
    ("gpt2", "sdpa", torch.float32, 16 * KiB): (38, 1),
    ("llama", "sdpa", torch.float32, 16 * KiB): (16, 1),
    ("bert", "sdpa", torch.float32, 16 * KiB): (13, 1),
    ("gpt2", "eager", torch.float16, 16 * KiB): (4, 0),
    ("gpt2", "eager", torch.float32, 64 * KiB): (0, 0),
    ("llama", "eager", torch.float16, 64 * KiB): (0, 0),
    ("bert", "eager", torch.float32, 64 * KiB): (0, 0),
}


def _case_id(case) -> str:
    name, attn, dtype, limit = case
    return f"{name}-{attn}-{str(dtype)[6:]}-{limit // KiB}KiB"


@pytest.fixture(scope="module", params=list(CASES), ids=_case_id)
def auto_run(request):
    name, attn, dtype, limit = request.param
    run = traced(name, attn, dtype).compile(max_span_bytes=limit,
                                            ignore_span_overflow_hints=False)
    return request.param, run


def _ops(run):
    (plan,) = run.plans
    return plan["ops"]


def test_no_unsupported_and_equal_to_eager(auto_run):
    (_, _, dtype, _), run = auto_run
    assert [r["op"] for r in _ops(run) if r["decision"] == "unsupported"] == []
    assert run.output.dtype == dtype
    assert run.max_error <= TOLERANCE[dtype]
    assert run.host_steps == []
    assert run.accesses and run.out_of_bounds_accesses() == []
    assert run.kernels and all(k.calls == 1 for k in run.kernels)


def test_span_check_clean_on_every_access(auto_run):
    case, run = auto_run
    limit, (_, gathered) = case[3], CASES[case]
    ops = _ops(run)
    statuses = {r["span_check"]["status"] for r in ops}
    assert statuses <= {"fits", "no generated access"}
    assert run.messages == []
    assert max(r["span_check"].get("max_span_bytes", 0) for r in ops
               if r["span_check"]["status"] == "fits") <= limit
    # the embeddings whose table read overflowed untiled are planned along the hidden dim
    embeddings = [r for r in ops if r["decision"] == "plan"
                  and any(s["rule"] == "gathered_span" for s in r["rule_trace"])]
    assert len(embeddings) == gathered
    # and so says the verifier, at every loop iteration, the gathered reads included
    assert run.limit == limit
    assert run.direct_accesses_over_the_limit() == []
    assert run.indirect_accesses_over_the_limit() == []


def test_the_plan_tiles_what_overflows(auto_run):
    case, run = auto_run
    tiled = [r for r in _ops(run) if r["levels"]]
    assert len(tiled) == CASES[case][0]
    # planned, or an untiled reader that joined a run (Llama's RMSNorm after the
    # embedding: its pow and mean share the table read's hidden-dim loop)
    assert all(r["decision"] == "plan" or r["rule"] == "grouping.untiled_reader_to_open_run"
               for r in tiled)
    loops = run.loop_counts()
    assert bool(loops) == bool(tiled)
    # a level whose last tile is shorter runs its whole tiles, then a peeled last one
    # (codegen/tail.py: gpt2 fp16 at 16 KiB splits 2 ways with a shorter last tile: two
    # loops of one trip each);
    # every tiled loop runs more than one tile in all
    trips: list[int] = []
    for item in (item for k in run.kernels for item in k.specs if isinstance(item, LoopSpec)):
        if int(item.first) > 0 and trips:
            trips[-1] += int(item.count)  # the peeled last tile of the loop before
        else:
            trips.append(int(item.count))
    assert all(count > 1 for count in trips)
