"""Fixtures of the pipeline tests: the pipeline module per test, pass list restored.

The composition root (``backend/pass_lists.py``) places the coarse-tiling pass;
each test gets ``spyre_rules.passes.pipeline`` through the autouse fixture, and
the pass list is restored afterwards (a test may add or swap a pass).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Inductor caches would skip the pre-scheduling seam on a hit (docs/inductor_integration.md pitfall 7).
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `import pipeline_helpers`


@pytest.fixture(autouse=True)
def pipeline_pass():
    import spyre_rules  # noqa: F401  (registers the backend)
    from spyre_rules.backend.pass_lists import PRE_SCHEDULING_PASSES
    from spyre_rules.hints import clear_tensor_dims
    saved = list(PRE_SCHEDULING_PASSES)
    from spyre_rules.passes import pipeline

    clear_tensor_dims()
    try:
        yield pipeline
    finally:
        clear_tensor_dims()
        PRE_SCHEDULING_PASSES[:] = saved
