"""Small, careful edits of Inductor IR objects (docs/inductor_integration.md §3).

``Loops``/``Pointwise``/``Reduction`` are frozen dataclasses and many of their
methods cache results on the instance (``cache_on_self`` stores
``__<method>_cache`` attributes).  An edit must bypass the frozen ``__setattr__``
and then drop those caches, or Inductor keeps answering with the old IR.
"""

from __future__ import annotations

from typing import Any

from torch._inductor import ir
from torch._inductor.virtualized import V

from spyre_rules.ir.op_identity import op_name

__all__ = ["drop_caches", "set_frozen", "op_description", "RenameLoads", "rename_loads"]


def drop_caches(*objs: Any) -> None:
    """Delete every ``cache_on_self`` / ``cache_on_self_and_args`` result on ``objs``."""
    for obj in objs:
        for key in [k for k in vars(obj) if k.startswith("__") and k.endswith("_cache")]:
            object.__delattr__(obj, key)


def set_frozen(obj: Any, name: str, value: Any) -> None:
    """Assign a field of a frozen IR dataclass, then drop its stale caches."""
    object.__setattr__(obj, name, value)
    drop_caches(obj)


def op_description(op: Any) -> str:
    """``buf3 (aten ops: amax, sub)`` -- how errors and the plan name an op."""
    name = op_name(op)
    origins = sorted(
        {str(getattr(o, "target", o)).replace("aten.", "") for o in getattr(op, "origins", ())}
    )
    if origins:
        return f"{name} (aten ops: {', '.join(origins)})"
    return name


class RenameLoads(V.WrapperHandler):  # type: ignore[name-defined]
    """Ops handler wrapper that redirects loads of some buffers to others."""

    def __init__(self, inner: Any, renames: dict[str, str]) -> None:
        super().__init__(inner)
        self._renames = renames

    def load(self, name: str, index: Any) -> Any:
        return self._inner.load(self._renames.get(name, name), index)


def _renaming(fn: Any, renames: dict[str, str]) -> Any:
    def inner_fn(*args: Any) -> Any:
        with V.set_ops_handler(RenameLoads(V.get_ops_handler(), renames)):
            return fn(*args)

    return inner_fn


def rename_loads(op: ir.ComputedBuffer, renames: dict[str, str]) -> None:
    """Make ``op`` read ``renames[name]`` wherever it read ``name``.

    Only the buffer name changes; index expressions stay the same, so the new
    buffer must have the same host size/stride as the old one (true for a
    restickify copy, which changes only the device layout).
    """
    # Multi-output reductions (welford) fold their inner_fns into inner_fn too.
    data = op.data
    set_frozen(data, "inner_fn", _renaming(data.inner_fn, renames))
    drop_caches(op)
