"""The default path never crashes on an op it cannot measure or run (issue 41).

* An allocation (``torch.empty_like``): Inductor zeroes its loop ranges, and tracing that
  body raised ``ValueRangeError: Invalid ranges [0:-1]`` while the seam decided host
  steps (every mixture-of-experts model).  It is a buffer no kernel computes: it stays
  on the program, and so does the ``index_put_`` that writes it in place (backend/in_place.py).
* A data-dependent size (an unbacked symbol: a boolean mask, ``nonzero``, ``.item()``):
  the op is refused by name (a host step under fallback='eager'), as is an index
  expression over a data-dependent value.
* A reflect pad's ``Abs`` index value runs on the program (the index vocabulary has
  ``Abs``); its gathered read, whose coordinates cannot be derived, runs on the host.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from spyre_helpers import run_spyre
from spyre_rules.ir.errors import BackendCompileError

HOST = "spyre_rules: {} of this graph run{} on the host instead of the Spyre program (fallback='eager'): "


def host_warning(count: int, listed: str) -> str:
    ops = "1 op" if count == 1 else f"{count} ops"
    return HOST.format(ops, "s" if count == 1 else "") + listed


def run_eager(fn, *inputs):
    """Compile under fallback='eager'; (compiled, the spyre_rules warnings' text)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        compiled = run_spyre(fn, *inputs, fallback="eager")
    return compiled, [str(w.message) for w in seen if str(w.message).startswith("spyre_rules")]


def refusal(fn, *inputs) -> str:
    with pytest.raises(Exception) as caught:
        run_spyre(fn, *inputs, fallback="error")
    cause = caught.value
    while not isinstance(cause, BackendCompileError):
        cause = cause.__cause__ or cause.inner_exception
    return str(cause)


def inverse_gather(x, perm):
    """transformers' grouped experts restore their token order so."""
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.size(0))
    return x[inv] * 2


def test_an_allocation_written_in_place_stays_on_the_program():
    x, perm = torch.randn(8, 16), torch.randperm(8, generator=torch.Generator().manual_seed(0))
    for fallback in ("eager", "error"):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            compiled = run_spyre(inverse_gather, x, perm, fallback=fallback)
        assert torch.equal(compiled.output, inverse_gather(x, perm))
        assert [str(w.message) for w in seen if str(w.message).startswith("spyre_rules")] == []
        # the allocation has no kernel; the in-place write through perm (of an iota
        # Inductor inlines), the gather and the scale ran on the program
        assert [spec.op for spec in compiled.op_specs()] == ["index_put_", "index", "mul"]


def masked_scale(x):
    return x[x > 0] * 2


def test_a_data_dependent_size_is_a_host_step_named_by_its_symbol():
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(0))
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled, messages = run_eager(masked_scale, x)
        error = refusal(masked_scale, x)
    assert torch.equal(compiled.output, masked_scale(x))
    assert messages == [host_warning(2, (
        "buf1 (aten ops: index.Tensor): lowers to torch.ops.aten.index.Tensor (FallbackKernel), "
        "which has no Spyre lowering; buf5 (aten ops: mul.Tensor): size [u0] depends on u0, a "
        "data-dependent size known only when the graph runs; spyre_rules compiles static shapes "
        "only"))]
    assert compiled.op_specs() and [spec.op for spec in compiled.op_specs()] == ["gt"]
    assert error == ("spyre_rules cannot compile this graph: buf1 (aten ops: index.Tensor) lowers "
                     "to torch.ops.aten.index.Tensor (FallbackKernel), which has no Spyre lowering")


def scaled_by_count(x, y):
    return y * (x > 0).sum().item()


def test_an_index_expression_over_a_data_dependent_value_is_a_host_step():
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        compiled, messages = run_eager(scaled_by_count, x, y)
    assert torch.equal(compiled.output, scaled_by_count(x, y))
    assert messages == [host_warning(2, (
        "buf2 (aten ops: _local_scalar_dense.default): lowers to DynamicScalar (DynamicScalar), "
        "which has no Spyre lowering; buf3 (aten ops: mul.Tensor): index expression u0 depends "
        "on u0, which no loop binds: a value known only when the graph runs (data-dependent)"))]


def reflect_pad(x):
    return torch.nn.functional.pad(x[None], (2, 2), mode="reflect")[0] * 2


GATHER = ("buf5 (aten ops: _unsafe_index.Tensor, unsqueeze.default): cannot derive coordinates "
          "of index 40*c0 - Abs(Abs(c1 - 2) - 39) + 39: term -Abs(Abs(c1 - 2) - 39) has "
          "coefficient -1, not a positive integer")


def test_a_reflect_pad_runs_its_abs_index_on_the_program_and_its_gather_on_the_host():
    x = torch.randn(6, 40, generator=torch.Generator().manual_seed(0))
    compiled, messages = run_eager(reflect_pad, x)
    assert torch.equal(compiled.output, reflect_pad(x))
    assert messages == [host_warning(1, GATHER)]
    sub, mul = compiled.op_specs()
    assert (sub.op, mul.op) == ("sub", "mul")
    index_value = sub.op_info["program"][0]
    assert (index_value["op"], str(index_value["expr"])) == ("index_expr", "39 - Abs(Abs(c0 - 2) - 39)")
    assert refusal(reflect_pad, x) == "spyre_rules cannot compile this graph: " + GATHER
