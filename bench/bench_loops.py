"""Compact vs unrolled counted loops: SDSC spec count and codegen time per split count.

One program, ``(a + b) * c`` on ``[1024, 128]`` fp16 tiled on rows by K (explicit
group, one loop), for K = 2, 8, 64, 512.  For each K the program is compiled once
(compact) and run against eager; then the kernel's codegen artefacts -- wrapper
source, ``sdsc_N.json`` files, ``bundle.mlir`` -- are generated side by side for
the compact LoopSpec tree and for its unrolled form (``unroll_loop_specs``),
timing each (best of 3).  Compact stays flat at 2 specs; unrolled grows as 2*K.

Run: ``python bench/bench_loops.py``
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "tiling"))

import torch  # noqa: E402
from tiling_helpers import explicit_groups, run_spyre  # noqa: E402

from spyre_rules.codegen.bundle import generate_bundle, sdsc_files  # noqa: E402
from spyre_rules.codegen.loops import unroll_loop_specs  # noqa: E402
from spyre_rules.codegen.source import kernel_definition  # noqa: E402

SPLITS = (2, 8, 64, 512)


def program(a, b, c):
    return (a + b) * c


def codegen(specs, kernel):
    start = time.perf_counter()
    kernel_definition(kernel.name, "spyre_device", specs, kernel.stickify, kernel.unstickify)
    files = sdsc_files(specs)
    generate_bundle(specs)
    return len(files), time.perf_counter() - start


def best(fn, repeat=3):
    runs = [fn() for _ in range(repeat)]
    return runs[0][0], min(t for _, t in runs)


def main() -> None:
    gen = torch.Generator().manual_seed(0)
    xs = [torch.randn(1024, 128, generator=gen).half() for _ in range(3)]
    print(f"{'split':>6} {'compact specs':>14} {'compact ms':>11} {'unrolled specs':>15} "
          f"{'unrolled ms':>12}")
    for k in SPLITS:
        with explicit_groups(([0, 1], k)):
            compiled = run_spyre(program, *xs)
        torch.testing.assert_close(compiled.output, program(*xs))
        (kernel,) = compiled.kernels
        n_c, t_c = best(lambda: codegen(kernel.specs, kernel))
        n_u, t_u = best(lambda: codegen(unroll_loop_specs(kernel.specs), kernel))
        print(f"{k:>6} {n_c:>14} {t_c * 1e3:>11.1f} {n_u:>15} {t_u * 1e3:>12.1f}")


if __name__ == "__main__":
    main()
