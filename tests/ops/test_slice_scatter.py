"""``slice_scatter`` as a concatenation (backend/concat.py, issue 41).

Functionalization turns ``key[..., 16:].copy_(k)`` into a ``slice_scatter``; Inductor's
lowering reads ``src`` under a mask at ``index - start`` on every output lane (a
negative offset: xLSTM; past ``src``'s end: DeepSeek's keys).  With step 1 it is a
concatenation of the kept slices and ``src``: moved elements, bitwise equal to eager.
"""

from __future__ import annotations

import pytest
import torch

from ops_helpers import randn, run_spyre


def check(fn, *inputs):
    """On the program (fallback=error) and bitwise equal to eager."""
    expected = fn(*(x.clone() for x in inputs))
    compiled = run_spyre(fn, *inputs)
    assert compiled.kernels
    outs, refs = (v if isinstance(v, tuple) else (v,) for v in (compiled.output, expected))
    for out, ref in zip(outs, refs, strict=True):
        assert torch.equal(out, ref)


def _rotated(k):
    return (k * 3).view(1, 1, 128, 16).expand(-1, 4, -1, -1)


@pytest.mark.parametrize("region", ["tail", "head", "middle", "negative_start"])
def test_copy_into_a_slice_equals_eager(region):
    where = {"tail": slice(16, None), "head": slice(None, 16), "middle": slice(8, 24),
             "negative_start": slice(-16, None)}[region]

    def fill(base, k):
        key = base * 2
        key[..., where].copy_(_rotated(k))
        return key + 1

    check(fill, randn(1, 4, 128, 32), randn(1, 128, 16, seed=1))


def test_deepseek_keys_from_two_copies_equal_eager():
    def keys(kv, k):
        kv = (kv * 2).view(1, 128, 4, 48).transpose(1, 2)
        k_nope, value = torch.split(kv, [16, 32], dim=-1)
        key = kv.new_empty(1, 4, 128, 32)
        key[..., :16].copy_(k_nope)
        key[..., 16:].copy_(_rotated(k))
        return key + 1, value

    check(keys, randn(1, 128, 192), randn(1, 128, 16, seed=1))


def test_a_row_range_of_the_outer_dim_equals_eager():
    def rows(state, new):
        state = state.clone()
        state[1:3] = new * 2
        return state * 1.5

    check(rows, randn(4, 8, 32), randn(2, 8, 32, seed=1))


def test_a_slice_write_into_an_input_stays_in_place():
    """A KV cache written at a slice: Inductor's reinplacing writes just the slice (no
    concatenation copying the whole cache), and the caller's tensor sees it."""
    def step(cache, k, q):
        cache[:, :, 3:5].copy_(k * 2)
        return q @ cache.transpose(-1, -2)

    cache, k, q = torch.zeros(1, 2, 64, 32), randn(1, 2, 2, 32), randn(1, 2, 4, 32, seed=2)
    expected_cache = cache.clone()
    expected = step(expected_cache, k, q)
    compiled = run_spyre(step, cache, k, q)
    assert torch.equal(compiled.output, expected) and torch.equal(cache, expected_cache)
    names = [kernel.name for kernel in compiled.kernels]
    assert names and not any("cat" in name for name in names), names
