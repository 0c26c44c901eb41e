"""Where one architecture's compile spends its CPU, phase by phase (issue 41).

    python bench/bench_compile_phases.py kimi_linear              # automatic tiling, 64 KiB
    python bench/bench_compile_phases.py zaya --limit-kib 0       # fallback="error", untiled
    python bench/bench_compile_phases.py kimi_linear --top 30     # and the 30 costliest functions

Builds the architecture sweep's tiny model (``bench_arch_sweep.py``), compiles it with
``torch.compile(backend="spyre_rules")`` under ``fallback="error"`` (and automatic tiling
at ``--limit-kib`` KiB unless 0), runs it once and compares the logits with eager.  The
backend and the first call are profiled with cProfile (CPU time); printed per phase: the cumulative
CPU seconds of the function that is that phase (a phase inside another counts in both;
cProfile roughly doubles Python-heavy times, so compare rows of one run, or runs with
each other, not with the sweep's seconds).  The phases are Inductor's (lowering, its
scheduler's node creation, its codegen and graph partition) and ours (each pre-scheduling
pass, the coarse-tiling pipeline, the per-tile index rebuild, the program's run).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (label, file suffix, function name): a phase is one function's cumulative time
PHASES = [
    ("backend total", "backend/compile.py", "spyre_rules_backend"),
    ("  inductor lowering", "_inductor/graph.py", "run"),
    ("  pre-scheduling passes", "backend/pre_scheduling.py", "run_pre_scheduling_passes"),
    ("    assign_layouts", "backend/layouts.py", "assign_layouts"),
    ("      lay_out_merged_views", "backend/merged_layouts.py", "lay_out_merged_views"),
    ("    insert_restickify", "backend/restickify.py", "insert_restickify"),
    ("    coarse-tiling pipeline", "passes/pipeline.py", "run_pipeline"),
    ("    plan_memory", "backend/pre_scheduling.py", "plan_memory"),
    ("  inductor Scheduler.__init__", "_inductor/scheduler.py", "__init__"),
    ("  inductor Scheduler.codegen", "_inductor/scheduler.py", "codegen"),
    ("    graph_partition", "_inductor/scheduler.py", "graph_partition"),
    ("  per-tile index rebuilds", "passes/tile_reads.py", "_tile_index"),
    ("  span check", "codegen/span_check.py", "check_kernel"),
    ("program run (executor)", "executor/runtime.py", "run"),
]


def phase_seconds(stats: pstats.Stats) -> list[tuple[str, float, int]]:
    """(label, cumulative seconds, calls) per phase; a phase never entered is 0."""
    rows = []
    for label, suffix, name in PHASES:
        seconds, calls = 0.0, 0
        for (path, _line, func), (_cc, nc, _tt, ct, _callers) in stats.stats.items():
            if func == name and path.endswith(suffix):
                seconds, calls = max(seconds, ct), max(calls, nc)
        rows.append((label, seconds, calls))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--limit-kib", type=int, default=64, help="0: no automatic tiling")
    parser.add_argument("--top", type=int, default=0, help="also print the N costliest functions")
    args = parser.parse_args(argv)

    import torch

    import bench_arch_sweep as sweep
    from spyre_rules import config
    from spyre_rules.backend.compile import spyre_rules_backend

    model, ids = sweep._build(args.model)
    with torch.no_grad():
        expected = model(input_ids=ids).logits
    profile = cProfile.Profile(time.process_time)  # CPU seconds: the machine may be shared
    settings: dict = {"fallback": "error"}
    if args.limit_kib:
        settings.update(max_span_bytes=args.limit_kib * 1024, ignore_span_overflow_hints=False)
    torch._dynamo.reset()
    cpu = time.process_time()
    try:
        with config.patch(**settings), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = torch.compile(model, backend=spyre_rules_backend)
            profile.enable()
            out = compiled(input_ids=ids).logits
        result = "equal eager" if sweep._equal(out, expected) else "WRONG"
    except Exception as exc:  # noqa: BLE001  (a refusal is a result too)
        result = sweep._first_line(exc)
    finally:
        profile.disable()
    cpu = time.process_time() - cpu
    stats = pstats.Stats(profile)
    print(f"{args.model} limit {args.limit_kib} KiB: {result}; CPU {cpu:.1f} s "
          f"(Dynamo, backend and first call, profiled)")
    for label, seconds, calls in phase_seconds(stats):
        print(f"{label:34} {seconds:9.1f} s  {calls:8} calls")
    if args.top:
        stats.sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
