"""Helpers of the pipeline tests: compile with automatic tiling on, check spans.

A plain module with a unique name (several test folders have helpers).
"""

from __future__ import annotations

import torch

import spyre_rules
from spyre_rules import config
from spyre_rules.backend.capture import CapturedOperations
from spyre_rules.executor.runtime import recent_kernels
from spyre_rules.passes import pipeline
from spyre_rules.program.op_spec import LoopSpec, element_bytes, iter_op_specs
from spyre_rules.spans import verify_spans

FP16 = torch.float16
DEMO_LIMIT = 8192
#: The small-limit setting of docs/layout_model.md §6.1/§6.2 (MAX 8192, sencores 4).
AUTO = dict(max_span_bytes=DEMO_LIMIT, sencores=4, ignore_span_overflow_hints=False)


def h(*shape, seed=0):
    gen = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=gen).to(FP16)


class Run:
    """Output, kernels and program of one compiled call."""

    def __init__(self, output, kernels):
        self.output = output
        self.kernels = kernels

    @property
    def programs(self):
        return [k.specs for k in self.kernels]

    def op_specs(self):
        return [s for k in self.kernels for s in iter_op_specs(k.specs)]

    def loops(self):
        return [item for k in self.kernels for item in k.specs if isinstance(item, LoopSpec)]


def run_auto(fn, *inputs, fallback="error", **cfg):
    """``torch.compile(fn, backend="spyre_rules")(*inputs)`` with automatic tiling on."""
    torch._dynamo.reset()
    before = max((k.serial for k in recent_kernels()), default=-1)
    with config.patch(**{**AUTO, "fallback": fallback, **cfg}), torch.no_grad():
        out = torch.compile(fn, backend="spyre_rules")(*inputs)
    return Run(out, [k for k in recent_kernels() if k.serial > before])


def capture_auto(fn, *inputs, **cfg):
    """The ops after the pipeline: captured (a capture skips the pass, like every
    tiling pass), then ``run_pipeline`` on the captured graph under ``cfg``.
    Plan records are in ``ops.state(0).plan``."""
    torch._dynamo.reset()
    settings = {**AUTO, **cfg}
    with config.patch(**settings):
        captured = spyre_rules.capture_operations(fn, *inputs)
        with captured.graph_context(0) as graph:
            pipeline.run_pipeline(graph)
    ops = CapturedOperations(graph.operations)
    ops.graphs = captured.graphs
    return ops


def records(ops):
    return ops.state(0).plan


def span_violations(spec, limit):
    """Every (arg, device dim, span bytes) over ``limit`` in one OpSpec, measured by
    the independent verifier over the op's per-iteration space."""
    ranges = {sym: int(r) for sym, (r, _) in spec.iteration_space.items()}
    bad = []
    for arg in spec.args:
        report = verify_spans(arg.device_size, arg.device_coordinates, ranges,
                              element_bytes(arg.device_dtype))
        assert report.in_bounds, (spec.op, arg.name, report.out_of_range_dims)
        bad += [(arg.name, d.device_dim, d.span_bytes) for d in report.check(limit)]
    return bad


def assert_close(actual, expected):
    actual = [actual] if isinstance(actual, torch.Tensor) else list(actual)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        torch.testing.assert_close(a, e, atol=2e-3, rtol=2e-3)


def max_error(actual, expected) -> float:
    actual = [actual] if isinstance(actual, torch.Tensor) else list(actual)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    return max((a.float() - e.float()).abs().max().item() for a, e in zip(actual, expected))


__all__ = ["AUTO", "DEMO_LIMIT", "FP16", "Run", "assert_close", "capture_auto", "h",
           "max_error", "records", "run_auto", "span_violations"]
