"""The widened search (rules/planner.rules search bound ``widen_to_dims``, docs/rules_language.md
§6.4): when no combination of the host dims whose spans overflow fits, the op's other output host
dims join the search, up to that many dims in all."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from spyre_rules import config
from spyre_rules.engine import plan_graph

from helpers import FP16, capture
from test_policy_edits import policy  # noqa: F401  (the edited-policy fixture)

WIDEN = "  bound widen_to_dims = MAX_WIDENED_DIMS;\n"


def biased_linear():
    """F.linear with bias in fp16, (192, 32) x (384, 32)^T + b: buf0 is the fp32 product
    laid out [12, 192, 32] (12 fp32 stick columns of 192 rows)."""
    g = torch.Generator().manual_seed(11)
    x, w, b = (torch.randn(192, 32, generator=g).half(), torch.randn(384, 32, generator=g).half(),
               torch.randn(384, generator=g).half())
    return capture("biased_linear_fp16", lambda x, w, b: F.linear(x, w, b), x, w, b)


def decision(ops, name):
    with config.patch(max_span_bytes=32768, ignore_span_overflow_hints=False):
        return {d.op: d for d in plan_graph(ops)}[name]


def test_the_rows_join_the_search_when_the_columns_cannot_fit():
    """The scan finds host dim 1 (the columns: stick columns of 6144 rows' bytes); 6 tiles are the
    most whose fp16 sticks stay whole, and 2 fp32 stick columns still span 49152 bytes.  The rows
    join (dims [1, 0]); every combination is then refused by the full-buffer write of the fp32
    product, whose stick columns hold all 192 rows whatever the row split: the refusal names that
    access, not the first scan's per-tile span."""
    d = decision(biased_linear(), "buf0")
    widen = [s for s in d.trace if s.section == "search" and s.rule == "widen"]
    assert [s.values["dims"] for s in widen] == [[1, 0]]
    assert d.decision == "unsupported"
    assert d.reason == (
        "Cannot auto-tile buf0 (aten ops: addmm.default, permute.default): no combined split among "
        "host dims [1, 0] keeps every span within 32768 bytes after trying 63 combinations (the last: "
        "writing tile {0: 192, 1: 6} of buf0 into its full output buffer spans more than 32768 bytes)")


def test_without_the_bound_the_search_keeps_the_scan_dims(policy):
    policy({"planner.rules": [(WIDEN, "")]})
    d = decision(biased_linear(), "buf0")
    assert not [s for s in d.trace if s.section == "search" and s.rule == "widen"]
    assert d.reason == (
        "Cannot auto-tile buf0 (aten ops: addmm.default, permute.default): no combined split among "
        "host dims [1] keeps every span within 32768 bytes after trying 3 combinations (the last: an "
        "output span of buf0 still exceeds 32768 bytes with split {1: 6})")
