"""``x + y`` on (1, 8195, 256, 64) fp16 at the real 256 MiB limit: compiled, not run.

The program is too large to execute in a test (three 268 MB tensors on the
simulated device), so the backend is called on a traced graph and only the
generated wrapper source and bundle.mlir are pinned.  Automatic tiling splits
host dim 1 in 2 remainder tiles (docs/layout_model.md §6.1): a loop over the whole
tile (tiled symbol c0 over 4224 rows) and the peeled last tile (3971 rows, iteration
1), and every moving tensor advances 4224 * 16384 * 2 = 138,412,032 bytes per
iteration in the bundle's affine map.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from spyre_rules import config
from spyre_rules.backend.compile import spyre_rules_backend


def _add(x, y):
    return (x + y,)


def test_seed_add_plan_only_wrapper_and_bundle(tmp_path, text_snapshot):
    gm = torch.fx.symbolic_trace(_add)
    x = torch.empty(1, 8195, 256, 64, dtype=torch.float16)
    with config.patch(ignore_span_overflow_hints=False, fallback="error", dump_dir=str(tmp_path)):
        spyre_rules_backend(gm, [x, torch.empty_like(x)])
    graph = Path(tmp_path) / "graph_0"
    bundle = (graph / "sdsc_add_0" / "bundle.mlir").read_text()
    assert "#map_0 = affine_map<(d0)[s0] -> (s0 + 138412032*d0)>" in bundle
    assert "%loop_bound_0 = arith.constant 1 : index" in bundle
    assert "%loop_first_1 = arith.constant 1 : index" in bundle
    assert "%loop_bound_1 = arith.constant 2 : index" in bundle
    # the AOT id counts the graphs compiled earlier in this process
    wrapper = re.sub(r"^# AOT ID: .*$", "# AOT ID: <n>", (graph / "wrapper.py").read_text(), flags=re.M)
    assert "tiled_symbols=[[sympify('c0')]]" in wrapper
    assert "sympify('c0'): (sympify('4224'), 1)" in wrapper
    assert "sympify('c0'): (sympify('3971'), 1)" in wrapper
    assert f"# ---- wrapper.py\n{wrapper}\n# ---- bundle.mlir\n{bundle}" == text_snapshot
