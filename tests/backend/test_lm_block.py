"""The bundled lm_block example (a Llama-style decoder layer written with torch only)
in the demo and explain examples: it compiles, equals eager, and exactly these ops
still run on the host (the rotary embedding's slice/neg/cat; pinned progress)."""

from __future__ import annotations

import torch

from spyre_rules.commands import demo, explain
from spyre_rules.examples import EXAMPLES
from spyre_rules.examples.lm_block import lm_block_shapes

CAT = "writes into another buffer (NonOwningLayout); in-place mutation and concatenation " \
      "buffers are unsupported"
ROTARY = "(aten ops: {}.default, permute.default, reshape.default, slice.Tensor)"

#: The ops of lm_block that have no Spyre lowering yet: each rotate_half's neg and cat.
HOST_STEPS = [f"buf9 {ROTARY.format('neg')}: {CAT}", f"buf11 {ROTARY.format('cat')}: {CAT}",
              f"buf17 {ROTARY.format('neg')}: {CAT}", f"buf19 {ROTARY.format('cat')}: {CAT}"]


def test_lm_block_demo_partitioned_equals_eager(tmp_path):
    report = demo.run_demo("lm_block", None, 4, tmp_path, demo.DEFAULT_TOLERANCE, "eager")
    assert report["max_span_bytes"] == 32768
    assert report["ok"], report.get("error")
    assert report["max_error"] <= 1e-4
    assert report["span_violations"] == []
    (graph,) = report["graphs"]
    assert graph["host_steps"] == HOST_STEPS
    kinds = {r["kind"] for r in graph["ops"]}
    assert {"reduction:batchmatmul", "host step"} <= kinds


def test_lm_block_is_a_bundled_example(capsys):
    model, (x,) = EXAMPLES["lm_block"]()
    assert x.shape == (1, 16, 64) and not model.training
    assert lm_block_shapes()[0] == (1, 16, 64)
    parser = explain.argparse.ArgumentParser()
    explain.add_arguments(parser)
    assert explain.run(parser.parse_args(["--list"])) == 0
    listed = capsys.readouterr().out.splitlines()
    assert ("lm_block               a Llama-style decoder layer (RMSNorm, rotary, causal "
            "attention, SiLU-gated MLP)") in listed
    assert "lm_block" in demo.MODELS


def test_lm_block_matches_its_functional_form():
    from spyre_rules.examples.lm_block import lm_block

    model, (x,) = EXAMPLES["lm_block"](dtype=torch.float64)
    weights = [model.norm1, model.q.weight, model.k.weight, model.v.weight, model.o.weight,
               model.norm2, model.gate.weight, model.up.weight, model.down.weight,
               model.cos, model.sin, model.mask]
    with torch.no_grad():
        assert torch.equal(model(x), lm_block(x, *weights))
        # causal: the first position does not see the others
        y = x.clone()
        y[:, 1:] += 1
        assert torch.allclose(model(x)[:, 0], model(y)[:, 0])
