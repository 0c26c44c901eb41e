"""The ``collectives`` section (rules/collectives.rules, docs/rules_language.md §6.7): the
policy picks how a collective step too large for one core is cut, and its bound caps the
chunks; both come from the rules, not from Python."""

from __future__ import annotations

import torch

from spyre_rules.codegen.collective_spans import CollectiveBuffer, plan_chunks
from spyre_rules.engine.policy import get_policy, load_policy
from spyre_rules.engine.values import Chunking
from spyre_rules.facts.tiled_layout import fixed_tiled_layout

from test_policy_loading import rules_copy

CANDIDATES = [Chunking(2, 32, 2), Chunking(1, 16, 2), Chunking(0, 1, 3)]


def _all_reduce(shape, dtype=torch.float16):
    layout = fixed_tiled_layout("cpu", dtype, shape)
    return [CollectiveBuffer("buf0", layout, True), CollectiveBuffer("buf0", layout, False)]


def test_the_bundled_cost_takes_the_fewest_calls_then_the_outermost_dim():
    rules = get_policy().program.collectives
    assert rules.bounds == {"max_chunks": 4096}
    assert rules.choose("all_reduce_", CANDIDATES, {}) == Chunking(1, 16, 2)
    assert rules.choose("all_reduce_", [], {}) is None


def test_an_edited_cost_decides(tmp_path):
    edited = rules_copy(tmp_path, {"collectives.rules": [
        ("cost c: (c.count, c.dim);", "cost c: (-c.dim, c.count);")]})
    rules = load_policy([str(edited)]).program.collectives
    assert rules.choose("all_reduce_", CANDIDATES, {}) == Chunking(2, 32, 2)


def test_the_chunk_cap_is_the_rules_constant(tmp_path):
    # (8, 8, 128) fp16 at 4 KiB needs 4 chunks of host dim 1 (its layout's outermost dim)
    buffers = _all_reduce([8, 8, 128])
    assert plan_chunks("all_reduce_", buffers, 4096, get_policy()) == Chunking(1, 2, 4)
    edited = rules_copy(tmp_path, {"collectives.rules": [
        ("const MAX_COLLECTIVE_CHUNKS = 4096;", "const MAX_COLLECTIVE_CHUNKS = 3;")]})
    assert plan_chunks("all_reduce_", buffers, 4096, load_policy([str(edited)])) is None
