"""Transformer models on the Spyre program (fallback='error'): GPT-2, Llama, BERT
(2 layers, hidden 64, 4 heads, sequence 16), eager and SDPA attention, fp32 and
fp16 -- equal to eager, every op on the program (no host step), every access in
bounds and within the span limit (the planner's span check and the independent
verifier, at every loop iteration); the same with one decoder layer (attention,
rotary embeddings and MLP) tiled on the sequence dim by a manual spyre_hint inside
the model's forward.

Each (model, attention, dtype) is traced and compiled once per session
(``model_helpers.traced``, shared with ``test_models_auto.py``)."""

from __future__ import annotations

import pytest
import torch

from model_helpers import TOLERANCE, hinted, traced

pytest.importorskip("transformers")

CASES = [(name, attn, dtype) for name in ("gpt2", "llama", "bert")
         for attn in ("eager", "sdpa") for dtype in (torch.float32, torch.float16)]


def _case_id(case) -> str:
    return "-".join(str(part).removeprefix("torch.") for part in case)


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
    assert run.accesses
    assert run.out_of_bounds_accesses() == []
    assert run.direct_accesses_over_the_limit() == []
    assert run.indirect_accesses_over_the_limit() == []
    assert run.kernels and all(k.calls == 1 for k in run.kernels)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_model_runs_on_the_spyre_program(case):
    name, attn, dtype = case
    run = traced(name, attn, dtype).plain
    _check_on_program(run, dtype)
    assert run.loop_counts() == []


#: (model, attention, dtype) -> (tiles, how the layer input is named, top-level loops).
#: Loop fission: the scores read every key, so the key and value projections run
#: in a loop of their own before the scores' loop; a norm's reductions close a loop
#: (their readers start the next).  How many loops depends on the model, its
#: attention and the tile count (4 tiles of 4 rows split GPT-2's and BERT's layer
#: into more loops than 2 tiles of 8).  Six cases cover each model with eager and SDPA
#: attention, both dtypes, both tile counts and both ways of naming the layer's input.
HINTED_LAYER_CASES = {
    ("gpt2", "eager", torch.float32): (2, "named_dims", 4),
    ("gpt2", "sdpa", torch.float16): (4, "named_dims", 9),
    ("llama", "eager", torch.float32): (2, "name_tensor_dims", 13),
    ("llama", "sdpa", torch.float16): (4, "name_tensor_dims", 14),
    ("bert", "eager", torch.float16): (4, "name_tensor_dims", 13),
    ("bert", "sdpa", torch.float32): (2, "name_tensor_dims", 9),
}


@pytest.mark.parametrize("case", list(HINTED_LAYER_CASES),
                         ids=lambda c: f"{_case_id(c)}-by{HINTED_LAYER_CASES[c][0]}"
                                       f"-{HINTED_LAYER_CASES[c][1]}")
def test_model_with_a_hinted_decoder_layer_runs_on_the_spyre_program(case):
    name, attn, dtype = case
    count, naming, loops = HINTED_LAYER_CASES[case]
    run = hinted(name, attn, dtype, count, naming)
    _check_on_program(run, dtype)
    counts = run.loop_counts()
    assert (len(counts), set(counts)) == (loops, {count})
