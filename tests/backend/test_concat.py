"""Concatenation and slices on the Spyre program (``backend/concat.py``).

``cat`` lowers to a ConcatKernel whose inputs write their regions of the one
output buffer; each region op is an OpSpec storing into that buffer at its
offset.  Rotary embeddings (``rotate_half``) are the motivating case.  Every
case compiles with ``fallback="error"`` and must equal eager.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from spyre_helpers import run_spyre

import spyre_rules
from spyre_rules.hints import declare_tensor_dim, name_tensor_dims, spyre_hint

TOL = {torch.float16: dict(atol=2e-2, rtol=2e-2), torch.float32: dict(atol=1e-4, rtol=1e-4)}
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])


def _randn(*shapes, dtype):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(*s, generator=g).to(dtype) for s in shapes]


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rotary(q, cos, sin):
    return q * cos + rotate_half(q) * sin


def _reused(x):
    y = x * 2
    return torch.cat([y, x], -1), y + 1


CASES = {
    # name: (fn, input shapes)
    "last_dim": (lambda a, b: torch.cat([a, b], -1), [(4, 16), (4, 32)]),
    "first_dim": (lambda a, b: torch.cat([a, b], 0) + 1, [(4, 16), (3, 16)]),
    "three_inputs_mid_dim": (lambda a, b, c: torch.cat([a, b, c], 1), [(2, 3, 8), (2, 5, 8), (2, 1, 8)]),
    "across_sticks": (lambda a, b: torch.cat([a, b], -1) * 1.5, [(3, 40), (3, 100)]),
    "transposed_input": (lambda a, b: torch.cat([a.transpose(0, 1), b], 1), [(8, 4, 16), (4, 3, 16)]),
    "stack": (lambda a, b: torch.stack([a, b], 1), [(4, 16), (4, 16)]),
    "reduced_after": (lambda a, b: torch.cat([a, b], 0).sum(0), [(4, 16), (4, 16)]),
    "input_also_read": (_reused, [(4, 16)]),
    "slice_offset": (lambda a: a[:, 2:10] * 2, [(4, 16)]),
    "slice_step": (lambda a: a[1:, ::2] * 2, [(4, 16)]),
    "rotate_half": (rotate_half, [(2, 4, 16, 16)]),
    "rotary": (_rotary, [(1, 4, 16, 16), (16, 16), (16, 16)]),
    "rotary_head_dim_64": (_rotary, [(1, 2, 8, 64), (8, 64), (8, 64)]),
    "pad_last_dim": (lambda a: F.pad(a, (1, 3)), [(4, 16)]),
    "pad_two_dims_value": (lambda a: F.pad(a, (2, 0, 1, 1), value=-1.5) * 2, [(4, 16)]),
    "pad_negative": (lambda a: F.pad(a, (-2, 3)), [(4, 16)]),
    "pad_crop_only": (lambda a: F.pad(a, (-2, -3)), [(4, 16)]),
    "pad_outer_dims": (lambda a: F.pad(a, (0, 0, 3, 5, 1, 0)), [(2, 4, 8)]),
}


@DTYPES
@pytest.mark.parametrize("case", list(CASES))
def test_equals_eager(case, dtype):
    fn, shapes = CASES[case]
    xs = _randn(*shapes, dtype=dtype)
    compiled = run_spyre(fn, *xs)
    expected = fn(*xs)
    if isinstance(expected, tuple):
        for got, want in zip(compiled.output, expected):
            torch.testing.assert_close(got, want, **TOL[dtype])
    else:
        torch.testing.assert_close(compiled.output, expected, **TOL[dtype])


def test_each_region_is_an_op_writing_the_concatenation_buffer():
    a, b = _randn((2, 4), (2, 2), dtype=torch.float32)
    compiled = run_spyre(lambda a, b: torch.cat([a, b], -1), a, b)
    writes = [(spec.op, str(arg.device_coordinates), arg.allocation["hbm"])
              for spec in compiled.op_specs() for arg in spec.args if not arg.is_input]
    # two ops, one TensorArg each, into one allocation; the second at column offset 4
    assert [w[:2] for w in writes] == [("cat", "[0, c0, c1]"), ("cat", "[0, c0, c1 + 4]")]
    assert writes[0][2] == writes[1][2]


def test_a_pad_is_a_concatenation_with_no_masked_load():
    (x,) = _randn((4, 16), dtype=torch.float32)
    compiled = run_spyre(lambda a: F.pad(a, (1, 3)), x)
    specs = compiled.op_specs()
    # fill left, copy x, fill right: three region writes, x read once, unmasked
    regions = sorted(
        ([str(a.device_coordinates) for a in s.args if not a.is_input],
         len([a for a in s.args if a.is_input]))
        for s in specs)
    assert regions == [(["[0, c0, 0]"], 0), (["[0, c0, c1 + 17]"], 0), (["[0, c0, c1 + 1]"], 1)]
    loads = [e for s in specs for e in s.op_info["program"] if e["op"] == "load"]
    assert len(loads) == 1 and "masks" not in loads[0]


def test_plan_names_the_concatenation_a_region_writes():
    a, b = _randn((2, 4), (2, 2), dtype=torch.float32)
    ops = spyre_rules.capture_operations(lambda a, b: torch.cat([a, b], -1), a, b)
    assert [type(op).__name__ for op in ops] == ["ComputedBuffer", "ComputedBuffer", "ConcatKernel"]


@pytest.mark.parametrize("dim", ["H", "S"])
def test_rotary_embeddings_inside_a_hint_loop_equal_eager(dim, fresh_dims):
    """The regions write their tiles straight into the concatenation, inside the
    one loop with the ops that read it (docs/layout_model.md §5.10)."""
    from spyre_rules.program.op_spec import LoopSpec

    q, cos, sin = _randn((1, 4, 16, 16), (16, 16), (16, 16), dtype=torch.float32)
    for n, size in zip("BHSD", q.shape):
        declare_tensor_dim(n, size)
    name_tensor_dims(q, list("BHSD"))

    def f(q, cos, sin):
        with spyre_hint(slices={dim: 2}):
            return _rotary(q * 2, cos, sin)

    compiled = run_spyre(f, q, cos, sin)
    torch.testing.assert_close(compiled.output, f(q, cos, sin), **TOL[torch.float32])
    (kernel,) = compiled.kernels
    (loop,) = kernel.specs
    assert isinstance(loop, LoopSpec) and loop.count == 2
    assert [s.op for s in loop.body] == ["mul", "mul", "neg", "cat", "mul", "add"]


def test_a_concatenation_tiled_along_its_concatenated_dim_is_refused_by_name(fresh_dims):
    declare_tensor_dim("S", 16)
    x = name_tensor_dims(torch.randn(16, 64), ["S", None])

    def f(x):
        with spyre_hint(slices={"S": 2}):
            y = x * 2
            return torch.cat((y, y * 3), dim=0) + 1

    with pytest.raises(Exception, match=r"writes a region of the concatenation buf2 \(cat, pad\) "
                       r"that covers 16 of its 32 elements along dim 0: dim 0 is the "
                       r"concatenated dim"):
        run_spyre(f, x)


def test_a_region_splits_the_stick_dim_in_whole_sticks_of_the_concatenation():
    """cat([a * 2, b * 3], -1) of fp32 (64, 64) and (64, 32) at 2 KiB: a 2-D buffer keeps
    its rows inside each column stick, so only a column split shrinks a region's write,
    and columns are the concatenated dim.  Both windows start on a stick (columns 0 and
    64), so the first region tiles its columns into whole sticks (a q, k, v projection's
    cat along its features): 4 x 2 tiles, each written straight into the concatenation.
    Span check on, bitwise equal eager."""
    from spyre_rules import config

    a, b = _randn((64, 64), (64, 32), dtype=torch.float32)
    fn = lambda a, b: torch.cat([a * 2, b * 3], -1)  # noqa: E731
    with config.patch(max_span_bytes=2048, ignore_span_overflow_hints=False,
                      span_check="error", fallback="error"):
        compiled = run_spyre(fn, a, b)
    torch.testing.assert_close(compiled.output, fn(a, b), atol=0, rtol=0)


def test_a_region_whose_window_starts_inside_a_stick_is_refused_by_name():
    """cat([a * 2, b * 3], -1) of fp32 (64, 16) and (64, 48) at 2 KiB: the second window
    starts at column 16, inside a stick, so every tile of its columns would cut the
    concatenation's sticks, and no other split shrinks its write (issue 33)."""
    from spyre_rules import config

    a, b = _randn((64, 16), (64, 48), dtype=torch.float32)
    fn = lambda a, b: torch.cat([a * 2, b * 3], -1)  # noqa: E731
    with config.patch(max_span_bytes=2048, ignore_span_overflow_hints=False), \
            pytest.raises(Exception, match=r"Cannot auto-tile buf1 \(aten ops: mul.Tensor\): no "
                          r"legal split brings its read under the limit of 2048 bytes .* host dim "
                          r"1: splits .* fail concat_dims_whole \(buf1 writes a region of a "
                          r"concatenation shorter than it along host dim 1, its stick dim, and its "
                          r"tiles would not be whole sticks of the concatenation \(window start 16"):
        run_spyre(fn, a, b)


def test_rotary_regions_tile_automatically_into_the_concatenation():
    """rotate_half of q (1, 4, 512, 64) fp16 at 128 KiB (issue 33): the cat's buffer spans
    256 KiB.  Each region spans heads and positions whole, so it tiles by two heads in
    q * 2's loop, writing each tile straight into the concatenation; the * 3 after it
    reads the whole concatenation in a loop of its own.  Span check on, equal eager."""
    from spyre_rules import config
    from spyre_rules.program.op_spec import LoopSpec

    (q,) = _randn((1, 4, 512, 64), dtype=torch.float16)
    fn = lambda q: rotate_half(q * 2) * 3  # noqa: E731
    with config.patch(max_span_bytes=128 * 1024, ignore_span_overflow_hints=False,
                      span_check="error"):
        compiled = run_spyre(fn, q)
    torch.testing.assert_close(compiled.output, fn(q), atol=0, rtol=0)
    loops = [item for k in compiled.kernels for item in k.specs if isinstance(item, LoopSpec)]
    assert [(loop.count, [s.op for s in loop.body]) for loop in loops] == \
        [(2, ["mul", "neg", "cat"]), (2, ["mul"])], loops


def test_a_region_splits_the_concatenated_dim_when_it_is_not_the_stick():
    """Mamba2's chunk states: cat([initial (1, 1, 4, 64), states (1, 7, 4, 64)], 1) fp32 at 2 KiB
    (1 KiB a chunk).  The chunks are outermost and not the stick dim, so only a split of
    the concatenated dim shrinks the states' write: 4 tiles of 2 chunks, the last 1, each
    written straight into its window at chunk 1 + 2t.  The * 3 reads the whole
    concatenation after the loop.  Span check on, bitwise equal eager."""
    from spyre_rules import config
    from spyre_rules.program.op_spec import LoopSpec

    first, states = _randn((1, 1, 4, 64), (1, 7, 4, 64), dtype=torch.float32)
    fn = lambda a, b: torch.cat([a * 2, b + 1], 1) * 3  # noqa: E731
    with config.patch(max_span_bytes=2048, ignore_span_overflow_hints=False,
                      span_check="error", fallback="error"):
        compiled = run_spyre(fn, first, states)
    torch.testing.assert_close(compiled.output, fn(first, states), atol=0, rtol=0)
    loops = [item for k in compiled.kernels for item in k.specs if isinstance(item, LoopSpec)]
    assert [(loop.count, loop.first, [s.op for s in loop.body]) for loop in loops][:2] == \
        [(3, 0, ["add"]), (1, 3, ["add"])], loops
