"""Transformer models from ``transformers`` on the spyre_rules backend, side by side with eager.

Per model (small configs from ``tests/models/model_zoo.py``: 2 layers, hidden 64,
4 heads, sequence 16, random weights, nothing downloaded), compiled with
``fallback='eager'`` (the partition: ops without a Spyre lowering run as host steps):

* ``compile s``: the first call (Dynamo trace + backend compile + first run),
  wall time; ``cpu s``: the same call's CPU time of this process (what it costs
  on a machine shared with other jobs);
* ``eager ms`` / ``program ms`` / ``ratio``: steady-state call time of the eager
  model and of the compiled program (the CPU executor over simulated device
  memory), medians of ``--runs`` interleaved calls (eager, program, eager, ...),
  both on ``--threads`` intra-op threads (default 1, printed: on a loaded
  machine eager's worker threads stall and a ratio over unequal thread counts
  flatters the program), and program / eager as measured;
* ``ops``: operations of the compiled graphs on the Spyre program;
* ``host``: host steps (aten nodes run on the host; target 0);
* ``max err``: largest |program - eager|;
* ``first missing op``: the first host step and why (blank when none).

Run: ``python bench/bench_models.py [--models gpt2,llama,...] [--attn eager|sdpa]
[--dtype float32|float16] [--runs N] [--threads N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "models"))

import model_zoo  # noqa: E402
from bench_timing import interleaved_medians, set_threads  # noqa: E402  (bench/ is on sys.path)
import spyre_rules  # noqa: E402,F401  (registers the backend)
from spyre_rules import config  # noqa: E402


def bench_model(name: str, attn: str, dtype: torch.dtype, runs: int) -> dict:
    model = model_zoo.LastHidden(model_zoo.build(name, attn, dtype))
    ids = model_zoo.input_ids()
    torch._dynamo.reset()
    row = {"model": name, "attn": attn, "dtype": str(dtype).removeprefix("torch.")}
    with tempfile.TemporaryDirectory() as dump, torch.no_grad(), \
            config.patch(fallback="eager", dump_dir=dump), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = torch.compile(model, backend="spyre_rules")
        start, cpu = time.perf_counter(), time.process_time()
        try:
            out = compiled(ids)
        except Exception as exc:  # noqa: BLE001 - a bench row, not a crash
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
            return row
        row["compile_s"] = time.perf_counter() - start
        row["compile_cpu_s"] = time.process_time() - cpu
        plans = [json.loads((f / "plan.json").read_text()) for f in sorted(Path(dump).iterdir())]
        expected = model(ids)
        t = interleaved_medians({"eager": model, "program": compiled}, (ids,), runs)
    steps = [(s["description"], s["reason"]) for p in plans for s in p["host_steps"].values()
             if not s["reason"].startswith("part of host step")]
    row.update(
        graphs=len(plans),
        ops=sum(1 for p in plans for r in p["ops"] if not r.get("host_step")),
        host=len(steps),
        eager_ms=t["eager"] * 1e3,
        program_ms=t["program"] * 1e3,
        run_ratio=t["program"] / t["eager"],
        max_err=(out.float() - expected.float()).abs().max().item(),
        first_missing=f"{steps[0][0]}: {steps[0][1]}" if steps else "",
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(model_zoo.MODELS))
    parser.add_argument("--attn", default="eager", choices=("eager", "sdpa"))
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    parser.add_argument("--runs", type=int, default=15, help="interleaved calls per side")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads of both sides (default 1)")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    print(f"{set_threads(args.threads)}; attn_implementation={args.attn} dtype={args.dtype}, "
          f"median of {args.runs} interleaved calls per side "
          f"(seq {model_zoo.SEQ}, hidden {model_zoo.HIDDEN}, {model_zoo.LAYERS} layers)")
    header = (f"{'model':<9} {'compile s':>9} {'cpu s':>6} {'eager ms':>8} {'program ms':>10} "
              f"{'ratio':>6} {'ops':>5} {'host':>4} {'max err':>9}  first missing op")
    print(header)
    print("-" * len(header))
    for name in args.models.split(","):
        row = bench_model(name, args.attn, dtype, args.runs)
        if "error" in row:
            print(f"{name:<9} {'-':>9} {'-':>6} {'-':>8} {'-':>10} {'-':>6} {'-':>5} {'-':>4} "
                  f"{'-':>9}  {row['error']}")
            continue
        print(f"{name:<9} {row['compile_s']:>9.1f} {row['compile_cpu_s']:>6.1f} "
              f"{row['eager_ms']:>8.2f} {row['program_ms']:>10.2f} "
              f"{row['run_ratio']:>5.1f}x {row['ops']:>5} "
              f"{row['host']:>4} {row['max_err']:>9.2e}  {row['first_missing'][:110]}", flush=True)


if __name__ == "__main__":
    main()
