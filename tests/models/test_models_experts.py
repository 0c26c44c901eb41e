"""Mixtures of experts and the Granite 4 hybrid under the default fallback='eager'
(issue 41): tiny Mixtral, Qwen2-MoE, Granite-MoE, OLMoE and GraniteMoeHybrid, built from
transformers configs (model_zoo.EXPERT_MODELS), compile with the ops that have no Spyre
lowering as host steps and equal eager; under fallback='error' the first such op is
refused by name.

They used to crash (``ValueRangeError: Invalid ranges [0:-1]``) while the seam decided
host steps: transformers' grouped-experts path inverts its token permutation into
``torch.empty_like(perm)``, which Inductor lowers to an allocation whose loop ranges it
zeroed (ir/op_identity.py ``is_allocation``), and tracing that body failed inside
Inductor.  The allocation now stays on the program as what it is: a buffer no kernel
computes, which the host step ``index_put_`` then writes.
"""

from __future__ import annotations

import functools
import re

import pytest
import torch

import model_zoo
from model_helpers import TOLERANCE, compile_captured
from spyre_rules import config
from spyre_rules.backend.compile import spyre_rules_backend
from spyre_rules.ir.errors import BackendCompileError

pytest.importorskip("transformers")

NO_LOWERING = "lowers to {}, which has no Spyre lowering"
GROUPED_MM = ("permute.default, transformers.grouped_mm_fallback.default",
              NO_LOWERING.format("torch.ops.transformers.grouped_mm_fallback.default (FallbackKernel)"))
#: the host steps of one experts layer: (aten ops, reason), in graph order
EXPERTS_LAYER = [
    ("topk.default", NO_LOWERING.format("torch.ops.aten.topk.default (FallbackKernel)")),
    ("reshape.default, sort.default", NO_LOWERING.format("torch.ops.aten.sort.stable (FallbackKernel)")),
    ("histc.default", NO_LOWERING.format("torch.ops.aten.histc.default (FallbackKernel)")),
    GROUPED_MM,
    GROUPED_MM,
]  # the inverse permutation's index_put_ into an allocation runs on the program (in_place.py)
#: the Mamba2 layer's depthwise causal conv1d
CONV = ("convolution.default, permute.default, split_with_sizes.default, squeeze.dim, unsqueeze.default",
        NO_LOWERING.format("extern_kernels.convolution (ExternKernelAlloc)"))
HOST_STEPS = {
    "mixtral": EXPERTS_LAYER,
    "qwen2_moe": EXPERTS_LAYER,
    "granitemoe": EXPERTS_LAYER,
    "olmoe": EXPERTS_LAYER,
    "granitemoehybrid": [CONV, *EXPERTS_LAYER, *EXPERTS_LAYER],
}


@functools.cache
def partitioned(name: str):
    """The model compiled under fallback='eager' once: (run, graph, example inputs)."""
    module = model_zoo.LastHidden(model_zoo.build(name))
    return compile_captured(module, (model_zoo.input_ids(),), fallback="eager")


@pytest.mark.parametrize("name", sorted(model_zoo.EXPERT_MODELS))
def test_experts_model_runs_with_its_host_steps_and_equals_eager(name):
    run, _, _ = partitioned(name)
    assert run.max_error <= TOLERANCE[torch.float32]
    steps = [(re.fullmatch(r"buf\d+ \(aten ops: (.*)\)", s).group(1)) for s in run.host_steps]
    assert steps == [ops for ops, _ in HOST_STEPS[name]]
    reasons = {step["description"]: step["reason"] for plan in run.plans
               for step in plan["host_steps"].values()}
    (message,) = run.messages
    assert message == (
        f"spyre_rules: {len(steps)} ops of this graph run on the host instead of the Spyre "
        "program (fallback='eager'): " + "; ".join(f"{s}: {reasons[s]}" for s in run.host_steps))
    assert [reasons[s] for s in run.host_steps] == [reason for _, reason in HOST_STEPS[name]]
    # everything else ran on the program, once
    assert len(run.op_specs()) > 50
    assert run.kernels and all(k.calls == 1 for k in run.kernels)


@pytest.mark.parametrize("name", ["granitemoehybrid", "mixtral"])  # the conv's and topk's refusals
def test_experts_model_names_its_first_host_op_under_fallback_error(name):
    run, graph, inputs = partitioned(name)
    first = run.host_steps[0]
    reason = HOST_STEPS[name][0][1]
    with config.patch(fallback="error"), torch.no_grad(), \
            pytest.raises(BackendCompileError) as caught:
        spyre_rules_backend(graph, inputs)
    assert str(caught.value) == f"spyre_rules cannot compile this graph: {first} {reason}"
