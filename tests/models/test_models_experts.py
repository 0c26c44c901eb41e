"""Mixtures of experts and the Granite 4 hybrid wholly on the program (issue 41): tiny
Mixtral, Qwen2-MoE, Granite-MoE, OLMoE and GraniteMoeHybrid, built from transformers
configs (model_zoo.EXPERT_MODELS), compile under fallback='error' with no host step and
equal eager, untiled and with automatic tiling at 64 KiB.

What used to be host steps now lowers to what the program runs: the router's topk and
the experts' sort as counting reductions (backend/ranking.py), the token counts' histc
bin for bin ATen's (backend/histogram.py), the grouped matmuls as one reduction each
with an indirect read of the expert weights (backend/grouped_mm.py), and the Mamba2
layer's depthwise causal conv1d as shifted slices (backend/depthwise_conv.py).

Why 64 KiB: the grouped matmul's weight read is gathered (any row may pick any
expert), so a tile spans every expert of the output columns it covers; the planner
splits those columns down to one output stick, and the down projection's 64 x 128
float32 weights of 4 experts need 64 KiB for one stick of 32 columns
(32 x 128 x 4 x 4 bytes).  At real size one stick of a 4096-wide output spans
tens of MiB (``spyre-rules plan``).
"""

from __future__ import annotations

import functools

import pytest
import torch

import model_zoo
from model_helpers import TOLERANCE, compile_captured, _compiled_run
from spyre_rules.backend.compile import spyre_rules_backend

pytest.importorskip("transformers")

KiB = 1024
LIMIT = 64 * KiB


@functools.cache
def captured(name: str, fallback: str = "error"):
    """The model compiled once under ``fallback``: (run, graph, example inputs)."""
    module = model_zoo.LastHidden(model_zoo.build(name))
    return compile_captured(module, (model_zoo.input_ids(),), fallback=fallback)


def _wholly_on_the_program(run) -> None:
    assert run.max_error <= TOLERANCE[torch.float32]
    assert run.host_steps == [] and run.messages == []
    ops = [op for plan in run.plans for op in plan["ops"]]
    assert [op["op"] for op in ops if op["decision"] in ("unsupported", "host")] == []
    assert {op["span_check"]["status"] for op in ops} <= {"fits", "no generated access"}
    assert run.kernels and all(k.calls == 1 for k in run.kernels)


@pytest.mark.parametrize("name", sorted(model_zoo.EXPERT_MODELS))
def test_experts_model_runs_wholly_on_the_program_under_fallback_error(name):
    run, _, _ = captured(name)
    _wholly_on_the_program(run)
    assert len(run.op_specs()) > 50


@pytest.mark.parametrize("name", sorted(model_zoo.EXPERT_MODELS))
def test_experts_model_auto_tiled_at_64KiB_stays_on_the_program(name):
    plain, graph, inputs = captured(name)
    run = _compiled_run(lambda: spyre_rules_backend(graph, inputs)(*inputs), plain.expected,
                        max_span_bytes=LIMIT, ignore_span_overflow_hints=False)
    _wholly_on_the_program(run)
    ops = [op for plan in run.plans for op in plan["ops"]]
    # the gathered expert weights overflow 64 KiB untiled: their grouped matmuls are split
    grouped = [op for op in ops if "grouped_mm_fallback" in op["description"]
               and op["kind"] == "reduction:sum"]
    assert grouped and any(op["decision"] == "plan" for op in grouped)
    assert max(op["span_check"].get("max_span_bytes", 0) for op in ops) <= LIMIT


def test_the_default_fallback_runs_mixtral_on_the_program_without_a_warning():
    run, _, _ = captured("mixtral", fallback="eager")
    _wholly_on_the_program(run)
