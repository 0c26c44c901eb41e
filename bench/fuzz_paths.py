"""Run one compiled program on both executor paths and compare every byte.

The executor has a structured path (strided views of the simulated device memory)
and a general one (``views.FORCE_GENERAL``: every access gathered and scattered
point by point).  Both must produce identical outputs, identical simulated HBM in
every kernel, and the same run-time error if any.  The differential fuzzer uses this
on the program it has just compiled, so checking both paths costs two runs and no
second compile.
"""

from __future__ import annotations

import torch

from spyre_rules.executor import views
from spyre_rules.executor.runtime import recent_kernels


def newest_kernel_serial() -> int:
    return max((k.serial for k in recent_kernels()), default=-1)


def kernels_since(serial: int) -> list:
    return [k for k in recent_kernels() if k.serial > serial]


def _bytes(value) -> list:
    if isinstance(value, torch.Tensor):
        return [(value.shape, value.dtype, value.contiguous().view(-1).view(torch.uint8))]
    return [b for v in value for b in _bytes(v)]


def run_on_path(compiled, inputs, kernels, general: bool, runtime_errors: tuple):
    """Outputs (or the run-time error) and every kernel's HBM, from zeroed memory."""
    for k in kernels:
        k.device.reset()
    views.FORCE_GENERAL = general
    try:
        with torch.no_grad():
            out = _bytes(compiled(*inputs))
    except runtime_errors as exc:  # both paths must refuse alike
        out = [(type(exc).__name__, str(exc), torch.empty(0, dtype=torch.uint8))]
    finally:
        views.FORCE_GENERAL = False
    memories = [k.device.memory().read_bytes(0, k.device.total_bytes).clone() for k in kernels]
    return out, memories


def difference(general, structured) -> str | None:
    """None when both runs agree byte for byte, else what differs first."""
    (out_g, mem_g), (out_s, mem_s) = general, structured
    if len(out_g) != len(out_s):
        return f"general path gave {len(out_g)} outputs, structured {len(out_s)}"
    for i, ((sa, da, ba), (sb, db, bb)) in enumerate(zip(out_g, out_s)):
        if (sa, da) != (sb, db):
            return f"output {i}: general {sa} {da}, structured {sb} {db}"
        if not torch.equal(ba, bb):
            return f"output {i} differs between the general and structured paths"
    for i, (ma, mb) in enumerate(zip(mem_g, mem_s, strict=True)):
        if not torch.equal(ma, mb):
            return f"device memory of kernel {i} differs between the general and structured paths"
    return None


def compare_paths(compiled, inputs, kernels, runtime_errors: tuple) -> str | None:
    general = run_on_path(compiled, inputs, kernels, True, runtime_errors)
    structured = run_on_path(compiled, inputs, kernels, False, runtime_errors)
    return difference(general, structured)
