"""The bundled lm_block example (a Llama-style decoder layer written with torch only)
in the demo and explain examples: it compiles, equals eager, and no op runs on the host."""

from __future__ import annotations

import torch

from spyre_rules.commands import demo, explain
from spyre_rules.examples import EXAMPLES
from spyre_rules.examples.lm_block import lm_block_shapes

def test_lm_block_demo_runs_wholly_on_the_spyre_program(tmp_path):
    # fallback="error": an op without a Spyre lowering would raise instead of
    # becoming a host step (the rotary embedding's cat lowers as concatenation regions).
    report = demo.run_demo("lm_block", None, 4, tmp_path, demo.DEFAULT_TOLERANCE, "error")
    assert report["max_span_bytes"] == 32768
    assert report["ok"], report.get("error")
    assert report["max_error"] <= 1e-4
    assert report["span_violations"] == []
    (graph,) = report["graphs"]
    assert graph["host_steps"] == []
    kinds = {r["kind"] for r in graph["ops"]}
    assert "reduction:batchmatmul" in kinds and "host step" not in kinds


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
