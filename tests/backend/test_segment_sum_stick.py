"""Mamba2's segment_sum: a per-head cumulative segment sum of a (1, L, H) fp32 input.

The expand + masked_fill writes (b, h, c, l, s) with the heads outermost, but reads
A stuck on the heads (32 per stick): at 32768 tokens (256 MiB) no tile of fewer than
32 heads cuts no stick of A and no tile of 32 heads fits (Granite-4.0-H-Small's
buf67).  backend/stick_choice.py sticks the chain on the heads instead; here the same
ratios at 512 KiB (8 MiB of fp32, 128 KiB per head, 256 KiB per chunk).
"""

from __future__ import annotations

import pytest
import torch

from spyre_helpers import run_spyre

from spyre_rules import config
from spyre_rules.program.op_spec import LoopSpec

transformers = pytest.importorskip("transformers")
from transformers.models.granitemoehybrid.modeling_granitemoehybrid import segment_sum  # noqa: E402

H, C, L, N = 64, 32, 32, 8
TOL = dict(atol=2e-5, rtol=2e-5)


def _diag_scores(a, dt, cm, bm):
    a = (a * dt).reshape(1, C, L, H).permute(0, 3, 1, 2)
    decay = torch.exp(segment_sum(a))
    g = torch.einsum("bclhn,bcshn->bclsh", cm.reshape(1, C, L, H, N), bm.reshape(1, C, L, H, N))
    return g * decay.permute(0, 2, 3, 4, 1)


def _inputs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1, C * L, H, generator=g), torch.rand(1, C * L, H, generator=g),
            torch.randn(1, C * L, H, N, generator=g), torch.randn(1, C * L, H, N, generator=g)]


def _compile(limit, xs):
    with config.patch(max_span_bytes=limit, ignore_span_overflow_hints=False,
                      coarse_tiling=True, span_check="error"):
        return run_spyre(_diag_scores, *xs)


def test_segment_sum_chain_tiles_on_chunks_and_equals_eager():
    xs = _inputs()
    tiled = _compile(512 * 1024, xs)
    assert any(isinstance(s, LoopSpec) for k in tiled.kernels for s in k.specs)
    untiled = _compile(1 << 30, xs)
    assert torch.equal(tiled.output, untiled.output)  # tiling changes no summation order
    torch.testing.assert_close(tiled.output, _diag_scores(*xs), **TOL)  # the scan's order
