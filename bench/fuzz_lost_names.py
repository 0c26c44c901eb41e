"""Lost hint names for the differential fuzzer (``bench/fuzz_gen.py`` draws
:class:`LostNames` after every other family, from its own random stream, so every
older program is unchanged as a prefix).

A fresh input's dims are named -- by ``name_tensor_dims`` (the hinted variants name
every input), or by ``spyre_hint(named_dims=[...])`` around a copy ``x * 1.0`` made
in a block of its own -- and one named dim is then lost through an op that reads it
partly or mixed with another dim: a slice with an offset or a short stop
(``x[:, 2:9] * 2.0``) or a reshape that merges or splits the dim.  That op sits
alone in a block ``spyre_hint(slices={name: count})`` and its result is one more
output.  In the hinted variants (manual, mixed) the hint matches no dim of its op:
the harness expects that refusal, a ``HintError`` that says where the name was lost
(``Program.lost``, :func:`verdict`); anything else -- compiling, or a refusal that
does not say which op dropped the name -- is the failure ``unexpected``.  The plain
variants (untiled, auto) compile the op like any other and compare it with eager.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from fuzz_program import MAX_NUMEL, Hint, Op, Program, _divisors, _numel

if TYPE_CHECKING:
    from fuzz_gen import _Gen

__all__ = ["LostNames", "verdict"]

RATE = 0.15
_SIZES = (4, 6, 8, 12, 16, 32, 64)


def verdict(error: str, message: str, lost: list[str]) -> str | None:
    """None when a hinted variant's refusal is the one a lost name calls for (or another
    clean refusal raised first); otherwise what is wrong with it."""
    if error != "HintError":
        return None  # refused before the hint pass (a documented refusal): not this op's
    for name in lost:
        if f"matches no dim named {name!r}" in message:
            if f"the name {name!r} was lost at " not in message:
                return f"the refusal of the lost name {name!r} does not say where it was lost"
            return None
    return None  # another hint of the program refused first


class LostNames:
    def __init__(self, gen: _Gen, program: Program) -> None:
        self.gen = gen
        self.program = program
        self.rng = random.Random(f"spyre-fuzz-lost-names:{gen.seed}:{gen.index}")

    def extend(self) -> None:
        if self.rng.random() >= RATE or len(self.gen.inputs) > 6 or len(self.gen.dims) > 20:
            return
        rank = self.rng.choice((2, 2, 3))
        shape = [self.rng.choice(_SIZES) for _ in range(rank)]
        while _numel(shape) > MAX_NUMEL // 2:
            d = max(range(rank), key=lambda i: shape[i])
            shape[d] //= 2
        d = self.rng.randrange(rank)
        lose = self.rng.choice(("slice", "reshape"))
        via_hint = self.rng.random() < 0.4  # named by spyre_hint(named_dims=...)
        names = tuple(self.gen.new_dim(s) for s in shape)
        dtype = self.gen.dtype
        x = self.gen.new_input(tuple(shape), (None,) * rank if via_hint else names, dtype)
        ops = []
        if via_hint:
            ops.append((Op(self.gen.tmp(shape, names, dtype=dtype), f"{x.var} * 1.0",
                           f"b_{x.var}", 0), Hint(0, 0, {}, names)))
            x = ops[-1][0].out
        lost_op = self._slice(x, d) if lose == "slice" else self._reshape(x, d)
        count = self.rng.choice([c for c in _divisors(shape[d]) if c > 1])
        ops.append((lost_op, Hint(0, 0, {names[d]: count})))
        for op, hint in ops:
            self.gen.add(op)
            hint.first = hint.last = len(self.gen.ops) - 1
            self.program.hints.append(hint)
        self.program.outputs.append(lost_op.out.var)
        self.program.lost.append(names[d])
        self.program.dims.update(self.gen.dims)

    def _slice(self, x, d: int) -> Op:
        n = x.shape[d]
        start = self.rng.randrange(n - 1)
        stop = self.rng.randint(start + 1, n if start else n - 1)  # never the whole dim
        index = ", ".join([":"] * d + [f"{start}:{stop}"])
        shape = list(x.shape)
        shape[d] = stop - start
        names = [n_ if i != d else None for i, n_ in enumerate(x.names)]
        return Op(self.gen.tmp(shape, names, dtype=x.dtype), f"{x.var}[{index}] * 2.0",
                  f"b_{x.var}[{index}] * 2.0", 1)

    def _reshape(self, x, d: int) -> Op:
        shape, rank = list(x.shape), len(x.shape)
        splits = [f for f in _divisors(shape[d]) if 1 < f < shape[d]]
        if rank < 4 and splits and self.rng.random() < 0.5:  # split the dim in two
            f = self.rng.choice(splits)
            new = shape[:d] + [f, shape[d] // f] + shape[d + 1:]
            names = list(x.names[:d]) + [None, None] + list(x.names[d + 1:])
        else:  # merge it with a neighbour
            j = d if d + 1 < rank else d - 1
            new = shape[:j] + [shape[j] * shape[j + 1]] + shape[j + 2:]
            names = list(x.names[:j]) + [None] + list(x.names[j + 2:])
        call = f"reshape({', '.join(map(str, new))})"
        return Op(self.gen.tmp(new, names, dtype=x.dtype), f"{x.var}.{call} * 2.0",
                  f"b_{x.var}.{call} * 2.0", 1)
