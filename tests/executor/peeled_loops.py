"""Hand-built kernels of a pointwise add over 300 elements in 64-element tiles: tiles
0..3 in ``LoopSpec(count=4)``, the 44-element tile 4 peeled into
``LoopSpec(count=1, first=4)`` whose OpSpec keeps the main tile's step
(``tiled_steps=[[64]]``).  Shared by tests/executor and tests/codegen."""

from __future__ import annotations

import dataclasses

import sympy
import torch

from spyre_rules.executor import DeviceMemory, stickify, unstickify
from spyre_rules.layout import generic_stick_layout
from spyre_rules.program.op_spec import LoopSpec, OpSpec, TensorArg

c0, c1 = sympy.symbols("c0 c1")
TILE, TOTAL, TAIL = 64, 300, 44


@dataclasses.dataclass(frozen=True)
class Case:
    """``host``: the host shape; ``tiled``: the symbol tiled (c0 rows, c1 stick columns)."""

    name: str
    host: tuple[int, int]
    tiled: sympy.Symbol
    stride: int  # bytes one tile moves every tensor
    coords: tuple[sympy.Expr, ...]

    @property
    def layout(self):
        return generic_stick_layout(list(self.host), [self.host[1], 1], torch.float16)


CASES = [
    # (300, 64) -> device [1, 300, 64]: a tile is 64 rows, 64 * 64 * 2 bytes
    Case("rows", (TOTAL, 64), c0, 64 * 64 * 2, (sympy.Integer(0), c0, c1)),
    # (8, 300) -> device [5, 8, 64]: a tile is one stick column, 8 * 64 * 2 bytes
    Case("columns", (8, TOTAL), c1, 8 * 64 * 2, (sympy.floor(c1 / 64), c0, sympy.Mod(c1, 64))),
]

#: (16, 300) -> device [5, 16, 64]: column tiles of 16 * 64 * 2 bytes inside an outer
#: loop over blocks of 8 rows (8 * 64 * 2 bytes), see ``nested``
NESTED = Case("nested", (16, TOTAL), c1, 16 * 64 * 2, (sympy.floor(c1 / 64), c0, sympy.Mod(c1, 64)))


def add_spec(case: Case, extent: int, steps: list[list[int]] | None = None) -> OpSpec:
    """out = x + y over one tile of ``extent`` elements along the tiled symbol."""
    layout = case.layout
    size = layout.size_in_bytes
    ranges = {c0: case.host[0], c1: case.host[1]}
    ranges[case.tiled] = extent

    def arg(is_input, index, name):
        return TensorArg(is_input, index, layout.device_dtype, list(layout.device_size),
                         list(case.coords), {"hbm": index * size}, name=name)

    return OpSpec(
        op="add", is_reduction=False,
        iteration_space={s: (sympy.Integer(r), 1) for s, r in ranges.items()},
        args=[arg(True, 0, "x"), arg(True, 1, "y"), arg(False, 2, "out")],
        op_info={"program": [{"op": "load", "arg": 0, "dtype": "float16"},
                             {"op": "load", "arg": 1, "dtype": "float16"},
                             {"op": "add", "in": [0, 1]}],
                 "store": {"arg": 2, "value": 2, "dtype": "float16"},
                 "reduction_symbols": []},
        tiled_symbols=[[case.tiled]],
        tiled_steps=steps,
    )


def peeled(case: Case, tail_first: int = 4) -> list[LoopSpec]:
    """Tiles 0..3 in the main loop, the short tile at ``tail_first`` peeled."""
    return [LoopSpec(sympy.Integer(4), [add_spec(case, TILE)]),
            LoopSpec(sympy.Integer(1), [add_spec(case, TAIL, [[TILE]])], first=tail_first)]


def inputs(case: Case) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    return tuple(torch.randn(*case.host, generator=g).half() for _ in range(2))


def memory_with_inputs(case: Case, x: torch.Tensor, y: torch.Tensor) -> DeviceMemory:
    layout = case.layout
    size = layout.size_in_bytes
    memory = DeviceMemory(3 * size)
    for index, tensor in enumerate((x, y)):
        memory.write_bytes(index * size, stickify(tensor, layout).reshape(-1).view(torch.uint8))
    return memory


def output(case: Case, memory: DeviceMemory) -> torch.Tensor:
    layout = case.layout
    size = layout.size_in_bytes
    raw = memory.read_bytes(2 * size, size).view(torch.float16)
    return unstickify(raw, layout, case.host, None, torch.float16)


def nested(case: Case) -> list[LoopSpec]:
    """Row blocks of 8 (outer loop of 2) around the column tiles: the 4 main tiles and
    the peeled one at inner iteration 4, for every outer iteration."""
    def spec(extent, steps):
        op = add_spec(case, extent)
        op.iteration_space[c0] = (sympy.Integer(8), 1)
        op.tiled_symbols = [[c1], [c0]]  # innermost level first
        op.tiled_steps = steps
        return op

    return [LoopSpec(sympy.Integer(2), [
        LoopSpec(sympy.Integer(4), [spec(TILE, None)]),
        LoopSpec(sympy.Integer(1), [spec(TAIL, [[TILE], [8]])], first=4)])]

