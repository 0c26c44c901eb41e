"""The transformer-model op families of the differential fuzzer
(``bench/fuzz_gen.py`` calls :class:`Extension` after a program's original ops
were drawn; see its docstring for why they use their own random stream).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from fuzz_program import LETTERS, MAX_NUMEL, Op, Program, Value, _numel

if TYPE_CHECKING:
    from fuzz_gen import _Gen


class Extension:
    """The op families added for transformer models: gathers (embedding,
    index_select, gather), cumsum, causal masks, activations, casts, in-place ops.

    They draw from their *own* random stream and are appended after the program
    the original generator built (all of whose draws happen first), so every
    seed keeps its original ops, hints, limit and settings as a prefix; a
    program the extension picks gains one or two ops at the end (its output is
    the last new op; a hint block that closed on the old last op may grow to
    cover them, which puts the new op inside a manual tiling loop).
    """

    FAMILIES = ("gather", "cumsum", "mask", "activation", "cast", "in_place")

    def __init__(self, gen: _Gen, program: Program) -> None:
        self.gen = gen
        self.program = program
        self.rng = random.Random(f"spyre-fuzz-ops2:{gen.seed}:{gen.index}")

    def extend(self) -> None:
        if self.rng.random() >= 0.45:
            return
        old_last = len(self.gen.ops) - 1
        added = 0
        for _ in range(self.rng.choice((1, 1, 2))):
            v = self.gen.ops[-1].out
            if v.dtype == "bool" or not v.shape:
                break
            op = getattr(self, self.rng.choice(self.FAMILIES))(v)
            if op is None or _numel(op.out.shape) > MAX_NUMEL:
                break
            self.gen.add(op)
            added += 1
        # An op that gave up may have made an index input first; the input stays
        # (unused), so its dims must be declared like every other input's.
        self.program.dims.update(self.gen.dims)
        if not added:
            return
        self.program.outputs[0] = self.gen.ops[-1].out.var
        for h in self.program.hints:
            if h.last == old_last and self.rng.random() < 0.6:
                h.last = len(self.gen.ops) - 1

    def _index_input(self, shape: tuple[int, ...], high: int) -> Value:
        names = tuple(self.gen.new_dim(s) if len(self.gen.dims) < len(LETTERS) else None
                      for s in shape)
        v = self.gen.new_input(shape, names, dtype="int64")
        v.high = high
        return v

    def gather(self, v: Value) -> Op | None:
        rank = len(v.shape)
        form = self.rng.choice(("embedding", "index_select", "gather"))
        if form == "embedding" and rank == 2:
            idx = self._index_input((self.rng.choice((1, 2, 3)), self.rng.choice((3, 5, 8, 16))),
                                    v.shape[0])
            shape = idx.shape + (v.shape[1],)
            return Op(self.gen.tmp(shape, idx.names + (v.names[1],)), f"F.embedding({idx.var}, {v.var})",
                      f"F.embedding({idx.var}, b_{v.var})", 0)
        d = self.rng.randrange(rank)
        if form == "gather":
            shape = tuple(self.rng.randint(1, s) if i == d else s for i, s in enumerate(v.shape))
            idx = self.gen.new_input(shape, tuple(n if i != d else None for i, n in enumerate(v.names)),
                                     dtype="int64")
            idx.high = v.shape[d]
            names = tuple(n if i != d else None for i, n in enumerate(v.names))
            return Op(self.gen.tmp(shape, names), f"torch.gather({v.var}, {d}, {idx.var})",
                      f"torch.gather(b_{v.var}, {d}, {idx.var})", 0)
        idx = self._index_input((self.rng.choice((1, 2, 3, 5, 8)),), v.shape[d])
        shape = v.shape[:d] + idx.shape + v.shape[d + 1:]
        names = v.names[:d] + idx.names + v.names[d + 1:]
        return Op(self.gen.tmp(shape, names), f"torch.index_select({v.var}, {d}, {idx.var})",
                  f"torch.index_select(b_{v.var}, {d}, {idx.var})", 0)

    def cumsum(self, v: Value) -> Op:
        d = self.rng.randrange(len(v.shape))
        return Op(self.gen.tmp(v.shape, v.names), f"torch.cumsum({v.var}, {d})",
                  f"torch.cumsum(b_{v.var}, {d})", 1, v.shape[d])

    def mask(self, v: Value) -> Op | None:
        if len(v.shape) < 2:
            return None
        a, b = v.shape[-2:]
        form = self.rng.choice(("masked_fill", "tril", "iota"))
        if form == "masked_fill":
            m = f"torch.ones({a}, {b}, dtype=torch.bool).triu(1)"
            expr, bound = f"{v.var}.masked_fill({m}, -1e4)", f"b_{v.var}.masked_fill({m}, 1e4)"
        elif form == "tril":
            expr = f"{v.var} * torch.ones({a}, {b}, dtype={v.var}.dtype).tril()"
            bound = f"b_{v.var}"
        else:
            keep = f"torch.arange({a})[:, None] >= torch.arange({b})[None, :]"
            expr, bound = f"torch.where({keep}, {v.var}, 0.0)", f"b_{v.var}"
        return Op(self.gen.tmp(v.shape, v.names), expr, bound, 1)

    def activation(self, v: Value) -> Op:
        expr = self.rng.choice(("F.gelu({a})", "F.gelu({a}, approximate='tanh')", "F.silu({a})"))
        # |gelu(x)|, |silu(x)| <= |x| (+ a little below zero); a few roundings inside
        return Op(self.gen.tmp(v.shape, v.names), expr.format(a=v.var), f"b_{v.var} + 0.5", 4)

    def cast(self, v: Value) -> Op:
        other = "float32" if v.dtype == "float16" else "float16"
        return Op(self.gen.tmp(v.shape, v.names, dtype=v.dtype),
                  f"({v.var} * 2.0).to(torch.{other}).to(torch.{v.dtype})", f"b_{v.var} * 2.0", 2,
                  half_rounds=int(other == "float16"))

    def in_place(self, v: Value) -> Op:
        expr = self.rng.choice(("{a}.clone().mul_(0.5).add_(1.0)",
                                "{a}.clone().masked_fill_({a} > 1.0, 0.0)"))
        bound = "b_{a} * 0.5 + 1.0" if "mul_" in expr else "b_{a}"
        return Op(self.gen.tmp(v.shape, v.names), expr.format(a=v.var), bound.format(a=v.var), 2)
