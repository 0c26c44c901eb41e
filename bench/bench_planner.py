"""Planning time of the rule engine on synthetic graphs of 100, 1,000 and 5,000 ops.

    python bench/bench_planner.py                  # sizes 100 1000 5000
    python bench/bench_planner.py --sizes 100 1000 --max-span-bytes 16384

Each graph is one function whose loop emits a chain of Pointwise ops with a
Reduction (+ the Pointwise that consumes it) every tenth step, on a
(4, 64, 128) fp16 tensor (64 KiB per buffer).  The span limit defaults to
16 KiB, so *every* op overflows and goes through candidates, legality, the
search and validation -- the planner's expensive path.

Reported per graph (``plan_graph`` over every op, cold fact caches):
* lowering: Dynamo trace + Inductor lowering up to the planner's seam (what
  planning is compared with; no code generation), measured once per graph;
* fit ms/op: planning at the default 256 MiB limit, where nothing overflows
  (eligibility + candidate scan: the common case);
* over ms/op: planning at ``--max-span-bytes`` where every op overflows
  (candidates, legality, search, validation; Reductions end Unsupported);
* 2N/N: over-time of all ops / over-time of the first half (linear = 2.0);
* group: ``group_operations`` with automatic tiling on at the default limit;
* fit/lowering, over/lowering: planning time as a fraction of lowering time;
* plan+group: over + group, in wall and CPU seconds (``time.process_time``: on
  a loaded machine CPU time is the steadier figure).

Every planning and grouping figure of the first table is the fastest of
``--repeat`` runs (default 3, each with cold fact caches), by CPU time: on a
shared machine one run of the same graph varied by up to 30% from minute to
minute, more than any difference between graph sizes.  Lowering is measured
once per graph, the second table's figures once (``tile_groups`` edits the graph).

After the table, for the largest size N and the size N/5 when both were run:
plan+group at N over plan+group at N/5 (bound 5.5x) and plan+group over the
lowering time at N (bound 0.2x), each in wall and CPU time.

A second table (skip it with ``--no-tiled``) measures applying groups, on a
second graph per size: the same chain with its reductions over dim 0, which the
grouping keeps in the chain's loop, so at ``--max-span-bytes`` the whole graph is
one run of N ops:
* group: ``collect_groups`` -- the pipeline's planning stage (the grouping
  decision, which plans every op, plus the plan records);
* tile_groups: ``tile_groups`` on those groups -- coarse_tile, tiling
  propagation and re-indexing the reads inside the loop.  It *applies* the
  groups (edits the IR) and is not part of the planning stage, so it is not in
  plan+group; its own ratios follow the table (N vs N/5: linear = 5x).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

# The checkout this script lives in, not whatever spyre_rules is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import spyre_rules  # noqa: E402
from spyre_rules import config  # noqa: E402
from spyre_rules.engine import plan_graph  # noqa: E402
from spyre_rules.hints import group_operations  # noqa: E402
from spyre_rules.engine.policy import get_policy  # noqa: E402
from spyre_rules.facts import op_facts  # noqa: E402
from spyre_rules.passes.pipeline import collect_groups  # noqa: E402
from spyre_rules.passes.tiling_propagation import tile_groups  # noqa: E402
from torch._inductor.virtualized import V  # noqa: E402


DEFAULT_LIMIT = 256 * 1024 * 1024


def make_program(n_ops: int, reduce_dim: int = -1):
    """A function whose lowering has about ``n_ops`` ComputedBuffers."""
    def program(x):
        made = 0
        step = 0
        while made < n_ops:
            step += 1
            if step % 10 == 0 and made + 2 <= n_ops:
                x = x - x.amax(dim=reduce_dim, keepdim=True)  # a Reduction and its consumer
                made += 2
            else:
                x = x + 1
                made += 1
        return x
    return program


class _Clock:
    """Wall and CPU seconds of a ``with`` block."""

    def __enter__(self) -> "_Clock":
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


#: Runs per planning / grouping figure (``--repeat``); the fastest by CPU time is kept.
REPEAT = 3


def _fastest(run):
    """``run()`` -> (clock, result) repeated ``REPEAT`` times: the run with the least CPU time."""
    return min((run() for _ in range(max(1, REPEAT))), key=lambda timed: timed[0].cpu)


def _timed_plan(ops, limit: int) -> tuple[_Clock, list]:
    """Plan every op with cold fact caches (fastest of ``REPEAT`` runs); its clock and decisions."""
    def run() -> tuple[_Clock, list]:
        with config.patch(max_span_bytes=limit):
            op_facts.clear_cache()
            with _Clock() as clock:
                decisions = plan_graph(ops)
            return clock, decisions
    return _fastest(run)


def _timed_group(ops) -> _Clock:
    """``group_operations`` at the default limit, cold fact caches (fastest of ``REPEAT`` runs).
    Nothing overflows there, so no op is grouped and a run stamps no hint: runs are alike."""
    def run() -> tuple[_Clock, None]:
        with config.patch(max_span_bytes=DEFAULT_LIMIT, ignore_span_overflow_hints=False):
            op_facts.clear_cache()
            with _Clock() as clock:
                group_operations(ops)
            return clock, None
    return _fastest(run)[0]


def bench(n_ops: int, limit: int) -> dict:
    x = torch.randn(4, 64, 128, dtype=torch.float16)
    torch._dynamo.reset()
    with _Clock() as capture:
        ops = spyre_rules.capture_operations(make_program(n_ops), x)
    half = type(ops)(ops[: len(ops) // 2])
    half.graphs = ops.graphs
    t_fit, _ = _timed_plan(ops, DEFAULT_LIMIT)          # nothing overflows
    t_half, _ = _timed_plan(half, limit)
    t_all, decisions = _timed_plan(ops, limit)          # everything overflows
    t_group = _timed_group(ops)
    planned = sum(1 for d in decisions if d.decision == "plan")
    both_wall, both_cpu = t_all.wall + t_group.wall, t_all.cpu + t_group.cpu
    return {"ops": len(ops), "planned": planned, "capture": capture.wall,
            "capture_cpu": capture.cpu,
            "fit_ms": 1000 * t_fit.wall / len(ops), "over_ms": 1000 * t_all.wall / len(ops),
            "over_cpu_ms": 1000 * t_all.cpu / len(ops),
            "ratio": t_all.wall / t_half.wall, "ratio_cpu": t_all.cpu / t_half.cpu,
            "group": t_group.wall, "group_cpu": t_group.cpu,
            "fit_vs": t_fit.wall / capture.wall, "over_vs": t_all.wall / capture.wall,
            "both": both_wall, "both_cpu": both_cpu}


def bench_tiled(n_ops: int, limit: int) -> dict:
    """The pipeline's planning stage and ``tile_groups`` on a graph that is one run."""
    x = torch.randn(4, 64, 128, dtype=torch.float16)
    torch._dynamo.reset()
    with _Clock() as capture:
        ops = spyre_rules.capture_operations(make_program(n_ops, reduce_dim=0), x)
    (graph,) = ops.graphs
    with config.patch(max_span_bytes=limit, ignore_span_overflow_hints=False), \
            V.set_graph_handler(graph):
        op_facts.clear_cache()
        with _Clock() as t_group:
            groups = collect_groups(graph)
        with _Clock() as t_tile:
            tile_groups(graph, groups)
    return {"ops": len(ops), "groups": len(groups), "capture": capture.wall,
            "capture_cpu": capture.cpu, "group": t_group.wall, "group_cpu": t_group.cpu,
            "tile": t_tile.wall, "tile_cpu": t_tile.cpu}


def _tiled_table(sizes: list[int], limit: int) -> None:
    print(f"tiled graph (reductions over dim 0): one run at {limit} B; group = collect_groups "
          "(the planning stage), tile_groups applies the groups (not in plan+group)")
    print(f"{'ops':>6} {'groups':>6} {'lowering s':>10} {'(CPU)':>7} {'group s':>7} {'(CPU)':>7} "
          f"{'tile_groups s':>13} {'(CPU)':>7} {'group/lowering':>14} {'tile/lowering':>13}")
    results = {}
    for n in sizes:
        r = results[n] = bench_tiled(n, limit)
        print(f"{r['ops']:>6} {r['groups']:>6} {r['capture']:>10.2f} {r['capture_cpu']:>7.2f} "
              f"{r['group']:>7.3f} {r['group_cpu']:>7.3f} {r['tile']:>13.3f} {r['tile_cpu']:>7.3f} "
              f"{r['group'] / r['capture']:>14.3f} {r['tile'] / r['capture']:>13.3f}", flush=True)
    big = max(results)
    if big // 5 in results:
        r, s = results[big], results[big // 5]
        print(f"tile_groups {r['ops']} vs {s['ops']} ops (linear = 5x): "
              f"wall {r['tile'] / s['tile']:.2f}x, CPU {r['tile_cpu'] / s['tile_cpu']:.2f}x; "
              f"group (one run): wall {r['group'] / s['group']:.2f}x, "
              f"CPU {r['group_cpu'] / s['group_cpu']:.2f}x")


def _summary(results: dict[int, dict]) -> None:
    big = max(results)
    small = big // 5
    r = results[big]
    print(f"plan+group (fastest of {REPEAT} runs) / lowering (one run) at {r['ops']} ops "
          f"(bound 0.2x): wall {r['both'] / r['capture']:.3f}x, "
          f"CPU {r['both_cpu'] / r['capture_cpu']:.3f}x")
    if small in results:
        s = results[small]
        print(f"plan+group {r['ops']} vs {s['ops']} ops (bound 5.5x): "
              f"wall {r['both'] / s['both']:.2f}x, CPU {r['both_cpu'] / s['both_cpu']:.2f}x")


def main() -> None:
    global REPEAT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[100, 1000, 5000])
    parser.add_argument("--max-span-bytes", type=int, default=16384,
                        help="limit of the overflow scenario (default 16 KiB: every op overflows)")
    parser.add_argument("--no-tiled", action="store_true",
                        help="skip the second table (tile_groups on a graph that is one run)")
    parser.add_argument("--repeat", type=int, default=REPEAT,
                        help="runs per planning / grouping figure, the fastest kept (default 3)")
    args = parser.parse_args()
    REPEAT = args.repeat
    t0 = time.perf_counter()
    get_policy()
    print(f"policy load + check + compile (once per rules path): "
          f"{1000 * (time.perf_counter() - t0):.1f} ms")
    print("fit: default 256 MiB limit (no op overflows); over: every op overflows "
          f"({args.max_span_bytes} B); lowering = Dynamo + Inductor lowering to the seam")
    print(f"{'ops':>6} {'lowering s':>10} {'(CPU)':>7} {'fit ms/op':>9} {'over ms/op':>10} "
          f"{'(CPU)':>7} {'planned':>7} {'2N/N':>5} {'(CPU)':>5} {'group s':>7} {'(CPU)':>7} "
          f"{'fit/lowering':>12} {'over/lowering':>13} {'plan+group s':>12} {'(CPU)':>7}")
    results = {}
    for n in args.sizes:
        r = results[n] = bench(n, args.max_span_bytes)
        print(f"{r['ops']:>6} {r['capture']:>10.2f} {r['capture_cpu']:>7.2f} {r['fit_ms']:>9.3f} "
              f"{r['over_ms']:>10.3f} {r['over_cpu_ms']:>7.3f} {r['planned']:>7} {r['ratio']:>5.2f} "
              f"{r['ratio_cpu']:>5.2f} {r['group']:>7.3f} {r['group_cpu']:>7.3f} "
              f"{r['fit_vs']:>12.3f} {r['over_vs']:>13.3f} {r['both']:>12.3f} {r['both_cpu']:>7.3f}",
              flush=True)
    _summary(results)
    if not args.no_tiled:
        _tiled_table(args.sizes, args.max_span_bytes)


if __name__ == "__main__":
    main()
