"""The structured (strided view) and general (gather/scatter) executor paths agree
byte for byte on every program of the differential suite, the tiled programs, the
hand-written OpSpecs whose chunks cut stick runs; the differential fuzzer's bounded
suite set (``tests/fuzz``: seed 9, programs 0..199) is compared on both paths by
``tests/fuzz/test_fuzz_programs.py`` itself, right after each program's compile.

Each program is compiled once and run twice from zeroed device memory, first with
``views.FORCE_GENERAL`` (every access gathered and scattered point by point, what
the executor did before structured views), then structured; the outputs and the
whole simulated HBM of every kernel must be identical bytes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

TESTS = Path(__file__).resolve().parent.parent
for folder in (TESTS / "backend", TESTS / "tiling", TESTS.parent / "bench"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import fuzz_paths  # noqa: E402
import fuzz_run  # noqa: E402
import pytest  # noqa: E402
import sympy  # noqa: E402
import torch  # noqa: E402
from both_paths import both_path_memories  # noqa: E402
from programs import PROGRAMS  # noqa: E402
from test_differential import CASES  # noqa: E402
from tiling_helpers import explicit_groups  # noqa: E402

from spyre_rules import config  # noqa: E402
from spyre_rules.executor import DeviceMemory, run_op_spec, stickify, views  # noqa: E402
from spyre_rules.executor import evaluate as evaluate_module  # noqa: E402
from spyre_rules.hints import clear_tensor_dims  # noqa: E402
from spyre_rules.ir.errors import find_cause  # noqa: E402
from spyre_rules.layout import generic_stick_layout  # noqa: E402
from spyre_rules.program.op_spec import OpSpec, TensorArg  # noqa: E402


def _compile_and_compare(fn, inputs, groups=(), unroll=False, settings=None):
    torch._dynamo.reset()
    before = fuzz_paths.newest_kernel_serial()
    compiled = torch.compile(fn, backend="spyre_rules", dynamic=False)
    settings = settings or {"fallback": "error", "unroll_loops": unroll}
    with config.patch(**settings), explicit_groups(*groups), torch.no_grad():
        try:
            compiled(*inputs)  # compile (and a first, structured run)
        except Exception as exc:  # noqa: BLE001 - only a clean refusal or a run-time error
            if find_cause(exc, fuzz_run.CLEAN_REFUSALS) is None and \
                    find_cause(exc, fuzz_run.RUNTIME_ERRORS) is None:
                raise
            if not fuzz_paths.kernels_since(before):
                torch._dynamo.reset()
                return False  # refused at compile time: nothing ran
        kernels = fuzz_paths.kernels_since(before)
        assert kernels
        difference = fuzz_paths.compare_paths(compiled, inputs, kernels, fuzz_run.RUNTIME_ERRORS)
    assert difference is None, difference
    torch._dynamo.reset()
    return True


@pytest.mark.parametrize("name", sorted(CASES))
def test_differential_program(name):
    fn, make_inputs = CASES[name]
    _compile_and_compare(fn, make_inputs())


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_tiled_program(program):
    try:
        _compile_and_compare(program.fn, program.inputs(), program.groups, program.unroll)
    finally:
        clear_tensor_dims()


def test_executor_add_program():
    x = torch.arange(4 * 37, dtype=torch.float32).reshape(4, 37)
    _compile_and_compare(lambda a, b: a + b, (x, torch.full((4, 37), 0.5)))


# ---- hand-written OpSpecs: chunks that start and stop inside a stick run

c0, c1 = sympy.symbols("c0 c1")


def _arg(is_input, index, layout, coords, address, name):
    return TensorArg(is_input, index, layout.device_dtype, list(layout.device_size), coords,
                     {"hbm": address}, name=name)


def _spec_memories(spec, inputs, size):
    return both_path_memories(spec, size, [(address, tensor, layout) for tensor, layout, address in inputs])


# width 128: whole sticks, so c1 is split into (stick, lane) chunk axes when a chunk
# holds whole sticks (chunk 64, 1 << 20) and stays one axis when it does not (7, 40)
@pytest.mark.parametrize("width", [150, 128])
@pytest.mark.parametrize("chunk", [7, 40, 64, 1 << 20])
@pytest.mark.parametrize("kind", ["add", "sum", "argmax", "welford_reduce", "batchmatmul"])
def test_hand_written_specs_cut_into_chunks(monkeypatch, chunk, kind, width):
    monkeypatch.setattr(evaluate_module, "CHUNK_ELEMENTS", chunk)
    lx = generic_stick_layout([5, width], [width, 1], torch.float32)  # [5, 5, 32]
    x = torch.randn(5, width, generator=torch.Generator().manual_seed(0))
    coords = [sympy.floor(c1 / 32), c0, sympy.Mod(c1, 32)]
    space = {c0: (sympy.Integer(5), 1), c1: (sympy.Integer(width), 1)}
    program = [{"op": "load", "arg": 0, "dtype": "float32"},
               {"op": "load", "arg": 1, "dtype": "float32"}]
    args = [_arg(True, 0, lx, coords, 0, "x"), _arg(True, 1, lx, coords, 0, "x")]
    if kind == "add":
        program.append({"op": "add", "in": [0, 1]})
        lo, out_coords, red, out_dtype = lx, coords, [], "float32"
    else:
        out_dtype = "int64" if kind == "argmax" else "float32"
        lo = generic_stick_layout([5], [1], torch.int64 if kind == "argmax" else torch.float32)
        out_coords, red = [sympy.floor(c0 / 32), sympy.Mod(c0, 32)], [c1]
        ins = [0, 1] if kind == "batchmatmul" else [0]
        program.append({"op": "reduction", "type": kind, "in": ins, "dtype": out_dtype,
                        "src_dtype": "float32"})
    value = len(program) - 1
    if kind == "welford_reduce":
        program.append({"op": "getitem", "in": [value], "index": 1})
        value += 1
    args.append(_arg(False, 2, lo, out_coords, lx.size_in_bytes, "out"))
    spec = OpSpec(kind, bool(red), space, args,
                  {"program": program, "store": {"arg": 2, "value": value, "dtype": out_dtype},
                   "reduction_symbols": red})
    general, structured = _spec_memories(spec, [(x, lx, 0)], lx.size_in_bytes + lo.size_in_bytes)
    assert torch.equal(general, structured)
    assert general[lx.size_in_bytes:].any()  # the op wrote its output


def test_structured_views_are_taken_for_stick_layouts():
    # The general path is the fallback: prove the usual stick access is structured.
    lx = generic_stick_layout([5, 150], [150, 1], torch.float32)
    access = evaluate_module._Access(
        "op", _arg(True, 0, lx, [sympy.floor(c1 / 32), c0, sympy.Mod(c1, 32)], 0, "x"),
        {"hbm": DeviceMemory(lx.size_in_bytes)})
    plan = access.view_plan({"c0": (0, 0, 5), "c1": (1, 0, 150)}, 2)
    assert plan is not None and plan.shape == [5, 150]
    # whole stick runs [0, 128) as (sticks, lanes) and the partial last stick
    assert [v[1] for v in plan.views] == [[5, 4, 32], [5, 22]]
    assert [v[3] for v in plan.views] == [[32, 160, 1], [32, 1]]


def test_split_stick_loads_are_views_of_device_memory():
    # [5, 128] fp32: c1 splits into 4 sticks x 32 lanes; the loads of an add are then
    # strided views of the simulated HBM (no copy), and the result equals eager bytes.
    layout = generic_stick_layout([5, 128], [128, 1], torch.float32)
    coords = [sympy.floor(c1 / 32), c0, sympy.Mod(c1, 32)]
    space = {c0: (sympy.Integer(5), 1), c1: (sympy.Integer(128), 1)}
    size = layout.size_in_bytes
    args = [_arg(True, 0, layout, coords, 0, "x"), _arg(True, 1, layout, coords, size, "y"),
            _arg(False, 2, layout, coords, 2 * size, "out")]
    program = [{"op": "load", "arg": 0, "dtype": "float32"},
               {"op": "load", "arg": 1, "dtype": "float32"}, {"op": "add", "in": [0, 1]}]
    spec = OpSpec("add", False, space, args,
                  {"program": program, "store": {"arg": 2, "value": 2, "dtype": "float32"}})
    x, y = (torch.randn(5, 128, generator=torch.Generator().manual_seed(s)) for s in (0, 1))
    memory = DeviceMemory(3 * size)
    for i, t in enumerate((x, y)):
        memory.write_bytes(i * size, stickify(t, layout).reshape(-1).view(torch.uint8))
    prog = evaluate_module._Program(spec, "", {"hbm": memory})
    assert prog.splits == {"c1": 32}
    space_ = evaluate_module._Space(3).add(["c0", "c1"], [(0, 5), (0, 128)], prog.splits)
    assert space_.shape == [5, 4, 32]
    loaded = prog._load(program[0], space_, [])
    assert loaded.untyped_storage().data_ptr() == memory.view(torch.float32).untyped_storage().data_ptr()
    run_op_spec(spec, memory)
    out = memory.read_bytes(2 * size, size).view(torch.float32)
    assert torch.equal(out, stickify(x + y, layout).reshape(-1))


@pytest.mark.parametrize("in_place", [False, True])
def test_arithmetic_store_computes_into_device_memory(in_place):
    # out = x * y: written straight into the store's view when no load can overlap it;
    # stored in place over x (the store overlaps a load), the usual compute-then-copy.
    layout = generic_stick_layout([5, 128], [128, 1], torch.float32)
    coords = [sympy.floor(c1 / 32), c0, sympy.Mod(c1, 32)]
    space = {c0: (sympy.Integer(5), 1), c1: (sympy.Integer(128), 1)}
    size = layout.size_in_bytes
    out_at = 0 if in_place else 2 * size
    args = [_arg(True, 0, layout, coords, 0, "x"), _arg(True, 1, layout, coords, size, "y"),
            _arg(False, 2, layout, coords, out_at, "out")]
    program = [{"op": "load", "arg": 0, "dtype": "float32"},
               {"op": "load", "arg": 1, "dtype": "float32"}, {"op": "mul", "in": [0, 1]}]
    spec = OpSpec("mul", False, space, args,
                  {"program": program, "store": {"arg": 2, "value": 2, "dtype": "float32"}})
    x, y = (torch.randn(5, 128, generator=torch.Generator().manual_seed(s)) for s in (2, 3))
    inputs = [(x, layout, 0), (y, layout, size)]
    general, structured = _spec_memories(spec, inputs, 3 * size)
    assert torch.equal(general, structured)
    out = structured[out_at:out_at + size].view(torch.float32)
    assert torch.equal(out, stickify(x * y, layout).reshape(-1))
    memory = DeviceMemory(3 * size)
    for tensor, lay, address in inputs:
        memory.write_bytes(address, stickify(tensor, lay).reshape(-1).view(torch.uint8))
    prog = evaluate_module._Program(spec, "", {"hbm": memory})
    space_ = evaluate_module._Space(3).add(["c0", "c1"], [(0, 5), (0, 128)], prog.splits)
    taken = prog._store_in_place(space_, space_.shape, prog.accesses[2], torch.float32)
    assert taken is not in_place
