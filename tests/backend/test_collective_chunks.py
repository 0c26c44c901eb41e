"""A collective step's buffers are span-checked, and run in chunks when a whole buffer
spans more than one core may address (codegen/collective_spans.py), two gloo ranks.

At a 16 KiB limit an fp32 (64, 128) buffer's stick-tile dim spans 32 KiB: the all_reduce
runs in 2 chunks of 64 columns, the all_gather (its (128, 64) output spans 32 KiB) in 2
chunks of 32 columns, the reduce_scatter in 2 chunks of 64 columns; each result equals
eager bit for bit on both ranks.  A chain tiled by automatic tiling on both sides of an
all_reduce keeps one loop group per side: no loop group spans the collective.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ranks import run_ranks

LIMIT = 16 * 1024


def _cases(rank: int):
    import torch.distributed as dist
    import torch.distributed._functional_collectives as fc

    group = dist.group.WORLD
    return {
        "all_reduce": lambda t: fc.all_reduce(t * (rank + 2), "sum", group) * 3,
        "all_gather": lambda t: fc.all_gather_tensor(t[:, rank * 64:(rank + 1) * 64] * 2, 0,
                                                     group) + 1,
        "reduce_scatter": lambda t: fc.reduce_scatter_tensor(t * (rank + 1), "sum", 0, group) - 1,
        # tiled before and after the collective: (64, 128) fp32 spans 32 KiB
        "tiled_chain": lambda t: torch.relu(fc.all_reduce(torch.exp(t * 0.5) + t, "sum", group)
                                            * 2) - t,
    }


def _rank(rank: int, world: int, dump: str) -> dict:
    import spyre_rules  # noqa: F401 - registers the backend
    from spyre_rules import config

    torch.manual_seed(0)
    x = torch.randn(64, 128)
    out = {}
    for name, fn in _cases(rank).items():
        torch._dynamo.reset()
        eager = fn(x)
        folder = Path(dump) / f"{name}-{rank}"
        with torch.no_grad(), config.patch(fallback="error", span_check="error",
                                           max_span_bytes=LIMIT, ignore_span_overflow_hints=False,
                                           dump_dir=str(folder)):
            got = torch.compile(fn, backend="spyre_rules", fullgraph=True)(x)
        plan = json.loads(next(folder.glob("graph_*/plan.json")).read_text())
        out[name] = {"equal": torch.equal(got, eager), "plan": plan}
    return out


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return run_ranks(2, _rank, str(tmp_path_factory.mktemp("chunks")))


def _collective(plan: dict, name: str) -> tuple[str, dict]:
    return next((op, s) for op, s in plan["collective_steps"].items()
                if s["reason"] == f"{name} on the rank's process group")


@pytest.mark.parametrize("case, collective, chunks, span", [
    ("all_reduce", "all_reduce_", {"host_dim": 1, "length": 64, "count": 2}, 16384),
    ("all_gather", "all_gather_into_tensor", {"host_dim": 1, "length": 32, "count": 2}, 16384),
    ("reduce_scatter", "reduce_scatter_tensor", {"host_dim": 1, "length": 64, "count": 2}, 16384),
])
def test_collective_buffers_over_the_limit_run_in_chunks(ranks, case, collective, chunks, span):
    for rank, got in ranks.items():
        assert isinstance(got, dict), f"rank {rank} failed:\n{got}"
        assert got[case]["equal"], (case, rank)
        plan = got[case]["plan"]
        op, step = _collective(plan, collective)
        assert step["chunks"] == chunks
        record = next(r for r in plan["ops"] if r["op"] == op)
        assert record["span_check"] == {"kernel": "collective step", "status": "fits",
                                        "max_span_bytes": span, "limit_bytes": LIMIT,
                                        "overflows": []}
        program = [s for s in plan["program"] if s["step"] == "collective step"]
        assert program[0] == {"step": "collective step", "op": op, "collective": collective,
                              "reads": program[0]["reads"], "writes": program[0]["writes"],
                              "chunks": chunks}
        assert program[1]["collective"] == "wait_tensor" and "chunks" not in program[1]
        assert program[0]["reads"] and program[0]["writes"]


def test_a_loop_group_never_spans_a_collective(ranks):
    for rank, got in ranks.items():
        assert isinstance(got, dict), f"rank {rank} failed:\n{got}"
        assert got["tiled_chain"]["equal"]
        plan = got["tiled_chain"]["plan"]
        groups = {r["op"]: tuple(r["loop"]["loop_group_id"]) for r in plan["ops"]
                  if (r.get("loop") or {}).get("loop_group_id")}
        # the program: kernels before the collective, the collective and its wait, kernels after
        sides, side = {}, 0
        for step in plan["program"]:
            if step["step"] == "collective step":
                side = 1
            for op in step.get("ops", []):
                if op in groups:
                    sides.setdefault(groups[op], set()).add(side)
        assert sides and all(len(s) == 1 for s in sides.values()), sides
        assert {frozenset(s) for s in sides.values()} == {frozenset({0}), frozenset({1})}
