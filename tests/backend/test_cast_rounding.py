"""Every cast rounds where eager rounds (issue 29): a chain ``fp32 -> fp16 -> bf16``
rounds to fp16 first; Inductor's joint-graph ``pointless_convert`` folded it into
one ``fp32 -> bf16`` cast (backend/precision_casts.py keeps it while we compile)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from spyre_rules import config
from spyre_rules.backend.precision_casts import first_cast_is_lossless

H, B, F32 = torch.float16, torch.bfloat16, torch.float32

#: name -> (fn, input dtype); eager's result is bit-exact on each
CHAINS = {
    "fp32 -> fp16 -> bf16": (lambda x: x.half().to(B), F32),
    "fp32 -> bf16 -> fp16": (lambda x: x.to(B).half(), F32),
    "(x * 3) -> fp16 -> bf16": (lambda x: (x * 3).half().to(B), F32),
    "fp16 softmax -> bf16": (lambda x: x.softmax(-1).to(B), H),
    "a sum of fp32 -> fp16 -> bf16": (lambda x: x.half().to(B).sum(-1), F32),
    "fp16 -> fp32 -> bf16, a lossless first cast": (lambda x: x.float().to(B), H),
}


@pytest.mark.parametrize("tiled", [False, True], ids=["untiled", "automatic tiling at 16 KiB"])
@pytest.mark.parametrize("name", list(CHAINS))
def test_a_cast_chain_rounds_at_every_cast_like_eager(name, tiled):
    fn, dtype = CHAINS[name]
    x = (torch.randn(64, 128, generator=torch.Generator().manual_seed(0)) * 3).to(dtype)
    patch = {"max_span_bytes": 16384, "ignore_span_overflow_hints": False} if tiled else {}
    torch._dynamo.reset()
    with torch.no_grad(), config.patch(fallback="error", **patch):
        out = torch.compile(fn, backend="spyre_rules", fullgraph=True)(x)
    expected = fn(x)
    assert out.dtype == expected.dtype
    assert torch.equal(out, expected)
    torch._dynamo.reset()


def test_a_layer_norm_cast_to_bf16_reads_its_fp16_result():
    # the program: the cast reads the fp16 layer norm (compiled alone: the
    # same program, the same bits), the whole equals eager
    x = torch.randn(504, 64, generator=torch.Generator().manual_seed(0)).half()
    w = torch.randn(7, 64, generator=torch.Generator().manual_seed(1))

    def norm(x):
        return F.layer_norm(x, (64,))

    def cast(x):
        return F.layer_norm(x, (64,)).to(torch.bfloat16)

    def fn(x, w):
        return F.linear(x + F.layer_norm(x, (64,)).to(torch.bfloat16), w)

    compiled = []
    for f, args in ((norm, (x,)), (cast, (x,)), (fn, (x, w))):
        torch._dynamo.reset()
        with torch.no_grad(), config.patch(fallback="error"):
            compiled.append(torch.compile(f, backend="spyre_rules", fullgraph=True)(*args))
    assert torch.equal(compiled[1], compiled[0].to(torch.bfloat16))
    torch.testing.assert_close(compiled[2], fn(x, w), rtol=2e-2, atol=2e-2)
    torch._dynamo.reset()


@pytest.mark.parametrize("src, dst, lossless", [
    (H, F32, True), (B, F32, True), (F32, torch.float64, True), (H, H, True),
    (F32, H, False), (F32, B, False), (H, B, False), (B, H, False), (torch.float64, F32, False),
])
def test_which_first_casts_keep_every_value(src, dst, lossless):
    assert first_cast_is_lossless(src, dst) is lossless
