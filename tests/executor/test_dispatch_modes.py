"""A kernel's work is the device's: no Python dispatch mode active around a call sees
the executor's tensor ops.  AOTAutograd runs every compiled graph's first call under its
custom-op aliasing mode (``_AnalyzeCustomOpInputOutputMode``), which cost each of the
executor's many small ops a Python dispatch (a 131072-tile copy: 127 s, 24 s without)."""

from __future__ import annotations

import torch

from spyre_rules import config
from spyre_rules.executor import loops, runtime


def _f(x, y):
    return torch.softmax(x @ y, dim=-1) * 2.0


def test_the_first_call_runs_its_kernels_outside_aot_autograds_dispatch_mode(monkeypatch):
    around, inside = [], []
    run, run_items = runtime.ProgramKernel.run, runtime.run_items

    def spy_run(self, *args):
        around.append(torch._C._len_torch_dispatch_stack())
        return run(self, *args)

    def spy_items(*args, **kwargs):
        inside.append(torch._C._len_torch_dispatch_stack())
        return run_items(*args, **kwargs)

    monkeypatch.setattr(runtime.ProgramKernel, "run", spy_run)
    monkeypatch.setattr(runtime, "run_items", spy_items)
    monkeypatch.setattr(torch._functorch.config, "check_custom_op_aliasing", True)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 32, generator=g), torch.randn(32, 64, generator=g)
    torch._dynamo.reset()
    compiled = torch.compile(_f, backend="spyre_rules", dynamic=False)
    with config.patch(fallback="error"), torch.no_grad():
        first = compiled(x, y)
        second = compiled(x, y)
    calls = len(around) // 2
    assert calls and len(inside) == 2 * calls
    assert all(n > 0 for n in around[:calls])  # the first call: under the mode
    assert inside == [0] * (2 * calls)  # never the kernels' own work
    assert torch.equal(first, second)
    assert torch.allclose(first, _f(x, y), atol=1e-6, rtol=1e-6)
