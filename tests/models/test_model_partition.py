"""The partition on a real model: GPT-2's tanh-approximated GELU (``gelu_new``)
left without a Spyre lowering (test-only) under fallback='eager' runs on the host,
one host step per layer, and everything else on the Spyre program; the result
equals eager and the one warning names exactly that op."""

from __future__ import annotations

import re

import pytest
import torch

import model_zoo
from model_helpers import TOLERANCE, compile_model
from spyre_rules.backend import support

pytest.importorskip("transformers")

REASON = "aten.tanh has no Spyre lowering (left unlowered by the test)"


def test_a_model_with_one_op_forced_onto_the_host_runs_partitioned(monkeypatch):
    monkeypatch.setitem(support.NO_SPYRE_LOWERING, torch.ops.aten.tanh, "left unlowered by the test")
    model = model_zoo.LastHidden(model_zoo.build("gpt2", "eager", torch.float32))
    run = compile_model(model, (model_zoo.input_ids(),), fallback="eager")
    assert run.max_error <= TOLERANCE[torch.float32]
    # one host step per layer's GELU, each exactly the tanh
    steps = run.host_steps
    assert len(steps) == model_zoo.LAYERS
    assert all(re.fullmatch(r"buf\d+ \(aten ops: tanh\.default\)", s) for s in steps)
    (message,) = run.messages
    assert message == (
        f"spyre_rules: {len(steps)} ops of this graph run on the host instead of the Spyre "
        "program (fallback='eager'): " + "; ".join(f"{s}: {REASON}" for s in steps))
    # every other op ran on the program, once
    assert "tanh" not in {spec.op for spec in run.op_specs()}
    assert len(run.op_specs()) > 100
    assert run.kernels and all(k.calls == 1 for k in run.kernels)
    assert run.out_of_bounds_accesses() == []
