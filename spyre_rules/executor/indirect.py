"""Masks and indirect indices: data-dependent parts of an op's program.

An ``indirect_index`` entry binds an iteration symbol to index values read by the
program (embedding ids, index_select / gather indices, op_spec.py); every index
is checked against ``[0, size)`` of the dim it indexes, because an index outside
it would silently read another row, or past the tensor.  Masked-off lanes
(``masks``) are exempt from that check and from bounds checks of their loads.
"""

from __future__ import annotations

from typing import Any

import torch

from spyre_rules.executor.hbm import IndirectIndexError
from spyre_rules.program.op_spec import OpSpec

__all__ = ["active_mask", "bind_indirect_index"]


def active_mask(entry: dict[str, Any], values: list[Any]) -> torch.Tensor | None:
    """The lanes an entry is evaluated for (the AND of its masks), None: every lane."""
    masks = entry.get("masks")
    if not masks:
        return None
    active = torch.as_tensor(values[masks[0]]).bool()
    for m in masks[1:]:
        active = active & torch.as_tensor(values[m]).bool()
    return active


def bind_indirect_index(op: str, spec: OpSpec, entry: dict[str, Any], values: list[Any],
                        env: dict[str, Any]) -> torch.Tensor:
    """Bind an indirect symbol to its index values in ``env``, refusing any index
    outside ``[0, size)`` (``op``: the op's name in error messages)."""
    index = torch.as_tensor(values[entry["in"][0]])
    if index.is_floating_point() or index.dtype == torch.bool:
        raise IndirectIndexError(
            f"op {op}: indirect index {entry['symbol']} is a {index.dtype} value, "
            "not an integer")
    index = index.to(torch.int64)
    size = int(entry["size"])
    if entry.get("wrap_neg", True):
        index = torch.where(index < 0, index + size, index)
    bad = (index < 0) | (index >= size)
    active = active_mask(entry, values)
    if active is not None:
        bad = bad & active
        index = torch.where(active, index, 0)
    if bool(bad.any()):
        original = torch.as_tensor(values[entry["in"][0]]).to(torch.int64)
        original = torch.broadcast_to(original, torch.broadcast_shapes(original.shape, bad.shape))
        where = _point(bad, env)
        raise IndirectIndexError(
            f"op {op}: indirect index {entry['symbol']} = {int(original[bad][0])}"
            f"{where} is outside [0, {size}) of the dim it indexes"
            f"{_index_tensor(spec, entry)}")
    env[entry["symbol"]] = index
    return index


def _index_tensor(spec: OpSpec, entry: dict[str, Any]) -> str:
    program = spec.op_info["program"]
    source = program[entry["in"][0]]
    while source["op"] in ("to_dtype", "identity"):
        source = program[source["in"][0]]
    symbols = {entry["symbol"]} | _windows_of(program, entry)
    users = dict.fromkeys(a.name for a in spec.args if any(str(i.symbol) in symbols for i in a.indirect))
    read = f"; read from tensor {spec.args[source['arg']].name}" if source["op"] == "load" else ""
    return f" (indexing tensor {', '.join(map(str, users))}{read})"


def _windows_of(program: list[dict[str, Any]], entry: dict[str, Any]) -> set[str]:
    """The indirect symbols computed from ``entry``'s index value: a table read in
    windows (backend/gathered_windows.py) binds the whole index only to check it and
    reads through one symbol per window, each computed from that same value."""
    derived = {entry["in"][0]}
    out = set()
    for position, other in enumerate(program):
        if position in derived or not any(v in derived for v in other.get("in", ())
                                          if isinstance(v, int)):
            continue
        derived.add(position)
        if other["op"] == "indirect_index":
            out.add(other["symbol"])
    return out


def _point(bad: torch.Tensor, env: dict[str, Any]) -> str:
    """`` at c0=.., c1=..`` for the first offending iteration point."""
    first = [int(i[0]) for i in bad.nonzero(as_tuple=True)]
    names = []
    for name, grid in env.items():
        if not name.startswith("c"):
            continue
        if isinstance(grid, torch.Tensor):
            axis = next((a for a, n in enumerate(grid.shape) if n > 1), None)
            if axis is None or axis >= len(first) or bad.shape[axis] == 1:
                continue  # the index does not vary along this symbol
            names.append(f"{name}={int(grid.flatten()[first[axis]])}")
        else:
            names.append(f"{name}={grid}")
    return f" at {', '.join(sorted(names))}" if names else ""
