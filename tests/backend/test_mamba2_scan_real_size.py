"""Mamba2's chunked selective scan at Granite-4.0-H-Small's real shape, planned on the
meta device at the real 256 MiB limit (issue 41): 32768 tokens, 128 heads of 64, state
128, chunks of 256, so 128 chunks.  Three of its accesses overflowed every split the
default rules offered; each now fits by a general rule:

* ``segment_sum``'s expand + masked_fill, (1, 128, 128, 256, 256) fp32 = 4 GiB, reads A
  stuck on the heads: it is stuck on the heads too (``backend/stick_choice.py``);
* ``cat([initial, states], 1)``, 129 chunk states of 4 MiB: the states' region splits the
  concatenated dim, which is not its stick dim (planner.rules ``concat_dims_whole``);
* the new-states einsum ``bzch,bzhpn->bchpn`` sums those 129 states and reads a stick per
  32 chunks of the decay: its reduction level takes remainder tiles, 64, 64 and 1
  (planner.rules ``otherwise splits``).

Compiled with ``fallback="error"`` and ``span_check="error"``: every generated access
fits.  About 15 s of CPU; the whole model's layers are ``bench/bench_experts_real_size.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from spyre_rules import config

transformers = pytest.importorskip("transformers")
from transformers.models.granitemoehybrid.modeling_granitemoehybrid import (  # noqa: E402
    mamba2_chunk_scan,
)

SEQ, HEADS, HEAD_DIM, STATE, CHUNK = 32768, 128, 64, 128, 256


def _scan(hidden, dt, a, b, c, d, dt_bias):
    return mamba2_chunk_scan(hidden, dt, a, b, c, CHUNK, D=d, dt_bias=dt_bias, dt_softplus=True)


def _inputs():
    meta = dict(device="meta")
    half = dict(meta, dtype=torch.bfloat16)
    return [torch.zeros(1, SEQ, HEADS, HEAD_DIM, **half), torch.zeros(1, SEQ, HEADS, **half),
            torch.zeros(HEADS, **meta), torch.zeros(1, SEQ, 1, STATE, **half),
            torch.zeros(1, SEQ, 1, STATE, **half), torch.zeros(HEADS, **meta),
            torch.zeros(HEADS, **meta)]


def test_the_chunk_scan_at_32768_tokens_fits_at_256_MiB(tmp_path):
    torch._dynamo.reset()
    with config.patch(max_span_bytes=256 << 20, ignore_span_overflow_hints=False,
                      coarse_tiling=True, fallback="error", span_check="error",
                      dump_dir=str(tmp_path)), torch.no_grad():
        out = torch.compile(_scan, backend="spyre_rules")(*_inputs())
    torch._dynamo.reset()
    assert out.shape == (1, SEQ, HEADS, HEAD_DIM) and out.device.type == "meta"
    (plan_file,) = Path(tmp_path).rglob("plan.json")
    ops = json.loads(plan_file.read_text())["ops"]
    assert {op["span_check"]["status"] for op in ops} <= {"fits", "no generated access"}
    assert all(op["decision"] in ("plan", "no plan") for op in ops)
    planned = {op["description"]: op["levels"] for op in ops if op["decision"] == "plan"}
    # the states' einsum and its region of the cat share one loop of 2 chunk tiles
    cat = [levels for what, levels in planned.items() if "cat.default" in what]
    assert cat and all(levels == [[1, 2]] for levels in cat), planned
    # the new states: 3 tiles of 43 output chunks, then its reduction (reduction dim 0,
    # the 129 source chunks) in 3 tiles of 64, 64 and 1
    products = [levels for what, levels in planned.items() if "batchmatmul" in what]
    assert [[1, 3], [0, 3]] in products, planned
