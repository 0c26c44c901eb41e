"""The combining-reduction family of the differential fuzzer: argmax / argmin and
Welford statistics (``var``, ``var_mean``), over one dim, several, or the whole tensor.

Drawn from its *own* random stream after everything else (``fuzz_gen.build``), so
every seed keeps its earlier ops, hints and settings as a prefix.  A program it
picks gains one op at the end (the program's output), and often a ``spyre_hint``
block of that op alone splitting a dim it reduces -- a reduction level whose
partial results combine across tiles (docs/accumulation.md).

argmax / argmin compare exactly, so they read values both sides compute with the
same bits: a new input ``w`` with the last value's shape and dim names, rounded to
quarters (``torch.round(w * 4.0)``: exact, and ties within and across tiles are
common).  ``var`` / ``var_mean`` read the last value; their bound is the sum of
``(|x| + mean |x|)^2`` over the reduced elements divided by ``n - 1`` (every
``(x - mean)^2`` is at most that term), with ``n`` accumulated elements.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from fuzz_program import Hint, Op, Program, Value, _divisors, _numel

if TYPE_CHECKING:
    from fuzz_gen import _Gen

#: share of programs that gain a combining reduction
RATE = 0.3


class Reductions:
    FAMILIES = ("argmax", "argmin", "var", "var_mean")

    def __init__(self, gen: _Gen, program: Program) -> None:
        self.gen = gen
        self.program = program
        self.rng = random.Random(f"spyre-fuzz-red:{gen.seed}:{gen.index}")

    def extend(self) -> None:
        if self.rng.random() >= RATE or not self.gen.ops:
            return
        v = self.gen.ops[-1].out
        if v.dtype not in ("float16", "float32") or not v.shape:
            return
        kind = self.rng.choice(self.FAMILIES)
        dims, arg = self._dims(v, kind)
        n = _numel([v.shape[d] for d in dims])
        if n < 2:
            return
        op = (self._index if kind in ("argmax", "argmin") else self._stats)(v, kind, dims, arg, n)
        old_last = len(self.gen.ops) - 1
        self.gen.add(op)
        i = len(self.gen.ops) - 1
        self.program.outputs[0] = op.out.var
        self.program.dims.update(self.gen.dims)
        for h in self.program.hints:
            if h.last == old_last and self.rng.random() < 0.5:
                h.last = i
        reduced = [n for n in op.reduced_names if self.gen.dims[n] > 1]
        if reduced and self.rng.random() < 0.6:
            name = self.rng.choice(reduced)
            splits = [d for d in _divisors(self.gen.dims[name]) if d > 1]
            self.program.hints.append(Hint(i, i, {name: self.rng.choice(splits)}))

    def _dims(self, v: Value, kind: str) -> tuple[list[int], str]:
        rank = len(v.shape)
        r = self.rng.random()
        if r < 0.25:
            return list(range(rank)), ""
        if kind in ("var", "var_mean") and r < 0.4 and rank >= 2:
            dims = sorted(self.rng.sample(range(rank), 2))
            return dims, f"dim={tuple(dims)}"
        d = self.rng.randrange(rank)
        keep = self.rng.random() < 0.3
        return [d], f"dim={d - rank if self.rng.random() < 0.3 else d}" + (
            ", keepdim=True" if keep else "")

    def _shape(self, v: Value, dims: list[int], arg: str) -> tuple[tuple, tuple]:
        if not arg:
            return (), ()
        if "keepdim" in arg:
            return (tuple(1 if d in dims else s for d, s in enumerate(v.shape)),
                    tuple(None if d in dims else n for d, n in enumerate(v.names)))
        return (tuple(s for d, s in enumerate(v.shape) if d not in dims),
                tuple(n for d, n in enumerate(v.names) if d not in dims))

    def _index(self, v: Value, kind: str, dims: list[int], arg: str, n: int) -> Op:
        w = self.gen.new_input(v.shape, v.names)
        shape, names = self._shape(v, dims, arg)
        out = self.gen.tmp(shape, names, dtype="int64")
        reduced = tuple(v.names[d] for d in dims if v.names[d] is not None)
        expr = f"torch.round({w.var} * 4.0).{kind}({arg})"
        # indices compare exactly; the bound is never read for an int64 output
        return Op(out, expr, f"torch.zeros({list(shape)}, dtype=torch.float64)", 0, 0, reduced)

    def _stats(self, v: Value, kind: str, dims: list[int], arg: str, n: int) -> Op:
        shape, names = self._shape(v, dims, arg)
        red = f"dim={tuple(dims)}" if dims else ""
        keep = ", keepdim=True" if "keepdim" in arg else ""
        call = f"{red}{keep}" if red else ""
        b = f"b_{v.var}"
        mean_b = f"{b}.mean({red}, keepdim=True)" if red else f"{b}.mean()"
        var_b = (f"(({b} + {mean_b}) ** 2).sum({call}) / {n - 1}" if red
                 else f"(({b} + {mean_b}) ** 2).sum() / {n - 1}")
        reduced = tuple(v.names[d] for d in dims if v.names[d] is not None)
        if kind == "var":
            out = self.gen.tmp(shape, names)
            expr = f"{v.var}.var({arg})"
            return Op(out, expr, var_b, 4, n, reduced)
        out = self.gen.tmp(shape, names)
        expr = f"torch.var_mean({v.var}{', ' + arg if arg else ''})"
        bound = f"({var_b}, {b}.mean({call}))" if red else f"({var_b}, {b}.mean())"
        return Op(out, expr, bound, 4, n, reduced)
