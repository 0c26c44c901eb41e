"""Only tilings codegen can address (tiles that are rigid translations) get past planning.

Before the planner and the hint pass knew codegen's rigid-tile condition
(``facts.translation``; the ``tiles_translate`` fact and validation rule), these
programs were planned, and codegen then refused them with ``TileTranslationError``.
Now an automatic plan avoids such splits (a manual hint asking for one is a
``HintError``: tests/tiling/test_tile_translation.py).
"""

from __future__ import annotations

import pytest
import torch

from pipeline_helpers import assert_close, auto_refusal, run_auto, span_violations

from spyre_rules.codegen.rigid_tiles import TileTranslationError
from spyre_rules.ir.errors import find_cause


@pytest.mark.parametrize("unroll", [False, True], ids=["compact", "unrolled"])
def test_wrapping_read_gets_a_split_by_whole_repeats(unroll):
    """x.repeat(3, 1) on (2, 64) fp16 at 512 B: {0: 2} (3 rows a tile) wraps its read of x;
    the planner takes {0: 3} (2 rows a tile, one whole repeat)."""
    x = torch.randn(2, 64, generator=torch.Generator().manual_seed(0)).half()
    fn = lambda t: t.repeat(3, 1) * 2.0  # noqa: E731
    run = run_auto(fn, x, max_span_bytes=512, sencores=1, unroll_loops=unroll)
    assert_close(run.output, fn(x))
    for spec in run.op_specs():
        assert span_violations(spec, 512) == []


def test_value_computed_from_a_tiled_index_is_refused_by_the_planner():
    """x + arange(2048) in fp32 at 4 KiB: the op computes its values from its index, so no
    split translates; the planner refuses the op (it used to plan one and codegen refused).
    The arange reads nothing, so Inductor inlines it into the add: the refusal names the add,
    the op that runs (it named the dead iota buffer before dead ops were dropped)."""
    x = torch.randn(2048)
    cause = auto_refusal(lambda t: t + torch.arange(2048, dtype=t.dtype), x,
                         max_span_bytes=4096, sencores=1)
    assert find_cause(cause, TileTranslationError) is None
    assert str(cause) == (
        "spyre_rules cannot compile this graph: Cannot auto-tile buf4 (aten ops: add.Tensor): "
        "no combined split among host dims [0] keeps every span within 4096 bytes after trying 14 "
        "combinations (the last: the tiles of buf4 under split {0: 64} are not rigid translations "
        "of the first tile (a split through part of a stick, a wrapping access or a dim the op "
        "computes a value from))")
