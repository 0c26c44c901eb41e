"""``torch.eye`` on the program (backend/eye.py, issue 41: Kimi-Linear).

ATen's reference ``eye`` builds uint8 ranges (no Spyre stick layout); ours int32:
the identity is exact, alone and added to a chunk system as the delta rule does.
"""

from __future__ import annotations

import pytest
import torch

from ops_helpers import randn, run_spyre


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
def test_identity_plus_a_chunk_system_equals_eager(dtype):
    def system(a):
        eye = torch.eye(64, dtype=dtype)
        return (torch.tril(a, -1) + eye, torch.eye(16, 48, dtype=dtype))

    a = randn(2, 64, 64)
    compiled = run_spyre(system, a)
    assert compiled.kernels
    for out, ref in zip(compiled.output, system(a), strict=True):
        assert out.dtype == ref.dtype and torch.equal(out, ref)
