"""Read a buffer whose stick fits but whose outer order does not through a reordered copy.

A read that keeps its buffer's stick needs no restickify (restickify.py), but its outer
(non-stick) device dims keep the buffer's order.  When the dim a loop variable ``u`` drives
sits outermost, one step of ``u`` spans everything inside it, and automatic tiling must
split ``u`` finer than that read alone allows (``stick_choice.fitting_tiles``).  If another
read of the op is stuck on ``u``, such a tile cuts its sticks and no split is legal.
qwen3_next's ``k_beta = key * beta``: the repeated key ``[1, S, 16, 2, 128]`` has the
tokens outermost (16 KiB a token: at most 4 tokens a tile at 64 KiB) while ``beta`` is
stuck on the tokens (whole sticks of 32).  The key is then read through an exact copy with
the same stick and ``u``'s dim just outside it (``staged_restickify_layout``, the layout of
a staged restickify's intermediate): one step of ``u`` spans one stick row, and the copy
itself keeps the stick, so its tiles need no whole sticks of ``u``
(docs/layout_model.md §1.6).  A batched matmul's operand too: GPT-NeoX's ``probs @ v``
reads ``v`` out of the fused projection with the tokens (its k) outermost while the
probabilities are stuck on k.  Only under automatic tiling, and only where the conflict
would otherwise refuse the op, and only where the policy takes the remedy
(rules/layout_choice.rules: ``outer_reorder``, ``reordered_output``).

A batched matmul's operands are read the same way: Gemma 4's ``p @ repeat_kv(v)`` (head
dim 512) reads the values ``[1, S, KV, D]`` with the keys outermost, 4 KiB a key, while the
probabilities are stuck on the keys (the reduction: whole sticks of 32 keys, 128 KiB of
``v``); through the copy one key is one stick row.

A batchmatmul's other operand is stuck on its reduction variable ``k`` (restickify.py moves
it there when it is not): its values operand, read as laid out, conflicts when ``k`` drives
an outer device dim of it.  Mamba2's diagonal block ``Y = M @ x`` (``bclsh,bcshp->bclhp``)
reads the chunk's values ``x`` ``[1, S, H, P]`` stuck on P with the source positions ``s``
outermost (16 KiB a position at the sweep's tiny sizes: at most 4 a tile), while ``M`` is
stuck on ``s`` (whole sticks of 32): the values are read through the same reordered copy.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep

from spyre_rules.backend.layout_choice import take
from spyre_rules.backend.stick_choice import cuts_sticks_of, fitting_tiles, host_dim_of, stick_vars
from spyre_rules.errors import LayoutError
from spyre_rules.facts.restickify_facts import staged_restickify_layout
from spyre_rules.facts.stick_layout import within_stick_host_dim
from spyre_rules.facts.tiled_layout import FixedTiledLayout

__all__ = ["outer_reorders", "reordered_output"]


def _reordered(layout: Any, dep: MemoryDep, u: sympy.Symbol) -> FixedTiledLayout | None:
    """``layout`` with the host dim ``u`` drives just outside its (unchanged) stick."""
    try:
        size = [int(n) for n in layout.size]
        stride = [int(n) for n in layout.stride]
        offset = int(layout.offset)
    except TypeError:
        return None
    stick = within_stick_host_dim(size, stride, layout.device_layout)
    dim = host_dim_of(layout, dep, u)
    if offset != 0 or stick is None or dim is None or dim == stick:
        return None
    try:
        device_layout = staged_restickify_layout(size, stride, layout.dtype, stick, dim)
    except LayoutError:
        return None
    return FixedTiledLayout(layout.device, layout.dtype, [sympy.Integer(n) for n in size],
                            [sympy.Integer(n) for n in stride], device_layout=device_layout)


def outer_reorders(op: ir.ComputedBuffer, layouts: dict[str, Any],
                   reads: list[tuple[MemoryDep, set[sympy.Symbol]]],
                   fixed_otherwise: Callable[[MemoryDep], bool],
                   graph_inputs: Collection[str] = (),
                   restuck: list[tuple[MemoryDep, set[sympy.Symbol]]] = ()
                   ) -> dict[str, FixedTiledLayout]:
    """Buffer -> reordered layout for each read in ``reads`` (each read as laid out, with
    its stick variables, none indirect) that alone makes ``op`` split a variable ``u``
    finer than a stick of another read stuck on ``u``, that no longer does once ``u``'s dim
    sits just outside its stick, and where ``fixed_otherwise`` (the restickify pass's
    remedy of moving that other read's stick, restickify._off_a_cut_stick) fails for some
    such read: the reorder is the last resort; the policy takes it or not
    (``outer_reorder``, rules/layout_choice.rules).  A read of one of
    ``graph_inputs`` is left alone: input_layouts.py lays such an input out so itself,
    at no copy in the program.  ``restuck``: the reads the restickify pass copies
    onto another stick, each with the variables it will be stuck on (a batchmatmul's first
    operand on ``k``): they conflict as the reads stuck so already do."""
    stuck = [*reads, *restuck]
    found: dict[str, FixedTiledLayout] = {}
    for dep, _ in reads:
        layout = layouts.get(dep.name)
        if layout is None or not layout.dtype.is_floating_point or dep.name in found \
                or not dep.index.free_symbols <= set(dep.ranges) or dep.name in graph_inputs:
            continue  # an indirect (gathered) read is planned by its own rules
        own = fitting_tiles(op, layouts, [dep])
        for u in sorted(own, key=str):
            conflicts = _stuck_on(u, dep, stuck, layouts, own)
            if u not in dep.ranges or not conflicts \
                    or all(fixed_otherwise(other) for other in conflicts):
                continue
            reordered = _reordered(layout, dep, u)
            if reordered is None:
                continue
            after = fitting_tiles(op, {**layouts, dep.name: reordered}, [dep])
            if _stuck_on(u, dep, stuck, layouts, after) or not take(op, "outer_reorder", dep.name):
                continue
            found[dep.name] = reordered
            break
    return found


def _stuck_on(u: sympy.Symbol, dep: MemoryDep,
              reads: list[tuple[MemoryDep, set[sympy.Symbol]]], layouts: dict[str, Any],
              fitting: dict[sympy.Symbol, int]) -> list[MemoryDep]:
    """The other reads of ``op`` stuck on ``u`` alone whose sticks a tile of ``u`` as small
    as ``fitting`` asks would cut."""
    if u not in dep.ranges:
        return []
    extent = int(dep.ranges[u])
    return [other for other, sticks in reads
            if other.name != dep.name and sticks == {u} and cuts_sticks_of(
                fitting, u, extent, int(layouts[other.name].device_layout.device_size[-1]))]


def reordered_output(op: ir.ComputedBuffer, layout: Any,
                     layouts: dict[str, Any]) -> FixedTiledLayout | None:
    """``layout`` (``op``'s own) with the dim its write drives by ``u`` just outside its
    stick, when that write alone makes ``op`` split ``u`` finer than a stick of a read
    stuck on ``u`` and no longer does so reordered, and no other variable's tile then cuts
    a read's sticks; None keeps ``layout``.

    The write's twin of ``outer_reorders``: Mamba2's ``Y_off = C_times_states *
    state_decay_out`` writes ``(b, c, l, h, p)`` stuck on the head dim p (2 values padded to
    a stick of 32) with the positions l outermost, 16 KiB a position at the sweep's tiny
    sizes (at most 4 a tile at 64 KiB), while the decay it reads is stuck on l (whole sticks
    of 32).  Reordered, one step of l is one stick row and the heads, which nothing is
    stuck on, are outermost.  The op writes its own buffer in that layout: no copy, and its
    readers read it as laid out.  The policy takes it or not (``reordered_output``,
    rules/layout_choice.rules, told one step of the reordered layout's outermost dim)."""
    writes = [d for d in op.get_read_writes().writes if isinstance(d, MemoryDep)]
    if len(writes) != 1 or not layout.dtype.is_floating_point:
        return None
    (write,) = writes
    name = op.get_name()
    reads = []
    for dep in op.get_read_writes().reads:
        read_layout = layouts.get(dep.name) if isinstance(dep, MemoryDep) else None
        sticks = None if read_layout is None else stick_vars(read_layout, dep)
        if sticks is not None and dep.name != name:
            reads.append((dep, sticks))
    own = fitting_tiles(op, {**layouts, name: layout}, [write])
    for u in sorted(own, key=str):
        if u not in write.ranges or not _stuck_on(u, write, reads, layouts, own):
            continue
        reordered = _reordered(layout, write, u)
        if reordered is None:
            continue
        after = fitting_tiles(op, {**layouts, name: reordered}, [write])
        if any(_stuck_on(w, write, reads, layouts, after) for w in after) \
                or not take(op, "reordered_output", name, _outermost_step_bytes(reordered)):
            continue
        return reordered
    return None


def _outermost_step_bytes(layout: FixedTiledLayout) -> int:
    """Bytes one step of the outermost device dim of size above 1 spans (the least a tile
    of the reordered output spans: the policy's measure of it)."""
    sizes = [int(n) for n in layout.device_layout.device_size]
    outer = next((d for d, n in enumerate(sizes[:-1]) if n > 1), len(sizes) - 1)
    step = layout.dtype.itemsize
    for n in sizes[outer + 1:]:
        step *= n
    return step
