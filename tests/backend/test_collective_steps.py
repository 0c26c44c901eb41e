"""Functional collectives are collective steps of the program under either fallback
(backend/collectives.py), two gloo ranks launched by the test.

A collective's output is ready only after its ``wait_tensor``, which Inductor lowers to a
separate in-place step: the gathered buffer must be stickified for the program after the
wait (backend/residency.py), never right after the collective is issued, and the
collective's input must stay the tensor it was handed.  Before, the all_gather's output
was stickified before the wait and its input re-read into a new tensor: garbage on one
rank or both, varying run to run.
"""

from __future__ import annotations

import json
import socket
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gather_rows(x, rank):
    import torch.distributed._functional_collectives as fc

    part = x.shape[1] // WORLD
    return fc.all_gather_tensor(x[:, rank * part:(rank + 1) * part] * 2, 1, dist.group.WORLD) + 1


def _reduce_scatter(x, rank):
    import torch.distributed._functional_collectives as fc

    return fc.reduce_scatter_tensor(x * (rank + 1), "sum", 0, dist.group.WORLD) - 1


def _all_reduce(x, rank):
    import torch.distributed._functional_collectives as fc

    return fc.all_reduce(x * (rank + 2), "sum", dist.group.WORLD) * 3


def _tensor_parallel_mlp(x, rank):
    # Column- then row-parallel: each rank holds half the hidden units.
    import torch.distributed._functional_collectives as fc

    w1, w2 = WEIGHTS
    part = w1.shape[0] // WORLD
    a, b = w1[rank * part:(rank + 1) * part], w2[:, rank * part:(rank + 1) * part]
    return fc.all_reduce(torch.nn.functional.gelu(x @ a.T) @ b.T, "sum", dist.group.WORLD)


g = torch.Generator().manual_seed(1)
WEIGHTS = (torch.randn(256, 64, generator=g) / 8, torch.randn(64, 256, generator=g) / 16)


CASES = {"all_gather": _gather_rows, "reduce_scatter": _reduce_scatter,
         "all_reduce": _all_reduce, "tensor_parallel_mlp": _tensor_parallel_mlp}


def _expected(name, x, rank):
    if name == "tensor_parallel_mlp":
        w1, w2 = WEIGHTS
        return torch.nn.functional.gelu(x @ w1.T) @ w2.T
    if name == "all_gather":
        return x * 2 + 1
    if name == "reduce_scatter":
        part = x.shape[0] // WORLD
        return (x * 3)[rank * part:(rank + 1) * part] - 1
    return (x * 2 + x * 3) * 3


def _rank_main(rank, port, dump, results):
    import os

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    import spyre_rules
    from spyre_rules import config

    out = {}
    try:
        for fallback in ("eager", "error"):
            for name, fn in CASES.items():
                torch.manual_seed(0)
                x = {"all_gather": torch.randn(2, 48, 192),
                     "tensor_parallel_mlp": torch.randn(2, 16, 64)}.get(name, torch.randn(8, 40))
                torch._dynamo.reset()
                with torch.no_grad(), warnings.catch_warnings(record=True) as seen, \
                        config.patch(dump_dir=f"{dump}/{name}-{fallback}-{rank}", fallback=fallback):
                    warnings.simplefilter("always")
                    got = torch.compile(lambda t: fn(t, rank), backend="spyre_rules",
                                        fullgraph=True)(x)
                host = [str(w.message) for w in seen if "on the host" in str(w.message)]
                error = (got - _expected(name, x, rank)).abs().max().item()
                out[name, fallback] = (round(error, 5), host)
        results.put((rank, out))
    except Exception as exc:  # reported to the test, which fails naming it
        results.put((rank, repr(exc)))
    finally:
        dist.destroy_process_group()


def test_collectives_between_program_ops_equal_eager_on_every_rank(tmp_path):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, port, str(tmp_path), results))
             for r in range(WORLD)]
    for p in procs:
        p.start()
    got = dict(results.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(60)
    # Equal to eager (the MLP to one process, within fp32 rounding of the split sums),
    # no host step under either fallback.
    assert got == {r: {(name, fallback): (0.0, []) for fallback in ("eager", "error")
                       for name in CASES} for r in range(WORLD)}
    plan = json.loads(next((tmp_path / "all_gather-error-0").glob("graph_*/plan.json")).read_text())
    assert plan["host_steps"] == {}
    assert {s["reason"] for s in plan["collective_steps"].values()} == {
        "all_gather_into_tensor on the rank's process group",
        "wait_tensor on the rank's process group"}
    assert [(r["kind"], r["decision"]) for r in plan["ops"] if r.get("host_step")] == [
        ("collective step", "collective")] * 2
    # The gathered rows reach the program after the wait, not when the gather is issued.
    wrapper = next((tmp_path / "all_gather-eager-0").glob("graph_*/wrapper.py")).read_text()
    lines = [line.strip() for line in wrapper[wrapper.index("def call"):].splitlines()]
    issued = next(i for i, l in enumerate(lines) if "all_gather_into_tensor.default(" in l)
    waited = next(i for i, l in enumerate(lines) if "wait_tensor.default(" in l)
    gathered = lines[issued].split(" = ")[0]
    stickified = [i for i, l in enumerate(lines)
                  if l.startswith(f"rules_to_device(") and l.endswith(f", {gathered})")]
    assert stickified and min(stickified) > waited > issued
    # The collective's input is unstickified once, before it is issued.
    assert sum(l.startswith("buf0 = rules_to_host(") for l in lines) == 1
