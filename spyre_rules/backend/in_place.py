"""In-place writes on the program: an op that stores into another op's buffer.

Inductor lowers ``index_put_`` / ``index_copy_`` / ``scatter_`` (and the functional
forms, as a copy followed by the in-place write) to a ComputedBuffer whose
``MutationLayoutSHOULDREMOVE`` names the buffer it writes; readers after it read that
buffer.  On the program such an op is a kernel storing into the target's own device
segment: it shares the target's layout and allocation (``assign_layouts``), its store
names the target (``codegen/build.py``), and a store through an indirect index writes,
or with ``atomic_add`` adds into, the indexed elements (``executor/evaluate.py``).
The write stays in place: nothing is copied, before or after.

A graph input written in place (a KV cache: ``compile_fx`` has AOT autograd keep
inference input mutations in the graph) lives on the device: the kernel writes its segment and
copies just the elements it wrote to the caller's tensor (``write_through``:
executor/write_through.py), so the segment stays resident from call to call and
no kernel re-stickifies the whole input (executor/resident.py).
"""

from __future__ import annotations

from typing import Any

from torch._inductor import ir
from torch._inductor.virtualized import V

__all__ = ["in_place_refusal", "in_place_target"]


def in_place_target(op: Any) -> str | None:
    """The buffer ``op`` writes in place (None: it owns its buffer)."""
    if not isinstance(getattr(op, "layout", None), ir.MutationLayoutSHOULDREMOVE):
        return None
    names = op.get_mutation_names()
    return names[0] if names else None


def in_place_refusal(op: Any) -> str | None:
    """Why the program cannot write ``op``'s target in place (None: it can)."""
    target = in_place_target(op)
    if target is None:
        return "writes into another buffer with no name (MutationLayoutSHOULDREMOVE)"
    graph = V.graph
    if target in graph.constants:
        return f"writes in place into constant {target}; constants are read-only"
    if target in graph.graph_inputs:
        return None  # written through to its host tensor (executor/write_through.py)
    buffer = graph.try_get_buffer(target)
    if not isinstance(buffer, ir.ComputedBuffer) or isinstance(
            buffer.layout, (ir.MutationLayoutSHOULDREMOVE, ir.NonOwningLayout)):
        kind = type(buffer).__name__ if buffer is not None else "no buffer"
        return (f"writes in place into {target} ({kind}); only a buffer a Spyre op "
                "computes can be written in place")
    return None
