"""Graphs the backend cannot compile: config.fallback decides, never silently."""

from __future__ import annotations

import pytest
import torch

from spyre_helpers import run_spyre
from spyre_rules import config
from spyre_rules.backend.compile import precheck


def cummax(x):
    # cummax has no Spyre lowering (cumsum / cumprod do: backend/scan.py)
    return torch.cummax(x, 0).values * 2


def train_step(x):
    return (x * 2).sum()


def _compile_with_grad(fn, x, fallback):
    torch._dynamo.reset()
    with config.patch(fallback=fallback), torch.enable_grad():
        return torch.compile(fn, backend="spyre_rules")(x)


def test_autograd_graph_raises_with_error_fallback():
    x = torch.randn(4, 5, requires_grad=True)
    with pytest.raises(Exception, match="needs autograd"):
        _compile_with_grad(train_step, x, "error")


def test_autograd_graph_warns_and_runs_eagerly_with_eager_fallback():
    x = torch.randn(4, 5, requires_grad=True)
    with pytest.warns(UserWarning, match=r"spyre_rules: running this graph eagerly.*needs autograd"):
        out = _compile_with_grad(train_step, x, "eager")
    out.backward()
    assert torch.equal(x.grad, torch.full_like(x, 2.0))


def test_unlowerable_op_raises_naming_the_op():
    with pytest.raises(Exception, match=r"cummax.*no Spyre lowering"):
        run_spyre(cummax, torch.randn(4, 5), fallback="error")


def test_unlowerable_op_runs_on_the_host_under_eager_fallback():
    # The partition (tests/backend/test_partition.py): only the op without a Spyre
    # lowering leaves the program.
    x = torch.randn(4, 5)
    with pytest.warns(UserWarning, match=r"1 op of this graph runs on the host.*cummax.*"
                                         r"no Spyre lowering"):
        compiled = run_spyre(cummax, x, fallback="eager")
    assert [spec.op for spec in compiled.op_specs()] == ["mul"]
    assert torch.equal(compiled.output, cummax(x))


def test_fallback_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("SPYRE_RULES_FALLBACK", "error")
    torch._dynamo.reset()
    with torch.no_grad(), pytest.raises(Exception, match="cummax"):
        torch.compile(cummax, backend="spyre_rules")(torch.randn(4, 5))


@pytest.mark.parametrize(
    "fn, reason",
    [
        (lambda x: torch.flip(x, [0]) + 1, "cannot derive coordinates"),
        (lambda x: torch.cummax(x, 1).values * 2, r"cummax.*has no Spyre lowering"),
    ],
)
def test_other_refusals_name_their_reason(fn, reason):
    with pytest.raises(Exception, match=reason):
        run_spyre(fn, torch.randn(4, 5), fallback="error")


def test_precheck_reasons():
    assert precheck([torch.randn(2)]) is None
    with torch.enable_grad():
        assert "autograd" in precheck([torch.randn(2, requires_grad=True)])
    with torch.no_grad():
        assert precheck([torch.randn(2, requires_grad=True)]) is None


def _unproven_access(monkeypatch):
    """The allocation check refusing every kernel, as it refused a DeepSeek-V3
    slice_scatter read it could not prove inside its tensor (issue 41)."""
    from spyre_rules.backend import scheduling
    from spyre_rules.codegen.in_allocation import AllocationBoundsError

    def refuse(kernel, specs, segments):
        raise AllocationBoundsError(f"spyre_rules allocation check: kernel {kernel}: not proven")

    monkeypatch.setattr(scheduling, "prove_in_allocation", refuse)


def test_unproven_access_runs_the_graph_eagerly_under_the_default_fallback(monkeypatch):
    _unproven_access(monkeypatch)
    x = torch.randn(4, 5)
    with pytest.warns(UserWarning, match=r"running this graph eagerly.*allocation check"):
        compiled = run_spyre(lambda x: x * 2, x, fallback="eager")
    assert not compiled.kernels and torch.equal(compiled.output, x * 2)


def test_unproven_access_raises_naming_the_kernel_under_error(monkeypatch):
    _unproven_access(monkeypatch)
    with pytest.raises(Exception, match=r"cannot compile this graph: spyre_rules allocation "
                                        r"check: kernel \S+: not proven"):
        run_spyre(lambda x: x * 2, torch.randn(4, 5), fallback="error")
