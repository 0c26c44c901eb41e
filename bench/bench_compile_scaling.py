"""Compile time against the number of identical layers, side by side in one run.

    python bench/bench_compile_scaling.py                          # tiny llama, 2 4 8 layers
    python bench/bench_compile_scaling.py --model rwkv --seq 16 --layers 2 4
    python bench/bench_compile_scaling.py --model rwkv --seq 8 16 32   # RWKV's time steps

Each case builds the architecture sweep's tiny model (``bench_arch_sweep.py``: hidden
128, 4 heads, vocabulary 256; ``--layers`` decoder layers, ``--seq`` tokens) in a
fresh process and compiles it whole with ``torch.compile(backend="spyre_rules")`` under
``fallback="error"`` (``--limit-kib``: automatic tiling at that span limit), then checks
the logits against eager.  RWKV's recurrence is unrolled per token, so for it ``--seq``
multiplies identical steps the way ``--layers`` multiplies identical layers.

Printed per case: the FX nodes handed to the backend, the backend's wall and CPU
seconds (Inductor and everything of ours: plan, schedule, codegen, span check; Dynamo's
tracing and the program's run apart), the first call's seconds (all of it), and whether
the logits equal eager.  The last column divides the backend's CPU seconds per FX node
by the smallest case's (CPU time: the machine may be shared): 1.0 means compile time
grows linearly with the graph, 2.0 that a graph twice as big costs four times as much
(quadratic).  No layer reuse is involved: every
layer is compiled in the one graph.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, sys, time, warnings
sys.path.insert(0, {bench!r})
import torch
import bench_arch_sweep as sweep
sweep.SEQ = {seq}
sweep.TINY["num_hidden_layers"] = {layers}
from spyre_rules import config
from spyre_rules.backend.compile import spyre_rules_backend
model, ids = sweep._build({model!r})
with torch.no_grad():
    expected = model(input_ids=ids).logits
nodes, backend_seconds, backend_cpu = [], [], []
def timed(gm, example_inputs):
    nodes.append(len(gm.graph.nodes))
    start, cpu = time.perf_counter(), time.process_time()
    try:
        return spyre_rules_backend(gm, example_inputs)
    finally:
        backend_seconds.append(time.perf_counter() - start)
        backend_cpu.append(time.process_time() - cpu)
settings = dict(fallback="error")
if {limit}:
    settings.update(max_span_bytes={limit} * 1024, ignore_span_overflow_hints=False)
torch._dynamo.reset()
start = time.perf_counter()
with config.patch(**settings), torch.no_grad(), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    out = torch.compile(model, backend=timed)(input_ids=ids).logits
print(json.dumps({{"nodes": sum(nodes), "graphs": len(nodes), "backend": sum(backend_seconds),
                  "backend_cpu": sum(backend_cpu),
                  "first_call": time.perf_counter() - start,
                  "equal": sweep._equal(out, expected)}}))
"""


def one_case(model: str, layers: int, seq: int, limit_kib: int) -> dict:
    code = _CHILD.format(bench=str(ROOT / "bench"), model=model, layers=layers, seq=seq,
                         limit=limit_kib)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env=env)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["died"])[-1][:200]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="llama", help="a model type of the sweep")
    parser.add_argument("--layers", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--seq", type=int, nargs="+", default=[128])
    parser.add_argument("--limit-kib", type=int, default=0,
                        help="automatic tiling at this span limit (0: untiled)")
    args = parser.parse_args(argv)
    cases = [(layers, seq) for layers in args.layers for seq in args.seq]
    print(f"{args.model}, fallback='error', "
          + (f"automatic tiling at {args.limit_kib} KiB" if args.limit_kib else "untiled"))
    print(f"{'layers':>6} {'seq':>5} {'fx nodes':>9} {'backend s':>10} {'backend cpu s':>14} "
          f"{'first call s':>13} {'equal':>6} {'cpu s/node vs first':>20}")
    first = None
    for layers, seq in cases:
        row = one_case(args.model, layers, seq, args.limit_kib)
        if "error" in row:
            print(f"{layers:>6} {seq:>5} failed: {row['error']}", flush=True)
            continue
        per_node = row["backend_cpu"] / max(row["nodes"], 1)
        first = first or per_node
        print(f"{layers:>6} {seq:>5} {row['nodes']:>9} {row['backend']:>10.1f} "
              f"{row['backend_cpu']:>14.1f} {row['first_call']:>13.1f} {str(row['equal']):>6} "
              f"{per_node / first:>20.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
