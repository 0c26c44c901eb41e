"""Operands read twice for the differential fuzzer (``bench/fuzz_gen.py`` draws
:class:`Gram` after every other family, from its own random stream, so every older
program is unchanged as a prefix).

One matmul reads one tensor twice, once transposed: ``x @ x.T``, ``x.T @ x``,
``torch.mm(x, x.t())``, ``x @ x.transpose(-1, -2)``, ``torch.bmm(x, x.transpose(1,
2))``, ``x.transpose(1, 2) @ x``.  The tensor is the program's last value (a computed
tensor read twice) or a fresh input whose row count is odd or has no stick divisor
(33, 37, 45, 63, 65, 67, 89): both output dims then follow one source dim, both reads
of its restickified copy need stick-whole splits, and automatic tiling cuts both
with a shorter last tile -- a loop nest with a remainder at two levels, whose corner
tile stored past its output before issue 40 was fixed.  The result is one more
output, compared with eager under the program's tolerance.  A program whose last block
tests a lost hint name (``fuzz_lost_names``) is left as it is: that block must stay last.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from fuzz_program import MAX_NUMEL, Op, Program, Value, _numel

if TYPE_CHECKING:
    from fuzz_gen import _Gen

__all__ = ["Gram", "RATE"]

RATE = 0.3
_ROWS = (33, 37, 45, 63, 65, 67, 89, 64, 8)
_K = (32, 64, 37, 96, 16)

# (expression, bound) templates over a variable ``{v}``; ``outer``: the output is
# the columns' Gram matrix (K x K, the rows reduced) rather than the rows' (M x M)
_FORMS = {
    2: [("{v} @ {v}.T", False), ("torch.mm({v}, {v}.t())", False), ("{v}.T @ {v}", True)],
    3: [("{v} @ {v}.transpose(-1, -2)", False), ("torch.bmm({v}, {v}.transpose(1, 2))", False),
        ("{v}.transpose(1, 2) @ {v}", True)],
}


class Gram:
    def __init__(self, gen: _Gen, program: Program) -> None:
        self.gen = gen
        self.program = program
        self.rng = random.Random(f"spyre-fuzz-gram:{gen.seed}:{gen.index}")

    def extend(self) -> None:
        if self.rng.random() >= RATE or len(self.gen.inputs) > 6 or len(self.gen.dims) > 20:
            return
        if self.program.lost:
            return  # a lost name's block must stay the program's last op, alone
        n_inputs = len(self.gen.inputs)
        op = self._op(self._operand())
        if op is None:
            del self.gen.inputs[n_inputs:]
            self.gen.values = [w for w in self.gen.values
                               if not (w.is_input and w not in self.gen.inputs)]
            return
        old_last = len(self.gen.ops) - 1
        self.gen.add(op)
        self.program.outputs.append(op.out.var)
        self.program.dims.update(self.gen.dims)
        for h in self.program.hints:
            if h.last == old_last and self.rng.random() < 0.5:
                h.last = len(self.gen.ops) - 1

    def _operand(self) -> Value:
        """The program's last value when it is a float matrix or batch of them, else a
        fresh input of an awkward row count."""
        op = self.gen.ops[-1] if self.gen.ops else None
        # a var_mean's value is a (var, mean) tuple: no tensor to read twice
        if op is not None and len(op.out.shape) in (2, 3) and op.out.dtype not in ("bool", "int64") \
                and "var_mean(" not in op.expr and self.rng.random() < 0.4:
            return op.out
        rank = self.rng.choice((2, 2, 3))
        shape = ([self.rng.choice((2, 3))] if rank == 3 else []) + [
            self.rng.choice(_ROWS), self.rng.choice(_K)]
        names = tuple(self.gen.new_dim(s) for s in shape)
        dtype = self.rng.choice(("float16", "float32", self.gen.dtype))
        return self.gen.new_input(tuple(shape), names, dtype)

    def _op(self, v: Value) -> Op | None:
        template, outer = self.rng.choice(_FORMS[len(v.shape)])
        lead, (m, k) = list(v.shape[:-2]), v.shape[-2:]
        lead_names, (m_name, k_name) = list(v.names[:-2]), v.names[-2:]
        side, side_name, reduced, reduced_name = (k, k_name, m, m_name) if outer else \
            (m, m_name, k, k_name)
        shape = (*lead, side, side)
        if _numel(shape) > MAX_NUMEL:
            return None
        # one name per dim: the second copy of the side dim stays unnamed
        out = self.gen.tmp(shape, (*lead_names, side_name, None), dtype=v.dtype)
        return Op(out, template.format(v=v.var), template.format(v=f"b_{v.var}"), 1, reduced,
                  (reduced_name,) if reduced_name is not None else ())
