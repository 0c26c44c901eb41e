"""CPU executor of the generated Spyre program over simulated device memory.

``stickify``/``unstickify`` convert host tensors to and from device stick layouts;
``run_op_spec`` executes one OpSpec; ``runtime`` holds the objects the generated
wrapper creates (device memory per graph, kernels).

Numerics (what the differential tests hold it to): values are computed in the
dtype eager computes them in -- half precision widened to float32 per op and
rounded on conversion/store (``dtypes.py``), reductions and matmuls accumulate
in float32 (float64 for float64).  Integer and bool results are exact.  Float
pointwise results equal eager's; reductions and matmuls sum in a different
order than eager's kernels, so they agree to ~1e-5 relative in float32 and to
about one float16 ulp (tests allow 2e-3) in float16.
"""

from __future__ import annotations

from spyre_rules.executor.evaluate import CHUNK_ELEMENTS
from spyre_rules.executor.run_program import run_op_spec
from spyre_rules.executor.hbm import DeviceMemory, DeviceMemoryError, IndirectIndexError
from spyre_rules.executor.stickify import stickify, unstickify

__all__ = ["CHUNK_ELEMENTS", "DeviceMemory", "DeviceMemoryError", "IndirectIndexError",
           "run_op_spec", "stickify", "unstickify"]
