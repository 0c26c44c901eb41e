"""Fixtures of the pipeline tests: the coarse-tiling pass is registered per test.

``spyre_rules.passes.pipeline`` registers its pass when imported (replacing the
user-hint-only pass of ``tiling_propagation``).  Importing it at collection time
would change every other test folder's compilations, so each test here imports
it through the autouse fixture and the previous pass list is restored afterwards.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Inductor caches would skip the pre-scheduling seam on a hit (integration pitfall 7).
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `import pipeline_helpers`


@pytest.fixture(autouse=True)
def pipeline_pass():
    import spyre_rules  # noqa: F401  (registers the backend)
    from spyre_rules.backend.pre_scheduling import PRE_SCHEDULING_PASSES
    from spyre_rules.hints import clear_tensor_dims
    import spyre_rules.backend.context  # noqa: F401  (registers the core passes first)

    saved = list(PRE_SCHEDULING_PASSES)
    from spyre_rules.passes import pipeline

    pipeline.register()
    clear_tensor_dims()
    try:
        yield pipeline
    finally:
        clear_tensor_dims()
        PRE_SCHEDULING_PASSES[:] = saved
