"""``scratchpad_planning``: put loop-internal per-tile buffers in the LX scratchpad.

The ``scratchpad_planning`` step (docs/layout_model.md §5.9), gated by ``config.lx_planning`` and run by
the pipeline pass right after coarse tiling (it must see per-tile sizes: before
tiling every buffer is full-size and would not fit).

Which buffers: a ComputedBuffer with a ``FixedTiledLayout`` that

* lives inside a loop group (a ``LoopStamp``) and is ``per_tile_fixed``
  (insert_tiling_propagation: rewritten every iteration at a fixed address), and
* is read only by ops of the same top-level loop group and is not a graph output
  (a loop-invariant ``per_tile_fixed`` buffer may still be read after its loop);

and the accumulator of every op with a reduction level (``passes/accumulators.py``:
per tile, used only by that op's init / combine / finalise steps, inside its loop),
placed right before the op's own buffer.

Placement (deliberately simple): per top-level loop group, first-fit in operation
order, each buffer at the next 128-byte aligned offset (one stick, like HBM
segments in program/memory_map.py) from 0; a buffer whose device size
(``device_layout.size_in_bytes``) does not fit in ``config.lx_capacity_bytes`` after
the ones already placed stays in HBM, and later smaller ones may still fit.

Liveness assumption: every LX buffer of a group may be live during the whole of
one iteration (no reuse inside a group), and nothing in LX outlives its loop: a
group is one kernel (bundle boundary) and its LX buffers are never read outside
it.  So groups run one after another and each starts again at offset 0.  The
capacity is compared with the whole per-tile buffer (work division would give each
core a slice; not modelled, so the check is conservative).

A placed buffer gets ``layout.allocation = {'lx': offset}``; the memory map skips it
(``backend.pre_scheduling.plan_memory``), codegen copies the allocation into its
TensorArgs and the executor keeps it in a separate scratchpad.  Each op's plan
record gets ``"scratchpad"``: the offset, or why the buffer stayed in HBM.
"""

from __future__ import annotations

from typing import Any

from torch._inductor import ir

from spyre_rules import config
from spyre_rules.facts.tiled_layout import FixedTiledLayout
from spyre_rules.ir.graph_state import graph_state
from spyre_rules.ir.loop_stamp import loop_group_id
from spyre_rules.program.memory_map import ALIGNMENT
from spyre_rules.passes.accumulators import ACCUMULATOR_ATTR

__all__ = ["lx_candidates", "scratchpad_planning"]


def _align(offset: int) -> int:
    return -(-offset // ALIGNMENT) * ALIGNMENT


def lx_candidates(graph: Any) -> dict[Any, list[Any]]:
    """Top-level loop group -> its loop-internal per-tile buffers, in operation order."""
    state = graph_state(graph)
    ops = [op for op in graph.operations if isinstance(op, ir.ComputedBuffer)]
    readers: dict[str, set[Any]] = {}
    for op in ops:
        gid = loop_group_id(op)
        for name in op.get_read_names():
            readers.setdefault(name, set()).add(None if gid is None else gid[0])
    outputs = set(state.host_outputs) | set(getattr(graph, "get_output_names", lambda: [])())
    found: dict[Any, list[Any]] = {}
    for op in ops:
        gid = loop_group_id(op)
        layout = op.layout
        if gid is None or not isinstance(layout, FixedTiledLayout):
            continue
        acc = getattr(op, ACCUMULATOR_ATTR, None)
        if acc is not None:  # read and written only inside the op's loop (accumulators.py)
            found.setdefault(gid[0], []).extend(_AccumulatorBuffer(acc, f) for f in acc.fields)
        if not getattr(layout, "per_tile_fixed", False) or op.get_name() in outputs:
            continue
        if readers.get(op.get_name(), set()) - {gid[0]}:
            continue
        found.setdefault(gid[0], []).append(op)
    return found


class _AccumulatorBuffer:
    """A reduction level's accumulator, seen as an LX candidate buffer."""

    def __init__(self, acc: Any, field: Any) -> None:
        self.acc = acc
        self.field = field
        self.layout = field.layout

    def get_name(self) -> str:
        return self.field.name


def _placed(record: Any, op: Any, placement: Any) -> Any:
    if not isinstance(op, _AccumulatorBuffer):
        return record.with_scratchpad(placement)
    if len(op.acc.fields) > 1:  # one placement per field buffer, by name
        prior = {} if op.field is op.acc.fields[0] else record.accumulator_scratchpad
        placement = {**prior, op.field.name: placement}
    return record.with_accumulator_scratchpad(placement)


def scratchpad_planning(graph: Any) -> dict[str, int]:
    """Place LX buffers (module doc); returns ``{buffer name: LX offset}``."""
    if not config.lx_planning:
        return {}
    capacity = int(config.lx_capacity_bytes)
    plan = graph_state(graph).plan
    placed: dict[str, int] = {}
    for _, ops in lx_candidates(graph).items():
        end = 0
        for op in ops:
            size = int(op.layout.device_layout.size_in_bytes)
            start = _align(end)
            # An accumulator's placement is reported in its reduction op's record.
            owner = op.acc.op if isinstance(op, _AccumulatorBuffer) else op.get_name()
            record = plan.get(owner)
            if start + size > capacity:
                if record is not None:
                    plan[owner] = _placed(record, op,
                                          f"stays in HBM: {size} bytes at LX offset {start} "
                                          f"exceed the {capacity}-byte capacity")
                continue
            op.layout.allocation = {"lx": start}
            placed[op.get_name()] = start
            end = start + size
            if record is not None:
                plan[owner] = _placed(record, op,
                                      {"lx": start, "size_bytes": size})
    return placed
