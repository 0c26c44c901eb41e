"""Run one OpSpec on the executor's general path and on its structured path.

The executor's contract is identical device bytes on both paths
(``views.FORCE_GENERAL`` forces the general gather/scatter one); tests that check an
access pattern or a fast path use this to get both memories.
"""

from __future__ import annotations

import torch

from spyre_rules.executor import DeviceMemory, run_op_spec, scratch, stickify, views


def both_path_memories(spec, total: int, writes) -> tuple[torch.Tensor, torch.Tensor]:
    """Memory bytes ``[0, total)`` after running ``spec`` on the general path, then on
    the structured path, each on fresh memory holding ``writes`` (``(address, host
    tensor, layout)``, stickified) and with the scratch buffers emptied first."""
    out = []
    for general in (True, False):
        scratch.clear()
        memory = DeviceMemory(total)
        for address, tensor, layout in writes:
            memory.write_bytes(address, stickify(tensor, layout).reshape(-1).view(torch.uint8))
        views.FORCE_GENERAL = general
        try:
            run_op_spec(spec, memory)
        finally:
            views.FORCE_GENERAL = False
        out.append(memory.read_bytes(0, total).clone())
    return out[0], out[1]
