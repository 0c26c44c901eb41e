"""Reductions over stick-split rows: the reduction symbol takes two chunk axes
(stick, lane), so loads are strided views of device memory, and the bits equal
both the general path's and eager torch's reduction of the contiguous row
(docs/architecture.md, "Loads as views before a reduction")."""

from __future__ import annotations

import pytest
import sympy
import torch
from both_paths import both_path_memories

from spyre_rules.executor import DeviceMemory, dtypes, unstickify
from spyre_rules.executor import evaluate as evaluate_module
from spyre_rules.layout import generic_stick_layout
from spyre_rules.program.op_spec import OpSpec, TensorArg

c0, c1 = sympy.symbols("c0 c1")


def _arg(is_input, index, layout, coords, address, name):
    return TensorArg(is_input, index, layout.device_dtype, list(layout.device_size), coords,
                     {"hbm": address}, name=name)


def _row_reduction(rows, width, kind, centred=False):
    """``out[c0] = reduce_c1 x[c0, c1]`` (``centred``: of ``(x - m[c0])**2``), its
    layouts and the addresses of x, m and out."""
    lx = generic_stick_layout([rows, width], [width, 1], torch.float32)
    out_dtype = torch.int64 if kind in ("argmax", "argmin") else \
        torch.bool if kind == "any" else torch.float32
    lr = generic_stick_layout([rows], [1], torch.float32)
    lo = generic_stick_layout([rows], [1], out_dtype)
    row = [sympy.floor(c0 / 32), sympy.Mod(c0, 32)]
    stick = int(lo.device_size[-1])
    out_row = [sympy.floor(c0 / stick), sympy.Mod(c0, stick)]
    x_at, m_at = 0, lx.size_in_bytes
    out_at = m_at + lr.size_in_bytes
    args = [_arg(True, 0, lx, [sympy.floor(c1 / 32), c0, sympy.Mod(c1, 32)], x_at, "x"),
            _arg(True, 1, lr, row, m_at, "m"), _arg(False, 2, lo, out_row, out_at, "out")]
    program = [{"op": "load", "arg": 0, "dtype": "float32"},
               {"op": "load", "arg": 1, "dtype": "float32"}]
    value = 0
    if centred:
        program += [{"op": "sub", "in": [0, 1]}, {"op": "square", "in": [2]}]
        value = 3
    dtype = {torch.int64: "int64", torch.bool: "bool", torch.float32: "float32"}[out_dtype]
    program.append({"op": "reduction", "type": kind, "in": [value], "dtype": dtype,
                    "src_dtype": "float32"})
    value = len(program) - 1
    if kind == "welford_reduce":
        program.append({"op": "getitem", "in": [value], "index": 1})
        value += 1
    space = {c0: (sympy.Integer(rows), 1), c1: (sympy.Integer(width), 1)}
    spec = OpSpec(kind, True, space, args,
                  {"program": program, "store": {"arg": 2, "value": value, "dtype": dtype},
                   "reduction_symbols": [c1]})
    return spec, (lx, lr, lo), (x_at, m_at, out_at)


def _both(spec, layouts, addresses, x, m):
    """Memory bytes after the general path and after the structured path (equal, or
    the test fails here)."""
    lx, lr, lo = layouts
    general, structured = both_path_memories(
        spec, addresses[2] + lo.size_in_bytes,
        [(addresses[0], x, lx), (addresses[1], m, lr)])
    assert torch.equal(general, structured)
    return structured


def _eager(kind, v):
    if kind == "sum":
        return v.sum(-1)
    if kind == "max":
        return v.amax(-1)
    if kind == "min":
        return v.amin(-1)
    if kind == "argmax":
        return v.argmax(-1)
    if kind == "argmin":
        return v.argmin(-1)
    if kind == "prod":
        return v.prod(-1)
    if kind == "any":
        return v.bool().any(-1)
    raise AssertionError(kind)


def _host_out(memory_bytes, layouts, addresses, rows, dtype):
    lo = layouts[2]
    raw = memory_bytes[addresses[2]:addresses[2] + lo.size_in_bytes]
    storage = dtypes.storage_dtype(lo.device_dtype, dtype)
    return unstickify(raw.view(storage), lo, [rows], dtype=dtype)


@pytest.mark.parametrize("shape", [(5, 128), (40, 1024), (3, 150)])
@pytest.mark.parametrize("centred", [False, True])
@pytest.mark.parametrize("kind", ["sum", "max", "min", "argmax", "argmin", "prod", "any",
                                  "welford_reduce"])
def test_split_reduction_matches_general_path_and_eager(kind, centred, shape):
    rows, width = shape
    gen = torch.Generator().manual_seed(rows + width)
    x = torch.randn(rows, width, generator=gen) * 3
    x[0, 5] = 0.0  # any(): a false lane; argmax/min ties and zeros
    m = torch.randn(rows, generator=gen)
    spec, layouts, addresses = _row_reduction(rows, width, kind, centred)
    structured = _both(spec, layouts, addresses, x, m)
    if kind == "welford_reduce":
        return  # no single eager op; both paths agree byte for byte (_both)
    value = (x - m[:, None]).square() if centred else x
    expected = _eager(kind, value)
    got = _host_out(structured, layouts, addresses, rows, expected.dtype)
    # bits, not closeness (NaN payloads included): the same row order as eager
    if expected.dtype == torch.float32:
        got, expected = got.view(torch.int32), expected.view(torch.int32)
    assert torch.equal(got, expected)


def test_reduction_symbol_is_split_and_exact_op_loads_are_views():
    spec, layouts, addresses = _row_reduction(4, 128, "sum", centred=True)
    memory = DeviceMemory(addresses[2] + layouts[2].size_in_bytes)
    prog = evaluate_module._Program(spec, "", {"hbm": memory})
    assert prog.red_splits == {"c1": 32} and prog._reduction_splits() == {"c1": 32}
    out = evaluate_module._Space(3).add(["c0"], [(0, 4)], prog.splits)
    space = evaluate_module._Space(3, out).add(["c1"], [(0, 128)], prog._reduction_splits())
    assert space.shape == [4, 4, 32]
    loaded = prog._load(spec.op_info["program"][0], space, [], 0)
    # the sub consumes x: a strided view of the simulated HBM, no copy
    assert loaded.untyped_storage().data_ptr() == memory.view(torch.float32).untyped_storage().data_ptr()
    assert list(loaded.shape) == [4, 4, 32]


def test_long_reduction_is_not_split(monkeypatch):
    # a reduction longer than the chunk bound is evaluated in pieces: one axis, as before
    monkeypatch.setattr(evaluate_module, "CHUNK_ELEMENTS", 64)
    spec, layouts, addresses = _row_reduction(3, 128, "sum")
    memory = DeviceMemory(addresses[2] + layouts[2].size_in_bytes)
    prog = evaluate_module._Program(spec, "", {"hbm": memory})
    assert prog.red_splits == {"c1": 32} and prog._reduction_splits() == {}
    x = torch.randn(3, 128, generator=torch.Generator().manual_seed(7))
    m = torch.zeros(3)
    _both(spec, layouts, addresses, x, m)


# ---- max / min read from the strided view, checked afterwards (executor/extrema.py)

def _plant(x, what, row):
    """Plant order-sensitive values in ``row`` of ``x`` (bits via int32 views)."""
    bits = x.view(torch.int32)
    if what == "zeros":  # every element a zero of either sign: which one wins is the order's
        x[row] = 0.0
        bits[row, ::3] = torch.tensor(-0.0).view(torch.int32)
    elif what == "nan_payloads":  # several NaNs with different payloads
        bits[row, 7] = 0x7FC00001
        bits[row, 70] = 0x7FC12345
        bits[row, 100] = -0x3FFFFF  # a negative quiet NaN (0xFFC00001)
    elif what == "subnormals":
        x[row] = -1.0
        bits[row, 3] = 1  # the smallest positive subnormal
        bits[row, 40] = 5
        x[row, 90] = -0.0
    return x


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("what", ["none", "zeros", "nan_payloads", "subnormals"])
def test_extremum_of_view_matches_general_path_and_eager(monkeypatch, kind, what):
    rows, width = 8, 128
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(11))
    if kind == "min" and what == "subnormals":
        x = -x  # min over the planted row: the subnormals are then the largest values
    if what != "none":
        x = _plant(x, what, 2)
        if kind == "min" and what == "subnormals":
            x[2] = -x[2]
    taken = []
    real = evaluate_module.extrema.extremum_of_view
    monkeypatch.setattr(evaluate_module.extrema, "extremum_of_view",
                        lambda *a: taken.append(real(*a)) or taken[-1])
    spec, layouts, addresses = _row_reduction(rows, width, kind)
    m = torch.zeros(rows)
    structured = _both(spec, layouts, addresses, x, m)
    got = _host_out(structured, layouts, addresses, rows, torch.float32)
    assert torch.equal(got.view(torch.int32), _eager(kind, x).view(torch.int32))
    # the view was read; its result is used only when no element can depend on the order
    assert len(taken) == 1 and (taken[0] is None) == (what != "none")


def test_extremum_of_view_refuses_every_order_sensitive_result():
    tiny = torch.finfo(torch.float32).tiny
    view = torch.tensor([[1.0, 2.0], [-3.0, -4.0]])
    assert torch.equal(evaluate_module.extrema.extremum_of_view("max", view, 1),
                       torch.tensor([2.0, -3.0]))
    for bad in (0.0, -0.0, float("nan"), tiny / 2, -tiny / 4):
        assert evaluate_module.extrema.extremum_of_view(
            "max", torch.tensor([[bad, bad]]), 1) is None
    assert evaluate_module.extrema.extremum_of_view(
        "min", torch.tensor([[tiny, float("inf")]]), 1) is not None
