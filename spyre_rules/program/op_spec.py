"""The generated Spyre program: OpSpec / TensorArg / LoopSpec (+ TensorPlacement).

Formats: docs/layout_model.md §5.5.  A kernel is a list of
``OpSpec | LoopSpec``; the wrapper source prints it with every sympy value as
``sympify('...')`` (see ``codegen/source.py``), and the executor runs it.

``OpSpec.iteration_space``: ``{symbol: (range, work_split)}`` in loop order --
output symbols first, then reduction symbols (the Inductor iteration order,
unit dims dropped).  Symbols are named ``c0, c1, ...``.

``OpSpec.tiled_symbols``: **one list per loop level, innermost level first**
(``[[c_inner...], [c_outer...]]``); empty for an op outside any ``LoopSpec``.
This is the convention of the whole project (docs/architecture.md "Deliberate
differences" 3); the reference's flat outermost-first list is not used.

``OpSpec.tiled_steps``: aligned with ``tiled_symbols``, how many elements each
tiled symbol advances per iteration of its level; ``None`` (the usual case)
means each symbol's per-tile range.  A dim tiled at two nested levels (nested
hints on one dim) needs it: its outer level advances by the inner count times
the per-tile range.  ``codegen.loops.level_steps`` resolves both forms.

``TensorArg``: one *access* of a tensor by the op (a tensor read twice with
different indices gives two TensorArgs).  ``device_coordinates`` are sympy
expressions over the iteration symbols, one per device dim
(docs/layout_model.md §1.4); the byte address of an element is
``allocation['hbm'] + sum(coord_d * device_strides[d]) * element_bytes`` with
``device_strides`` the row-major strides of ``device_size`` and
``element_bytes = 128 // elems_per_stick(device_dtype)``.  ``arg_index`` is the
position of the tensor in the kernel's ``run(...)`` arguments.

An *indirect* TensorArg (``indirect`` non-empty) has device coordinates that
also use indirect symbols: each ``IndirectIndex`` names the symbol, the host
extent ``size`` of the dim it indexes (its values lie in ``[0, size)``), and the
position in ``OpSpec.args`` of the tensor its values are loaded from
(``source_arg``; None when the index is computed).  Span checks bound such a
coordinate over the symbol's whole range ``[0, size)``.

``OpSpec.op_info`` -- what the op computes (enough to execute it):

* ``"program"``: a list of SSA entries; entry ``i`` defines value ``i`` and may
  only use earlier values.  Each entry is a dict with ``"op"``:

  - ``{"op": "load", "arg": a, "dtype": d}`` -- read ``args[a]`` (a TensorArg,
    ``is_input=True``) at every iteration point; ``d`` is the host dtype.
    Optional ``"masks": [m, ...]``: only lanes where every mask value is true
    are read (the others yield 0 and are not bounds-checked) -- loads inside
    ``masked`` bodies (padding, concatenation) read out of range otherwise.
  - ``{"op": "constant", "value": v, "dtype": d}``
  - ``{"op": "index_expr", "expr": e, "dtype": d}`` -- sympy expression of the
    iteration symbols (iota, masks of pads).
  - ``{"op": "to_dtype", "in": [x], "dtype": d}``
  - ``{"op": "masked", "in": [mask, body_value], "other": v}`` -- ``where``.
  - ``{"op": "reduction", "type": t, "in": [x] | [a, b], "dtype": d,
    "src_dtype": s}`` -- reduces over the reduction symbols; ``t`` is one of
    sum, prod, max, min, any, argmax, argmin, welford_reduce (value is the
    triple mean, m2, weight), batchmatmul (``in`` = the operand pair; sum of
    products) or softmax_values (``in`` = (score, value); ``sum exp(s - m) v /
    sum exp(s - m)``, ``m`` the max score, 0 when all are -inf).  At most one reduction per op; it is the last computing entry.
    Optional ``"partial": true`` (a reduction level's combine step,
    ``codegen/accumulate_fields.py``): the value is the tile's combinable partial
    result, for argmax / argmin the pair (value, index) instead of the index, for
    softmax_values the triple (acc, max, sum) instead of ``acc / sum``.
  - ``{"op": "getitem", "in": [x], "index": i}`` -- element of a tuple value.
  - ``{"op": "indirect_index", "in": [x], "symbol": s, "size": n, "wrap_neg": w}``
    -- binds the *indirect symbol* ``s`` (``ind0, ind1, ...``) to value ``x``
    (an integer index computed by the program, usually a load of an index
    tensor) at every iteration point; a negative index counts from ``n`` when
    ``w``.  The executor refuses any index outside ``[0, n)`` with an error
    naming the op, the symbol and the value (never a silent read elsewhere).
    Optional ``"masks"`` as for ``load``.  Later loads use ``s`` in their
    device coordinates (``TensorArg.indirect``): embedding, index_select, gather.
  - ``{"op": <name>, "in": [...]}`` -- an Inductor pointwise op (add, mul,
    exp, where, lt, ...; the names of ``torch._inductor.ops_handler.OpsHandler``).

* ``"store": {"arg": a, "value": v, "dtype": d}`` -- write value ``v`` through
  ``args[a]`` (``is_input=False``), rounded to host dtype ``d``.
* ``"reduction_symbols"``: the iteration symbols reduced over (``[]`` for a
  pointwise op).
* ``"accumulate"`` (reduction levels only, ``codegen/accumulate.py``): which step
  of an accumulation the op is -- ``{"step": "init" | "combine" | "finalize",
  "accumulator": name, "reduction": type, ...}`` with the identity (init), the
  combine op (combine) or the final dtype (finalize).  Informative: the program
  entries already say what runs.
* ``"region"`` (only on an op writing a region of a concatenation):
  ``{"op": its buffer name, "of": the concatenation buffer}``; its store
  TensorArg addresses the concatenation buffer (docs/layout_model.md §5.10).
* ``"in_place"`` (only on an op writing another op's buffer in place, backend/in_place.py):
  ``{"op": its buffer name, "of": the buffer it writes}``; its store TensorArg
  addresses that buffer.  ``store["mode"] == "atomic_add"`` adds each value into its
  element (index_put with accumulate, index_add), repeated indices included.

Dtypes are torch dtype names without the ``torch.`` prefix (``"float16"``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Union

import sympy

from spyre_rules.facts.stick_layout import BYTES_IN_STICK, DataFormat


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> sympy.Basic:
    return sympy.sympify(text)


def sympify(value: Any) -> Any:
    """``sympy.sympify``, parsing each distinct string once: the wrapper source
    spells every coordinate as ``sympify('<str>')`` and a model's wrapper repeats a
    few dozen strings thousands of times (sympy's parser costs ~1 ms a call; its
    results are immutable, so sharing one is safe)."""
    if isinstance(value, str):
        return _parse(value)
    return sympy.sympify(value)


def sticks_in_bytes(device_size: list[Any]) -> int:
    """Bytes of a device tensor: every device dim but the stick counts sticks."""
    size = 1
    for s in device_size[:-1]:
        size *= int(s)
    return BYTES_IN_STICK * size


__all__ = [
    "DataFormats",
    "IndirectIndex",
    "LoopSpec",
    "OpSpec",
    "TensorArg",
    "TensorPlacement",
    "element_bytes",
    "iter_op_specs",
    "output_name",
    "sympify",
]

#: The wrapper source spells device formats ``DataFormats.X`` like the reference.
DataFormats = DataFormat


def element_bytes(device_dtype: DataFormat) -> int:
    """Bytes one element occupies in device memory (a stick is 128 bytes)."""
    return BYTES_IN_STICK // device_dtype.elems_per_stick


@dataclasses.dataclass(frozen=True)
class IndirectIndex:
    """An index of an indirect access whose values come from data (module doc)."""

    symbol: sympy.Symbol
    size: int
    source_arg: int | None = None


@dataclasses.dataclass
class TensorArg:
    is_input: bool
    arg_index: int
    device_dtype: DataFormat
    device_size: list[int]
    device_coordinates: list[sympy.Expr]
    allocation: dict[str, int]
    per_tile_fixed: bool = False
    name: str | None = None
    #: byte range ``(start, end)`` of the whole buffer when ``allocation`` is one
    #: tile of it (an unrolled loop iteration); None: the allocation is the buffer.
    #: Accesses are bounds-checked against both.
    segment: tuple[int, int] | None = None
    #: the data-dependent symbols of ``device_coordinates`` (gather reads; module doc)
    #: (the wrapper source prints ``(symbol, size, source_arg)`` triples)
    indirect: list[IndirectIndex] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.indirect = [i if isinstance(i, IndirectIndex) else IndirectIndex(*i)
                         for i in self.indirect]

    def indirect_ranges(self) -> dict[sympy.Symbol, int]:
        """``{indirect symbol: size}``: the range each data-dependent symbol can take."""
        return {ind.symbol: int(ind.size) for ind in self.indirect}

    @property
    def size_in_bytes(self) -> int:
        return sticks_in_bytes(self.device_size)


@dataclasses.dataclass
class OpSpec:
    op: str
    is_reduction: bool
    iteration_space: dict[sympy.Symbol, tuple[sympy.Expr, int]]
    args: list[TensorArg]
    op_info: dict[str, Any]
    #: one list of symbols per loop level, innermost level first (see module doc)
    tiled_symbols: list[list[sympy.Symbol]] = dataclasses.field(default_factory=list)
    #: elements per iteration of each tiled symbol (aligned with tiled_symbols;
    #: None = each symbol's range; see module doc)
    tiled_steps: list[list[int]] | None = None


@dataclasses.dataclass
class LoopSpec:
    """A counted loop running ``body`` for iterations ``first .. first + count - 1``.

    At iteration ``i`` every moving TensorArg of the body is shifted by
    ``i * stride`` bytes (``codegen.loops.arg_level_strides``) with that ``i``,
    not ``i - first``: a loop starting at ``first`` addresses its tiles where
    iterations ``first ..`` of a loop starting at 0 would.  The use is a peeled
    last tile: a loop of N tiles whose last one is shorter is
    ``LoopSpec(count=N-1, body)`` then ``LoopSpec(count=1, first=N-1, tail)``,
    the tail's OpSpecs with the shorter range and the main tile's
    ``tiled_steps`` (docs/layout_model.md §5.5)."""

    count: sympy.Expr
    body: list[Union[OpSpec, "LoopSpec"]]
    first: int = 0

    def __post_init__(self) -> None:
        if int(self.first) < 0:
            raise ValueError(f"LoopSpec: first iteration {self.first} is negative")


@dataclasses.dataclass(frozen=True)
class TensorPlacement:
    """Where a *host* tensor lives in device memory: used to stickify a graph
    input into HBM before a kernel reads it and to unstickify a graph output
    after a kernel writes it (see executor/stickify.py)."""

    name: str
    host_size: tuple[int, ...]
    host_stride: tuple[int, ...]
    host_dtype: str
    device_size: tuple[int, ...]
    stride_map: tuple[int, ...]
    device_dtype: DataFormat
    address: int

    @property
    def size_in_bytes(self) -> int:
        return sticks_in_bytes(self.device_size)


def iter_op_specs(items: list[Any]) -> Any:
    """Every OpSpec of a kernel, depth first (the sdsc_N.json numbering order)."""
    for item in items:
        if isinstance(item, LoopSpec):
            yield from iter_op_specs(item.body)
        else:
            yield item


def output_name(spec: OpSpec) -> str:
    """The op's output buffer (what ``store`` writes through): how reports name an OpSpec
    (the span check's and the in-allocation proof's key into the plan records).  A region
    of a concatenation stores into the concatenation buffer, an in-place write into the
    buffer it writes; their own names are in ``op_info["region"]`` / ``op_info["in_place"]``."""
    writes_into = spec.op_info.get("region") or spec.op_info.get("in_place")
    if writes_into:
        return writes_into["op"]
    index = (spec.op_info.get("store") or {}).get("arg")
    if isinstance(index, int) and 0 <= index < len(spec.args) and spec.args[index].name:
        return spec.args[index].name
    return next((a.name for a in spec.args if not a.is_input and a.name), spec.op)
