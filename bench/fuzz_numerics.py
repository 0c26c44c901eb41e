"""Programs' precision checks for the differential fuzzer (``bench/fuzz_gen.py`` calls
:class:`Numerics` after every other op family was drawn, from its own random
stream, so every older program is unchanged as a prefix).

Each family adds one op that reads only *inputs* (fresh ones, and the program's
first float input) and returns it as one more output, whose eager value no other
op's rounding touches.  So it is compared more tightly than the tolerance the
program's other outputs get (``Program.exact``, ``fuzz_run.compare``):

* ``one_element`` -- ``x * 2.0 + s * 1.5`` with a one-element ``s`` of shape
  ``()``, ``(1,)`` or all ones of ``x``'s rank (a rank-0 op broadcast into a
  tiled one): every op rounds where eager rounds, the constants are exact in
  every dtype, so the output is bit for bit eager's ("bits");
* ``bias_linear`` -- ``F.linear`` / ``torch.addmm`` with a bias in float16 or
  bfloat16 (2-D or 3-D input): eager rounds the biased sum once; the float32 sum
  runs in another order, so up to 1% of the outputs may differ ("share"); a
  product rounded before the bias add makes about 30% differ;
* ``cast_chain`` -- ``x.to(d1).to(d2)`` over float32/float16/bfloat16 (and
  ``(x * 3.0)`` first): each cast rounds where eager rounds ("bits").
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from fuzz_program import MAX_NUMEL, Op, Program, Value, _numel

if TYPE_CHECKING:
    from fuzz_gen import _Gen

__all__ = ["Numerics", "SHARE"]

#: most outputs of a "share" output that may differ from eager
SHARE = 0.01

_HALF = ("float16", "bfloat16")
_FLOATS = ("float32", "float16", "bfloat16")


class Numerics:
    FAMILIES = ("one_element", "bias_linear", "cast_chain")

    def __init__(self, gen: _Gen, program: Program) -> None:
        self.gen = gen
        self.program = program
        self.rng = random.Random(f"spyre-fuzz-numerics:{gen.seed}:{gen.index}")

    def extend(self) -> None:
        if self.rng.random() >= 0.35 or len(self.gen.inputs) > 6:
            return
        family = self.rng.choice(self.FAMILIES)
        n_inputs = len(self.gen.inputs)
        made = getattr(self, family)()
        if made is None or _numel(made[0].out.shape) > MAX_NUMEL:
            del self.gen.inputs[n_inputs:]
            self.gen.values = [w for w in self.gen.values
                               if not (w.is_input and w not in self.gen.inputs)]
            return
        op, claim = made
        old_last = len(self.gen.ops) - 1
        self.gen.add(op)
        self.program.outputs.append(op.out.var)
        self.program.exact[op.out.var] = claim
        self.program.dims.update(self.gen.dims)
        for h in self.program.hints:
            if h.last == old_last and self.rng.random() < 0.5:
                h.last = len(self.gen.ops) - 1

    def _float_input(self, dtype: str) -> Value:
        """The program's first input if it is a float of ``dtype``, else a fresh one."""
        first = self.gen.inputs[0]
        if first.dtype == dtype and first.shape and self.rng.random() < 0.5:
            return first
        rank = self.rng.choice((1, 2, 2, 3))
        shape = [self.gen.size(stick=(d == rank - 1)) for d in range(rank)]
        while _numel(shape) > MAX_NUMEL // 2:
            d = max(range(rank), key=lambda i: shape[i])
            shape[d] = max(1, shape[d] // 2)
        return self.gen.new_input(tuple(shape), tuple(self.gen.new_dim(s) for s in shape), dtype)

    def one_element(self) -> tuple[Op, str]:
        dtype = self.rng.choice(("float32", "float16"))
        x = self._float_input(dtype)
        shape = self.rng.choice(((), (1,), (1,) * len(x.shape)))
        s = self.gen.new_input(shape, (None,) * len(shape), dtype)
        return Op(self.gen.tmp(x.shape, x.names, dtype=dtype), f"{x.var} * 2.0 + {s.var} * 1.5",
                  f"b_{x.var} * 2.0 + b_{s.var} * 1.5", 3), "bits"

    def bias_linear(self) -> tuple[Op, str] | None:
        dtype = self.rng.choice(_HALF)
        rank = self.rng.choice((2, 2, 3))
        k, n = self.gen.size(stick=True), self.gen.size(stick=self.rng.random() < 0.5)
        lead = [self.gen.size() for _ in range(rank - 1)]
        if _numel(lead) * max(k, n) > MAX_NUMEL or n * k > MAX_NUMEL:
            return None
        names = [self.gen.new_dim(s) for s in lead]
        k_name, n_name = self.gen.new_dim(k), self.gen.new_dim(n)
        x = self.gen.new_input(tuple(lead) + (k,), tuple(names) + (k_name,), dtype)
        w = self.gen.new_input((n, k), (n_name, k_name), dtype)
        b = self.gen.new_input((n,), (n_name,), dtype)
        if rank == 2 and self.rng.random() < 0.4:
            expr, bound = f"torch.addmm({b.var}, {x.var}, {w.var}.t())", \
                f"torch.addmm(b_{b.var}, b_{x.var}, b_{w.var}.t())"
        else:
            expr, bound = f"F.linear({x.var}, {w.var}, {b.var})", \
                f"F.linear(b_{x.var}, b_{w.var}, b_{b.var})"
        out = self.gen.tmp(tuple(lead) + (n,), tuple(names) + (n_name,), dtype=dtype)
        return Op(out, expr, bound, 2, k, (k_name,) if k_name else ()), "share"

    def cast_chain(self) -> tuple[Op, str]:
        src = self.rng.choice(("float32", "float32", "float16"))
        x = self._float_input(src)
        chain = [self.rng.choice([d for d in _FLOATS if d != src])]
        chain.append(self.rng.choice([d for d in _FLOATS if d != chain[0]]))
        head = f"({x.var} * 3.0)" if self.rng.random() < 0.4 else x.var
        expr = head + "".join(f".to(torch.{d})" for d in chain)
        scale = " * 3.0" if head != x.var else ""
        return Op(self.gen.tmp(x.shape, x.names, dtype=chain[-1]), expr, f"b_{x.var}{scale}",
                  1 + len(chain)), "bits"
