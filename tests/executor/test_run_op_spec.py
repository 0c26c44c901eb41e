"""The executor on hand-written OpSpecs (no torch.compile involved)."""

from __future__ import annotations

import pytest
import sympy
import torch

from spyre_rules.executor import DeviceMemory, DeviceMemoryError, run_op_spec, stickify, unstickify
from spyre_rules.executor import evaluate as evaluate_module
from spyre_rules.program.index_eval import evaluate
from spyre_rules.layout import generic_stick_layout
from spyre_rules.program.op_spec import OpSpec, TensorArg

c0, c1, c2 = sympy.symbols("c0 c1 c2")


def _place(memory, tensor, layout, address):
    data = stickify(tensor, layout).reshape(-1).view(torch.uint8)
    memory.write_bytes(address, data)


def _read(memory, layout, address, shape, dtype):
    raw = memory.read_bytes(address, layout.size_in_bytes).view(dtype)
    return unstickify(raw, layout, shape, None, dtype)


def _arg(is_input, index, layout, coords, address, name):
    return TensorArg(is_input, index, layout.device_dtype, list(layout.device_size), coords,
                     {"hbm": address}, name=name)


def _fp16_add_setup():
    layout = generic_stick_layout([4, 150], [150, 1], torch.float16)  # [3, 4, 64]
    coords = [sympy.floor(c1 / 64), c0, sympy.Mod(c1, 64)]
    size = layout.size_in_bytes
    spec = OpSpec(
        op="add", is_reduction=False,
        iteration_space={c0: (sympy.Integer(4), 1), c1: (sympy.Integer(150), 1)},
        args=[_arg(True, 0, layout, coords, 0, "x"), _arg(True, 1, layout, coords, size, "y"),
              _arg(False, 2, layout, coords, 2 * size, "out")],
        op_info={"program": [{"op": "load", "arg": 0, "dtype": "float16"},
                             {"op": "load", "arg": 1, "dtype": "float16"},
                             {"op": "add", "in": [0, 1]}],
                 "store": {"arg": 2, "value": 2, "dtype": "float16"},
                 "reduction_symbols": []},
    )
    return layout, size, spec


def test_pointwise_add_with_padding():
    layout, size, spec = _fp16_add_setup()
    x, y = torch.randn(4, 150).half(), torch.randn(4, 150).half()
    memory = DeviceMemory(3 * size)
    _place(memory, x, layout, 0)
    _place(memory, y, layout, size)
    run_op_spec(spec, memory)
    assert torch.equal(_read(memory, layout, 2 * size, (4, 150), torch.float16), x + y)


def test_chunked_execution_matches(monkeypatch):
    monkeypatch.setattr(evaluate_module, "CHUNK_ELEMENTS", 7)  # many uneven chunks
    layout, size, spec = _fp16_add_setup()
    x, y = torch.randn(4, 150).half(), torch.randn(4, 150).half()
    memory = DeviceMemory(3 * size)
    _place(memory, x, layout, 0)
    _place(memory, y, layout, size)
    run_op_spec(spec, memory)
    assert torch.equal(_read(memory, layout, 2 * size, (4, 150), torch.float16), x + y)


@pytest.mark.parametrize("kind", ["sum", "max", "argmax", "welford_reduce", "batchmatmul"])
def test_chunked_reductions_combine(monkeypatch, kind):
    # Reduce [5, 150] over the last dim with chunks smaller than one row.
    monkeypatch.setattr(evaluate_module, "CHUNK_ELEMENTS", 40)
    lx = generic_stick_layout([5, 150], [150, 1], torch.float32)
    lo = generic_stick_layout([5], [1], torch.int64 if kind == "argmax" else torch.float32)
    x = torch.randn(5, 150)
    in_coords = [sympy.floor(c1 / 32), c0, sympy.Mod(c1, 32)]
    out_dtype = "int64" if kind == "argmax" else "float32"
    program = [{"op": "load", "arg": 0, "dtype": "float32"}]
    ins = [0]
    if kind == "batchmatmul":
        program.append({"op": "load", "arg": 1, "dtype": "float32"})
        ins = [0, 1]
    program.append({"op": "reduction", "type": kind, "in": ins, "dtype": out_dtype,
                    "src_dtype": "float32"})
    value = len(program) - 1
    if kind == "welford_reduce":
        program.append({"op": "getitem", "in": [value], "index": 1})  # m2
        value += 1
    args = [_arg(True, 0, lx, in_coords, 0, "x")]
    if kind == "batchmatmul":
        args.append(_arg(True, 1, lx, in_coords, 0, "x"))
    out_addr = lx.size_in_bytes
    args.append(_arg(False, 2, lo, [sympy.floor(c0 / 32), sympy.Mod(c0, 32)], out_addr, "out"))
    spec = OpSpec(kind, True, {c0: (sympy.Integer(5), 1), c1: (sympy.Integer(150), 1)}, args,
                  {"program": program, "store": {"arg": len(args) - 1, "value": value,
                                                  "dtype": out_dtype},
                   "reduction_symbols": [c1]})
    memory = DeviceMemory(out_addr + lo.size_in_bytes)
    _place(memory, x, lx, 0)
    run_op_spec(spec, memory)
    storage = torch.int32 if kind == "argmax" else torch.float32
    got = _read(memory, lo, out_addr, (5,), storage)
    expected = {
        "sum": x.sum(1), "max": x.amax(1), "argmax": x.argmax(1).int(),
        "welford_reduce": ((x - x.mean(1, keepdim=True)) ** 2).sum(1),
        "batchmatmul": (x * x).sum(1),
    }[kind]
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-5)


def test_load_outside_allocation_names_op_tensor_and_address():
    layout, size, spec = _fp16_add_setup()
    spec.args[1].device_coordinates = [spec.args[1].device_coordinates[0] + 3,
                                       *spec.args[1].device_coordinates[1:]]
    memory = DeviceMemory(3 * size)
    with pytest.raises(DeviceMemoryError, match=r"op k/add: load of tensor y.*byte address \d+"):
        run_op_spec(spec, memory, where="k")


@pytest.mark.parametrize(
    "expr, env, expected",
    [
        ("floor(c1/64)", {"c1": 130}, 2),
        ("Mod(c1, 64) + 64*floor(c0/3)", {"c0": 7, "c1": 130}, 2 + 128),
        ("floor((37*c0 + c1)/32)", {"c0": 3, "c1": 5}, (37 * 3 + 5) // 32),
        ("floor(Mod(c0, 37)/32)", {"c0": 70}, 1),
        ("Max(c0 - 3, 0)", {"c0": 1}, 0),
    ],
)
def test_index_expressions_are_exact_integers(expr, env, expected):
    assert evaluate(sympy.sympify(expr), env) == expected
    grid = {k: torch.tensor([v]) for k, v in env.items()}
    assert int(evaluate(sympy.sympify(expr), grid)) == expected


def test_inductor_index_functions_evaluate():
    from torch._inductor.utils import sympy_index_symbol
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    x = sympy_index_symbol("c0")
    assert evaluate(ModularIndexing(x, 4, 8), {"c0": torch.tensor([100])}).item() == (100 // 4) % 8
    assert evaluate(FloorDiv(x, 7), {"c0": 50}) == 7


@pytest.mark.parametrize("force_general", [False, True])
def test_unrolled_tile_is_bounds_checked_against_its_whole_buffer(monkeypatch, force_general):
    """An unrolled iteration's allocation is one tile of a buffer (``segment``): an access
    inside that tile's window but past the buffer's end (here: y's second tile window
    reaches into out) is an error naming both ranges, never a read of the neighbour."""
    from spyre_rules.executor import views

    monkeypatch.setattr(views, "FORCE_GENERAL", force_general)
    layout, size, spec = _fp16_add_setup()
    y = spec.args[1]
    y.allocation = {"hbm": size + size // 2}  # the tile window [1.5 size, 2.5 size)
    y.segment = (size, 2 * size)
    memory = DeviceMemory(3 * size)
    with pytest.raises(DeviceMemoryError) as err:
        run_op_spec(spec, memory)
    assert str(err.value).startswith("op add: load of tensor y at byte address ")
    assert str(err.value).endswith(
        f"is outside its allocation (allocation [{size + size // 2}, {2 * size + size // 2}) "
        f"of the buffer [{size}, {2 * size}))")


def test_relu_keeps_nan_and_negative_zero_like_eager():
    # regression: relu was where(x > 0, x, 0), which turned NaN into 0 and -0.0 into 0.0
    from spyre_rules.program.pointwise import apply_pointwise

    x = torch.tensor([float("nan"), -0.0, -1.5, 2.0, float("-inf")])
    got = apply_pointwise("relu", [x])
    assert torch.equal(got.view(torch.int32), torch.relu(x).view(torch.int32))
    flags = torch.tensor([True, False])
    assert torch.equal(apply_pointwise("relu", [flags]), flags)
