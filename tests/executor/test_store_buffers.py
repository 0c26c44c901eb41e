"""The last unary op of a pointwise program stored through a strided view: computed
into a reused contiguous buffer (the layout of the general path's fresh result), then
copied; the bytes equal the general path's and eager's (executor/evaluate.py,
``_unary_into_buffer``)."""

from __future__ import annotations

import pytest
import sympy
import torch
from both_paths import both_path_memories

from spyre_rules.executor import DeviceMemory, run_op_spec, scratch, stickify
from spyre_rules.layout import generic_stick_layout
from spyre_rules.program.op_spec import OpSpec, TensorArg

c0, c1 = sympy.symbols("c0 c1")


def _spec(op, rows, width, negate_first=False):
    """``op(x)`` stored (``negate_first``: ``op(-x)``, so the op's operand is a
    computed value, not a load)."""
    layout = generic_stick_layout([rows, width], [width, 1], torch.float32)
    coords = [sympy.floor(c1 / 32), c0, sympy.Mod(c1, 32)]
    size = layout.size_in_bytes
    args = [TensorArg(True, 0, layout.device_dtype, list(layout.device_size), coords,
                      {"hbm": 0}, name="x"),
            TensorArg(False, 1, layout.device_dtype, list(layout.device_size), coords,
                      {"hbm": size}, name="out")]
    program = [{"op": "load", "arg": 0, "dtype": "float32"}]
    if negate_first:
        program.append({"op": "neg", "in": [0]})
    program.append({"op": op, "in": [len(program) - 1]})
    space = {c0: (sympy.Integer(rows), 1), c1: (sympy.Integer(width), 1)}
    store = {"arg": 1, "value": len(program) - 1, "dtype": "float32"}
    spec = OpSpec(op, False, space, args, {"program": program, "store": store})
    return spec, layout


@pytest.mark.parametrize("negate_first", [False, True])
@pytest.mark.parametrize("shape", [(5, 128), (64, 1024), (3, 150)])
@pytest.mark.parametrize("op", ["exp", "tanh", "sigmoid", "erf", "relu", "rsqrt"])
def test_unary_store_through_buffer_matches_general_path_and_eager(op, shape, negate_first):
    rows, width = shape
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(3)) * 4
    bits = x.view(torch.int32)
    bits[0, :4] = torch.tensor([0x7FC00001, -0x3FFFFF, 0, -0x80000000], dtype=torch.int32)
    spec, layout = _spec(op, rows, width, negate_first)
    size = layout.size_in_bytes
    memories = both_path_memories(spec, 2 * size, [(0, x, layout)])
    assert torch.equal(memories[0], memories[1])
    eager = getattr(torch, op)(-x if negate_first else x)
    expected = stickify(eager, layout).reshape(-1).view(torch.uint8)
    assert torch.equal(memories[1][size:], expected)


def test_unary_store_uses_a_reused_buffer():
    spec, layout = _spec("exp", 5, 128, negate_first=True)
    size = layout.size_in_bytes
    memory = DeviceMemory(2 * size)
    memory.write_bytes(0, stickify(torch.ones(5, 128), layout).reshape(-1).view(torch.uint8))
    scratch.clear()
    run_op_spec(spec, memory)
    held = [k for k in scratch._BUFFERS if k[0] == ("store", 2)]
    assert held == [(("store", 2), (5, 4, 32), torch.float32)]
