"""One exact op on half-precision loads, computed in the half dtype (executor/native_half.py).

What the code relies on, checked against torch itself: the native float16/bfloat16
kernels of ``+ - * /``, negation and ``x*x`` give the float32 route's bits
(``op(a.float(), b.float()).to(half)``) on every output that is not NaN, in any memory
layout, and a NaN exactly where it gives one; only NaN bits depend on the layout.
What the executor promises: every NaN stored in half storage is the canonical one,
and the structured path (native compute where it applies) writes the very bytes of
the general path (``views.FORCE_GENERAL``) on random bit patterns full of NaN
payloads, infs, subnormals and signed zeros, in padded sticks, with scalar tails,
in place and with a store overlapping a load; and those blocks really are computed
natively (``native_half.counts``).
"""

from __future__ import annotations

import pytest
import sympy
import torch
from both_paths import both_path_memories

from spyre_rules.executor import (DeviceMemory, DeviceMemoryError, dtypes, native_half, run_op_spec,
                                  stickify, views)
from spyre_rules.layout import generic_stick_layout
from spyre_rules.program.op_spec import OpSpec, TensorArg

c0, c1 = sympy.symbols("c0 c1")
HALVES = [torch.float16, torch.bfloat16]
BINARY = ["add", "sub", "mul", "truediv", "div_rn"]
UNARY = ["neg", "square"]
TORCH_OPS = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "truediv": torch.true_divide,
             "div_rn": torch.true_divide, "neg": torch.neg, "square": torch.square}


def _int16(values):
    return torch.tensor(values, dtype=torch.int32).to(torch.int16)


def special_bits(shape, dtype, seed, nan=True):
    """Random bit patterns, with many NaNs (random payload and sign, quiet and
    signalling), infs, subnormals and zeros of both signs; ``nan=False``: none of the
    NaNs, infs or values whose sums reach inf."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for d in shape:
        n *= d
    bits = torch.randint(-32768, 32768, (n,), generator=g, dtype=torch.int32)
    kind = torch.randint(0, 16, (n,), generator=g)
    payload = torch.randint(1, 1 << 9, (n,), generator=g, dtype=torch.int32)
    sign = torch.randint(0, 2, (n,), generator=g, dtype=torch.int32) << 15
    if dtype == torch.float16:
        nan_bits, inf_bits, mantissa = 0x7C00, 0x7C00, 0x3FF
    else:
        nan_bits, inf_bits, mantissa = 0x7F80, 0x7F80, 0x7F
    if nan:
        bits = torch.where(kind < 3, sign | nan_bits | (payload & mantissa).clamp(min=1), bits)
        bits = torch.where(kind == 3, sign | inf_bits, bits)
    else:
        small = torch.randn(n, generator=g).to(dtype).view(torch.int16).to(torch.int32)
        bits = torch.where(kind < 4, small & 0xFFFF, bits)
    bits = torch.where(kind == 4, sign | (payload & mantissa), bits)  # subnormal
    bits = torch.where(kind == 5, sign, bits)  # signed zero
    out = bits.to(torch.int16).view(dtype)
    if not nan:  # keep magnitudes where no sum or product overflows to inf
        out = torch.where(out.isfinite() & (out.abs() < 100), out, torch.ones((), dtype=dtype))
    return out.reshape(shape)


# ---- the torch behaviour the native path relies on

@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("op", BINARY + UNARY)
def test_native_half_kernels_give_the_float32_routes_bits_except_nan_payloads(dtype, op):
    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    fn = TORCH_OPS[op]
    if op in UNARY:
        ins = [every]
    else:  # every value against a random partner, and random pairs
        g = torch.Generator().manual_seed(7)
        pick = torch.randint(0, 65536, (2, 1 << 18), generator=g)
        ins = [torch.cat([every, every[pick[0]]]), torch.cat([every[torch.randperm(65536, generator=g)],
                                                              every[pick[1]]])]
    reference = fn(*[x.float() for x in ins]).to(dtype)
    nan = reference.isnan()
    strided_ins = []
    for x in ins:
        wide = torch.empty(2 * x.numel(), dtype=dtype)[::2]  # torch's scalar loop
        wide.copy_(x)
        strided_ins.append(wide)
    strided = torch.empty(2 * ins[0].numel(), dtype=dtype)[::2]
    fn(*strided_ins, out=strided)
    for native in (fn(*ins), strided):
        assert torch.equal(native.isnan(), nan)
        assert torch.equal(native.view(torch.int16)[~nan], reference.view(torch.int16)[~nan])


def test_native_half_nan_payloads_do_depend_on_the_layout():
    # why stored half NaNs are made canonical: the same float16 add gives
    # other NaN bits when torch runs its scalar loop (a strided operand) than its vector loop
    g = torch.Generator().manual_seed(3)
    x = special_bits((1 << 14,), torch.float16, 1)
    y = x[torch.randperm(x.numel(), generator=g)]
    wide_x, wide_y = (torch.empty(2 * x.numel(), dtype=torch.float16)[::2] for _ in range(2))
    wide_x.copy_(x)
    wide_y.copy_(y)
    contiguous, strided = x + y, wide_x + wide_y
    nan = contiguous.isnan()
    assert torch.equal(strided.isnan(), nan)
    assert not torch.equal(contiguous.view(torch.int16)[nan], strided.view(torch.int16)[nan])


# ---- the executor: structured == general, byte for byte

def _arg(is_input, index, layout, coords, address, name):
    return TensorArg(is_input, index, layout.device_dtype, list(layout.device_size), coords,
                     {"hbm": address}, name=name)


def _spec(op, rows, cols, dtype, out_address=None, out_coords=None):
    """``out = op(x[, y])`` over ``[rows, cols]`` stick layouts: x at 0, y at one segment,
    out at two segments (or ``out_address``)."""
    layout = generic_stick_layout([rows, cols], [cols, 1], dtype)
    size = layout.size_in_bytes
    coords = [sympy.floor(c1 / 64), c0, sympy.Mod(c1, 64)]
    name = str(dtype).removeprefix("torch.")
    unary = op in UNARY
    args = [_arg(True, 0, layout, coords, 0, "x")]
    program = [{"op": "load", "arg": 0, "dtype": name}]
    if not unary:
        args.append(_arg(True, 1, layout, coords, size, "y"))
        program.append({"op": "load", "arg": 1, "dtype": name})
    store = len(args)
    address = 2 * size if out_address is None else out_address
    args.append(_arg(False, store, layout, out_coords or coords, address, "out"))
    program.append({"op": op, "in": [0] if unary else [0, 1]})
    spec = OpSpec(op, False, {c0: (sympy.Integer(rows), 1), c1: (sympy.Integer(cols), 1)}, args,
                  {"program": program, "store": {"arg": store, "value": len(program) - 1,
                                                 "dtype": name},
                   "reduction_symbols": []})
    return spec, layout, size


def _both_paths(spec, layout, size, tensors, total=None):
    """The whole memory after one run on each path, and the native block counts (the
    general path runs no native block, so they are the structured run's)."""
    before = dict(native_half.counts)
    general, structured = both_path_memories(
        spec, total or 3 * size, [(i * size, t, layout) for i, t in enumerate(tensors)])
    counts = {k: native_half.counts[k] - before[k] for k in before}
    return general, structured, counts


SHAPES = [(8, 128), (5, 40), (3, 150), (64, 1024), (7, 1)]
#: shapes whose block is one strided view per arg (a padded or partial stick is one
#: view; (3, 150) is whole sticks plus a partial one: two views, the float32 route)
ONE_VIEW = {(8, 128), (5, 40), (64, 1024), (7, 1)}


def _expected(op, tensors, layout, dtype):
    """The stored bytes: the float32 route's value, every NaN canonical."""
    value = TORCH_OPS[op](*[t.float() for t in tensors]).to(dtype)
    value.view(torch.int16)[value.isnan()] = dtypes.CANONICAL_NAN[dtype]
    return stickify(value, layout).reshape(-1).view(torch.uint8)


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("op", BINARY + UNARY)
@pytest.mark.parametrize("rows,cols", SHAPES)
@pytest.mark.parametrize("nan", [True, False])
def test_random_bits_give_the_general_paths_bytes(dtype, op, rows, cols, nan):
    spec, layout, size = _spec(op, rows, cols, dtype)
    tensors = [special_bits((rows, cols), dtype, seed, nan=nan) for seed in (1, 2)][:len(spec.args) - 1]
    general, structured, counts = _both_paths(spec, layout, size, tensors)
    assert torch.equal(general, structured)
    assert torch.equal(structured[2 * size:], _expected(op, tensors, layout, dtype))
    native = (rows, cols) in ONE_VIEW
    assert counts["native"] == int(native)
    if nan and native:
        assert counts["canonical"] == 1


def test_canonical_nans_are_torchs_own_nan():
    for dtype, bits in dtypes.CANONICAL_NAN.items():
        assert torch.tensor(float("nan"), dtype=dtype).view(torch.int16).item() == bits


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("op", ["add", "mul"])
def test_a_single_nan_anywhere_is_found(dtype, op):
    # every position of a padded, odd block: a NaN with a payload, or inf - inf
    rows, cols = 3, 70
    spec, layout, size = _spec(op, rows, cols, dtype)
    nan = _int16([0xFC05 if dtype == torch.float16 else 0xFF85]).view(dtype)[0]
    for position in range(rows * cols):
        x = special_bits((rows, cols), dtype, 5, nan=False)
        y = special_bits((rows, cols), dtype, 6, nan=False)
        if position % 2:
            x.view(-1)[position] = nan
        else:  # inf + -inf, or 0 * inf: NaN from operands that are not NaN
            x.view(-1)[position] = float("inf")
            y.view(-1)[position] = float("-inf") if op == "add" else 0.0
        general, structured, counts = _both_paths(spec, layout, size, [x, y])
        assert torch.equal(general, structured), position
        assert torch.equal(structured[2 * size:], _expected(op, [x, y], layout, dtype)), position


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("nan", [True, False])
@pytest.mark.parametrize("op, cols, out_address, seeds", [
    ("mul", 192, 0, (8, 9)),  # in place: out is x's own segment, computed aside then stored
    ("add", 128, 128, (10, 11)),  # out overlaps x by one stick
], ids=["in_place", "one_stick_overlap"])
def test_store_overlapping_an_operand(dtype, nan, op, cols, out_address, seeds):
    rows = 16
    spec, layout, size = _spec(op, rows, cols, dtype, out_address=out_address)
    tensors = [special_bits((rows, cols), dtype, seed, nan=nan) for seed in seeds]
    general, structured, counts = _both_paths(spec, layout, size, tensors)
    assert torch.equal(general, structured)
    assert counts == {"native": 1, "canonical": int(nan)}


def test_store_of_a_transposed_layout_is_the_general_paths():
    # out's sticks run along the other dim: not one view in the block's shape
    rows = cols = 64
    out_coords = [sympy.floor(c0 / 64), c1, sympy.Mod(c0, 64)]
    spec, layout, size = _spec("add", rows, cols, torch.float16, out_coords=out_coords)
    tensors = [special_bits((rows, cols), torch.float16, s, nan=False) for s in (12, 13)]
    general, structured, counts = _both_paths(spec, layout, size, tensors)
    assert torch.equal(general, structured)
    assert counts["native"] == 0


def test_a_store_outside_its_allocation_raises_the_general_paths_error():
    spec, layout, size = _spec("add", 8, 128, torch.float16)
    spec.args[2].device_size = [2, 4, 64]  # rows 4..7 are outside the output's buffer
    messages = []
    for general in (True, False):
        memory = DeviceMemory(3 * size)
        views.FORCE_GENERAL = general
        try:
            with pytest.raises(DeviceMemoryError) as caught:
                run_op_spec(spec, memory)
        finally:
            views.FORCE_GENERAL = False
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert "store of tensor out" in messages[0]


def test_only_a_lone_exact_op_of_same_dtype_loads_is_native():
    accesses = []  # prepare reads accesses only for eligible programs

    def prepared(program, store_dtype="float16"):
        store = {"arg": 2, "value": len(program) - 1, "dtype": store_dtype}
        return native_half.prepare(program, store, accesses, None)

    load = [{"op": "load", "arg": 0, "dtype": "float16"}, {"op": "load", "arg": 1, "dtype": "float16"}]
    assert prepared([*load, {"op": "exp", "in": [0]}]) is None  # not exact
    assert prepared([*load, {"op": "add", "in": [0, 1]}], "float32") is None  # converted store
    mixed = [load[0], {"op": "load", "arg": 1, "dtype": "bfloat16"}, {"op": "add", "in": [0, 1]}]
    assert prepared(mixed) is None  # the general path computes float32 of mixed halves
    chain = [*load, {"op": "add", "in": [0, 1]}, {"op": "mul", "in": [2, 0]}]
    assert prepared(chain) is None  # the intermediate is not rounded on the general path
    constant = [load[0], {"op": "constant", "value": 0.5, "dtype": None}, {"op": "mul", "in": [0, 1]}]
    assert prepared(constant) is None
    unused = [*load, {"op": "neg", "in": [0]}]
    assert prepared(unused) is None  # an unused load's bounds check still runs


# ---- a compiled tiled program (the bench's (a + b) * c in 8 row tiles)

@pytest.mark.parametrize("batched", [False, True], ids=["iterations", "batched"])
def test_tiled_half_program_with_nans_is_path_identical_and_native(batched, monkeypatch):
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent.parent
    for folder in (tests / "tiling", tests.parent / "bench"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    import fuzz_paths
    from tiling_helpers import explicit_groups

    from spyre_rules import config
    from spyre_rules.executor import batched_loops

    monkeypatch.setattr(batched_loops, "ENABLED", batched)
    inputs = [special_bits((256, 256), torch.float16, seed) for seed in (20, 21, 22)]
    inputs[2] = special_bits((256, 256), torch.float16, 22, nan=False)
    torch._dynamo.reset()
    before = fuzz_paths.newest_kernel_serial()
    program = torch.compile(lambda a, b, c: (a + b) * c, backend="spyre_rules", dynamic=False)
    with config.patch(fallback="error"), explicit_groups(([0, 1], 8)), torch.no_grad():
        out = program(*inputs)
        kernels = fuzz_paths.kernels_since(before)
        start = dict(native_half.counts)
        program(*inputs)
        # 2 ops x 8 tiles, or 2 ops over all tiles at once
        assert native_half.counts["native"] - start["native"] == (2 if batched else 16)
        assert native_half.counts["canonical"] > start["canonical"]
        assert fuzz_paths.compare_paths(program, inputs, kernels, (RuntimeError,)) is None
    expected = (inputs[0].float() + inputs[1].float()).half()
    expected = (expected.float() * inputs[2].float()).half()
    assert torch.equal(out.isnan(), expected.isnan())
    assert torch.equal(out[~out.isnan()].view(torch.int16), expected[~out.isnan()].view(torch.int16))
    assert set(out.view(torch.int16)[out.isnan()].tolist()) == {dtypes.CANONICAL_NAN[torch.float16]}
    torch._dynamo.reset()
