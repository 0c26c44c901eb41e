"""Transformer models on the Spyre program (fallback='error'): GPT-2, Llama, BERT
(2 layers, hidden 64, 4 heads, sequence 16), eager and SDPA attention, fp32 and
fp16 -- equal to eager, every op on the program (no host step), every access in
bounds and within the span limit; the same with one decoder layer (attention,
rotary embeddings and MLP) tiled on the sequence dim by a manual spyre_hint inside
the model's forward."""

from __future__ import annotations

import pytest
import torch

import model_zoo
from hinting import decoder_layer, hint_sequence_dim
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


#: (model, attention, dtype, tiles, how the layer input is named) -> top-level loops.
#: Loop fission: the scores read every key, so the key and value projections run
#: in a loop of their own before the scores' loop; a norm's reductions close a loop
#: (their readers start the next).
HINTED_LAYER_CASES = {
    ("gpt2", "eager", torch.float32, 2, "named_dims"): 4,
    ("llama", "eager", torch.float32, 2, "name_tensor_dims"): 13,
    ("bert", "eager", torch.float32, 2, "named_dims"): 9,
    ("gpt2", "sdpa", torch.float16, 4, "named_dims"): 9,
}


@pytest.mark.parametrize("case", list(HINTED_LAYER_CASES),
                         ids=lambda c: f"{c[0]}-{c[1]}-{str(c[2])[6:]}-by{c[3]}-{c[4]}")
def test_model_with_a_hinted_decoder_layer_runs_on_the_spyre_program(case, fresh_dims):
    name, attn, dtype, count, naming = case
    base = model_zoo.build(name, attn, dtype)
    hint_sequence_dim(decoder_layer(base, name), model_zoo.SEQ, count, naming)
    run = compile_model(model_zoo.LastHidden(base), (model_zoo.input_ids(),), fallback="error")
    _check_on_program(run, dtype)
    loops = [item for k in run.kernels for item in k.specs if isinstance(item, LoopSpec)]
    assert [int(loop.count) for loop in loops] == [count] * HINTED_LAYER_CASES[case]
