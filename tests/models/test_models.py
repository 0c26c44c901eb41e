"""Transformer models on the Spyre program (fallback='error'): GPT-2, Llama, BERT
(2 layers, hidden 64, 4 heads, sequence 16), eager and SDPA attention, fp32 and
fp16 -- equal to eager, every op on the program (no host step), every access in
bounds and within the span limit; the same with the MLP block of one layer tiled
on the sequence dim by a manual spyre_hint."""

from __future__ import annotations

import pytest
import torch

import model_zoo
from hinting import hint_sequence_dim, mlp_block
from model_helpers import TOLERANCE, compile_model
from spyre_rules.program.op_spec import LoopSpec

pytest.importorskip("transformers")

CASES = [(name, attn, dtype) for name in ("gpt2", "llama", "bert")
         for attn in ("eager", "sdpa") for dtype in (torch.float32, torch.float16)]


def _check_on_program(run, dtype):
    assert run.output.dtype == dtype
    assert run.max_error <= TOLERANCE[dtype]
    assert run.host_steps == []
    assert run.messages == []  # no host step, no eager fallback, no span warning
    assert len(run.plans) == 1
    # every generated access fits the span limit (ops folded into another kernel
    # have no access of their own)
    statuses = {r["span_check"]["status"] for r in run.plans[0]["ops"]}
    assert "fits" in statuses and statuses <= {"fits", "no generated access"}
    assert run.out_of_bounds_accesses() == []
    assert run.kernels and all(k.calls == 1 for k in run.kernels)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{str(c[2])[6:]}")
def test_model_runs_on_the_spyre_program(case):
    name, attn, dtype = case
    model = model_zoo.LastHidden(model_zoo.build(name, attn, dtype))
    run = compile_model(model, (model_zoo.input_ids(),), fallback="error")
    _check_on_program(run, dtype)


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert"])
def test_model_with_a_hinted_mlp_block_runs_on_the_spyre_program(name):
    base = model_zoo.build(name, "sdpa", torch.float32)
    hint_sequence_dim(*mlp_block(base, name), model_zoo.SEQ, 2)
    run = compile_model(model_zoo.LastHidden(base), (model_zoo.input_ids(),), fallback="error")
    _check_on_program(run, torch.float32)
    loops = [item for k in run.kernels for item in k.specs if isinstance(item, LoopSpec)]
    assert loops and all(int(loop.count) == 2 for loop in loops)
