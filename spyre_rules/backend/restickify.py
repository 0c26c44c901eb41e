"""Insert restickify ops where a consumer needs a buffer stuck on another host dim.

A Spyre op walks its operands stick by stick, so the variable that moves along
each operand's stick must be the one the op expects:

* pointwise: every read that involves the output's stick variable ``v`` must
  have ``v`` on its stick (a transposed/permuted view read does not);
* reduction: a read's stick variable may be ``v`` or a reduction variable;
* batchmatmul ``C[b,m,n] = sum_k A[b,m,k] * B[b,k,n]``: the operand that
  involves ``n`` (= ``v``, the output stick) must be stuck on ``n``; the other
  operand must be stuck on the reduction variable ``k``.

When a read breaks the rule, a *restickify* op (a copy whose output keeps the
host shape but is stuck on the needed host dim -- docs/layout_model.md §1.5) is inserted
before the consumer, and the consumer's loads of that buffer are redirected to
the copy.  One restickified copy per (buffer, stick dim) is shared.
Reads where no host dim of the buffer is driven by the needed variable (e.g. a
broadcast along the stick) cannot be fixed by a restickify and are left alone.
"""

from __future__ import annotations

from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep
from torch._inductor.virtualized import V, ops

from spyre_rules import config
from spyre_rules.backend.layout_choice import take
from spyre_rules.backend.outer_order import outer_reorders
from spyre_rules.backend.stick_choice import cuts_sticks_of, fitting_tiles, host_dim_of, stick_vars
from spyre_rules.backend.value_sticks import value_per_stick_copies
from spyre_rules.errors import CoordinateError
from spyre_rules.facts.coordinates import host_coordinates
from spyre_rules.facts.restickify_facts import staged_restickify_layout, stick_run_bytes
from spyre_rules.facts.stick_layout import restickify_layout, within_stick_host_dim
from spyre_rules.facts.tiled_layout import FixedTiledLayout
from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.ir.graph_state import RulesGraphState
from spyre_rules.ir.ir_edit import RenameLoads, drop_caches, op_description, set_frozen
from spyre_rules.ir.op_identity import set_op_kind

__all__ = ["insert_restickify", "RESTICKIFY_KIND", "RESTICKIFY_STAGE_KIND", "stick_vars"]

#: The stamped kind (``set_op_kind``) of inserted copies; codegen names their OpSpecs after it.
RESTICKIFY_KIND = "ReStickifyOpHBM"
#: ... and of the first stage of a copy that goes through an intermediate (rules/restickify.rules).
RESTICKIFY_STAGE_KIND = "ReStickifyStageHBM"


def _required_var(
    op: ir.ComputedBuffer, dep: MemoryDep, v: sympy.Symbol, read_sticks: set[sympy.Symbol],
    out_vars: set[sympy.Symbol],
) -> sympy.Symbol | None:
    """The variable ``dep`` must be stuck on, or None when the read is fine as is."""
    involves_v = v in dep.index.free_symbols
    reduction_vars = set(dep.ranges) - out_vars
    if isinstance(op.data, ir.Reduction):
        if op.data.reduction_type == "batchmatmul":
            if involves_v:
                required = v
            elif len(reduction_vars) == 1:
                required = next(iter(reduction_vars))
            else:
                return None
            return None if read_sticks == {required} else required
        if not read_sticks or read_sticks <= ({v} | reduction_vars):
            return None
    elif not read_sticks or read_sticks == {v}:
        return None
    return v if involves_v else None


def _needed_restickifies(
    op: ir.ComputedBuffer, state: RulesGraphState,
) -> tuple[dict[str, tuple[int, int | None]], dict[str, FixedTiledLayout]]:
    """(buffer -> (stick dim, reduction dim) to restickify onto, buffer -> the layout of
    a same-stick copy with another outer order to read it through: outer_order.py)."""
    rw = op.get_read_writes()
    writes = [d for d in rw.writes if isinstance(d, MemoryDep)]
    if len(writes) != 1:
        return {}, {}
    out_sticks = stick_vars(state.layouts[op.get_name()], writes[0])
    if out_sticks == set():
        # a write whose stick no variable moves (the one column a concatenation's
        # region writes): only a read with nowhere else to stick can need a copy
        return {}, value_per_stick_copies(op, state.layouts, _as_laid_out(rw, state),
                                          writes[0], set(writes[0].ranges), None)
    if not out_sticks or len(out_sticks) != 1:
        return {}, {}
    (v,) = out_sticks
    out_vars = set(writes[0].ranges)
    needed: dict[str, tuple[int, int | None]] = {}
    as_laid_out: list[tuple[MemoryDep, Any, set[sympy.Symbol]]] = []
    restuck: list[tuple[MemoryDep, set[sympy.Symbol]]] = []  # each with its new stick variable
    for dep in rw.reads:
        layout = state.layouts.get(dep.name)
        if not isinstance(dep, MemoryDep) or layout is None:
            continue
        read_sticks = stick_vars(layout, dep)
        if read_sticks is None:
            continue
        required = _required_var(op, dep, v, read_sticks, out_vars)
        if required is None:
            as_laid_out.append((dep, layout, read_sticks))
            continue
        dim = host_dim_of(layout, dep, required)
        if dim is None:
            continue
        size = [int(s) for s in layout.size]
        stride = [int(s) for s in layout.stride]
        if dim == within_stick_host_dim(size, stride, layout.device_layout):
            continue
        needed[dep.name] = (dim, _reduction_dim(op, layout, dep, required, out_vars))
        restuck.append((dep, {required}))
    reorders: dict[str, FixedTiledLayout] = {}
    if as_laid_out:
        reorders = outer_reorders(
            op, state.layouts, [(dep, sticks) for dep, _, sticks in as_laid_out],
            lambda other: _restick_would_fit(op, state, other, v, out_vars, writes[0],
                                             [dep for dep, _, _ in as_laid_out]),
            state.host_inputs, restuck)
        # a reordered read is measured as the op will read it: through its copy; the
        # op's own write counts too (its tile of the full output must fit: llama's
        # safe-softmax guard at 200 tokens, 32 KiB, below)
        layouts = {**state.layouts, **reorders}
        fitting = fitting_tiles(op, layouts, [dep for dep, _, _ in as_laid_out] + writes)
        for dep, layout, read_sticks in as_laid_out:
            if dep.name in reorders:
                continue
            dim = _off_a_cut_stick(op, dep, layout, v, read_sticks, out_vars, fitting)
            if dim is not None:
                needed[dep.name] = (dim, None)
        # a read with no other dim to move its stick onto: one value a stick
        reorders.update({name: lay for name, lay in value_per_stick_copies(
            op, state.layouts, [(dep, sticks) for dep, _, sticks in as_laid_out
                                if dep.name not in needed and dep.name not in reorders],
            writes[0], out_vars, v).items()})
    return needed, {name: lay for name, lay in reorders.items() if name not in needed}


def _as_laid_out(rw: Any, state: RulesGraphState) -> list[tuple[MemoryDep, set[sympy.Symbol]]]:
    """Each read of ``rw`` with a layout and its stick variables."""
    found = []
    for dep in rw.reads:
        layout = state.layouts.get(dep.name)
        if isinstance(dep, MemoryDep) and layout is not None:
            sticks = stick_vars(layout, dep)
            if sticks is not None:
                found.append((dep, sticks))
    return found


def _restick_would_fit(op: ir.ComputedBuffer, state: RulesGraphState, dep: MemoryDep,
                       v: sympy.Symbol, out_vars: set[sympy.Symbol], write: MemoryDep,
                       laid_out: list[MemoryDep]) -> bool:
    """Whether ``_off_a_cut_stick`` moves the stick of ``dep`` onto a variable ``w`` that
    ``op`` need not split finer than a stick, its output's write counted (qwen3_next's
    ``k_beta``: beta moved onto the heads, while the output holds 64 KiB a head: a tile
    of one head would cut beta's new sticks).  Unknown counts as fitting: the existing
    remedy is kept."""
    layout = state.layouts[dep.name]
    sticks = stick_vars(layout, dep) or set()
    dim = _off_a_cut_stick(op, dep, layout, v, sticks, out_vars,
                           fitting_tiles(op, state.layouts, laid_out))
    if dim is None:
        return False
    try:
        coords = host_coordinates(layout.size, layout.stride, dep.index - layout.offset,
                                  dep.ranges)
    except CoordinateError:
        return True
    walked = set(coords[dim].free_symbols) & set(dep.ranges)
    if len(walked) != 1:
        return True
    (w,) = walked
    with_write = fitting_tiles(op, state.layouts, laid_out + [write])
    return not cuts_sticks_of(with_write, w, int(dep.ranges[w]),
                              int(layout.device_layout.elems_per_stick))


def _off_a_cut_stick(op: ir.ComputedBuffer, dep: MemoryDep, layout: Any, v: sympy.Symbol,
                     read_sticks: set[sympy.Symbol], out_vars: set[sympy.Symbol],
                     fitting: dict[sympy.Symbol, int]) -> int | None:
    """The host dim to restick a read onto whose stick variable ``u`` (an output
    variable, not the output's stick ``v``) ``op`` must split finer than a stick of it
    under automatic tiling (``stick_choice.fitting_tiles``): the host dim of smallest
    stride that another variable drives.  xLSTM's head norm subtracts the mean of each
    head, a ``[1, L, H, 1]`` buffer stuck on its 8 heads, from ``h.transpose(1, 2)``,
    whose read needs the heads split in two at 64 KiB: a tile would read half a stick of
    the mean.  When every such dim is cut too and the read has a unit dim, the unit dim:
    torch's safe softmax zeroes the rows of ``softmax(scores)`` that are wholly masked
    with ``where(all_masked, 0, p)``; the guard ``[1, KV, R, L, 1]`` is stuck on the
    query positions L, and at 200 tokens and 32 KiB the output ``[1, KV, R, L, K]``
    holds at most 36 positions a tile (one each of KV and R), cutting the guard's
    64-position sticks; with one value a stick no tile cuts it (its 64-fold padding is
    on a buffer K times smaller than the output; the policy takes that or not:
    ``unit_stick_guard``, rules/layout_choice.rules).  None: the read is left as it is.
    Only under automatic tiling: the new stick serves the tiles it would cut."""
    if config.ignore_span_overflow_hints:
        return None
    if not fitting or len(read_sticks) != 1 or isinstance(op.data, ir.Reduction) \
            and op.data.reduction_type == "batchmatmul":
        return None
    (u,) = read_sticks
    if u == v or u not in out_vars or v in dep.index.free_symbols or u not in dep.ranges:
        return None
    if not cuts_sticks_of(fitting, u, int(dep.ranges[u]),
                          int(layout.device_layout.device_size[-1])):
        return None
    try:
        coords = host_coordinates(layout.size, layout.stride, dep.index - layout.offset,
                                  dep.ranges)
        size, stride = [int(n) for n in layout.size], [int(n) for n in layout.stride]
    except (CoordinateError, TypeError):
        return None
    others = [d for d, c in enumerate(coords)
              if size[d] > 1 and c.free_symbols & set(dep.ranges) and u not in c.free_symbols]
    stick_elems = int(layout.device_layout.elems_per_stick)
    uncut = [d for d in others if not any(
        cuts_sticks_of(fitting, w, int(dep.ranges[w]), stick_elems)
        for w in coords[d].free_symbols & set(dep.ranges))]
    units = [d for d, n in enumerate(size) if n == 1]
    if not uncut and units and take(op, "unit_stick_guard", dep.name):
        return units[-1]
    if not others:
        return None
    return min(uncut or others, key=lambda d: (stride[d], -d))


def _reduction_dim(op: ir.ComputedBuffer, layout: Any, dep: MemoryDep, required: sympy.Symbol,
                   out_vars: set[sympy.Symbol]) -> int | None:
    """The host dim of a batchmatmul's reduction variable k in an operand it needs stuck
    on an output variable (the m of a matrix-vector product, whose output is stuck on
    m), else None."""
    if not (isinstance(op.data, ir.Reduction) and op.data.reduction_type == "batchmatmul"):
        return None
    reduction_vars = set(dep.ranges) - out_vars
    if required not in out_vars or len(reduction_vars) != 1:
        return None
    return host_dim_of(layout, dep, next(iter(reduction_vars)))


def _make_restickify(
    graph: Any, state: RulesGraphState, src: str, dims: tuple[int, int | None],
    consumer: ir.ComputedBuffer,
) -> str:
    src_layout = state.layouts[src]
    size = [int(s) for s in src_layout.size]
    stride = [int(s) for s in src_layout.stride]
    dim, reduced = dims
    device_layout = restickify_layout(size, stride, src_layout.dtype, dim,
                                      _held_dims(consumer, src, src_layout))
    inside = reduced is not None and reduced != dim and _reduction_inside(
        size, stride, device_layout, reduced)
    if inside:
        device_layout = staged_restickify_layout(size, stride, src_layout.dtype, dim, reduced)
    key = (src, dim, reduced) if inside else (src, dim)
    if key in state.restickified:
        return state.restickified[key]
    if int(src_layout.offset) != 0:
        raise UnsupportedGraph(
            f"{op_description(consumer)} needs {src} restickified, but {src} starts at "
            f"storage offset {src_layout.offset}; restickifying offset views is unsupported"
        )
    layout = FixedTiledLayout(
        src_layout.device, src_layout.dtype, [sympy.Integer(s) for s in size],
        [sympy.Integer(s) for s in stride],
        device_layout=device_layout,
    )
    name = _insert_copy(graph, state, src, layout, consumer, RESTICKIFY_KIND)
    state.restickified[key] = name
    _stage_if_policy_says(graph, state, src, name)
    return name


def _held_dims(consumer: ir.ComputedBuffer, src: str, layout: Any) -> list[int]:
    """The host dims of ``src`` (size > 1) that every read of it by ``consumer`` holds at
    one value (a ``select``: one expert's weights of a stack); none when a read cannot
    be decomposed."""
    held: set[int] | None = None
    for dep in consumer.get_read_writes().reads:
        if not isinstance(dep, MemoryDep) or dep.name != src:
            continue
        try:
            coords = host_coordinates(layout.size, layout.stride, dep.index - layout.offset,
                                      dep.ranges)
        except CoordinateError:
            return []
        fixed = {d for d, c in enumerate(coords)
                 if not (set(sympy.sympify(c).free_symbols) & set(dep.ranges))
                 and int(layout.size[d]) > 1}
        held = fixed if held is None else held & fixed
    return sorted(held or ())


def _reduction_inside(size: list[int], stride: list[int], device_layout: Any,
                      reduced: int) -> bool:
    """Whether a batchmatmul operand restickified onto an output variable keeps its
    reduction dim k just outside the new stick instead of where the generic layout
    puts it.  There k may sit outermost (the scan's states [L, I, N] stuck on I put N
    over all of L and I), and a k-controlled read spans its device stride per value:
    when one stick's worth of k (the least a reduction tile may hold without cutting
    the other operand's sticks) already spans more than the limit, no split of the
    product fits.  Just outside the stick, one value of k spans one stick.  Only
    under automatic tiling: the layout serves the tiles it would cut."""
    if config.ignore_span_overflow_hints:
        return False
    run = stick_run_bytes(size, stride, device_layout, reduced)
    return run is not None and run > config.max_span_bytes


def _stage_if_policy_says(graph: Any, state: RulesGraphState, src: str, name: str) -> None:
    """Send the copy ``name`` of ``src`` through intermediates where the ``restickify``
    section says so (rules/restickify.rules), asked for each side before anything changes:
    the source side reads through a buffer still stuck on the source's stick dim with the
    new stick dim just outside it, the output side writes through one stuck on the new
    stick dim with the old one just outside it; the copy then reads the last of them
    instead of ``src`` (docs/layout_model.md §1.6).  Every stage is a plain copy: exact."""
    from spyre_rules.engine.api import restickify_staged

    copy = V.graph.get_buffer(name)
    sides = []
    for side in ("source", "output"):
        staged, steps = restickify_staged(copy, side)
        state.restickify_stages.setdefault(name, []).extend(steps)
        sides.append(staged)
    if not any(sides):
        return
    src_layout = state.layouts[src]
    size = [int(s) for s in src_layout.size]
    stride = [int(s) for s in src_layout.stride]
    old = within_stick_host_dim(size, stride, src_layout.device_layout)
    new = within_stick_host_dim(size, stride, state.layouts[name].device_layout)
    read = src
    for staged, stick, outside in zip(sides, (old, new), (new, old)):
        if staged:
            layout = FixedTiledLayout(
                src_layout.device, src_layout.dtype, [sympy.Integer(s) for s in size],
                [sympy.Integer(s) for s in stride],
                device_layout=staged_restickify_layout(size, stride, src_layout.dtype, stick,
                                                       outside),
            )
            read = _insert_copy(graph, state, read, layout, copy, RESTICKIFY_STAGE_KIND)
    _read_through_copies(copy, {src: read})


def _insert_copy(graph: Any, state: RulesGraphState, src: str, layout: FixedTiledLayout,
                 consumer: ir.ComputedBuffer, kind: str) -> str:
    """A Pointwise copy of ``src`` into a new buffer of ``layout``, placed before ``consumer``."""
    size = [int(s) for s in layout.size]
    stride = [int(s) for s in state.layouts[src].stride]

    def inner_fn(index: Any) -> Any:
        # Index through the source's *current* layout (like Inductor's lazy
        # Buffer.make_loader): coarse tiling may later shrink it to one tile.
        buf = V.graph.get_buffer(src)
        if isinstance(buf, ir.Buffer):
            return buf.make_loader()(index)
        return ops.load(src, sum((i * s for i, s in zip(index, stride)), sympy.Integer(0)))

    data = ir.Pointwise(
        device=layout.device, dtype=layout.dtype, inner_fn=inner_fn,
        ranges=[sympy.Integer(s) for s in size],
    )
    buf = ir.ComputedBuffer(name=None, layout=layout, data=data)
    name = graph.register_buffer(buf, set_name=True)
    graph.register_operation(buf)
    graph.operations.remove(buf)
    graph.operations.insert(graph.operations.index(consumer), buf)
    buf.origins = type(consumer.origins)(consumer.origins)
    set_op_kind(buf, kind)
    state.layouts[name] = layout
    return name


def _read_through_copies(op: ir.ComputedBuffer, renames: dict[str, str]) -> None:
    """Make ``op`` load each restickified copy wherever it loaded the source,
    *indexed through the copy's layout*.

    Inductor resolves a load lazily (``Buffer.make_loader`` computes the source's
    ``layout.make_indexer()`` when the reader's body is traced), and coarse tiling
    may later shrink the source to a per-tile buffer while the copy -- which this
    op really reads -- keeps its own (full, or per-tile inside the same loop)
    layout.  A bare name swap would index the copy with the source's per-tile
    strides (a matmul outside the loop reading ``x + y`` tiled along its
    columns read the wrong rows).  So while the body is traced each source's
    layout is temporarily its copy's: same host size and strides as the source
    had, and whatever tiling propagation later makes of the copy.
    """
    data = op.data
    fn = data.inner_fn

    def inner_fn(*args: Any) -> Any:
        saved = []
        # Outside a graph (a pass asking an op its read names) no layout is read.
        get_buffer = getattr(V.graph, "get_buffer", None)
        for src, copy in renames.items() if get_buffer is not None else ():
            buf = get_buffer(src)
            if isinstance(buf, ir.ComputedBuffer):
                saved.append((buf, buf.layout))
                buf.layout = get_buffer(copy).layout
        try:
            with V.set_ops_handler(RenameLoads(V.get_ops_handler(), renames)):
                return fn(*args)
        finally:
            for buf, layout in saved:
                buf.layout = layout

    set_frozen(data, "inner_fn", inner_fn)
    drop_caches(op)


def insert_restickify(graph: Any, state: RulesGraphState) -> None:
    for op in list(graph.operations):
        if not isinstance(op, ir.ComputedBuffer):
            continue
        gathered = state.gathered_restickifies.get(op.get_name())
        if gathered:
            # read through the copies its stick was chosen for (layouts.py), first:
            # the rules below then see the reads as op will make them
            _read_through_copies(op, {src: _make_gathered_copy(graph, state, src, layout, op)
                                      for src, layout in gathered.items()})
        needed, reorders = _needed_restickifies(op, state)
        # a broadcast read stuck on a variable narrower than a stick (stick_choice.py)
        needed.update({src: (dim, None) for src, dim
                       in state.broadcast_restickifies.get(op.get_name(), {}).items()})
        if needed or reorders:
            renames = {src: _make_restickify(graph, state, src, dims, op)
                       for src, dims in needed.items()}
            renames.update({src: _make_reorder(graph, state, src, layout, op)
                            for src, layout in reorders.items() if src not in renames})
            _read_through_copies(op, renames)


def _make_gathered_copy(graph: Any, state: RulesGraphState, src: str,
                        layout: FixedTiledLayout, consumer: ir.ComputedBuffer) -> str:
    """A restickify copy of ``src`` that ``consumer`` reads gathered, stuck on the dim it
    splits finely with the gathered dim just outside the stick (gathered_sticks.py)."""
    key = (src, "gathered", tuple(layout.device_layout.stride_map),
           tuple(layout.device_layout.device_size))
    if key not in state.restickified:
        name = _insert_copy(graph, state, src, layout, consumer, RESTICKIFY_KIND)
        state.restickified[key] = name
        _stage_if_policy_says(graph, state, src, name)
    return state.restickified[key]


def _make_reorder(graph: Any, state: RulesGraphState, src: str, layout: FixedTiledLayout,
                  consumer: ir.ComputedBuffer) -> str:
    """An exact copy of ``src`` with its stick and another outer order (outer_order.py),
    shared by every reader that asks for the same layout."""
    key = (src, "order", tuple(layout.device_layout.stride_map), tuple(layout.device_layout.device_size))
    if key not in state.restickified:
        state.restickified[key] = _insert_copy(graph, state, src, layout, consumer,
                                               RESTICKIFY_STAGE_KIND)
    return state.restickified[key]
