"""Complex rotary embeddings on the program (backend/complex_as_real.py, issue 41).

Llama 4 and DeepSeek-V2 rotate queries and keys as complex numbers; the post-grad
pass carries each complex64 value as its real and imaginary parts with ATen's own
formulas, so the multiply equals eager bitwise.  ``polar``'s eager kernel takes the
C library's cos/sin, the program torch's (within 1 ULP): that graph equals eager
within the ops tolerance and, bitwise, the same rotation made from torch.cos/sin.
"""

from __future__ import annotations

import pytest
import torch

from ops_helpers import randn, run_spyre


def _angles(seq=16, dim=32):
    inv = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
    return (torch.arange(seq, dtype=torch.float)[:, None] * inv)[None]  # [1, seq, dim/2]


def _as_complex(x):
    return torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))


def _rotate_tables(xq, xk, angles):
    """DeepSeek-V2's rotation, the table from cos and sin (llama4's vision form)."""
    freqs = torch.view_as_complex(torch.stack([torch.cos(angles), torch.sin(angles)], -1))
    freqs = freqs.unsqueeze(1)
    return (torch.view_as_real(_as_complex(xq) * freqs).flatten(3).type_as(xq),
            torch.view_as_real(_as_complex(xk) * freqs * 0.5).flatten(3))


def test_complex_multiply_equals_eager_bitwise():
    xq, xk = randn(1, 4, 16, 32), randn(1, 2, 16, 32, seed=1)
    args = (xq, xk, _angles())
    compiled = run_spyre(_rotate_tables, *args)
    assert compiled.kernels
    for out, ref in zip(compiled.output, _rotate_tables(*args)):
        assert torch.equal(out, ref)


def _rotate_polar(xq, angles):
    """Llama 4's rotation: the table from ``polar``, scaled, broadcast over heads."""
    freqs = torch.polar(torch.ones_like(angles), angles) * 1.0
    return torch.view_as_real(_as_complex(xq) * freqs[:, :, None, :]).flatten(3).type_as(xq)


def test_polar_rotation_differs_from_eager_only_by_cos_and_sin():
    xq, angles = randn(1, 16, 4, 32), _angles()
    compiled = run_spyre(_rotate_polar, xq, angles)
    assert compiled.kernels
    torch.testing.assert_close(compiled.output, _rotate_polar(xq, angles), atol=1e-6, rtol=1e-6)
    freqs = torch.complex(torch.cos(angles), torch.sin(angles))  # torch's cos/sin, no polar
    same_tables = torch.view_as_real(_as_complex(xq) * freqs[:, :, None, :]).flatten(3)
    assert torch.equal(compiled.output, same_tables)


def test_real_tensor_factor_is_promoted_like_aten():
    x, scale = randn(2, 8, 16), randn(2, 8, 1, seed=1)
    f = lambda x, s: torch.view_as_real(_as_complex(x) * s).flatten(2)  # noqa: E731
    compiled = run_spyre(f, x, scale)
    assert torch.equal(compiled.output, f(x, scale))


def test_a_complex_op_without_real_form_leaves_the_graph_to_the_refusal():
    f = lambda x: torch.view_as_real(torch.exp(_as_complex(x)))  # noqa: E731
    with pytest.warns(UserWarning, match="does not support code generation for complex"), \
            pytest.raises(Exception, match=r"view_as_complex.default.*no Spyre lowering"):
        run_spyre(f, randn(2, 8, 16))
