"""The bundled example model compiles with spyre_rules and matches eager."""

from __future__ import annotations

import pytest
import torch

from spyre_helpers import run_spyre
from spyre_rules.examples import EXAMPLES


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.float16, 2e-3)])
def test_mlp_softmax_example(dtype, tol):
    model, inputs = EXAMPLES["mlp_softmax"](dtype=dtype)
    compiled = run_spyre(model, *inputs)
    with torch.no_grad():
        expected = model(*inputs)
    ops = [spec.op for spec in compiled.op_specs()]
    assert ops.count("batchmatmul") == 2 and ops.count("ReStickifyOpHBM") == 2
    torch.testing.assert_close(compiled.output, expected, atol=tol, rtol=tol)
