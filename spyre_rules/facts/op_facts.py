"""The facts of ``rules/prelude.rules``: the registry the rule engine binds.

Every fact *measures* a ``torch._inductor.ir.Operation`` (its type, ranges,
layout, MemoryDeps, symbol maps, device coordinates and spans) and decides
nothing: no limit, no threshold, no skip/accept.  A fact is declared in the
prelude and defined once, as a ``@fact`` function in one of the modules below
(its signature comes from its annotations: ``spyre_rules.facts.registry``).
Adding a fact is two edits: the prelude's ``fact`` line and the function.

==========================  =================================================
module                      job
==========================  =================================================
``facts.op_kind``           classify an op: IR type, layout kind, rank, reads
``facts.hint_kinds``        user dim hints vs the ones automatic grouping stamps
``facts.access``            loop symbols and access coordinates of reads/writes
``facts.alignment``         does a consumer's tile read its producer's tile
``facts.layout_facts``      within-stick dim, host sizes, divisors
``facts.snapshot``          :class:`OpFacts`, one op's memoised measurements
``facts.op_cache``          the per-op cache of snapshots (:func:`op_facts`)
==========================  =================================================

This module lists the fact modules explicitly (no registration by import side
effect) and re-exports their names, so callers keep one import.
"""

from __future__ import annotations

from spyre_rules.facts import (
    access, alignment, hint_kinds, layout_facts, op_kind, reduction_facts, restickify_facts,
)
from spyre_rules.facts.access import (
    full_output_coords,
    has_output_coords,
    has_unmeasured_indirect_reads,
    indirect_reads,
    input_reads,
    output_coords,
    output_dim,
    output_symbols,
    read_coords,
    read_host_coords,
    reduction_symbols,
    tiles_translate,
)
from spyre_rules.facts.alignment import read_tile_dim, reads_dim_by_own_symbol
from spyre_rules.facts.hint_kinds import AUTO_HINT_DIM_NAMES, has_user_hints, is_auto_hint
from spyre_rules.facts.layout_facts import divisors, host_size, stick_elems, within_stick_dim
from spyre_rules.facts.op_cache import _CACHE, clear_cache, op_facts
from spyre_rules.facts.op_kind import (
    BATCH_MATMUL,
    extent,
    has_fixed_tiled_layout,
    has_indirect_reads,
    has_static_layout,
    is_batch_matmul,
    is_computed_buffer,
    spans_concat_whole,
    spans_in_place_target_whole,
    writes_in_place,
    is_pointwise,
    is_reduction,
    layout,
    order_dependencies,
    rank,
    read_buffers,
)
from spyre_rules.facts.reduction_facts import (
    output_dtype,
    reduction_split_dim,
    reduction_type,
    split_extent,
)
from spyre_rules.facts.registry import FactRegistry
from spyre_rules.facts.restickify_facts import restickify_output_run_bytes, restickify_source_run_bytes
from spyre_rules.facts.snapshot import OpFacts

#: Every bundled fact, from the modules that define them (the engine's default registry).
REGISTRY = FactRegistry.from_modules(op_kind, hint_kinds, access, alignment, layout_facts,
                                     reduction_facts, restickify_facts)

#: Prelude fact name -> its Python function (``REGISTRY.functions``).
FACTS = REGISTRY.functions

#: Each fact's signature in the prelude's spelling, derived from its annotations
#: (``REGISTRY.signatures``).  The engine compares these with the prelude's
#: ``fact`` declarations and refuses to load if they disagree.
SIGNATURES = REGISTRY.signatures

__all__ = ["AUTO_HINT_DIM_NAMES", "BATCH_MATMUL", "FACTS", "REGISTRY", "SIGNATURES", "OpFacts",
           "clear_cache", "is_auto_hint", "op_facts", "order_dependencies", *FACTS]
