"""Per-OpSpec compiled programs, reused while the spec is unchanged.

Building an op's program (its accesses' structures and limits, axes, chunk
splits, which loads may be views) costs ~0.3 ms; a counted loop runs the same
OpSpec every iteration and a compiled graph runs its specs every call.  So the
program is kept per spec and only re-bound to the run's memories, loop offsets
and kernel name (``evaluate._Program.bind``).

OpSpecs and their TensorArgs are mutable (tests edit them between runs), so a
kept program is used only if the spec's *fingerprint* is unchanged: every field
of the spec, its args, op_info and program entries, frozen recursively by
value; immutable leaves (sympy expressions, enums, dtypes) by identity, kept
alive in the entry so an identity is never reused by another object while the
entry stands.  Any edit, in place or by replacing a field, misses the cache and
builds a fresh program.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["fingerprint", "lookup", "remember", "clear"]

#: Kept programs at most (dropped all at once past it: a bound, not a policy).
LIMIT = 1 << 12

_PROGRAMS: dict[int, tuple[Any, tuple, list, Any]] = {}


_ATOMS = (int, str, type(None))
#: dataclass type -> its field names (dataclasses.fields is slow per call)
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _freeze(x: Any, keep: list) -> Any:
    t = type(x)
    if t in _ATOMS:
        return x
    if t is float:
        return ("float", x.hex())  # -0.0 == 0.0, nan != nan: compare the bits
    if t is bool:
        return ("bool", x)  # True == 1: a bool constant is not an int constant
    if t is list or t is tuple:
        return (t is list, *[_freeze(v, keep) for v in x])
    if t is dict:
        return ("dict", *[(_freeze(k, keep), _freeze(v, keep)) for k, v in x.items()])
    names = _FIELDS.get(t, False)
    if names is False:
        names = _FIELDS[t] = (tuple(f.name for f in dataclasses.fields(x))
                              if dataclasses.is_dataclass(x) else None)
    if names is not None:
        return (t, *[_freeze(getattr(x, n), keep) for n in names])
    keep.append(x)
    return id(x), t


def _entry(entry: dict, keep: list) -> tuple:
    """One program entry: mostly strings, ints and int lists (fast path), else frozen."""
    out = []
    for k, v in entry.items():
        t = type(v)
        if t is str or t is int or v is None:
            out.append((k, v))
        elif t is list and all(type(i) is int for i in v):
            out.append((k, tuple(v)))
        else:
            out.append((k, _freeze(v, keep)))
    return tuple(out)


def _ints(x: Any, keep: list) -> Any:
    if type(x) is list and all(type(i) is int for i in x):
        return tuple(x)
    return _freeze(x, keep)


def _arg(arg: Any, keep: list) -> tuple:
    coordinates = tuple(arg.device_coordinates)
    keep.append(coordinates)
    allocation = arg.allocation
    if type(allocation) is dict and all(type(v) is int for v in allocation.values()):
        allocation = tuple(allocation.items())
    else:
        allocation = _freeze(allocation, keep)
    return (arg.is_input, arg.arg_index, arg.device_dtype, _ints(arg.device_size, keep),
            tuple(map(id, coordinates)), allocation, arg.per_tile_fixed, arg.name,
            _freeze(arg.segment, keep), _freeze(arg.indirect, keep) if arg.indirect else ())


def _space(space: Any, keep: list) -> Any:
    if type(space) is dict:
        items = tuple(space.items())
        if all(type(v) is tuple and len(v) == 2 and type(v[1]) is int for _, v in items):
            keep.append(items)
            return tuple((id(k), id(v[0]), v[1]) for k, v in items)
    return _freeze(space, keep)


def fingerprint(spec: Any, extra: Any = None) -> tuple[tuple, list]:
    """``(key, objects the key names by identity)`` of the spec (and ``extra``): the
    fields the executor reads.  Args, iteration space and program entries (the
    bulk of a spec) take fast paths; anything unusual is frozen generically."""
    keep: list = []
    info = spec.op_info
    program = info.get("program") if type(info) is dict else None
    if type(program) is list and all(type(e) is dict for e in program):
        frozen_program = tuple(_entry(e, keep) for e in program)
        rest = {k: v for k, v in info.items() if k != "program"}
    else:
        frozen_program, rest = None, info
    args = spec.args
    key = (spec.op, spec.is_reduction, _space(spec.iteration_space, keep),
           tuple(_arg(a, keep) for a in args) if type(args) is list else _freeze(args, keep),
           frozen_program, _freeze(rest, keep), _freeze(spec.tiled_symbols, keep),
           _freeze(spec.tiled_steps, keep), _freeze(extra, keep))
    return key, keep


def lookup(spec: Any, key: tuple) -> Any:
    hit = _PROGRAMS.get(id(spec))
    if hit is not None and hit[0] is spec and hit[1] == key:
        return hit[3]
    return None


def remember(spec: Any, key: tuple, keep: list, program: Any) -> None:
    if len(_PROGRAMS) >= LIMIT:
        _PROGRAMS.clear()
    _PROGRAMS[id(spec)] = (spec, key, keep, program)


def clear() -> None:
    _PROGRAMS.clear()
