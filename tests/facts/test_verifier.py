"""The brute-force verifier: true spans on small spaces, refusals and bug reports."""

from __future__ import annotations

import pytest
import sympy
from torch.utils._sympy import functions as tf

from spyre_rules.errors import VerifierError
from spyre_rules.facts.verifier import DimTrueSpan, SpanReport, verify_spans

h, l, r, c0, c1, c2 = sympy.symbols("h l r c0 c1 c2", integer=True, nonnegative=True)
Mod, floor = sympy.Mod, sympy.floor


def spans(report: SpanReport) -> list[int]:
    return [d.span_elems for d in report.dims]


def test_pointwise_tile_true_spans():
    report = verify_spans([5, 16, 1, 1, 64], [c0, c1, 0, 0, c2], {c0: 5, c1: 16, c2: 64}, 2)
    assert report.points == 5 * 16 * 64
    assert spans(report) == [5, 16, 1, 1, 64]
    assert [d.span_bytes for d in report.dims] == [10_240, 2_048, 128, 128, 128]
    assert report.dims[0] == DimTrueSpan(0, 5, False, 0, 4, 1024, 2)
    assert report.dims[-1].is_stick and not report.dims[0].is_stick
    assert report.total_span_elems == 5 * 16 * 64
    assert report.total_span_bytes == 10_240
    assert report.max_dim_span_bytes == 10_240
    assert report.in_bounds and report.out_of_range_dims == []


def test_check_takes_the_limit_from_the_caller():
    report = verify_spans([5, 16, 1, 1, 64], [c0, c1, 0, 0, c2], {c0: 5, c1: 16, c2: 64}, 2)
    assert [d.device_dim for d in report.check(8192)] == [0]
    assert report.check(10_240) == []  # strictly greater overflows
    assert [d.device_dim for d in report.check(2047)] == [0, 1]


def test_reduction_input_tile_from_the_plan():
    # sum(dim=0), plan (0, 10): the per-tile read of x touches c0 in [0, 2)
    report = verify_spans(
        [20, 16, 1, 2, 64], [c0, c1, 0, r, c2], {c0: 2, c1: 16, r: 2, c2: 64}, 2
    )
    assert spans(report) == [2, 16, 1, 2, 64]
    assert report.dims[0].span_bytes == 8_192
    # offsets 2048*c0 + 128*c1 + 64*r + c2: 0 .. 2048 + 1920 + 64 + 63
    assert (report.min_offset, report.max_offset) == (0, 4095)
    assert report.total_span_bytes == 8_192
    assert report.check(8192) == []


def test_floor_and_mod_coordinates():
    report = verify_spans([16, 64, 64], [floor(c0 / 64), c1, Mod(c0, 64)], {c0: 1024, c1: 64}, 2)
    assert spans(report) == [16, 64, 64]
    assert report.dims[0].span_bytes == 131_072
    assert report.max_dim_span_bytes == 131_072
    assert report.total_span_elems == 16 * 64 * 64


def test_seed_mod_examples_true_values():
    one = lambda coord, rng: verify_spans([1, 1], [coord, 0], {h: rng}, 1).dims[0]  # noqa: E731
    assert one(floor(2 * Mod(h, 2048)), 6000).span_elems == 4095
    assert one(Mod(h, 64) + Mod(h, 128), 200).span_elems == 191
    assert (one(Mod(3 * h, 64), 100).min_coord, one(Mod(3 * h, 64), 100).max_coord) == (0, 63)
    assert one(Mod(h, 3) + Mod(h, 5), 100).max_coord == 6
    assert one(h + Mod(h, 64), 200).max_coord == 254


def test_joint_coordinate_true_span():
    report = verify_spans(
        [3 * 4096, 1], [floor(h / 2048) + 2 * Mod(l, 2048), 0], {h: 6000, l: 100}, 2
    )
    assert report.dims[0].span_elems == 2 + 198 + 1


def test_torch_index_functions():
    coords = [
        tf.FloorDiv(h, 64),
        tf.ModularIndexing(h, 2, 8),
        tf.CeilDiv(h, 100),
        tf.PythonMod(h, 7) + tf.Mod(h, 5),
        tf.Identity(sympy.Max(h, 100)) - sympy.Min(h, 10),
        tf.CleanDiv(64 * h, 64),
    ]
    report = verify_spans([1000] * 6, coords, {h: 1000}, 1)
    assert [(d.min_coord, d.max_coord) for d in report.dims] == [
        (0, 15),
        (0, 7),
        (0, 10),
        (0, 10),
        (90, 999 - 10),
        (0, 999),
    ]


def test_c_and_python_modulo_differ_on_negative_dividends():
    report = verify_spans([10, 10], [tf.Mod(h - 3, 5), Mod(h - 3, 5)], {h: 3}, 1)
    assert (report.dims[0].min_coord, report.dims[0].max_coord) == (-3, -1)
    assert (report.dims[1].min_coord, report.dims[1].max_coord) == (2, 4)


def test_chunking_does_not_change_the_answer():
    coords = [floor((3 * h + l) / 5), Mod(h * l, 7), l]
    ranges = {h: 37, l: 23}
    whole = verify_spans([100, 7, 23], coords, ranges, 2)
    chunked = verify_spans([100, 7, 23], coords, ranges, 2, chunk_points=10)
    assert whole == chunked
    assert spans(whole) == [(3 * 36 + 22) // 5 + 1, 7, 23]


def test_constant_coordinates_and_empty_symbol_set():
    report = verify_spans([3, 4, 64], [2, 1, 5], {}, 2)
    assert report.points == 1
    assert spans(report) == [1, 1, 1]
    assert report.total_span_elems == 1
    assert report.min_offset == 2 * 256 + 64 + 5
    assert report.max_dim_span_bytes == 0


def test_fixed_outer_coordinate_is_not_a_candidate():
    # a fixed row of a huge tensor: the access itself spans 128 bytes
    report = verify_spans([1, 1_000_000, 64], [0, 5, c2], {c2: 64}, 2)
    assert report.dims[0].span_bytes == 128_000_000
    assert not report.dims[0].varies
    assert report.candidate_dims == []
    assert report.check(1024) == []
    assert report.total_span_bytes == 128


def test_unused_symbols_are_not_enumerated():
    report = verify_spans([4, 64], [c0, c2], {c0: 4, c2: 64, c1: 10**9}, 2)
    assert report.points == 256


def test_out_of_range_coordinates_are_reported():
    report = verify_spans([4, 8, 64], [h + 3, l - 1, c2], {h: 2, l: 8, c2: 64}, 2)
    assert not report.in_bounds
    assert [d.device_dim for d in report.out_of_range_dims] == [0, 1]
    assert (report.dims[0].min_coord, report.dims[0].max_coord) == (3, 4)
    assert (report.dims[1].min_coord, report.dims[1].max_coord) == (-1, 6)
    assert report.dims[2].in_bounds


def test_refuses_spaces_too_large_to_enumerate():
    with pytest.raises(VerifierError) as err:
        verify_spans([2**14, 2**13], [c0, c1], {c0: 2**14, c1: 2**13}, 2)
    message = str(err.value)
    assert "134217728 points" in message
    assert "max_points=67108864" in message
    with pytest.raises(VerifierError, match=r"of 100 points \(c0:10 x c1:10\).*max_points=99"):
        verify_spans([10, 10], [c0, c1], {c0: 10, c1: 10}, 2, max_points=99)
    assert verify_spans([10, 10], [c0, c1], {c0: 10, c1: 10}, 2, max_points=100).points == 100


@pytest.mark.parametrize(
    "coord, node",
    [
        (sympy.sin(h), "sin"),
        (sympy.Float(1.5) * h, "Float"),
        (sympy.Pow(h + 1, -1), "Pow"),
        (tf.Where(h > 2, h, 0), "Where"),
    ],
)
def test_unsupported_nodes_are_named(coord, node):
    with pytest.raises(VerifierError, match=f"unsupported expression node {node}"):
        verify_spans([10, 1], [coord, 0], {h: 10}, 1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(device_size=[4, 64], coords=[h, c2], var_ranges={h: 4}, itemsize=2), "no range given for symbol c2"),
        (dict(device_size=[4, 64], coords=[h, 0], var_ranges={h: 0}, itemsize=2), "range of h"),
        (dict(device_size=[4, 64], coords=[h], var_ranges={h: 4}, itemsize=2), "1 coordinates"),
        (dict(device_size=[4, 64], coords=[h, 0], var_ranges={h: 4}, itemsize=0), "itemsize"),
        (dict(device_size=[], coords=[], var_ranges={}, itemsize=2), "empty"),
        (dict(device_size=[4, 64], coords=[h / 2, 0], var_ranges={h: 4}, itemsize=2), "non-integer"),
        (dict(device_size=[4, 64], coords=[Mod(h, l), 0], var_ranges={h: 4, l: 2}, itemsize=2), "division by zero"),
        (dict(device_size=[4, 64], coords=["h", 0], var_ranges={h: 4}, itemsize=2), "not a sympy expression"),
    ],
)
def test_refusals_name_the_problem(kwargs, match):
    with pytest.raises(VerifierError, match=match):
        verify_spans(**kwargs)


def test_name_keyed_ranges():
    assert verify_spans([4, 64], [h, 0], {"h": 4}, 2).dims[0].span_elems == 4


def test_facade_exports_the_verifier_lazily():
    import spyre_rules.spans as facade

    assert facade.verify_spans is verify_spans
    assert facade.SpanReport is SpanReport
    with pytest.raises(AttributeError):
        facade.no_such_name  # noqa: B018
