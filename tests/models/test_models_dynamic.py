"""Served language models with varying prompt lengths stay on the Spyre program.

GPT-2 and Llama (one decoder layer, hidden 64: ``dynamic_helpers.build``) called
with six sequence lengths and then the first two again, under Dynamo's automatic
dynamic (the first length compiles static, the second recompiles with a symbolic
sequence dim) and under ``dynamic=True``: every call equals eager and runs the
generated kernels (``fallback='error'``: no eager graph; no host step; every
access within the span limit, ``span_check='error'``); one program is compiled
per distinct length, each dump folder naming its length, and the repeated
lengths compile nothing and run their length's program again.  BERT (fp32) and
Qwen2 (fp16, grouped-query attention) with two lengths and a repeat, too."""

from __future__ import annotations

import pytest
import torch

from dynamic_helpers import build, run_lengths
from model_helpers import TOLERANCE

pytest.importorskip("transformers")

LENGTHS = (8, 12, 16, 20, 24, 28)


# each model under one of the two modes (the suite's time budget; the mechanism is the same)
@pytest.mark.parametrize("name, dynamic", [("gpt2", None), ("llama", True)],
                         ids=["gpt2-automatic-dynamic", "llama-dynamic-true"])
def test_every_sequence_length_runs_its_own_spyre_program(name, dynamic):
    run = run_lengths(build(name), LENGTHS + LENGTHS[:2], dynamic=dynamic)
    assert run.messages == []  # no eager graph, no host step, no span warning
    assert run.host_steps() == []
    assert run.span_statuses() <= {"fits", "no generated access"}
    assert [c.length for c in run.calls if c.max_error > 1e-4] == []
    first, repeated = run.calls[:len(LENGTHS)], run.calls[len(LENGTHS):]
    # one program per distinct length; the repeated lengths compile nothing
    assert run.programs == len(LENGTHS)
    assert all(c.compiled for c in first) and [c.compiled for c in repeated] == [[], []]
    # each call ran its program's kernels once: a repeat runs its length's program again
    assert [c.kernel_calls for c in first] == [len(c.compiled) for c in first]
    assert [c.kernel_calls for c in repeated] == [len(c.compiled) for c in first[:2]]
    sizes = [f["sizes"] for f in run.folders]
    if dynamic is None:  # the first length compiled static, before Dynamo saw a second
        assert sizes[0] is None
        sizes = sizes[1:]
        lengths = LENGTHS[1:]
    else:
        lengths = LENGTHS
    assert [list(s["sizes"].values()) for s in sizes] == [[n] for n in lengths]
    assert {w for s in sizes for w in s["symbols"].values()} == {"L['ids'].size()[1]"}


@pytest.mark.parametrize("name, dtype", [("bert", torch.float32), ("qwen2", torch.float16)])
def test_other_models_and_dtypes_get_one_program_per_length(name, dtype):
    run = run_lengths(build(name, dtype=dtype), (8, 20, 8), dynamic=True)
    assert run.messages == [] and run.host_steps() == []
    assert [c.max_error <= TOLERANCE[dtype] for c in run.calls] == [True] * 3
    assert [bool(c.compiled) for c in run.calls] == [True, True, False]
    assert run.calls[2].kernel_calls == len(run.calls[0].compiled)
    assert [list(f["sizes"]["sizes"].values()) for f in run.folders] == [[8], [20]]
