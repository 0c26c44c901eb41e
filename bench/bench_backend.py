"""Compile and run time of the spyre_rules backend on the bundled example model,
side by side with stock Inductor (compile) and eager (run), in one process.

* compile: time spent in the backend (FX graph -> compiled callable) for
  ``spyre_rules`` and for stock Inductor (``compile_fx``, C++ codegen), each
  cold (``torch._dynamo.reset()``, Inductor caches disabled), interleaved over
  ``--reps`` repetitions; medians and the ratio spyre_rules / inductor.  The
  Dynamo trace before the backend is identical for both and not included; the
  whole first call (trace + compile + first run) is printed too.
* run: steady-state call time of the compiled spyre_rules program (the CPU
  executor over simulated device memory) vs. the eager model, interleaved;
  medians and the ratio executor / eager.

Run: ``python bench/bench_backend.py [--reps N] [--runs N] [--batch B]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import torch  # noqa: E402
from bench_timing import median_call_seconds  # noqa: E402  (bench/ is on sys.path)

import spyre_rules  # noqa: E402,F401  (registers the backend)
from spyre_rules import config  # noqa: E402
from spyre_rules.examples import mlp_softmax_example  # noqa: E402


def _timed_backend(backend, spent: list[float]):
    def timed(gm, example_inputs):
        start = time.perf_counter()
        try:
            return backend(gm, example_inputs)
        finally:
            spent.append(time.perf_counter() - start)

    return timed


def _compile_time(model, inputs, backend) -> tuple[float, float, object]:
    """(backend seconds, first-call seconds, output) of one cold compile."""
    torch._dynamo.reset()
    spent: list[float] = []
    compiled = torch.compile(model, backend=_timed_backend(backend, spent))
    start = time.perf_counter()
    out = compiled(*inputs)
    return sum(spent), time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="cold compiles per backend")
    parser.add_argument("--runs", type=int, default=20, help="timed calls per run measurement")
    parser.add_argument("--batch", type=int, default=37)
    args = parser.parse_args()

    model, inputs = mlp_softmax_example(batch=args.batch)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    from torch._inductor.compile_fx import compile_fx

    from spyre_rules.backend.compile import spyre_rules_backend

    ours, stock, ours_first, stock_first = [], [], [], []
    with torch.no_grad(), config.patch(fallback="error"):
        expected = model(*inputs)
        for _ in range(args.reps):
            t, first, out = _compile_time(model, inputs, spyre_rules_backend)
            torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
            ours.append(t)
            ours_first.append(first)
            t, first, _ = _compile_time(model, inputs, compile_fx)
            stock.append(t)
            stock_first.append(first)

        torch._dynamo.reset()
        program = torch.compile(model, backend="spyre_rules")
        program(*inputs)  # compile once, then time steady-state calls
        executor, eager = [], []
        for _ in range(3):
            executor.append(median_call_seconds(program, inputs, args.runs))
            eager.append(median_call_seconds(model, inputs, args.runs))

    c_ours, c_stock = statistics.median(ours), statistics.median(stock)
    r_exec, r_eager = statistics.median(executor), statistics.median(eager)
    print(f"model: MLPSoftmaxBlock, input {tuple(inputs[0].shape)} {inputs[0].dtype}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    f_ours, f_stock = statistics.median(ours_first), statistics.median(stock_first)
    print(f"compile  spyre_rules {c_ours:8.3f} s   inductor {c_stock:8.3f} s   "
          f"ratio {c_ours / c_stock:6.2f}x")
    print(f"1st call spyre_rules {f_ours:8.3f} s   inductor {f_stock:8.3f} s   "
          f"ratio {f_ours / f_stock:6.2f}x  (trace + compile + first run)")
    print(f"run      executor    {r_exec * 1e3:8.2f} ms  eager    {r_eager * 1e3:8.3f} ms  "
          f"ratio {r_exec / r_eager:6.1f}x")


if __name__ == "__main__":
    main()
