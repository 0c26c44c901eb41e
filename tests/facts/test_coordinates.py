"""Device / host coordinates of Inductor indices (docs/layout_model.md §1.4, §1.5)."""

from __future__ import annotations

import itertools
import math
import re

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from sympy import Mod, floor

from spyre_rules.errors import CoordinateError
from spyre_rules.facts.coordinates import device_coordinates, host_coordinates, to_plain_sympy
from spyre_rules.facts.stick_layout import (
    DataFormat,
    SpyreTensorLayout,
    contiguous_strides,
    generic_stick_layout,
    restickify_layout,
)

c0, c1, c2, c3, c4 = sympy.symbols("c0:5", integer=True, nonnegative=True)
n, k = sympy.symbols("n k", integer=True, nonnegative=True)
CS = [c0, c1, c2, c3, c4]


def generic(size, dtype="float16", stride=None):
    return generic_stick_layout(size, contiguous_strides(size) if stride is None else stride, dtype)


def contiguous_index(size, stride=None):
    """Inductor's MemoryDep form: unit dims squeezed, loop vars numbered densely."""
    stride = contiguous_strides(size) if stride is None else stride
    dims = [d for d, s in enumerate(size) if s != 1]
    index = sum((CS[i] * stride[d] for i, d in enumerate(dims)), sympy.Integer(0))
    return index, {CS[i]: size[d] for i, d in enumerate(dims)}


# --------------------------------------------------------------------------- §1.5 table


@pytest.mark.parametrize(
    "size, dtype, want",
    [
        ([1024, 4096], "float16", [floor(c1 / 64), c0, Mod(c1, 64)]),
        ([512, 1024], "float16", [floor(c1 / 64), c0, Mod(c1, 64)]),
        ([1, 8195, 256, 64], "float16", [c0, c1, 0, 0, c2]),
        ([2, 20, 16, 64], "float16", [c1, c2, 0, c0, c3]),
        ([20, 16, 64], "float16", [c1, 0, c0, c2]),
        ([2, 64], "float16", [0, c0, c1]),
        ([1024, 64], "float16", [0, c0, c1]),
        ([4096, 4096, 4096, 64], "float16", [c1, c2, 0, c0, c3]),
        ([128, 256, 512], "float16", [c1, floor(c2 / 64), c0, Mod(c2, 64)]),
        ([4, 150], "float16", [floor(c1 / 64), c0, Mod(c1, 64)]),
        ([1024, 4096], "float32", [floor(c1 / 32), c0, Mod(c1, 32)]),
        ([4194304], "float16", [floor(c0 / 64), Mod(c0, 64)]),
    ],
)
def test_worked_example_coordinates(size, dtype, want):
    index, ranges = contiguous_index(size)
    assert device_coordinates(generic(size, dtype), index, ranges) == want


def test_scalar_coordinates():
    assert device_coordinates(generic([]), sympy.Integer(0), {}) == [0, 0]


def test_sparse_one_element_per_stick():
    sparse = generic_stick_layout([64], [1], "float16", [0, -1])
    assert device_coordinates(sparse, c0, {c0: 64}) == [0, c0, 0]


# --------------------------------------------------------------------------- LM head (§1.5)


def test_restickified_weight_own_write():
    w = restickify_layout([1024, 64], [64, 1], "float16", 0)
    assert device_coordinates(w, 64 * c0 + c1, {c0: 1024, c1: 64}) == [floor(c0 / 64), c1, Mod(c0, 64)]


def test_transposed_view_reads_restickified_layout():
    w_t = generic_stick_layout([64, 1024], [1, 64], "float16")
    assert device_coordinates(w_t, c0 + 64 * c1, {c0: 64, c1: 1024}) == [floor(c1 / 64), c0, Mod(c1, 64)]


def test_unrestickified_weight_read_transposed_sticks_on_k():
    w = generic([1024, 64])
    assert device_coordinates(w, c0 + 64 * c1, {c0: 64, c1: 1024}) == [0, c1, c0]


def test_bmm_read_of_restickified_buffer():
    w = restickify_layout([1024, 64], [64, 1], "float16", 0)
    assert device_coordinates(w, 64 * n + k, {n: 1024, k: 64}) == [floor(n / 64), k, Mod(n, 64)]
    assert host_coordinates([1024, 64], [64, 1], 64 * n + k, {n: 1024, k: 64}) == [n, k]


# --------------------------------------------------------------------------- index forms


def test_constant_offset():
    w = generic([1024, 64])
    assert device_coordinates(w, 64 * c0 + c1 + 24, {c0: 1024, c1: 40}) == [0, c0, c1 + 24]
    big = generic([1024, 4096])
    # 20480 + 24 = 5 rows + 24: the offset is decomposed over the dims it crosses.
    assert device_coordinates(big, 4096 * c0 + c1 + 20504, {c0: 8, c1: 128}) == [floor(c1 / 64), c0 + 5, Mod(c1, 64) + 24]
    # With c1 < 64 the loop ranges make floor(c1/64) = 0 and Mod(c1, 64) = c1.
    assert device_coordinates(big, 4096 * c0 + c1 + 20504, {c0: 8, c1: 64}) == [0, c0 + 5, c1 + 24]


def test_inductor_floordiv_and_modularindexing():
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    layout = generic([1024, 4096])
    index = 4096 * c0 + 64 * FloorDiv(c1, 64) + ModularIndexing(c1, 1, 64)
    assert device_coordinates(layout, index, {c0: 1024, c1: 4096}) == [floor(c1 / 64), c0, Mod(c1, 64)]
    # A flat loop var walking a [16, 64] tensor.
    flat = 64 * FloorDiv(c0, 64) + ModularIndexing(c0, 1, 64)
    assert device_coordinates(generic([16, 64]), flat, {c0: 1024}) == [0, floor(c0 / 64), Mod(c0, 64)]
    # ModularIndexing(a, b, c) == Mod(floor(a/b), c).
    assert to_plain_sympy(ModularIndexing(c1, 8, 64)) == Mod(floor(c1 / 8), 64)
    assert to_plain_sympy(FloorDiv(c1, 64)) == floor(c1 / 64)


def test_torch_mod_classes_are_rewritten():
    from torch.utils._sympy.functions import Identity, PythonMod
    from torch.utils._sympy.functions import Mod as TorchMod

    layout = generic([64])
    assert device_coordinates(layout, PythonMod(c0, 64), {c0: 128}) == [0, Mod(c0, 64)]
    assert device_coordinates(layout, TorchMod(c0, 64), {c0: 128}) == [0, Mod(c0, 64)]
    assert device_coordinates(layout, Identity(c0), {c0: 64}) == [0, c0]


def test_sympy_floor_and_mod_forms():
    layout = generic([16, 64])
    assert device_coordinates(layout, 64 * floor(c0 / 64) + Mod(c0, 64), {c0: 1024}) == [0, floor(c0 / 64), Mod(c0, 64)]


def test_repeat_broadcast_var():
    # A [64] tensor re-read for every row of a [1024, 64] loop nest (broadcast).
    layout = generic([64])
    assert device_coordinates(layout, c1, {c0: 1024, c1: 64}) == [0, c1]
    # Repeat var: Mod(v, M) with M < R, also with a coefficient.
    assert device_coordinates(layout, Mod(c0, 64), {c0: 1024}) == [0, Mod(c0, 64)]
    two = generic([8, 2])
    assert device_coordinates(two, 2 * Mod(c0, 8), {c0: 100}) == [0, Mod(c0, 8), 0]
    # Mod with modulus >= range is the var itself.
    assert device_coordinates(layout, Mod(c0, 64), {c0: 32}) == [0, c0]


def test_size_one_vars_and_non_loop_symbols_are_skipped():
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    layout = generic([1024, 4096])
    assert device_coordinates(layout, 4096 * c0 + c1 + 7 * c2, {c0: 1024, c1: 4096, c2: 1}) == [floor(c1 / 64), c0, Mod(c1, 64)]
    assert device_coordinates(layout, 4096 * c0 + c1 + s0, {c0: 1024, c1: 4096}) == [floor(c1 / 64), c0, Mod(c1, 64)]


def test_real_inductor_modularindexing_index():
    # The read index Inductor 2.13 emits for x.permute(1, 0, 2).reshape(16, 512) on x[64, 16, 8].
    from torch.utils._sympy.functions import ModularIndexing

    d0, d1 = sympy.symbols("d0 d1", integer=True, nonnegative=True)
    index = 8 * d0 + ModularIndexing(d1, 1, 8) + 128 * ModularIndexing(d1, 8, 64)
    x = generic([64, 16, 8])
    assert list(x.device_size) == [16, 1, 64, 64]
    assert device_coordinates(x, index, {d0: 16, d1: 512}) == [d0, 0, floor(d1 / 8), Mod(d1, 8)]
    assert host_coordinates([64, 16, 8], [128, 8, 1], index, {d0: 16, d1: 512}) == [floor(d1 / 8), d0, Mod(d1, 8)]


def test_index_lowered_by_inductor():
    torch = pytest.importorskip("torch")
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V
    from torch.fx.experimental.proxy_tensor import make_fx

    x = torch.randn(64, 16, 8, dtype=torch.float16)
    gm = make_fx(lambda t: t.permute(1, 0, 2).reshape(16, 512) + 1)(x)
    graph = GraphLowering(gm)
    with V.set_graph_handler(graph):
        graph.run(x)
        (op,) = graph.operations
        (read,) = op.get_read_writes().reads
        (write,) = op.get_read_writes().writes
    ranges = dict(zip(read.var_names, read.size))
    d0, d1 = read.var_names
    coords = device_coordinates(generic([64, 16, 8]), read.index, ranges)
    assert [str(c) for c in coords] == [str(d0), "0", f"floor({d1}/8)", f"Mod({d1}, 8)"]
    out = device_coordinates(generic([16, 512]), write.index, dict(zip(write.var_names, write.size)))
    w0, w1 = write.var_names
    assert [str(c) for c in out] == [f"floor({w1}/64)", str(w0), f"Mod({w1}, 64)"]


def test_plain_symbols_without_assumptions():
    a, b = sympy.symbols("a b")
    coords = device_coordinates(generic([1024, 4096]), 4096 * a + b, {a: 1024, b: 4096})
    assert [str(c) for c in coords] == ["floor(b/64)", "a", "Mod(b, 64)"]
    assert coords[1] == a


def test_accepts_objects_with_device_layout():
    class Holder:
        device_layout = generic([1024, 4096])

    assert device_coordinates(Holder(), 4096 * c0 + c1, {c0: 1024, c1: 4096}) == [floor(c1 / 64), c0, Mod(c1, 64)]


def test_host_coordinates_basic():
    assert host_coordinates([2, 20, 16, 64], contiguous_strides([2, 20, 16, 64]), 20480 * c3 + 1024 * c0 + 64 * c1 + c2,
                            {c0: 20, c1: 16, c2: 64, c3: 2}) == [c3, c0, c1, c2]
    assert host_coordinates([], [], sympy.Integer(0), {}) == []


# --------------------------------------------------------------------------- errors


def err(message: str):
    return pytest.raises(CoordinateError, match="^" + re.escape(message) + "$")


def test_errors_name_index_and_reason():
    layout = generic([1024, 64])
    with err("cannot derive coordinates of index Mod(3*c0, 64): term Mod(3*c0, 64) is not coeff * (var | floor(var/b) | Mod(var, m), nested)"):
        device_coordinates(layout, Mod(3 * c0, 64), {c0: 100})
    with err("cannot derive coordinates of index 63 - c0: term -c0 has coefficient -1, not a positive integer"):
        device_coordinates(layout, 63 - c0, {c0: 64})
    with err("cannot derive coordinates of index c0*c1: term c0*c1 is not coeff * (var | floor(var/b) | Mod(var, m), nested)"):
        device_coordinates(layout, c0 * c1, {c0: 4, c1: 4})
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    with err("cannot derive coordinates of index c0*s0 + c1: term c0*s0 mixes loop vars with non-loop symbols"):
        device_coordinates(layout, s0 * c0 + c1, {c0: 4, c1: 64})
    with err("cannot derive coordinates of index 64*c0: range of c0 is s0, not an integer"):
        device_coordinates(layout, 64 * c0, {c0: s0})
    with err("cannot derive coordinates of index c0/2: term c0/2 has coefficient 1/2, not a positive integer"):
        device_coordinates(layout, c0 / 2, {c0: 4})
    with err("cannot derive coordinates of index c0 - 5: constant offset -5 is negative"):
        device_coordinates(layout, c0 - 5, {c0: 64})
    # A raw layout whose strides cannot express a unit step: the term would be lost.
    raw = SpyreTensorLayout((1, 4, 64), (-1, 4, -1), DataFormat.SEN169_FP16)
    with err("cannot derive coordinates of index c0: term c0 (step 1) lands on no dim of size [1, 4, 64] stride [-1, 4, -1]"):
        device_coordinates(raw, c0, {c0: 4})


def test_bad_layout_and_host_inputs():
    with pytest.raises(CoordinateError, match="is neither a SpyreTensorLayout nor has a .device_layout"):
        device_coordinates(object(), c0, {c0: 4})
    with err("host_size [4, 64] and host_stride [64] differ in length"):
        host_coordinates([4, 64], [64], c0, {c0: 4})
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    with err("host_size[1] = s0 is not a non-negative integer (in host_size [4, s0])"):
        host_coordinates([4, s0], [64, 1], c0, {c0: 4})


# --------------------------------------------------------------------------- round trip


def _check_round_trip(size, dim_order):
    stride = contiguous_strides(size)
    layout = generic_stick_layout(size, stride, "float16", dim_order)
    index, ranges = contiguous_index(size)
    coords = device_coordinates(layout, index, ranges)
    syms = list(ranges)
    seen = set()
    points = list(itertools.product(*(range(ranges[s]) for s in syms)))
    for values in points:
        env = dict(zip(syms, values))
        point = [int(c.subs(env)) for c in coords]
        assert all(0 <= p < ds for p, ds in zip(point, layout.device_size)), (size, point)
        assert layout.host_offset(point) == int(index.subs(env)), (size, dim_order, point)
        seen.add(tuple(point))
    assert len(seen) == len(points)  # distinct host elements never share a device slot


@pytest.mark.parametrize("size, dim_order", [([4, 150], None), ([3, 130], [1, 0]), ([2, 3, 70], [2, 0, 1]),
                                             ([5, 1, 66], None), ([130], None)])
def test_round_trip_examples(size, dim_order):
    _check_round_trip(size, dim_order)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 70), min_size=1, max_size=4).filter(lambda s: math.prod(s) <= 600),
       st.randoms(use_true_random=False))
def test_round_trip_property(size, rnd):
    order = list(range(len(size)))
    rnd.shuffle(order)
    _check_round_trip(size, order)


def test_access_coordinates_exact_for_a_view_across_a_padded_stick():
    """x.view(-1) of a [5, 37] fp32 buffer read as one loop variable c0."""
    from spyre_rules.facts.coordinates import access_coordinates
    from spyre_rules.layout import generic_stick_layout

    layout = generic_stick_layout([5, 37], [37, 1], "float32")
    assert layout.device_size == (2, 5, 32)
    c0 = sympy.Symbol("c0", integer=True, nonnegative=True)
    coords = access_coordinates(layout, [5, 37], [37, 1], 0, c0, {c0: 185})
    for flat in range(185):
        row, col = divmod(flat, 37)
        got = [int(c.subs(c0, flat)) for c in coords]
        assert got == [col // 32, row, col % 32], flat


def test_access_coordinates_subtracts_the_storage_offset():
    from spyre_rules.facts.coordinates import access_coordinates
    from spyre_rules.layout import generic_stick_layout

    layout = generic_stick_layout([4, 64], [64, 1], "float16")
    c0, c1 = (sympy.Symbol(n, integer=True, nonnegative=True) for n in ("c0", "c1"))
    coords = access_coordinates(layout, [4, 64], [64, 1], 128, 128 + 64 * c0 + c1, {c0: 4, c1: 64})
    assert coords == [sympy.Integer(0), c0, c1]
