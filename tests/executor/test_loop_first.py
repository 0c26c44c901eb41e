"""A LoopSpec starting at iteration ``first`` (a peeled last tile) runs, is checked and
unrolls at its real iterations: the 300-element add of ``peeled_loops`` in four
64-element tiles and a peeled 44-element tile 4 equals x + y on every route."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import sympy
import torch

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import peeled_loops as pl  # noqa: E402

from spyre_rules.codegen.loops import unroll_loop_specs  # noqa: E402
from spyre_rules.executor import DeviceMemoryError, batched_loops  # noqa: E402
from spyre_rules.executor.loops import LoopAddressError, check_affine, run_items  # noqa: E402
from spyre_rules.program.op_spec import LoopSpec  # noqa: E402


def _run(case, items):
    x, y = pl.inputs(case)
    memory = pl.memory_with_inputs(case, x, y)
    run_items(items, memory, "k")
    return pl.output(case, memory), x + y


@pytest.mark.parametrize("batched", [True, False], ids=["batched allowed", "iterations"])
@pytest.mark.parametrize("case", pl.CASES, ids=lambda c: c.name)
def test_a_peeled_last_tile_computes_its_elements(case, batched, monkeypatch):
    monkeypatch.setattr(batched_loops, "ENABLED", batched)
    out, expected = _run(case, pl.peeled(case))
    assert torch.equal(out, expected)


@pytest.mark.parametrize("case", pl.CASES, ids=lambda c: c.name)
def test_without_the_tail_the_last_elements_stay_zero(case):
    # the tail, not the main loop, writes elements 256..299
    out, expected = _run(case, pl.peeled(case)[:1])
    tail = (slice(256, None), slice(None)) if case.tiled == pl.c0 else (slice(None), slice(256, None))
    head = (slice(None, 256), slice(None)) if case.tiled == pl.c0 else (slice(None), slice(None, 256))
    assert torch.equal(out[head], expected[head])
    assert not out[tail].any()


def test_a_batched_loop_starting_at_two_runs_tiles_two_and_three(monkeypatch):
    # tiles 0-1 and 2-3 as two batched passes (count 2 each), then the peeled tile
    case = pl.CASES[0]
    monkeypatch.setattr(batched_loops, "ENABLED", True)
    main = pl.add_spec(case, pl.TILE)
    items = [LoopSpec(sympy.Integer(2), [main]), LoopSpec(sympy.Integer(2), [main], first=2),
             pl.peeled(case)[1]]
    before = batched_loops.counts["batched"]
    out, expected = _run(case, items)
    assert batched_loops.counts["batched"] - before == 2
    assert torch.equal(out, expected)


@pytest.mark.parametrize("case", pl.CASES, ids=lambda c: c.name)
def test_one_op_spec_in_two_loops_runs_in_both(case, monkeypatch):
    # the same OpSpec object in the loops of tiles 0-1 and 2-3 (and on the route where
    # the batched pass is refused: the attempt must not leave its program unbound)
    monkeypatch.setattr(batched_loops, "ENABLED", True)
    monkeypatch.setattr(batched_loops, "GROUP_BYTES", 1)  # no pass: iterations run
    main = pl.add_spec(case, pl.TILE)
    items = [LoopSpec(sympy.Integer(2), [main]), LoopSpec(sympy.Integer(2), [main], first=2),
             pl.peeled(case)[1]]
    before = batched_loops.counts["batched"]
    out, expected = _run(case, items)
    assert batched_loops.counts["batched"] == before
    assert torch.equal(out, expected)


@pytest.mark.parametrize("case", pl.CASES, ids=lambda c: c.name)
def test_the_affine_check_runs_at_the_real_iterations(case):
    assert check_affine(pl.peeled(case), "k") == 6  # x, y, out of the main op and of the tail


def test_a_tail_stepping_by_its_own_rows_addresses_other_rows():
    # the tail with no explicit step advances by its own 44 rows: an affine program
    # (the check passes) whose tile 4 starts at row 176 -- the step is the builder's
    # to state, and the result shows the difference
    case = pl.CASES[0]
    items = pl.peeled(case)
    items[1].body[0].tiled_steps = None
    assert check_affine(items, "k") == 6
    out, expected = _run(case, items)
    assert torch.equal(out[:256], expected[:256]) and not out[256:].any()


def test_a_tail_stepping_by_part_of_a_stick_is_caught_by_the_affine_check():
    # 44 columns per iteration is not a whole number of sticks: iteration 4 (the real
    # one, not 0) moves by 4 * 88 bytes while its coordinates move by 176 columns
    case = pl.CASES[1]
    items = pl.peeled(case)
    items[1].body[0].tiled_steps = None
    with pytest.raises(LoopAddressError) as info:
        check_affine(items, "k")
    assert str(info.value) == (
        "kernel k: op add: tensor x: at loop iteration [4] the affine offset 352 bytes "
        "(strides [88]) differs from the exact coordinate shift c1 -> c1 + 176; the tile is "
        "not a rigid translation of the first one (e.g. not a whole number of sticks along "
        "the stick dim)")


@pytest.mark.parametrize("case", pl.CASES, ids=lambda c: c.name)
def test_unrolling_places_the_tail_at_iteration_four(case):
    flat = unroll_loop_specs(pl.peeled(case))
    assert len(flat) == 5
    tail = flat[-1]
    assert tail.args[0].device_size == {"rows": [1, 44, 64], "columns": [5, 8, 64]}[case.name]
    assert [int(a.allocation["hbm"]) - i * case.layout.size_in_bytes
            for i, a in enumerate(tail.args)] == [4 * case.stride] * 3
    assert [a.segment for a in tail.args] == [
        (i * case.layout.size_in_bytes, (i + 1) * case.layout.size_in_bytes) for i in range(3)]
    out, expected = _run(case, flat)
    assert torch.equal(out, expected)


@pytest.mark.parametrize("case", pl.CASES, ids=lambda c: c.name)
def test_a_tail_past_the_buffer_is_refused(case):
    # tile 5 of a 5-tile buffer: its first element is one tile past the end of x
    items = pl.peeled(case, tail_first=5)
    size = case.layout.size_in_bytes
    with pytest.raises(DeviceMemoryError) as info:
        _run(case, items)
    assert str(info.value) == (
        f"op k/add: load of tensor x at byte address {5 * case.stride} is outside its "
        f"allocation (allocation [0, {size}))")


def test_a_tail_keeping_the_full_tile_runs_past_the_rows():
    # tile 4 with 64 rows instead of 44: rows 300..319 are past the (300, 64) buffer
    case = pl.CASES[0]
    items = pl.peeled(case)
    items[1].body[0] = pl.add_spec(case, pl.TILE, [[pl.TILE]])
    with pytest.raises(DeviceMemoryError) as info:
        _run(case, items)
    assert str(info.value) == (
        "op k/add: load of tensor x at byte address 38400 is outside its allocation "
        "(allocation [0, 38400))")


@pytest.mark.parametrize("case", pl.CASES, ids=lambda c: c.name)
def test_an_unrolled_tail_past_the_buffer_is_refused(case):
    flat = unroll_loop_specs(pl.peeled(case, tail_first=5))
    size = case.layout.size_in_bytes
    # an unrolled tile's allocation is the tile: 44 rows (rows case), the whole
    # stick-tiled tensor (columns: a stick dim is never shrunk)
    tile = {"rows": 44 * 64 * 2, "columns": size}[case.name]
    assert flat[-1].args[0].size_in_bytes == tile
    with pytest.raises(DeviceMemoryError) as info:
        _run(case, flat)
    assert str(info.value) == (
        f"op k/add: load of tensor x at byte address {5 * case.stride} is outside its "
        f"allocation (allocation [{5 * case.stride}, {5 * case.stride + tile}) of the "
        f"buffer [0, {size}))")


def test_a_negative_first_iteration_is_refused():
    with pytest.raises(ValueError, match="LoopSpec: first iteration -1 is negative"):
        LoopSpec(sympy.Integer(1), [], first=-1)


def test_a_peeled_tile_inside_an_outer_loop():
    # (16, 300) fp16 -> device [5, 16, 64]: a column tile moves 16 * 64 * 2 bytes, a
    # block of 8 rows 8 * 64 * 2
    case = pl.NESTED
    items = pl.nested(case)
    assert check_affine(items, "k") == 6
    out, expected = _run(case, items)
    assert torch.equal(out, expected)
    flat = unroll_loop_specs(items)
    assert [int(s.args[0].allocation["hbm"]) for s in flat] == [
        o * 8 * 128 + i * case.stride for o in range(2) for i in range(5)]
    out, expected = _run(case, flat)
    assert torch.equal(out, expected)
