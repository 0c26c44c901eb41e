"""Record an Inductor loop body as the SSA ``op_info["program"]`` of an OpSpec.

``ProgramRecorder`` is an ops handler: running a LoopBody under it turns every
``ops.load / constant / index_expr / to_dtype / masked / reduction / <pointwise>``
call into one SSA entry (format in ``op_spec.py``) and every ``load``/``store``
into an access (buffer name + index) that becomes a TensorArg.  An
``indirect_indexing`` call (embedding, index_select, gather) becomes an
``indirect_index`` entry binding a fresh symbol ``indN`` that later load
and store indices use (a scatter stores through one).  Anything the executor
could not run (random numbers, bitcasts, masked stores, store modes other than
an atomic add, unknown op names, an ``index_expr`` outside the index vocabulary
``program/index_eval.py`` or over a symbol no loop binds) raises
UnsupportedGraph naming the op.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import sympy
import torch
from torch._inductor.ops_handler import DefaultHandler
from torch._inductor.utils import sympy_index_symbol
from torch._inductor.virtualized import V

from spyre_rules.facts.coordinates import to_plain_sympy
from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.program.index_eval import ExprEvalError, compile_expr
from spyre_rules.program.pointwise import POINTWISE_OPS

__all__ = ["Access", "ProgramRecorder", "Ref", "dtype_name"]

REDUCTION_TYPES = frozenset(
    {"sum", "prod", "max", "min", "any", "argmax", "argmin", "welford_reduce", "batchmatmul",
     "softmax_values"}
)
_TUPLE_REDUCTIONS = {"welford_reduce": 3}


def dtype_name(dtype: torch.dtype | None) -> str | None:
    return None if dtype is None else str(dtype).removeprefix("torch.")


class Ref(int):
    """An SSA value: the index of the program entry that defines it."""


@dataclasses.dataclass
class Access:
    is_input: bool
    buffer: str
    index: sympy.Expr


class ProgramRecorder(DefaultHandler):
    def __init__(self, what: str, symbols: Any = None) -> None:
        self.what = what  # op description for error messages
        #: the body's iteration symbols (c0, c1, ...); None: not checked
        self.symbols = None if symbols is None else frozenset(symbols)
        self.program: list[dict[str, Any]] = []
        self.accesses: list[Access] = []
        self.store_entry: dict[str, Any] | None = None
        self._masks: list[Ref] = []
        #: indirect symbol -> (the program value holding its index, the indexed extent)
        self.indirect: dict[sympy.Symbol, tuple[Ref, int]] = {}

    # -- helpers ---------------------------------------------------------------
    def _refuse(self, reason: str) -> UnsupportedGraph:
        return UnsupportedGraph(f"{self.what}: {reason}")

    def _emit(self, entry: dict[str, Any]) -> Ref:
        self.program.append(entry)
        return Ref(len(self.program) - 1)

    def _ref(self, value: Any) -> Ref:
        if isinstance(value, Ref):
            return value
        if isinstance(value, (bool, int, float)):
            return self._emit({"op": "constant", "value": value, "dtype": None})
        raise self._refuse(f"operand {value!r} ({type(value).__name__}) is not a recorded value")

    def _access(self, is_input: bool, name: str, index: Any) -> int:
        self.accesses.append(Access(is_input, name, sympy.sympify(index)))
        return len(self.accesses) - 1

    # -- memory ------------------------------------------------------------------
    def load(self, name: str, index: sympy.Expr) -> Ref:
        entry: dict[str, Any] = {
            "op": "load",
            "arg": self._access(True, name, index),
            "dtype": dtype_name(V.graph.get_dtype(name)),
        }
        if self._masks:
            entry["masks"] = list(self._masks)
        return self._emit(entry)

    def _store(self, name: str, index: Any, value: Any, mode: str | None = None) -> None:
        if self.store_entry is not None:
            raise self._refuse("more than one store in one op")
        if self._masks:
            raise self._refuse("a masked store is unsupported")
        self.store_entry = {
            "arg": self._access(False, name, index),
            "value": self._ref(value),
            "dtype": dtype_name(V.graph.get_dtype(name)),
        }
        if mode is not None:
            self.store_entry["mode"] = mode

    def store(self, name: str, index: sympy.Expr, value: Any, mode: Any = None) -> None:
        # A scatter (index_put, index_copy, scatter) stores through an indirect index;
        # "atomic_add" (index_put with accumulate, index_add, scatter_add) adds into the
        # stored elements, duplicates included (executor/evaluate.py).
        if mode not in (None, "atomic_add"):
            raise self._refuse(f"store mode {mode!r} is unsupported")
        self._store(name, index, value, mode)

    def store_reduction(self, name: str, index: sympy.Expr, value: Any) -> None:
        self._store(name, index, value)

    # -- values ------------------------------------------------------------------
    def constant(self, value: Any, dtype: torch.dtype) -> Ref:
        return self._emit({"op": "constant", "value": value, "dtype": dtype_name(dtype)})

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> Ref:
        # Plain floor/Mod so the printed source re-parses with stock sympify.
        return self._emit({"op": "index_expr", "expr": self._evaluable(to_plain_sympy(expr)),
                           "dtype": dtype_name(dtype)})

    def _evaluable(self, expr: sympy.Expr) -> sympy.Expr:
        """``expr`` if the executor can evaluate it at every point of the loop; else the
        op is refused here, while the backend can still put it on the host, instead of
        failing when the program runs."""
        if self.symbols is not None:
            unbound = sorted(map(str, expr.free_symbols - self.symbols - set(self.indirect)))
            if unbound:
                raise self._refuse(
                    f"index expression {expr} depends on {', '.join(unbound)}, which no loop "
                    "binds: a value known only when the graph runs (data-dependent)"
                )
        try:
            compile_expr(expr)
        except ExprEvalError as exc:
            raise self._refuse(str(exc)) from None
        return expr

    def to_dtype(self, x: Any, dtype: torch.dtype, src_dtype: Any = None,
                 use_compute_types: bool = True) -> Ref:
        return self._emit({"op": "to_dtype", "in": [self._ref(x)], "dtype": dtype_name(dtype)})

    def masked(self, mask: Any, body: Any, other: Any) -> Ref:
        m = self._ref(mask)
        self._masks.append(m)
        try:
            value = self._ref(body())
        finally:
            self._masks.pop()
        if not isinstance(other, (bool, int, float)):
            raise self._refuse(f"masked fill value {other!r} is not a scalar")
        return self._emit({"op": "masked", "in": [m, value], "other": other})

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str,
                  value: Any) -> Any:
        if reduction_type not in REDUCTION_TYPES:
            raise self._refuse(f"reduction type {reduction_type!r} is unsupported")
        values = value if isinstance(value, tuple) else (value,)
        ref = self._emit({
            "op": "reduction", "type": reduction_type, "in": [self._ref(v) for v in values],
            "dtype": dtype_name(dtype), "src_dtype": dtype_name(src_dtype),
        })
        width = _TUPLE_REDUCTIONS.get(reduction_type)
        if width is None:
            return ref
        return tuple(self._emit({"op": "getitem", "in": [ref], "index": i}) for i in range(width))

    # -- no-ops and refusals ---------------------------------------------------------
    def check_bounds(self, expr: Any, size: Any, lower: bool, upper: bool) -> None:
        return None  # the executor bounds-checks every access itself

    def device_assert_async(self, cond: Any, msg: str) -> None:
        return None

    def indirect_indexing(self, index: Any, size: Any, check: bool = True,
                          wrap_neg: bool = True) -> sympy.Symbol:
        size = sympy.sympify(size)
        if not size.is_Integer:
            raise self._refuse(f"indirect index over a symbolic extent {size} is unsupported")
        symbol = sympy_index_symbol(f"ind{len(self.indirect)}")
        entry: dict[str, Any] = {"op": "indirect_index", "in": [self._ref(index)],
                                 "symbol": str(symbol), "size": int(size),
                                 "wrap_neg": bool(wrap_neg)}
        if self._masks:
            entry["masks"] = list(self._masks)
        self.indirect[symbol] = (self._emit(entry), int(size))
        return symbol

    def index_source(self, symbol: sympy.Symbol) -> int | None:
        """The access whose loaded values give ``symbol`` (through casts), if one."""
        entry = self.program[self.program[self.indirect[symbol][0]]["in"][0]]
        while entry["op"] in ("to_dtype", "identity"):
            entry = self.program[entry["in"][0]]
        return entry["arg"] if entry["op"] == "load" else None

    def _default(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name not in POINTWISE_OPS:
            raise self._refuse(f"op {name!r} has no Spyre/executor implementation")
        if kwargs:
            raise self._refuse(f"op {name!r} called with keyword arguments {sorted(kwargs)}")
        return self._emit({"op": name, "in": [self._ref(a) for a in args]})
