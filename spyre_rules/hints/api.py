"""User-facing hint API: ``spyre_hint``, ``declare_tensor_dim``, ``name_tensor_dims``.

How a hint reaches the compiler (docs/inductor_integration.md §5):

* ``spyre_hint(...)`` returns a ``torch.fx.traceback.annotate`` context manager.
  Dynamo runs ``annotate`` eagerly while tracing, so every FX node created in the
  block carries the annotation in ``node.meta["custom"]``; it survives AOT autograd
  and Inductor ops keep their FX ``origins``, which is where the pre-scheduling
  pass (``spyre_rules.hints.assign``) reads it back.
* ``annotate`` *merges* nested dicts with the inner value winning, so nesting is
  not left to the merge: each hint reads the levels already active and stores
  ``outer levels + its own`` under one key.  The read happens in
  ``_extend_levels``, marked ``assume_constant_result`` so that Dynamo calls it
  at trace time (when the outer ``annotate`` is really active) and bakes the
  result in as a constant, without guards and without tracing into
  ``torch.fx.traceback`` internals.
* ``name_tensor_dims`` inside compiled code cannot set an attribute on a traced
  tensor, so there it returns ``spyre_rules::name_dims(tensor, names)``: an
  identity op that survives Dynamo, AOT autograd and dead-code elimination
  (it is marked side-effecting, so the names stick to ``tensor`` even when the
  returned value is not used); its lowering records the names on the tensor's
  buffer (``graph_state(graph).named_buffers``) for the hint pass.
* Named dims of user tensors are Python attributes of the tensors.  Only the
  Dynamo backend sees the user's own tensors (after AOT autograd they are fake
  tensors without attributes), so the backend binds them with
  ``bind_input_dim_names(example_inputs)`` around ``compile_fx`` and the pass maps
  them to graph placeholders by position.

A level is ``(raw_id, dim_name, count)``.  ``raw_id`` is unique per level in the
process; the pass renumbers levels densely per graph (first appearance in op
order), so the hint ids an op ends up with are deterministic.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch.fx import traceback as fx_traceback

from spyre_rules.hints.errors import HintError

__all__ = [
    "LEVELS_KEY",
    "NAMED_DIMS_KEY",
    "DIM_NAMES_ATTR",
    "spyre_hint",
    "declare_tensor_dim",
    "declared_tensor_dims",
    "clear_tensor_dims",
    "name_tensor_dims",
    "tensor_dim_names",
    "bind_input_dim_names",
    "bound_input_dim_names",
    "bind_dim_sizes",
]

#: ``node.meta["custom"]`` key holding the active levels, outermost first.
LEVELS_KEY = "spyre_rules.hint_levels"
#: ``node.meta["custom"]`` key holding ``named_dims`` of the innermost hint that set it.
NAMED_DIMS_KEY = "spyre_rules.named_dims"
#: Tensor attribute set by ``name_tensor_dims``.
DIM_NAMES_ATTR = "_spyre_rules_dim_names"

# Declared dims: name -> size.  Process-global like the reference API (dims are
# declared once per model); ``clear_tensor_dims`` resets it (tests, new models).
_DECLARED: dict[str, int] = {}
_LEVEL_IDS = itertools.count()


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if getattr(value, "is_Integer", False):  # sympy.Integer
        return int(value) if int(value) > 0 else None
    return None


def _dim_name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise HintError(f"{what}: dim name {value!r} must be a non-empty string")
    return value


# --------------------------------------------------------------------------- declared dims


def declare_tensor_dim(name: str, size: int) -> None:
    """Declare a named dim and its size (``declare_tensor_dim("A", 1024)``).

    Re-declaring with the same size is a no-op; another size is an error, because
    tensors already named with the old size would silently change meaning.
    """
    name = _dim_name(name, "declare_tensor_dim")
    count = _positive_int(size)
    if count is None:
        raise HintError(f"declare_tensor_dim: size {size!r} of dim {name!r} must be a positive int")
    old = _DECLARED.get(name)
    if old is not None and old != count:
        raise HintError(
            f"declare_tensor_dim: dim {name!r} is already declared with size {old}, not {count}"
        )
    _DECLARED[name] = count


def declared_tensor_dims() -> dict[str, int]:
    """A copy of the declared dims (name -> size), with the sizes bound by the
    innermost ``bind_dim_sizes``."""
    return {**_DECLARED, **(_BOUND_SIZES.get() or {})}


_BOUND_SIZES: contextvars.ContextVar[dict[str, int] | None] = (
    contextvars.ContextVar("spyre_rules_bound_dim_sizes", default=None)
)


@contextlib.contextmanager
def bind_dim_sizes(sizes: Mapping[str, int]) -> Iterator[None]:
    """Inside, declared dims ``sizes`` have these sizes: a graph with symbolic sizes
    compiled for one concrete shape (backend/specialize.py) binds each declared dim
    that names a symbolic dim to the call's size."""
    token = _BOUND_SIZES.set(dict(sizes))
    try:
        yield
    finally:
        _BOUND_SIZES.reset(token)


def clear_tensor_dims() -> None:
    """Forget every declared dim (tests; a new model in the same process)."""
    _DECLARED.clear()


def _declared_list() -> str:
    return ", ".join(sorted(_DECLARED)) or "none"


def name_tensor_dims(tensor: torch.Tensor, names: Sequence[str | None]) -> torch.Tensor:
    """Name the dims of a user tensor; ``None`` leaves a dim unnamed.  Returns ``tensor``.

    Call it on the tensors passed to the compiled function, or inside the compiled
    code (a model's forward): there it names the traced tensor through the graph
    op ``spyre_rules::name_dims``.  Every name must be declared with the dim's
    size, and a tensor may use a name once (two dims with one name would make a
    hint on it ambiguous).
    """
    if not isinstance(tensor, torch.Tensor):
        raise HintError(f"name_tensor_dims: {type(tensor).__name__} is not a torch.Tensor")
    if isinstance(names, str):
        raise HintError(f"name_tensor_dims: names must be a list of dim names, not {names!r}")
    names = tuple(names)
    shape = list(tensor.shape)
    if len(names) != len(shape):
        raise HintError(
            f"name_tensor_dims: {len(names)} names {list(names)} for a tensor of rank "
            f"{len(shape)} (shape {shape})"
        )
    seen: set[str] = set()
    for d, name in enumerate(names):
        if name is None:
            continue
        name = _dim_name(name, "name_tensor_dims")
        if name in seen:
            raise HintError(f"name_tensor_dims: dim name {name!r} is used twice in {list(names)}")
        seen.add(name)
        declared = _DECLARED.get(name)
        if declared is None:
            raise HintError(
                f"name_tensor_dims: dim {d} is named {name!r}, which is not declared "
                f"(declared dims: {_declared_list()}); call declare_tensor_dim({name!r}, "
                f"{shape[d]}) first"
            )
        if declared != shape[d]:
            raise HintError(
                f"name_tensor_dims: dim {d} named {name!r} has size {shape[d]}, but {name!r} "
                f"is declared with size {declared}"
            )
    if torch.compiler.is_compiling():
        # Inside compiled code the tensor is a traced value: the names travel in the
        # graph as the identity op ``name_dims`` (see the module docstring).
        return torch.ops.spyre_rules.name_dims(tensor, NAMES_SEPARATOR.join(n or "" for n in names))
    setattr(tensor, DIM_NAMES_ATTR, names)
    return tensor


#: Joins a tensor's dim names in ``name_dims``' string argument ("" for None).
NAMES_SEPARATOR = "\x1f"


def decode_dim_names(text: str) -> tuple[str | None, ...]:
    """The names ``name_tensor_dims`` encoded for ``name_dims`` (None: unnamed)."""
    return tuple(n or None for n in text.split(NAMES_SEPARATOR))


@torch.library.custom_op("spyre_rules::name_dims", mutates_args=())
def name_dims(x: torch.Tensor, names: str) -> torch.Tensor:
    """``x`` with its dims named (``name_tensor_dims`` inside compiled code).

    Our backend lowers it to ``x`` itself and records the names on ``x``'s buffer
    (``backend/named_dims.py``); anywhere else it is a copy."""
    return x.clone()


@name_dims.register_fake
def _name_dims_fake(x: torch.Tensor, names: str) -> torch.Tensor:
    return torch.empty_like(x)


# Kept by dead-code elimination when its result is unused: ``name_tensor_dims(h, ...)``
# names ``h`` itself, so its return value may be dropped.
torch.fx.node.has_side_effect(torch.ops.spyre_rules.name_dims.default)


def tensor_dim_names(tensor: Any) -> tuple[str | None, ...] | None:
    """The names given by ``name_tensor_dims`` (None: never named)."""
    return getattr(tensor, DIM_NAMES_ATTR, None)


# --------------------------------------------------------------------------- spyre_hint


@torch._dynamo.assume_constant_result
def _extend_levels(entries: tuple[tuple[str, int], ...]) -> tuple[tuple[int, str, int], ...]:
    """Active levels + one new level per entry (runs eagerly, also under Dynamo)."""
    current = fx_traceback.current_meta.get("custom") or {}
    outer = tuple(current.get(LEVELS_KEY, ()))
    return outer + tuple((next(_LEVEL_IDS), name, count) for name, count in entries)


def _check_slices(slices: Any, what: str) -> tuple[tuple[str, int], ...]:
    if not isinstance(slices, Mapping) or not slices:
        raise HintError(f"spyre_hint: {what} must be a non-empty dict {{dim name: count}}")
    entries = []
    for name, count in slices.items():
        name = _dim_name(name, "spyre_hint")
        value = _positive_int(count)
        if value is None:
            raise HintError(
                f"spyre_hint: count {count!r} for dim {name!r} must be a positive int"
            )
        entries.append((name, value))
    return tuple(entries)


def spyre_hint(
    slices: Mapping[str, int] | None = None,
    *,
    num_tiles_per_dim: Mapping[str, int] | None = None,
    named_dims: Iterable[str | None] | None = None,
) -> contextlib.AbstractContextManager[None]:
    """Context manager: tile the ops created inside along named dims.

    ``slices={"A": 2}`` splits dim ``A`` into 2 tiles: the ops of the block run in a
    counted loop of 2 iterations over half of ``A`` each.  Nested hints nest loops
    (outer hint = outer loop).  Several entries in one dict are several levels in
    dict order, outermost first.  ``num_tiles_per_dim`` is the same argument under
    its other name.  ``named_dims=[...]`` names the dims of the tensors created in
    the block (ops of another rank keep the names propagated from their inputs).

    Usable in eager code (no effect) and inside ``torch.compile``d code; the block
    must not contain a graph break (Dynamo cannot resume inside ``annotate``).
    """
    if slices is not None and num_tiles_per_dim is not None:
        raise HintError("spyre_hint: pass slices= or num_tiles_per_dim= (the same thing), not both")
    if slices is None:
        slices, what = num_tiles_per_dim, "num_tiles_per_dim"
    else:
        what = "slices"
    annotation: dict[str, Any] = {}
    if slices is not None:
        annotation[LEVELS_KEY] = _extend_levels(_check_slices(slices, what))
    if named_dims is not None:
        if isinstance(named_dims, str):
            raise HintError(
                f"spyre_hint: named_dims must be a list of dim names, not {named_dims!r}"
            )
        annotation[NAMED_DIMS_KEY] = tuple(
            None if n is None else _dim_name(n, "spyre_hint named_dims") for n in named_dims
        )
    if not annotation:
        raise HintError("spyre_hint needs slices=, num_tiles_per_dim= or named_dims=")
    return fx_traceback.annotate(annotation)


# --------------------------------------------------------------------------- binding inputs

_BOUND: contextvars.ContextVar[tuple[tuple[str | None, ...] | None, ...] | None] = (
    contextvars.ContextVar("spyre_rules_input_dim_names", default=None)
)


@contextlib.contextmanager
def bind_input_dim_names(
    example_inputs: Sequence[Any],
) -> Iterator[tuple[tuple[str | None, ...] | None, ...]]:
    """Make the dim names of the backend's ``example_inputs`` visible to the hint pass.

    The Dynamo backend must enter this around ``compile_fx``: the example inputs
    are the user's tensors there, while inside Inductor they are fake tensors
    without our attribute.  Entry ``i`` is input ``i``'s names (None: unnamed).
    """
    names = tuple(
        tensor_dim_names(x) if isinstance(x, torch.Tensor) else None for x in example_inputs
    )
    token = _BOUND.set(names)
    try:
        yield names
    finally:
        _BOUND.reset(token)


def bound_input_dim_names() -> tuple[tuple[str | None, ...] | None, ...] | None:
    """Names bound by the innermost ``bind_input_dim_names`` (None: nothing bound)."""
    return _BOUND.get()
