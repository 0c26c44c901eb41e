"""Facts that classify an operation: its IR type, layout kind, rank and reads.

Each is a ``@fact`` (``spyre_rules.facts.registry``): declared in
``rules/prelude.rules``, defined here once, signature from the annotations.
They measure and decide nothing.
"""

from __future__ import annotations

from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep

from spyre_rules.facts.in_place import in_place_target
from spyre_rules.facts.in_place import spans_in_place_target_whole as _spans_target_whole
from spyre_rules.facts.op_cache import op_facts
from spyre_rules.facts.records import FactError
from spyre_rules.facts.records import as_int as _int
from spyre_rules.facts.regions import effective_layout, region_start, spans_concatenation_whole
from spyre_rules.facts.registry import Layout, Op, fact
from spyre_rules.facts.snapshot import static_layout
from spyre_rules.facts.tiled_layout import FixedTiledLayout
from spyre_rules.ir.ir_edit import op_description as _op_description
from spyre_rules.ir.op_identity import op_name

__all__ = ["BATCH_MATMUL", "concat_region_start", "extent", "has_fixed_tiled_layout", "has_indirect_reads", "ordered_read_names",
           "has_static_layout", "is_batch_matmul", "is_computed_buffer", "is_pointwise",
           "spans_concat_whole", "spans_in_place_target_whole", "writes_in_place",
           "is_reduction", "layout", "op_description", "order_dependencies", "rank", "read_names",
           "read_buffers"]

BATCH_MATMUL = "batchmatmul"


@fact
def op_description(op: Op) -> str:
    return _op_description(op)


@fact
def is_computed_buffer(op: Op) -> bool:
    return isinstance(op, ir.ComputedBuffer)


@fact
def has_fixed_tiled_layout(op: Op) -> bool:
    return isinstance(getattr(op, "layout", None), FixedTiledLayout)


@fact
def writes_concat_region(op: Op) -> bool:
    layout = getattr(op, "layout", None)
    return isinstance(layout, ir.NonOwningLayout) and isinstance(
        getattr(getattr(layout.view, "data", None), "data", None), ir.ConcatKernel)


@fact
def spans_concat_whole(op: Op, dim: int) -> bool:
    return spans_concatenation_whole(op, int(dim))


@fact
def concat_region_start(op: Op, dim: int) -> int | None:
    return region_start(op, int(dim))


@fact
def writes_in_place(op: Op) -> bool:
    return in_place_target(op) is not None


@fact
def spans_in_place_target_whole(op: Op, dim: int) -> bool:
    facts = op_facts(op)
    return _spans_target_whole(op, int(dim), facts.write, facts.position_vars)


@fact
def is_pointwise(op: Op) -> bool:
    return isinstance(getattr(op, "data", None), ir.Pointwise)


@fact
def is_reduction(op: Op) -> bool:
    return isinstance(getattr(op, "data", None), ir.Reduction)


@fact
def is_batch_matmul(op: Op) -> bool:
    return is_reduction(op) and getattr(op.data, "reduction_type", None) == BATCH_MATMUL


@fact
def has_static_layout(op: Op) -> bool:
    return static_layout(effective_layout(op))


@fact
def has_indirect_reads(op: Op) -> bool:
    """True if a read goes through an indirect (gather/scatter) index.

    If Inductor cannot list the op's reads at all, the answer is True: "cannot
    tell" must not read as "only direct reads".
    """
    rw = op_facts(op).read_writes
    if rw is None:
        return True
    return any(d.is_indirect() for d in rw.reads if isinstance(d, MemoryDep))


@fact
def rank(op: Op) -> int:
    return len(getattr(getattr(op, "data", None), "ranges", None) or ())


@fact
def extent(op: Op, dim: int) -> int | None:
    ranges = list(getattr(getattr(op, "data", None), "ranges", None) or ())
    d = _int(dim)
    if d is None or not 0 <= d < len(ranges):
        return None
    return _int(ranges[d])


@fact
def layout(op: Op) -> Layout:
    found = effective_layout(op)
    if not isinstance(found, FixedTiledLayout):
        raise FactError(
            f"{op_name(op)} has a {type(found).__name__}, not a FixedTiledLayout "
            "(check has_fixed_tiled_layout first)"
        )
    return found


@fact
def read_buffers(op: Op) -> frozenset[str]:
    return frozenset(d.name for d in op_facts(op).memory_reads)


def read_names(op: Op) -> frozenset[str]:
    """Every buffer ``op`` reads, any dependency kind (``ordered_read_names``)."""
    return frozenset(ordered_read_names(op))


def ordered_read_names(op: Op) -> list[str]:
    """Every buffer ``op`` reads, in the order it reads them.  A ComputedBuffer's
    loader names them, and a scatter's store index reads more (the indices of
    ``index_put``: Scatter's ``get_read_names`` leaves them out); an extern kernel (a
    concatenation, a fallback) is a Buffer whose ``get_read_names`` is its own name:
    its reads are the dependencies the Scheduler orders it by."""
    if isinstance(op, ir.ComputedBuffer):
        names = list(op.get_read_names())
        if isinstance(op.data, ir.Scatter):
            names += [dep.name for dep in op.get_read_writes().reads]
        return list(dict.fromkeys(names))
    return [name for name in dict.fromkeys(dep.name for dep in op.get_read_writes().reads)
            if name != op.get_name()]


def order_dependencies(op: Op) -> frozenset[str] | None:
    """The buffers ``op`` must come after: every buffer it reads (``read_names``).
    A region of a concatenation writes into storage nothing reads before the
    concatenation, which comes after its regions.  None when its place in the
    order depends on more than its reads: it mutates a buffer or writes no output
    of its own (side effects)."""
    layout = getattr(op, "layout", None)
    if isinstance(layout, (ir.MutationLayoutSHOULDREMOVE, ir.NoneLayout)) or op.get_mutation_names():
        return None
    return read_names(op)
