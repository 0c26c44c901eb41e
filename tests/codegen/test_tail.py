"""codegen/tail.py: a loop nest whose op has a remainder at two levels (issue 40).

Codegen builds a nest from the inside out, so the inner level is peeled first and
the outer level's tail clips the copies the inner tail made.  The corner tile (the
last outer tile x the last inner tile) must run both remainders: before the fix it
kept the outer dim's whole range and stored one row past an odd-sized buffer."""

from __future__ import annotations

import sympy

from spyre_rules.codegen.tail import peel_last_tile
from spyre_rules.program.op_spec import DataFormats, LoopSpec, OpSpec, TensorArg

c0, c1 = sympy.symbols("c0 c1")


def _gram_tile() -> OpSpec:
    """One (64, 64) tile of a (127, 127) fp16 output, rows tiled by the outer level,
    columns by the inner one (device [2, 127, 64]: floor(c1/64), c0, Mod(c1, 64))."""
    out = TensorArg(False, 0, DataFormats.SEN169_FP16, [2, 127, 64],
                    [sympy.floor(c1 / 64), c0, sympy.Mod(c1, 64)], {"hbm": 0}, name="buf0")
    return OpSpec(op="add", is_reduction=False,
                  iteration_space={c0: (sympy.Integer(64), 1), c1: (sympy.Integer(64), 1)},
                  args=[out], op_info={"store": {"arg": 0}, "reduction_symbols": []},
                  tiled_symbols=[[c1], [c0]])


def _ranges(spec: OpSpec) -> dict[str, int]:
    return {str(s): int(r) for s, (r, _) in spec.iteration_space.items()}


def _nest(items: list) -> list:
    """``(first, count, body)`` of every loop, each OpSpec as its ranges and steps."""
    return [(int(i.first), int(i.count), _nest(i.body)) if isinstance(i, LoopSpec)
            else (_ranges(i), i.tiled_steps) for i in items]


def test_the_corner_tile_runs_both_remainders():
    spec = _gram_tile()
    tails = {id(spec): [{c0: 63}, {c1: 63}]}  # outermost level first
    inner = peel_last_tile(LoopSpec(count=sympy.Integer(2), body=[spec]), 1, tails)
    outer = peel_last_tile(LoopSpec(count=sympy.Integer(2), body=inner), 0, tails)
    whole = ({"c0": 64, "c1": 64}, None)
    assert _nest(outer) == [
        (0, 1, [(0, 1, [whole]),
                (1, 1, [({"c0": 64, "c1": 63}, [[64], [64]])])]),
        (1, 1, [(0, 1, [({"c0": 63, "c1": 64}, [[64], [64]])]),
                (1, 1, [({"c0": 63, "c1": 63}, [[64], [64]])])]),
    ]


def test_an_op_with_one_remainder_level_is_clipped_once():
    spec = _gram_tile()
    tails = {id(spec): [{}, {c1: 63}]}
    inner = peel_last_tile(LoopSpec(count=sympy.Integer(2), body=[spec]), 1, tails)
    outer = peel_last_tile(LoopSpec(count=sympy.Integer(2), body=inner), 0, tails)
    assert _nest(outer) == [
        (0, 2, [(0, 1, [({"c0": 64, "c1": 64}, None)]),
                (1, 1, [({"c0": 64, "c1": 63}, [[64], [64]])])]),
    ]
