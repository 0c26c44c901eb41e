"""Counted loops reuse each body OpSpec's compiled program for every iteration of one
kernel run (executor/loops.py): one fingerprint per spec per kernel run, and an edit
made between two runs is still seen by the next one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS / "tiling") not in sys.path:
    sys.path.insert(0, str(TESTS / "tiling"))

from tiling_helpers import explicit_groups  # noqa: E402

from spyre_rules import config  # noqa: E402
from spyre_rules.executor import compiled, runtime  # noqa: E402
from spyre_rules.program.op_spec import LoopSpec, iter_op_specs  # noqa: E402


def _inputs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(64, 128, generator=g).half() for _ in range(3)]


@pytest.fixture
def tiled_kernel():
    """The (a + b) * c program in 8 row tiles: one kernel, one LoopSpec of two OpSpecs."""
    torch._dynamo.reset()
    program = torch.compile(lambda a, b, c: (a + b) * c, backend="spyre_rules", dynamic=False)
    with config.patch(fallback="error"), explicit_groups(([0, 1], 8)), torch.no_grad():
        program(*_inputs())
    kernel = runtime.recent_kernels()[-1]
    assert isinstance(kernel.specs[0], LoopSpec) and kernel.specs[0].count == 8
    yield kernel
    torch._dynamo.reset()


def _run(kernel, inputs):
    out = torch.empty(64, 128, dtype=torch.float16)
    kernel.run(*inputs, None, out)
    return out


def test_one_fingerprint_per_spec_per_kernel_run(tiled_kernel, monkeypatch):
    calls = []
    real = compiled.fingerprint

    def counting(spec, extra=None):
        calls.append(spec)
        return real(spec, extra)

    monkeypatch.setattr(compiled, "fingerprint", counting)
    inputs = _inputs()
    expected = ((inputs[0].float() + inputs[1].float()).half().float() * inputs[2].float()).half()
    for runs in (1, 2):
        assert torch.equal(_run(tiled_kernel, inputs), expected)
        assert len(calls) == 2 * runs  # two body specs, eight iterations each


@pytest.mark.parametrize("op", ["sub", "mul"])
def test_an_edit_between_kernel_runs_is_seen(tiled_kernel, op):
    inputs = _inputs()
    _run(tiled_kernel, inputs)
    first = list(iter_op_specs(tiled_kernel.specs))[0]
    first.op_info["program"][2]["op"] = op  # in place: the same spec object
    a, b, c = (x.float() for x in inputs)
    value = a - b if op == "sub" else a * b
    assert torch.equal(_run(tiled_kernel, inputs), (value.half().float() * c).half())
