"""The fuzzer's precision family (``bench/fuzz_numerics.py``): one-element operands,
half-precision bias linears and low-precision cast chains, each an extra output
compared bit for bit ("bits") or by the share of differing elements ("share")."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import torch  # noqa: E402

import fuzz_run  # noqa: E402
from fuzz_gen import generate  # noqa: E402
from fuzz_numerics import SHARE  # noqa: E402

SEED, COUNT = 9, 200


def _claimed(claim):
    for i in range(COUNT):
        p = generate(SEED, i)
        if claim in p.exact.values() and "var_mean" not in p.op_text():  # tuple outputs
            yield p


def test_the_suite_set_has_every_precision_form():
    text = "\n".join(p.op_text() for p in (generate(SEED, i) for i in range(COUNT)) if p.exact)
    for needle in ("* 1.5", "F.linear(", "torch.addmm(", ".to(torch.bfloat16)", ".to(torch.float16)",
                   "bfloat16"):
        assert needle in text, needle
    shapes = {v.shape for p in _claimed("bits") for v in p.inputs}
    assert {(), (1,)} <= shapes
    assert sum(1 for _ in _claimed("share")) >= 5
    halves = {op.out.dtype for p in _claimed("share") for op in p.ops
              if p.exact.get(op.out.var) == "share"}
    assert halves == {"float16", "bfloat16"}


def _outputs(program):
    """Eager's outputs and bounds, one tensor per program output (no tuple outputs)."""
    ns = fuzz_run._namespace(program)
    inputs = fuzz_run.make_inputs(program, named=False)
    expected, bound = ns["f_plain"](*inputs), ns["f_bound"](*inputs)
    expected, bound = list(fuzz_run._flat(expected)), list(fuzz_run._flat(bound))
    assert len(expected) == len(program.outputs)
    return expected, bound


def _flip(t, n):
    """``t`` with its first ``n`` elements one ulp up."""
    out = t.clone()
    flat = out.view(-1)
    flat[:n] = torch.nextafter(flat[:n], torch.full_like(flat[:n], float("inf")))
    return out


def test_a_bits_output_rejects_one_ulp():
    program = next(_claimed("bits"))
    expected, bound = _outputs(program)
    at = program.outputs.index(next(v for v, c in program.exact.items() if c == "bits"))
    assert fuzz_run.compare(program, expected, expected, bound) is None
    flipped = list(expected)
    flipped[at] = _flip(expected[at], 1)
    message = fuzz_run.compare(program, flipped, expected, bound)
    assert message is not None and "1/" in message and "where none may" in message


def test_a_share_output_takes_one_percent_and_rejects_a_double_rounding_share():
    # the program whose claimed output is largest (an input's size says nothing about it:
    # a read-twice matmul, bench/fuzz_gram.py, may bring a larger input of its own)
    program = max(_claimed("share"), key=lambda p: max(
        math.prod(op.out.shape) for op in p.ops if p.exact.get(op.out.var) == "share"))
    expected, bound = _outputs(program)
    at = program.outputs.index(next(v for v, c in program.exact.items() if c == "share"))
    n = expected[at].numel()
    assert n >= 200
    some, many = list(expected), list(expected)
    some[at] = _flip(expected[at], int(SHARE * n))
    many[at] = _flip(expected[at], int(0.3 * n))
    assert fuzz_run.compare(program, some, expected, bound) is None
    message = fuzz_run.compare(program, many, expected, bound)
    assert message is not None and "at most 1% may" in message


def test_claims_follow_tuple_outputs():
    # a var_mean output flattens to two tensors before the claimed one
    program = next(p for p in (generate(SEED, i) for i in range(COUNT))
                   if p.exact and "var_mean" in p.op_text() and len(p.outputs) > 1
                   and not p.lost)  # a lost-name op's output comes after the claimed one
    ns = fuzz_run._namespace(program)
    inputs = fuzz_run.make_inputs(program, named=False)
    expected = ns["f_plain"](*inputs)
    claims = fuzz_run._claims(program, expected)
    assert len(claims) == len(fuzz_run._flat(expected)) > len(program.outputs)
    assert claims[-1] == program.exact[program.outputs[-1]]
    assert claims[:-1] == [None] * (len(claims) - 1)
