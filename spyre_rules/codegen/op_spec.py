"""The names a generated wrapper module imports (``codegen/source.py`` ``IMPORTS``).

The program model itself lives in ``spyre_rules.program.op_spec``; this module
keeps the import path that generated wrapper sources (and their snapshots) use.
"""

from __future__ import annotations

from spyre_rules.program.op_spec import (
    DataFormats,
    IndirectIndex,
    LoopSpec,
    OpSpec,
    TensorArg,
    TensorPlacement,
    element_bytes,
    iter_op_specs,
    sympify,
)

__all__ = [
    "DataFormats",
    "IndirectIndex",
    "LoopSpec",
    "OpSpec",
    "TensorArg",
    "TensorPlacement",
    "element_bytes",
    "iter_op_specs",
    "sympify",
]
