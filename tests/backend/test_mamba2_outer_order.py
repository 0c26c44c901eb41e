"""Mamba2's chunk scan: a batchmatmul operand and an op's own output whose finely split dim
is outermost (backend/outer_order.py, docs/layout_model.md §1.6), at small sizes.

* ``Y_diag = einsum("bclsh,bcshp->bclhp", M, x)``: the values ``x`` ``[1, 1, S, H, 2]`` are
  stuck on the head dim (2 values in a stick of 32) with the source positions ``s``
  outermost (2 KiB a position: at most 2 a tile at 4 KiB) while ``M`` is stuck on ``s``
  (whole sticks of 32).  Before: ``Cannot auto-tile buf1 (aten ops: permute.default,
  spyre_rules.batchmatmul.default): no combined split among host dims [3, 2, 5] ...``.
  Now ``x`` is read through a same-stick copy with ``s`` just outside the stick.
* ``Y_off = C_times_states * exp(A_cumsum)``: the output ``[1, 1, L, H, 2]`` has the
  positions outermost while the decay is stuck on them.  Before: ``Cannot auto-tile buf1
  (aten ops: mul.Tensor, permute.default, unsqueeze.default): no combined split among host
  dims [2, 3] ...``.  Now the output itself is laid out with the positions just outside its
  stick (no copy).
"""

from __future__ import annotations

import json

import torch

from spyre_helpers import run_spyre

from spyre_rules import config

H, L, P = 16, 32, 2
TILED = dict(max_span_bytes=4 * 1024, ignore_span_overflow_hints=False, span_check="error",
             fallback="error")


def _y_diag(m, x):
    return torch.einsum("bclsh,bcshp->bclhp", m, x * 2)


def _y_off(states_out, a):
    return states_out.permute(0, 1, 3, 2, 4) * torch.exp(a).permute(0, 2, 3, 1)[..., None]


def _plan(tmp_path):
    records = json.loads((tmp_path / "graph_0" / "plan.json").read_text())["ops"]
    return {r["op"]: (r["kind"], r["levels"], r["layout"]["device_size"]) for r in records}


def test_the_values_operand_is_read_with_the_positions_inside(tmp_path):
    g = torch.Generator().manual_seed(0)
    m, x = torch.randn(1, 1, L, L, H, generator=g), torch.randn(1, 1, L, H, P, generator=g)
    with config.patch(**TILED, dump_dir=str(tmp_path)):
        compiled = run_spyre(_y_diag, m, x)
    assert torch.equal(compiled.output, _y_diag(m, x))
    plans = _plan(tmp_path)
    # buf4: x * 2 copied with the source positions (32) just outside its stick
    assert plans["buf4"] == ("ReStickifyStageHBM", [[2, 16], [3, 16]], [1, 1, 16, 1, 32, 32])
    assert plans["buf1"][:2] == ("reduction:batchmatmul", [[2, 16], [3, 16]]), plans


def test_the_output_is_laid_out_with_the_positions_inside(tmp_path):
    g = torch.Generator().manual_seed(1)
    states_out, a = torch.randn(1, 1, H, L, P, generator=g), torch.randn(1, H, 1, L, generator=g)
    with config.patch(**TILED, dump_dir=str(tmp_path)):
        compiled = run_spyre(_y_off, states_out, a)
    assert torch.equal(compiled.output, _y_off(states_out, a))
    plans = _plan(tmp_path)
    # the heads outermost, the 32 positions just outside the stick of 2 head values
    assert plans["buf1"] == ("pointwise", [[3, 16]], [1, 1, 16, 1, 32, 32]), plans
    assert not [op for op, (kind, _, _) in plans.items() if kind.startswith("ReStickify")]
