"""The data of one fuzz program and its rendering to Python source
(``bench/fuzz_gen.py`` draws them; ``bench/fuzz_run.py`` runs them).

A program's inputs and op results are :class:`Value` s, its ops :class:`Op` s
(an eager expression and a magnitude-bound expression), its ``spyre_hint``
blocks :class:`Hint` s.  :meth:`Program.functions_source` renders the three
functions every variant runs (``f_plain``, ``f_hinted``, ``f_bound``; see the
``fuzz_gen`` docstring).  No torch import here.
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["Hint", "Op", "Program", "Value"]

#: dim names are single letters; no value has more elements than this
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MAX_NUMEL = 8192


@dataclasses.dataclass
class Value:
    var: str
    shape: tuple[int, ...]
    names: tuple[str | None, ...]
    dtype: str  # "float16" | "float32" | "bfloat16" | "bool" | "int64" (index inputs)
    contiguous: bool = True
    is_input: bool = False
    high: int = 0  # int64 inputs: values are drawn from [0, high)


@dataclasses.dataclass
class Op:
    out: Value
    expr: str  # eager expression over value vars
    bound: str  # magnitude-bound expression over b_<var> (and input vars for conditions)
    rounds: int = 1  # rounding steps this op adds to an element's error
    reduced: int = 0  # elements one output element sums over (fp32 accumulation)
    reduced_names: tuple[str, ...] = ()  # named dims the op reduces (reduction-dim hints)
    # roundings to float16 inside a wider value (a float32 -> float16 -> float32 cast):
    # a last-bit difference before the cast (tiled accumulation order) can flip it
    half_rounds: int = 0


@dataclasses.dataclass
class Hint:
    first: int  # first op index in the block
    last: int  # last op index (inclusive)
    slices: dict[str, int]
    #: ``spyre_hint(named_dims=...)``: names the dims of the block's ops (no slices: no loop)
    named_dims: tuple[str | None, ...] | None = None

    def source(self) -> str:
        args = [f"slices={self.slices!r}"] if self.slices else []
        if self.named_dims is not None:
            args.append(f"named_dims={list(self.named_dims)!r}")
        return f"spyre_hint({', '.join(args)})"

    def text(self) -> str:
        names = "" if self.named_dims is None else "named" + "".join(n or "_" for n in self.named_dims)
        return f"[{self.first}..{self.last}]{self.slices if self.slices else ''}{names}"


@dataclasses.dataclass
class Program:
    seed: int
    index: int
    dtype: str
    dims: dict[str, int]
    inputs: list[Value]
    ops: list[Op]
    outputs: list[str]
    hints: list[Hint]  # outer before inner; properly nested
    limit: int  # max_span_bytes of the automatic variants
    sencores: int
    unroll: bool
    #: output var -> "bits" (equal to eager bit for bit) or "share" (at most
    #: ``fuzz_numerics.SHARE`` of its elements differ): outputs that read only inputs
    exact: dict[str, str] = dataclasses.field(default_factory=dict)
    #: dim names a hint slices after an op of its block lost them (``fuzz_lost_names``):
    #: the hinted variants must refuse with a HintError saying where each was lost
    lost: list[str] = dataclasses.field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.seed}:{self.index}"

    # ------------------------------------------------------------ rendering

    def _body(self, hinted: bool) -> list[str]:
        lines: list[str] = []
        blocks = self.hints if hinted else []
        depth = 1
        open_blocks: list[Hint] = []
        for i, op in enumerate(self.ops):
            for h in blocks:
                if h.first == i:
                    lines.append("    " * depth + f"with {h.source()}:")
                    depth += 1
                    open_blocks.append(h)
            lines.append("    " * depth + f"{op.out.var} = {op.expr}")
            while open_blocks and open_blocks[-1].last == i:
                open_blocks.pop()
                depth -= 1
        lines.append(f"    return {self._returned()}")
        return lines

    def _returned(self, prefix: str = "") -> str:
        names = [prefix + v for v in self.outputs]
        return names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"

    def args(self) -> str:
        return ", ".join(v.var for v in self.inputs)

    def op_text(self) -> str:
        """The program in one line (for failure reports)."""
        parts = [f"{v.var}:{list(v.shape)}{''.join(n or '_' for n in v.names)}" for v in self.inputs]
        body = "; ".join(f"{op.out.var}={op.expr}" for op in self.ops)
        hints = " ".join(h.text() for h in self.hints)
        return f"{self.dtype} {' '.join(parts)} | {body} | hints {hints}"

    def functions_source(self) -> str:
        args = self.args()
        out = [f"def f_plain({args}):", *self._body(hinted=False), ""]
        out += [f"def f_hinted({args}):", *self._body(hinted=True), ""]
        out += [f"def f_bound({args}):"]
        for v in self.inputs:
            if v.dtype in ("bool", "int64"):
                continue  # conditions and indices are used as they are
            out.append(f"    b_{v.var} = {v.var}.double().abs()")
        for op in self.ops:
            out.append(f"    b_{op.out.var} = {op.bound}")
        out.append(f"    return {self._returned('b_')}")
        return "\n".join(out) + "\n"

    def inputs_source(self) -> str:
        """Statements building the inputs (``g`` a seeded generator) and their names."""
        lines = []
        for v in self.inputs:
            if v.dtype == "int64":
                lines.append(f"{v.var} = torch.randint(0, {v.high}, {list(v.shape)}, generator=g)")
            else:
                lines.append(f"{v.var} = torch.randn({list(v.shape)}, generator=g).to(torch.{v.dtype})")
        return "\n".join(lines)

    def rounds(self) -> int:
        return sum(op.rounds for op in self.ops)

    def reduced(self) -> int:
        return sum(op.reduced for op in self.ops)

    def half_rounds(self) -> int:
        return sum(op.half_rounds for op in self.ops)


# ---------------------------------------------------------------- helpers


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _broadcastable(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    for x, y in zip(reversed(a), reversed(b)):
        if x != y and x != 1 and y != 1:
            return False
    return True


def _broadcast(a: Value, b: Value) -> tuple[list[int], list[str | None]]:
    rank = max(len(a.shape), len(b.shape))
    pa = [1] * (rank - len(a.shape)) + list(a.shape)
    pb = [1] * (rank - len(b.shape)) + list(b.shape)
    na = [None] * (rank - len(a.names)) + list(a.names)
    nb = [None] * (rank - len(b.names)) + list(b.names)
    shape = [max(x, y) for x, y in zip(pa, pb)]
    names = [x or y for x, y in zip(na, nb)]
    return shape, names


def _vars_in(expr: str, values: list[Value]) -> list[Value]:
    found = set(re.findall(r"\b[xt]\d+\b", expr))
    return [v for v in values if v.var in found]
