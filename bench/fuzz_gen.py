"""Seeded random programs for the differential fuzzer (``bench/fuzz_programs.py``).

A program is 1-4 ops over 1-4 input tensors (ranks 1-4, fp16 or fp32):
pointwise ops, broadcasts, reductions over any axis (sum/mean/amax/amin, keepdim
or not), transposes/permutes made contiguous, views and reshapes (including ones
whose rows straddle source rows), matmul/bmm/linear (3-D @ 2-D too); and, from their own random stream and
appended after everything else was drawn (``_Gen.extend_attention``, so older
programs are a prefix), ``cat``, sliced reads with offsets and steps, constant
pads (negative too) and ``F.scaled_dot_product_attention`` on a rank-4 value.  Every
input dim carries a declared name, so the same ops can be wrapped in
``spyre_hint`` blocks: 1-2 levels, splits up to the dim's size, nested hints on
the same dim, blocks whose ops do not all carry the hinted dim, and (about a
third of the hints) splits of a dim an op of the block reduces -- a sum's axis or
a matmul's K -- which compile to reduction levels with an accumulator.  About 45% of
programs then gain one or two ops of the transformer-model families
(``fuzz_extension.Extension``: embedding / index_select / gather over int64 index inputs,
cumsum, causal masks, GELU / SiLU, dtype round trips, in-place ops), drawn from
a separate random stream so that the original part of every seed is unchanged.
About 30% of programs then gain a combining reduction (``fuzz_reductions``:
argmax / argmin, ``var`` / ``var_mean`` over a dim, several or all), often with a
hint block of its own splitting a dim it reduces, from a third stream.
About a third finally gain a precision check (``fuzz_numerics.Numerics``, a stream of
its own, drawn last): an op on inputs only -- a one-element operand, a float16 or
bfloat16 bias linear / addmm, a low-precision cast chain -- returned as one more
output that must equal eager bit for bit, or differ in at most 1% of its elements.
About 15% gain, from a fifth stream drawn after that, an op that loses a named dim (a
slice or reshape of it) alone in a hint block slicing that name
(``fuzz_lost_names.LostNames``): the hinted variants must refuse it with a HintError
saying where the name was lost.
About 30% gain, from a sixth stream drawn last, a matmul reading one tensor twice,
once transposed (``fuzz_gram.Gram``: ``x @ x.T``, ``torch.bmm(x, x.transpose(1, 2))``
and kin, often at odd row counts), as one more output.

Each program renders to Python source with three functions sharing one op list:

* ``f_plain``  -- the ops (no hints): untiled and automatic-tiling variants;
* ``f_hinted`` -- the ops inside the hint blocks: manual and mixed variants;
* ``f_bound``  -- the ops on |inputs| in float64 with every sign-sensitive op
  replaced by its magnitude bound (``a - b`` -> ``A + B``, ``relu`` -> ``A``, ...).
  ``f_bound`` bounds every element's magnitude *and* the first-order propagation
  of rounding errors, which is what the comparison tolerance is scaled by.

The program is a pure function of ``(seed, index)``: ``--replay SEED:INDEX``
rebuilds it exactly.  No torch import here.
"""

from __future__ import annotations

import math
import random

from fuzz_extension import Extension
from fuzz_gram import Gram
from fuzz_lost_names import LostNames
from fuzz_numerics import Numerics
from fuzz_reductions import Reductions
from fuzz_program import (LETTERS, MAX_NUMEL, Hint, Op, Program, Value, _broadcast, _broadcastable,  # noqa: F401
                          _divisors, _numel, _vars_in)

__all__ = ["Program", "generate", "VARIANTS"]

VARIANTS = ("untiled", "manual", "auto", "mixed")

_SIZES = (1, 2, 3, 4, 5, 6, 8, 12, 16, 32, 64)
_SIZE_WEIGHTS = (2, 6, 4, 6, 2, 3, 6, 3, 5, 5, 4)
_STICK_SIZES = (32, 64, 128, 37, 96)
#: share of op draws taken by the ops added later (``_Gen.extended``)
EXTENDED_RATE = 0.3

# ---------------------------------------------------------------- generation


class _Gen:
    def __init__(self, seed: int, index: int, read_twice: bool = True) -> None:
        self.rng = random.Random(f"spyre-fuzz:{seed}:{index}")
        self.read_twice = read_twice
        # Ops added later draw from their own stream (see ``extended``).
        self.ext = random.Random(f"spyre-fuzz-ext:{seed}:{index}")
        self.seed, self.index = seed, index
        self.dtype = self.rng.choice(("float16", "float32"))
        self.dims: dict[str, int] = {}
        self.inputs: list[Value] = []
        self.values: list[Value] = []
        self.ops: list[Op] = []
        self._n_tmp = 0

    # --- names, sizes, values

    def new_dim(self, size: int) -> str | None:
        if size == 1:
            return None
        name = LETTERS[len(self.dims)]
        self.dims[name] = size
        return name

    def size(self, stick: bool = False) -> int:
        if stick and self.rng.random() < 0.6:
            return self.rng.choice(_STICK_SIZES)
        return self.rng.choices(_SIZES, _SIZE_WEIGHTS)[0]

    def new_input(self, shape: tuple[int, ...], names: tuple[str | None, ...],
                  dtype: str | None = None) -> Value:
        names = tuple(n if s > 1 else None for n, s in zip(names, shape))
        v = Value(f"x{len(self.inputs)}", tuple(shape), names, dtype or self.dtype, True, True)
        self.inputs.append(v)
        self.values.append(v)
        return v

    def tmp(self, shape, names, contiguous=True, dtype=None) -> Value:
        v = Value(f"t{self._n_tmp}", tuple(shape), tuple(names), dtype or self.dtype, contiguous)
        self._n_tmp += 1
        return v

    def add(self, op: Op) -> Value:
        # Eager keeps the strides of a non-contiguous operand (a pointwise op on a
        # transposed tensor is transposed too): only .contiguous() restores it.
        if not op.expr.endswith(".contiguous()") and not all(
                w.contiguous for w in _vars_in(op.expr, self.values)):
            op.out.contiguous = False
        self.ops.append(op)
        self.values.append(op.out)
        return op.out

    def first_input(self) -> None:
        rank = self.rng.choice((1, 2, 2, 3, 3, 4))
        shape = [self.size(stick=(d == rank - 1)) for d in range(rank)]
        while _numel(shape) > MAX_NUMEL:
            d = max(range(rank), key=lambda i: shape[i])
            shape[d] = max(1, shape[d] // 2)
        names = tuple(self.new_dim(s) for s in shape)
        self.new_input(tuple(shape), names)

    # --- ops (each returns None when it does not apply to ``v``)

    def unary(self, v: Value) -> Op:
        forms = [
            ("{a} * 2.0", "{A} * 2.0", 1), ("{a} + 1.0", "{A} + 1.0", 1),
            ("torch.relu({a})", "{A}", 1), ("{a}.abs()", "{A}", 1), ("-{a}", "{A}", 1),
            ("torch.tanh({a})", "{A}", 1), ("torch.sigmoid({a})", "{A} * 0.25 + 1.0", 2),
            ("{a} * {a}", "{A} * {A}", 1), ("{a} * 0.5 - 0.25", "{A} * 0.5 + 0.25", 2),
        ]
        expr, bound, rounds = self.rng.choice(forms)
        out = self.tmp(v.shape, v.names)
        return Op(out, expr.format(a=v.var), bound.format(A="b_" + v.var), rounds)

    def broadcast_partner(self, v: Value) -> Value:
        same = [w for w in self.values if w is not v and w.shape == v.shape and w.dtype == v.dtype
                and w.names == v.names]
        r = self.rng.random()
        if same and r < 0.35:
            return self.rng.choice(same)
        if r < 0.4:
            return v
        shape, names = list(v.shape), list(v.names)
        mode = self.rng.choice(("suffix", "ones", "same"))
        if mode == "suffix" and len(shape) > 1:
            k = self.rng.randint(1, len(shape) - 1)
            shape, names = shape[k:], names[k:]
        elif mode == "ones":
            for d in range(len(shape)):
                if self.rng.random() < 0.5:
                    shape[d], names[d] = 1, None
        return self.new_input(tuple(shape), tuple(names))

    def binary(self, v: Value) -> Op:
        w = self.broadcast_partner(v)
        a, b = (v, w) if self.rng.random() < 0.6 else (w, v)
        shape, names = _broadcast(a, b)
        form = self.rng.choice(("+", "-", "*", "max"))
        A, B = "b_" + a.var, "b_" + b.var
        if form == "max":
            expr, bound = f"torch.maximum({a.var}, {b.var})", f"torch.maximum({A}, {B})"
        else:
            expr = f"{a.var} {form} {b.var}"
            bound = f"{A} * {B}" if form == "*" else f"{A} + {B}"
        return Op(self.tmp(shape, names), expr, bound)

    def where(self, v: Value) -> Op:
        # The condition compares an *input* with 0: eager and compiled see the same
        # values, so no rounding can flip the selection.
        cond_candidates = [x for x in self.inputs if x.dtype != "bool" and len(x.shape) <= len(v.shape)
                           and _broadcastable(x.shape, v.shape)]
        c = self.rng.choice(cond_candidates) if cond_candidates else v
        if not c.is_input:
            c = self.new_input(v.shape, v.names)
        w = self.broadcast_partner(v)
        shape, names = _broadcast(v, w)
        shape2, names2 = _broadcast(Value("", shape, names, v.dtype), c)
        expr = f"torch.where({c.var} > 0, {v.var}, {w.var})"
        bound = f"torch.where({c.var} > 0, b_{v.var}, b_{w.var})"
        return Op(self.tmp(shape2, names2), expr, bound)

    def compare(self, v: Value) -> Op | None:
        # Only on inputs (exact operands): a bool result is compared exactly.
        if not v.is_input:
            return None
        w = self.broadcast_partner(v)
        if not w.is_input:
            return None
        shape, names = _broadcast(v, w)
        return Op(self.tmp(shape, names, dtype="bool"), f"{v.var} > {w.var}",
                  f"{v.var} > {w.var}", 0)

    def reduce(self, v: Value, last: bool) -> Op | None:
        rank = len(v.shape)
        kind = self.rng.choice(("sum", "mean", "amax", "amin"))
        keep = self.rng.random() < 0.4
        r = self.rng.random()
        if r < 0.1 and (last or keep):
            dims = list(range(rank))
            arg = ""
        elif r < 0.25 and rank >= 3:
            dims = sorted(self.rng.sample(range(rank), 2))
            arg = f"dim={tuple(dims)}"
        else:
            d = self.rng.randrange(rank)
            dims = [d]
            arg = f"dim={d - rank if self.rng.random() < 0.3 else d}"
        if not keep and len(dims) == rank and not last:
            keep = True
        if arg and keep:
            arg += ", keepdim=True"
        elif not arg and keep:
            arg = f"dim={tuple(range(rank))}, keepdim=True"
        shape = [1 if d in dims else s for d, s in enumerate(v.shape)]
        names = [None if d in dims else n for d, n in enumerate(v.names)]
        if not keep:
            shape = [s for d, s in enumerate(v.shape) if d not in dims]
            names = [n for d, n in enumerate(v.names) if d not in dims]
        count = _numel([v.shape[d] for d in dims])
        bound_kind = "amax" if kind in ("amax", "amin") else kind
        expr = f"{v.var}.{kind}({arg})"
        bound = f"b_{v.var}.{bound_kind}({arg})"
        rounds = 2 if kind == "mean" else 1
        reduced_names = tuple(v.names[d] for d in dims if v.names[d] is not None)
        return Op(self.tmp(shape, names), expr, bound, rounds,
                  count if kind in ("sum", "mean") else 0, reduced_names)

    def transpose(self, v: Value) -> Op | None:
        rank = len(v.shape)
        if rank < 2:
            return None
        r = self.rng.random()
        if r < 0.2 and rank == 2:
            return Op(self.tmp(v.shape, v.names, contiguous=False), f"{v.var}.t().contiguous().t()",
                      f"b_{v.var}", 0)
        if r < 0.55:
            i, j = sorted(self.rng.sample(range(rank), 2))
            perm = list(range(rank))
            perm[i], perm[j] = j, i
            call = f"transpose({i}, {j})"
        else:
            perm = list(range(rank))
            while perm == list(range(rank)):
                self.rng.shuffle(perm)
            call = f"permute({', '.join(map(str, perm))})"
        shape = [v.shape[p] for p in perm]
        names = [v.names[p] for p in perm]
        if self.rng.random() < 0.25:
            tail, tail_b = (" * 2.0", " * 2.0")  # a transposed read by a pointwise op
        else:
            tail, tail_b = (".contiguous()", "")
        return Op(self.tmp(shape, names, contiguous=tail != " * 2.0"), f"{v.var}.{call}{tail}",
                  f"b_{v.var}.{call}{tail_b}",
                  1 if tail == " * 2.0" else 0)

    def view(self, v: Value) -> Op | None:
        shape = self.reshaped(list(v.shape))
        if shape is None or tuple(shape) == v.shape:
            return None
        names = [n if d < len(shape) and shape[: d + 1] == list(v.shape[: d + 1]) else None
                 for d, n in enumerate(v.names)][: len(shape)]
        names += [None] * (len(shape) - len(names))
        method = "view" if v.contiguous else "reshape"
        call = f"{method}({', '.join(map(str, shape))})"
        return Op(self.tmp(shape, names, contiguous=v.contiguous), f"{v.var}.{call}",
                  f"b_{v.var}.reshape({', '.join(map(str, shape))})", 0)

    def reshaped(self, shape: list[int]) -> list[int] | None:
        rank, n = len(shape), _numel(shape)
        mode = self.rng.choice(("merge", "split", "refactor", "refactor", "flatten", "unsqueeze"))
        if mode == "merge" and rank >= 2:
            d = self.rng.randrange(rank - 1)
            return shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2:]
        if mode == "split" and rank < 4:
            d = self.rng.randrange(rank)
            fs = [f for f in _divisors(shape[d]) if 1 < f < shape[d]]
            if fs:
                f = self.rng.choice(fs)
                return shape[:d] + [f, shape[d] // f] + shape[d + 1:]
        if mode == "refactor" and rank >= 2:
            # The last two dims re-cut: rows of the result straddle source rows.
            m = shape[-2] * shape[-1]
            fs = [f for f in _divisors(m) if f not in (shape[-2], 1, m)]
            if fs:
                f = self.rng.choice(fs)
                return shape[:-2] + [f, m // f]
        if mode == "flatten" and rank >= 2:
            return [n]
        if mode == "unsqueeze" and rank < 4:
            d = self.rng.randint(0, rank)
            return shape[:d] + [1] + shape[d:]
        return None

    def matmul(self, v: Value) -> Op | None:
        rank = len(v.shape)
        if rank < 2 or v.dtype == "bool":
            return None
        k, k_name = v.shape[-1], v.names[-1]
        n = self.size(stick=self.rng.random() < 0.4)
        if _numel(v.shape[:-1]) * n > MAX_NUMEL:
            return None
        n_name = self.new_dim(n)
        form = self.rng.choice(("mm", "mm", "batched", "linear", "linear_bias"))
        out_shape = list(v.shape[:-1]) + [n]
        out_names = list(v.names[:-1]) + [n_name]
        if form == "batched" and rank >= 3:
            w = self.new_input(tuple(v.shape[:-2]) + (k, n), tuple(v.names[:-2]) + (k_name, n_name))
            fn = "torch.bmm" if rank == 3 and self.rng.random() < 0.5 else "torch.matmul"
            expr, bound = f"{fn}({v.var}, {w.var})", f"{fn}(b_{v.var}, b_{w.var})"
        elif form.startswith("linear"):
            w = self.new_input((n, k), (n_name, k_name))
            if form == "linear_bias":
                b = self.new_input((n,), (n_name,))
                expr = f"F.linear({v.var}, {w.var}, {b.var})"
                bound = f"F.linear(b_{v.var}, b_{w.var}, b_{b.var})"
            else:
                expr, bound = f"F.linear({v.var}, {w.var})", f"F.linear(b_{v.var}, b_{w.var})"
        else:
            w = self.new_input((k, n), (k_name, n_name))
            expr, bound = f"{v.var} @ {w.var}", f"b_{v.var} @ b_{w.var}"
        return Op(self.tmp(out_shape, out_names), expr, bound, 2 if form == "linear_bias" else 1, k,
                  (k_name,) if k_name is not None else ())

    # --- ops added after the first seeds were recorded: they use ``self.ext`` only,
    # and are appended after everything else was drawn (old programs are a prefix)

    def extend_attention(self, program: Program) -> None:
        if self.ext.random() >= EXTENDED_RATE or not self.ops:
            return
        v = self.ops[-1].out
        if v.dtype == "bool" or not v.shape:
            return
        old_last, n_inputs = len(self.ops) - 1, len(self.inputs)
        op = self.extended(v)
        if op is None or _numel(op.out.shape) > MAX_NUMEL:
            del self.inputs[n_inputs:]
            self.values = [w for w in self.values if not (w.is_input and w not in self.inputs)]
            return
        self.add(op)
        program.outputs[0] = op.out.var
        program.dims.update(self.dims)
        for h in program.hints:
            if h.last == old_last and self.ext.random() < 0.6:
                h.last = len(self.ops) - 1

    def extended(self, v: Value) -> Op | None:
        kind = self.ext.choice(("cat", "slice", "sdpa", "pad"))
        return getattr(self, "ext_" + kind)(v)

    def ext_input(self, shape, names) -> Value:
        return self.new_input(tuple(shape), tuple(names))

    def ext_cat(self, v: Value) -> Op | None:
        if v.dtype == "bool":
            return None
        d = self.ext.randrange(len(v.shape))
        extra = self.ext.choice((1, 2, 3, 8, 16, 33))
        shape = list(v.shape)
        shape[d] = extra
        w = self.ext_input(shape, [n if i != d else None for i, n in enumerate(v.names)])
        first, second = (v, w) if self.ext.random() < 0.5 else (w, v)
        out_shape = list(v.shape)
        out_shape[d] += extra
        names = [n if i != d else self.new_dim(out_shape[d]) for i, n in enumerate(v.names)]
        tail = " * 2.0" if self.ext.random() < 0.5 else ""
        return Op(self.tmp(out_shape, names),
                  f"torch.cat([{first.var}, {second.var}], dim={d}){tail}",
                  f"torch.cat([b_{first.var}, b_{second.var}], dim={d}){tail}", 1 if tail else 0)

    def ext_slice(self, v: Value) -> Op | None:
        d = self.ext.randrange(len(v.shape))
        n = v.shape[d]
        if n < 2 or v.dtype == "bool":
            return None
        start = self.ext.randrange(n - 1)
        stop = self.ext.randint(start + 1, n)
        step = self.ext.choice((1, 1, 2, 3))
        index = ", ".join([":"] * d + [f"{start}:{stop}:{step}"])
        size = len(range(start, stop, step))
        shape = list(v.shape)
        shape[d] = size
        names = [n_ if i != d else None for i, n_ in enumerate(v.names)]
        return Op(self.tmp(shape, names), f"{v.var}[{index}] * 2.0",
                  f"b_{v.var}[{index}] * 2.0", 1)

    def ext_pad(self, v: Value) -> Op | None:
        if v.dtype == "bool":
            return None
        dims = self.ext.randint(1, min(2, len(v.shape)))
        pad = [self.ext.choice((0, 1, 2, 3, -1)) for _ in range(2 * dims)]
        shape = list(v.shape)
        for i in range(dims):
            d = len(shape) - 1 - i
            shape[d] += pad[2 * i] + pad[2 * i + 1]
            if shape[d] < 1:
                return None
        names = [n if s == v.shape[d] else None for d, (n, s) in enumerate(zip(v.names, shape))]
        return Op(self.tmp(shape, names), f"F.pad({v.var}, {tuple(pad)!r}, value=0.5) * 2.0",
                  f"F.pad(b_{v.var}, {tuple(pad)!r}, value=0.5) * 2.0", 1)

    def ext_sdpa(self, v: Value) -> Op | None:
        if len(v.shape) != 4 or v.dtype == "bool":
            return None
        b, h, length, e = v.shape
        kv_len = self.ext.choice((length, 1, 8, 16))
        ev = self.ext.choice((e, 16, 32))
        kv_name = self.new_dim(kv_len)
        ev_name = self.new_dim(ev) if ev != e else v.names[3]
        k = self.ext_input((b, h, kv_len, e), (v.names[0], v.names[1], kv_name, v.names[3]))
        w = self.ext_input((b, h, kv_len, ev), (v.names[0], v.names[1], kv_name, ev_name))
        causal = self.ext.random() < 0.5
        if _numel((b, h, length, max(kv_len, ev))) > MAX_NUMEL:
            return None
        # softmax weights sum to 1: |out| <= max |value| over the keys; exp's
        # relative rounding grows with the score, bounded by |q| @ |k|^T * scale.
        scores = f"(b_{v.var} @ b_{k.var}.transpose(-2, -1)).amax(dim=-1, keepdim=True)"
        bound = (f"b_{w.var}.amax(dim=-2, keepdim=True) * "
                 f"(1.0 + {scores} / {math.sqrt(e)!r})")
        # not contiguous: the CPU kernel (and its decomposition) returns a permuted layout
        return Op(self.tmp((b, h, length, ev), (v.names[0], v.names[1], v.names[2], ev_name),
                           contiguous=False),
                  f"F.scaled_dot_product_attention({v.var}, {k.var}, {w.var}, is_causal={causal})",
                  bound, 4, e + kv_len)

    # --- the program

    def build(self) -> Program:
        self.first_input()
        n_ops = self.rng.randint(1, 4)
        attempts = 0
        while len(self.ops) < n_ops and attempts < 50:
            attempts += 1
            last = len(self.ops) == n_ops - 1
            floats = [w for w in self.values if w.dtype != "bool"]
            v = floats[-1] if self.rng.random() < 0.7 else self.rng.choice(floats)
            kind = self.rng.choices(
                ("unary", "binary", "where", "compare", "reduce", "transpose", "view", "matmul"),
                (3, 4, 1, 1 if last else 0, 3, 3, 3, 2))[0]
            n_inputs = len(self.inputs)
            if kind == "reduce":
                op = self.reduce(v, last)
            else:
                op = getattr(self, kind)(v)
            # The last op computes something: a program of views only has no kernel.
            no_compute = op is not None and last and op.rounds == 0 and op.out.dtype != "bool"
            if op is None or no_compute or len(self.inputs) > 4 or _numel(op.out.shape) > MAX_NUMEL:
                del self.inputs[n_inputs:]
                self.values = [w for w in self.values if not (w.is_input and w not in self.inputs)]
                continue
            self.add(op)
        if not self.ops:
            self.add(self.unary(self.inputs[0]))
        outputs = [self.ops[-1].out.var]
        earlier = [op.out.var for op in self.ops[:-1]]
        if earlier and self.rng.random() < 0.15:
            outputs.append(self.rng.choice(earlier))
        hints = self.hint_blocks()
        program = Program(
            self.seed, self.index, self.dtype, dict(self.dims), self.inputs, self.ops, outputs,
            hints, self.limit(), self.rng.choice((1, 2, 4, 32)), self.rng.random() < 0.3,
        )
        Extension(self, program).extend()
        self.extend_attention(program)
        Reductions(self, program).extend()
        Numerics(self, program).extend()
        LostNames(self, program).extend()
        if self.read_twice:
            Gram(self, program).extend()
        return program

    def limit(self) -> int:
        # Log-uniform in [1 KiB, 64 KiB], capped near the largest tensor so that
        # automatic tiling usually has something to do.
        biggest = max(_numel(v.shape) * (2 if v.dtype == "float16" else 4)
                      for v in self.inputs + [op.out for op in self.ops])
        top = min(64 * 1024, max(1024, biggest))
        lo, hi = 10.0, max(10.0, math.log2(top))
        return int(round(2 ** self.rng.uniform(lo, hi)))

    def block_names(self, first: int, last: int) -> list[str]:
        names: list[str] = []
        for op in self.ops[first: last + 1]:
            for var in _vars_in(op.expr, self.values) + [op.out]:
                names += [n for n in var.names if n is not None and n not in names]
        return names

    def reduced_names(self, first: int, last: int) -> list[str]:
        names: list[str] = []
        for op in self.ops[first: last + 1]:
            names += [n for n in op.reduced_names if n not in names]
        return names

    def hint_dim(self, first: int, last: int, avoid: str | None = None) -> str | None:
        # A third of the hints split a dim some op of the block reduces (a sum's axis,
        # a matmul's K): a reduction level, accumulated across tiles.
        reduced = [n for n in self.reduced_names(first, last) if n != avoid]
        if reduced and self.rng.random() < 0.35:
            return self.rng.choice(reduced)
        names = [n for n in self.block_names(first, last) if n != avoid]
        if not names or self.rng.random() < 0.1:
            names = [n for n in self.dims if n != avoid]
        return self.rng.choice(names) if names else None

    def count(self, size: int) -> int | None:
        ds = [d for d in _divisors(size) if d > 1]
        if not ds:
            return None
        # Bias to the largest splits (per-tile extent 1) now and then.
        return ds[-1] if self.rng.random() < 0.2 else self.rng.choice(ds)

    def hint_blocks(self) -> list[Hint]:
        n = len(self.ops)
        first = 0 if self.rng.random() < 0.6 else self.rng.randrange(n)
        last = n - 1 if self.rng.random() < 0.6 else self.rng.randrange(first, n)
        dim = self.hint_dim(first, last)
        if dim is None:
            return []
        outer_count = self.count(self.dims[dim])
        if outer_count is None:
            return []
        outer = Hint(first, last, {dim: outer_count})
        r = self.rng.random()
        if r < 0.55:
            return [outer]
        if r < 0.7:  # two levels in one hint dict
            other = self.hint_dim(first, last, avoid=dim)
            c = self.count(self.dims[other]) if other else None
            if c:
                outer.slices[other] = c
            return [outer]
        i_first = self.rng.randint(first, last)
        i_last = self.rng.randint(i_first, last)
        if self.rng.random() < 0.35:  # nested on the same dim
            inner_dim, c = dim, self.count(self.dims[dim] // outer_count)
        else:
            inner_dim = self.hint_dim(i_first, i_last, avoid=dim)
            c = self.count(self.dims[inner_dim]) if inner_dim else None
        if not c:
            return [outer]
        return [outer, Hint(i_first, i_last, {inner_dim: c})]


def generate(seed: int, index: int, read_twice: bool = True) -> Program:
    """Program ``seed:index``; ``read_twice=False``: without the last family drawn
    (``fuzz_gram``), the program as campaigns before it generated it (regression
    tests pinned to a key found then keep testing the program they were written for)."""
    return _Gen(seed, index, read_twice).build()
