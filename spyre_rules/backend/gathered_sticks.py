"""A gathered read its reader must split finely: stuck on that dim, the gathered dim inside.

An op reads a buffer gathered when an indirect index picks the row of one of its host dims
(any index may pick any row): the grouped experts product reads ``w[g(t), k, n]``,
the expert ``g(t)`` of each row (backend/grouped_mm.py).  Whatever the split, one tile
spans every row of the gathered dim, so the gathered dim must sit just outside the stick,
where one row is one stick.  gpt_oss stores its experts weight ``[E, K, N]``: generically
``[K, N/eps, E, eps]``, the experts already inside, but K outermost, one K row of every
expert 4 KiB at the sweep's tiny sizes, so at 64 KiB a tile may hold 16 values of K while
the rows it multiplies are stuck on K with 32 a stick.  The staged layout that serves an
ungathered read so (input_layouts.py: K just outside the stick, ``[E, N/eps, K, eps]``)
puts the experts outermost: every tile spans the whole weight.  Stuck on K with the
experts just outside the stick, ``[N, K/eps, E, eps]`` (Mixtral's ``[E, N, K]`` weight
has it generically), a tile of whole sticks of K spans one stick of every expert per N.

``finely_split`` finds such reads (the variable ``u`` of a read that a tile must hold
fewer values of than a stick of another read stuck on ``u``), ``gathered_layout`` the
layout; a graph input is laid out so (input_layouts.py), a computed buffer is read through
a restickify copy so (restickify.py), both decided before the reader's own stick is chosen
(layouts.py), so that the reader sees the layout it will read through.
"""

from __future__ import annotations

from typing import Any, Callable

import sympy
from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep

from spyre_rules.backend.stick_choice import fitting_tiles, host_dim_of, stick_vars
from spyre_rules.errors import CoordinateError, LayoutError
from spyre_rules.facts.coordinates import host_coordinates
from spyre_rules.facts.gathered import indirect_ranges
from spyre_rules.facts.read_writes import read_writes
from spyre_rules.facts.stick_layout import SpyreTensorLayout, generic_stick_layout, within_stick_host_dim
from spyre_rules.facts.tiled_layout import FixedTiledLayout

__all__ = ["finely_split", "gathered_host_dims", "gathered_layout", "gathered_read_layouts",
           "split_host_dim"]


def _stick_var(layout: Any, dep: MemoryDep) -> sympy.Symbol | None:
    found = stick_vars(layout, dep)
    return next(iter(found)) if found is not None and len(found) == 1 else None


def finely_split(op: ir.ComputedBuffer, layouts: dict[str, Any],
                 wanted: Callable[[MemoryDep], bool]) -> dict[str, sympy.Symbol]:
    """The buffers ``op`` reads (those ``wanted``) with a variable ``u`` alone on an outer
    device dim that a tile must hold fewer values of than a stick of another read stuck
    on ``u``."""
    reads = [d for d in op.get_read_writes().reads
             if isinstance(d, MemoryDep) and d.name in layouts]
    found: dict[str, sympy.Symbol] = {}
    for dep in reads:
        if not wanted(dep):
            continue
        for u, tile in fitting_tiles(op, layouts, [dep]).items():
            for other in reads:
                layout = layouts[other.name]
                stick = int(layout.device_layout.device_size[-1])
                if other.name != dep.name and _stick_var(layout, other) == u \
                        and tile < min(stick, int(dep.ranges[u])):
                    found[dep.name] = u
    return found


def gathered_host_dims(op: ir.ComputedBuffer, layout: Any, dep: MemoryDep) -> list[int] | None:
    """Host dims of ``dep`` whose coordinate holds an indirect symbol (any index may pick
    any row); None when an indirect symbol has no static bound to place it by."""
    if not dep.is_indirect():
        return []
    recorded = read_writes(op)  # Inductor's own records keep no indirect symbol's bound
    same = [d for d in recorded.reads if isinstance(d, MemoryDep) and d.name == dep.name
            and d.index == dep.index]
    bounds = indirect_ranges(dep.index, recorded) if same else None
    if bounds is None:
        return None
    coords = host_coordinates(layout.size, layout.stride, dep.index - layout.offset,
                              {**dict(dep.ranges), **bounds})
    return [d for d, c in enumerate(coords) if set(c.free_symbols) & set(bounds)]


def gathered_layout(size: list[int], stride: list[int], dtype: Any, gathered: int,
                    split: int) -> SpyreTensorLayout:
    """Stuck on host dim ``split``, the gathered host dim just outside the stick, the
    others outside both in host order."""
    order = [gathered] + [d for d in range(len(size)) if d not in (gathered, split)]
    return generic_stick_layout(size, stride, dtype, order + [split])


def _dep_of(op: ir.ComputedBuffer, name: str) -> MemoryDep:
    return next(d for d in op.get_read_writes().reads
                if isinstance(d, MemoryDep) and d.name == name)


def split_host_dim(layout: Any, dep: MemoryDep, u: sympy.Symbol) -> int | None:
    """The one host dim of ``dep`` that ``u`` walks, when it is not the stick."""
    size, stride = [int(s) for s in layout.size], [int(s) for s in layout.stride]
    dim = host_dim_of(layout, dep, u)
    stick = within_stick_host_dim(size, stride, layout.device_layout)
    if dim is None or stick is None or dim == stick:
        return None
    return dim


def gathered_read_layouts(op: ir.ComputedBuffer, layouts: dict[str, Any],
                          wanted: Callable[[str], bool]) -> dict[str, FixedTiledLayout]:
    """Each buffer ``op`` reads gathered on one host dim (``wanted`` by name) and must
    split finely on another: the layout to read it through (``gathered_layout``)."""
    out: dict[str, FixedTiledLayout] = {}
    found = finely_split(op, layouts, lambda dep: dep.is_indirect() and wanted(dep.name))
    for name, u in found.items():
        layout = layouts[name]
        dep = _dep_of(op, name)
        try:
            split = split_host_dim(layout, dep, u)
            gathered = gathered_host_dims(op, layout, dep)
            if split is None or gathered is None or len(gathered) != 1 or gathered[0] == split:
                continue
            size, stride = [int(s) for s in layout.size], [int(s) for s in layout.stride]
            device = gathered_layout(size, stride, layout.dtype, gathered[0], split)
        except (CoordinateError, LayoutError, TypeError, ValueError):
            continue
        out[name] = FixedTiledLayout(layout.device, layout.dtype, list(layout.size),
                                     list(layout.stride), device_layout=device)
    return out
