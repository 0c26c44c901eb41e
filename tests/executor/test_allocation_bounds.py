"""The executor refuses every access outside its allocation, loads and stores, on every
route: structured views, the general gather/scatter and batched counted loops.

The programs are the loop nests of issue 40 before the fix: a (127, 127) fp16 tensor,
device [2, 127, 64], tiled 64 + 63 along both dims, whose corner tile kept a whole tile
of 64 rows and reaches row 127.  (Codegen's proof, codegen/in_allocation.py, refuses
them before they run; here they are handed to the executor directly.)"""

from __future__ import annotations

import math

import pytest
import sympy

from spyre_rules.executor import DeviceMemory, DeviceMemoryError, batched_loops, views
from spyre_rules.executor.loops import check_affine, run_items
from spyre_rules.program.op_spec import DataFormats, LoopSpec, OpSpec, TensorArg

c0, c1 = sympy.symbols("c0 c1")
SIZE = 2 * 127 * 64 * 2  # bytes of one [2, 127, 64] fp16 tensor


def _arg(is_input, index, name):
    return TensorArg(is_input, index, DataFormats.SEN169_FP16, [2, 127, 64],
                     [sympy.floor(c1 / 64), c0, sympy.Mod(c1, 64)], {"hbm": index * SIZE},
                     name=name)


def _spec(rows, cols, loads):
    """``out = x + y`` (``loads``) or ``out = 1`` over a (rows, cols) tile."""
    if loads:
        args = [_arg(True, 0, "x"), _arg(True, 1, "y"), _arg(False, 2, "out")]
        program = [{"op": "load", "arg": 0, "dtype": "float16"},
                   {"op": "load", "arg": 1, "dtype": "float16"}, {"op": "add", "in": [0, 1]}]
        store = {"arg": 2, "value": 2, "dtype": "float16"}
    else:
        args = [_arg(False, 2, "out")]
        program = [{"op": "constant", "value": 1.0, "dtype": "float16"}]
        store = {"arg": 0, "value": 0, "dtype": "float16"}
    return OpSpec(op="add" if loads else "full", is_reduction=False,
                  iteration_space={c0: (sympy.Integer(rows), 1), c1: (sympy.Integer(cols), 1)},
                  args=args, op_info={"program": program, "store": store, "reduction_symbols": []},
                  tiled_symbols=[[c1], [c0]], tiled_steps=[[64], [64]])


def _corner_nest(loads):
    """The four tiles, the corner one (outer 1, inner 1) with 64 rows instead of 63."""
    def one(spec, outer, inner):
        return LoopSpec(sympy.Integer(1), [LoopSpec(sympy.Integer(1), [spec], first=inner)],
                        first=outer)

    return [one(_spec(64, 64, loads), 0, 0), one(_spec(64, 63, loads), 0, 1),
            one(_spec(63, 64, loads), 1, 0), one(_spec(64, 63, loads), 1, 1)]


@pytest.mark.parametrize("general", [False, True], ids=["views", "general"])
@pytest.mark.parametrize("loads,message", [
    (True, "op k/add: load of tensor x at byte address 32512 is outside its allocation "
           "(allocation [0, 32512))"),
    (False, "op k/full: store of tensor out at byte address 97536 is outside its allocation "
            "(allocation [65024, 97536))"),
])
def test_the_corner_tile_is_refused_on_every_route(monkeypatch, general, loads, message):
    monkeypatch.setattr(views, "FORCE_GENERAL", general)
    with pytest.raises(DeviceMemoryError) as info:
        run_items(_corner_nest(loads), DeviceMemory(3 * SIZE), "k")
    assert str(info.value) == message


def _rows(loads, size, coords):
    """A loop of two 64-row tiles (rows 64..127 in the second: one row too many)."""
    spec = _spec(64, 64, loads)
    spec.tiled_symbols, spec.tiled_steps = [[c0]], None
    for arg in spec.args:
        arg.device_size, arg.device_coordinates = list(size), list(coords)
        arg.allocation = {"hbm": arg.arg_index * math.prod(size[:-1]) * 128}
    return [LoopSpec(sympy.Integer(2), [spec])]


@pytest.mark.parametrize("batched", [True, False], ids=["batched allowed", "iterations"])
@pytest.mark.parametrize("loads", [True, False], ids=["load", "store"])
def test_a_counted_loop_past_the_rows_is_refused(monkeypatch, batched, loads):
    # one stick column [1, 127, 64]: row 127 is past the tensor's bytes; the batched
    # pass checks its views at the first and last iteration and leaves the loop to the
    # iterations, which raise the exact error
    monkeypatch.setattr(batched_loops, "ENABLED", batched)
    items = _rows(loads, (1, 127, 64), (sympy.Integer(0), c0, c1))
    with pytest.raises(DeviceMemoryError) as info:
        run_items(items, DeviceMemory(3 * SIZE), "k")
    assert str(info.value) == (
        "op k/add: load of tensor x at byte address 16256 is outside its allocation "
        "(allocation [0, 16256))" if loads else
        "op k/full: store of tensor out at byte address 48768 is outside its allocation "
        "(allocation [32512, 48768))")


@pytest.mark.parametrize("loads", [True, False], ids=["load", "store"])
def test_a_tile_past_a_device_dim_inside_the_allocation_is_refused(loads):
    # stick column 0 of [2, 127, 64]: row 127 of column 0 is row 0 of column 1, inside
    # the allocation; a run checks the tile's unshifted coordinates and its bytes, so the
    # affine check (run once per program, before the first run) checks the shifted ones
    items = _rows(loads, (2, 127, 64), (sympy.Integer(0), c0, c1))
    name, op = ("x", "add") if loads else ("out", "full")
    with pytest.raises(DeviceMemoryError) as info:
        check_affine(items, "k")
    assert str(info.value) == (
        f"kernel k: op {op}: tensor {name}: at loop iteration [1] device coordinate 1 = c0 "
        "(shifted) takes the value 127 outside [0, 127)")
