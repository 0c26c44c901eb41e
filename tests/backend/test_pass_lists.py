"""The composition root declares the pass lists; importing a lower layer registers nothing."""

from __future__ import annotations

import subprocess
import sys


def test_the_pass_lists_are_declared_in_order():
    from spyre_rules.backend import pass_lists
    from spyre_rules.hints import assign_dim_hints
    from spyre_rules.passes.pipeline import coarse_tiling_pass
    from spyre_rules.scheduler import build_loop_scheduler_nodes

    assert pass_lists.PRE_SCHEDULING_PASSES[:2] == [assign_dim_hints, coarse_tiling_pass]
    assert pass_lists.SKIPPED_BY_CAPTURE == (coarse_tiling_pass,)
    assert pass_lists.POST_FUSION_PASSES[:1] == [build_loop_scheduler_nodes]


def test_importing_hints_passes_and_scheduler_touches_no_pass_list():
    code = (
        "import sys\n"
        "import spyre_rules.hints, spyre_rules.passes.pipeline, spyre_rules.scheduler\n"
        "print(sorted(m for m in sys.modules if m.startswith('spyre_rules.backend')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
