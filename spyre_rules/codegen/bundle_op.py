"""The ``sdscbundle.sdsc_execute`` op of ``bundle.mlir``, in either printed form.

``custom`` is the dialect's own syntax, which only a toolchain that registers
``sdscbundle`` parses; ``generic`` is MLIR's generic op form (operand types
spelled out), which any MLIR parser accepts with unregistered dialects allowed
(``config.bundle_mlir_form`` chooses).
"""

from __future__ import annotations

__all__ = ["sdsc_execute"]


def sdsc_execute(operands: list[str], attrs: list[tuple[str, str]], form: str) -> str:
    """One execute; every operand is an ``index`` (an HBM address)."""
    if form == "custom":
        attr_text = ", ".join(f"{k}={v}" for k, v in attrs)
        return f"sdscbundle.sdsc_execute ({', '.join(operands)}) {{{attr_text}}}"
    if form != "generic":
        raise ValueError(f"bundle.mlir form must be 'custom' or 'generic', got {form!r}")
    attr_text = ", ".join(f"{k} = {v}" for k, v in attrs)
    types = ", ".join("index" for _ in operands)
    return f'"sdscbundle.sdsc_execute"({", ".join(operands)}) {{{attr_text}}} : ({types}) -> ()'
