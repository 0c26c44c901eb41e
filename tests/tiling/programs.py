"""The tiled programs the tiling tests compile (hints or explicit groups).

Each ``Program`` builds fresh inputs (declaring and naming dims when it uses
``spyre_hint``) and says how it is tiled: by its hints, or by explicit
``groups`` = ``([op positions], levels)`` applied at the pre-scheduling seam.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from spyre_rules.hints import clear_tensor_dims, declare_tensor_dim, name_tensor_dims, spyre_hint


@dataclasses.dataclass
class Program:
    name: str
    fn: Callable[..., Any]
    shapes: list[tuple[int, ...]]
    dtype: torch.dtype = torch.float16
    names: list[list[str]] | None = None  # dim names per input (hint programs)
    groups: tuple[Any, ...] = ()  # explicit groups (no hints)
    unroll: bool = False

    def inputs(self) -> list[torch.Tensor]:
        clear_tensor_dims()
        gen = torch.Generator().manual_seed(0)
        xs = [torch.randn(*s, generator=gen).to(self.dtype) for s in self.shapes]
        if self.names:
            for x, names in zip(xs, self.names):
                for n, size in zip(names, x.shape):
                    declare_tensor_dim(n, size)
                name_tensor_dims(x, names)
        return xs


def seed(a, b, c):
    with spyre_hint(slices={"A": 2}):  # outer loop: 2 iterations over rows
        with spyre_hint(slices={"B": 4}):  # inner loop: 4 iterations over cols
            y = a + b
            z = y * c
            return z


def flat_rows(a, b):
    with spyre_hint(slices={"A": 4}):
        return a + b


def flat_cols(a, b):
    with spyre_hint(slices={"B": 2}):
        return a * b


def internal_chain(a, b, c):
    with spyre_hint(slices={"A": 4}):
        y = a + b  # loop-internal
        z = (y * c).exp()  # loop-internal
        return z - a


def used_outside_too(a, b, c):
    with spyre_hint(slices={"A": 2}):
        y = a + b  # read inside (z) and outside (w): copy op
        z = y * c
    return z, y * 2.0


def used_only_outside(a, b):
    with spyre_hint(slices={"A": 4}):
        y = a - b  # only read outside: writes the full buffer
    return y.relu()


def output_and_inside(a, b, c):
    with spyre_hint(slices={"A": 2}):
        y = a + b  # graph output and read inside: copy op
        z = y * c
    return z, y


def row_sum(x):
    with spyre_hint(slices={"A": 4}):
        return x.sum(dim=1)


def softmax_rows(x):
    with spyre_hint(slices={"A": 4}):
        m = x.amax(dim=1, keepdim=True)
        e = (x - m).exp()
        return e / e.sum(dim=1, keepdim=True)


def three_d(x, y):
    with spyre_hint(slices={"C": 2}):
        with spyre_hint(slices={"H": 4}):
            return (x + y) * x


def bias_add(x, bias):
    with spyre_hint(slices={"A": 8}):
        return x + bias


def two_loops(a, b):
    with spyre_hint(slices={"A": 2}):
        y = a + b
    with spyre_hint(slices={"B": 2}):
        z = y * b
    return z


def transposed_consumer(a, b, c):
    with spyre_hint(slices={"A": 2}):
        with spyre_hint(slices={"B": 2}):
            y = a + b
            z = y.t() * c  # ranges (B, A): tiles dims [1] then [0]
            return z


def mean_last(x):
    with spyre_hint(slices={"R": 4}):
        return x.mean(dim=-1)


def sum0(x):
    return x.sum(dim=0)


def add_one(x):
    return x + 1.0


def scaled(a, b):
    return (a * 0.5) + b


def chain3(a, b):
    y = a + b
    z = y * y
    return z - b


PROGRAMS = [
    Program("seed_nested_add_mul", seed, [(1024, 4096)] * 3, names=[["A", "B"]] * 3),
    Program("flat_rows_fp32", flat_rows, [(64, 256)] * 2, torch.float32, names=[["A", "B"]] * 2),
    Program("flat_cols_fp16", flat_cols, [(32, 256)] * 2, names=[["A", "B"]] * 2),
    Program("loop_internal_chain", internal_chain, [(64, 128)] * 3, names=[["A", "B"]] * 3),
    Program("copy_for_outside_reader", used_outside_too, [(32, 128)] * 3, names=[["A", "B"]] * 3),
    Program("writes_full_buffer", used_only_outside, [(64, 128)] * 2, names=[["A", "B"]] * 2),
    Program("copy_for_graph_output", output_and_inside, [(32, 128)] * 3, torch.float32,
            names=[["A", "B"]] * 3),
    Program("row_sum_tiled_on_output", row_sum, [(64, 192)], names=[["A", "B"]]),
    Program("softmax_rows_fp32", softmax_rows, [(32, 96)], torch.float32, names=[["A", "B"]]),
    Program("three_d_nested", three_d, [(4, 16, 128)] * 2, names=[["C", "H", "W"]] * 2),
    Program("bias_broadcast", bias_add, [(64, 128), (128,)], names=[["A", "B"], ["B"]]),
    Program("two_top_level_loops", two_loops, [(32, 128)] * 2, names=[["A", "B"]] * 2),
    Program("mean_tiled_fp32", mean_last, [(16, 64)], torch.float32, names=[["R", "K"]]),
    Program("non_stick_multiple_cols", flat_rows, [(96, 100)] * 2, names=[["A", "B"]] * 2),
    Program("sum_dim0_count10", sum0, [(2, 20, 16, 64)], groups=(([0], [(10, [0])]),)),
    Program("explicit_nested_fp32", add_one, [(8, 256)], torch.float32,
            groups=(([0], [(2, [0]), (2, [1])]),)),
    Program("explicit_two_op_group", scaled, [(64, 64)] * 2, groups=(([0, 1], 4),)),
    Program("explicit_chain_nested", chain3, [(16, 512)] * 2,
            groups=(([0, 1, 2], [(4, [0]), (4, [1])]),)),
    Program("unrolled_flat", flat_rows, [(64, 256)] * 2, names=[["A", "B"]] * 2, unroll=True),
    Program("unrolled_internal_chain", internal_chain, [(64, 128)] * 3,
            names=[["A", "B"]] * 3, unroll=True),
    Program("unrolled_three_d_nested", three_d, [(4, 16, 128)] * 2, names=[["C", "H", "W"]] * 2,
            unroll=True),
    Program("unrolled_sum_dim0", sum0, [(2, 20, 16, 64)], groups=(([0], [(10, [0])]),),
            unroll=True),
]
