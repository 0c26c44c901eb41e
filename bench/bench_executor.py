"""CPU executor vs eager on 1M-element programs, measured side by side in one run.

Programs: a three-op pointwise chain, softmax and layer norm on 1024x1024 fp32, a
GELU MLP (1024x256 -> 1024 -> 256, hidden 1M elements) and a tiled program (the
``(a + b) * c`` chain on 1024x1024 fp16 split into 8 row tiles: one LoopSpec), and
the same in 128 row tiles (a counted loop of many small tiles: ``batched_loops``).
For each program: the first call (Dynamo trace + spyre_rules compile + the
executor's first run, which builds its per-OpSpec plans), then the steady-state
call time of the compiled program and of eager: ``--runs`` x ``--reps`` rounds,
each calling every side once in turn (interleaved calls), medians of the calls
and the ratio executor / eager.  Both sides run on ``--threads`` intra-op
threads (default 1, printed): on a loaded machine eager's worker threads stall
and the ratio would flatter the executor.  With
``--general`` the executor's general (gather/scatter) path is timed beside the
structured one (``executor.views.FORCE_GENERAL``), which is what the executor
did for every access before structured views.

The last columns are the *torch floor* (``torch_floor.py``) where a program has
one: its kernels' op sequence as plain torch calls ``out=`` contiguous tensors
(``floor``), and the same with the stickify / unstickify copies a compiled call
makes (``+io``), timed in the same rounds; executor time above ``+io`` is executor
overhead, eager time below ``floor`` is what fusing the kernels buys.

Run: ``python bench/bench_executor.py [--runs N] [--reps N] [--threads N] [--general]``;
the figures are printed as measured.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "tiling"))
warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from bench_timing import interleaved_medians, set_threads  # noqa: E402  (bench/ is on sys.path)
from tiling_helpers import explicit_groups  # noqa: E402
from torch_floor import floors  # noqa: E402  (bench/ is on sys.path)

import spyre_rules  # noqa: E402,F401  (registers the backend)
from spyre_rules import config  # noqa: E402
from spyre_rules.executor import views  # noqa: E402


def _g(*shape, dtype=torch.float32, seed=0, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen) * scale).to(dtype)


def chain(x, y):
    return ((x + y) * x).relu()


def softmax(x):
    return torch.softmax(x, -1)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def gelu_mlp(x, w1, b1, w2, b2):
    return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)


def tiled(a, b, c):
    return (a + b) * c


N = 1024
PROGRAMS = [
    ("pointwise chain 1024x1024", chain, lambda: (_g(N, N), _g(N, N, seed=1)), ()),
    ("softmax 1024x1024", softmax, lambda: (_g(N, N),), ()),
    ("layer_norm 1024x1024", layer_norm, lambda: (_g(N, N), _g(N, seed=1), _g(N, seed=2)), ()),
    ("gelu mlp 1024x256-1024-256", gelu_mlp,
     lambda: (_g(N, 256), _g(N, 256, seed=1, scale=0.05), _g(N, seed=2),
              _g(256, N, seed=3, scale=0.05), _g(256, seed=4)), ()),
    ("tiled (a+b)*c 1024x1024 fp16 x8", tiled,
     lambda: tuple(_g(N, N, dtype=torch.float16, seed=s) for s in range(3)), (([0, 1], 8),)),
    ("tiled (a+b)*c 1024x1024 fp16 x128", tiled,
     lambda: tuple(_g(N, N, dtype=torch.float16, seed=s) for s in range(3)), (([0, 1], 128),)),
]


def _compile(fn, inputs, groups):
    torch._dynamo.reset()
    start = time.perf_counter()
    if groups:
        with explicit_groups(*groups):
            program = torch.compile(fn, backend="spyre_rules")
            out = program(*inputs)
    else:
        program = torch.compile(fn, backend="spyre_rules")
        out = program(*inputs)
    return program, out, time.perf_counter() - start


def _forced(flag: bool, fn):
    def run(*inputs):
        old = getattr(views, "FORCE_GENERAL", False)
        views.FORCE_GENERAL = flag
        try:
            return fn(*inputs)
        finally:
            views.FORCE_GENERAL = old

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="timed calls per side (x --reps)")
    parser.add_argument("--reps", type=int, default=3, help="multiplies --runs")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads of both sides (default 1)")
    parser.add_argument("--general", action="store_true",
                        help="also time the forced general (gather/scatter) path")
    args = parser.parse_args()
    threads = set_threads(args.threads)
    has_switch = hasattr(views, "FORCE_GENERAL")
    print(f"{threads}; median of {args.reps * args.runs} interleaved calls per side")
    header = f"{'program':34} {'1st call s':>10} {'eager ms':>9} {'executor ms':>12} {'ratio':>7}"
    if args.general and has_switch:
        header += f" {'general ms':>11} {'ratio':>7}"
    header += f" {'floor ms':>9} {'ratio':>6} {'+io ms':>7} {'ratio':>6}"
    print(header)
    with torch.no_grad(), config.patch(fallback="error"):
        for name, fn, make, groups in PROGRAMS:
            inputs = make()
            expected = fn(*inputs)
            program, out, first = _compile(fn, inputs, groups)
            tol = 2e-3 if expected.dtype == torch.float16 else 2e-4
            torch.testing.assert_close(out, expected, atol=tol, rtol=tol)
            runners = {"eager": fn, "executor": _forced(False, program)}
            if args.general and has_switch:
                runners["general"] = _forced(True, program)
                torch.testing.assert_close(runners["general"](*inputs), out, atol=0, rtol=0)
            floor = floors(name, inputs) or {}
            for key, run in floor.items():
                torch.testing.assert_close(run(), expected, atol=tol, rtol=tol)
                runners[key] = lambda *_, run=run: run()
            t = interleaved_medians(runners, inputs, args.reps * args.runs)
            line = (f"{name:34} {first:10.3f} {t['eager'] * 1e3:9.3f} {t['executor'] * 1e3:12.3f} "
                    f"{t['executor'] / t['eager']:6.1f}x")
            if "general" in t:
                line += f" {t['general'] * 1e3:11.3f} {t['general'] / t['eager']:6.1f}x"
            if floor:
                line += (f" {t['floor'] * 1e3:9.3f} {t['floor'] / t['eager']:5.1f}x"
                         f" {t['floor+io'] * 1e3:7.3f} {t['floor+io'] / t['eager']:5.1f}x")
            else:
                line += f" {'-':>9} {'-':>6} {'-':>7} {'-':>6}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
