"""Launch N gloo ranks on the CPU and collect what each returns (tests of several cards).

``run_ranks(world, target, *args)`` spawns ``world`` processes (spawn, not fork:
a forked child would inherit the parent's torch threads), each calling
``target(rank, world, *args)`` inside an initialised gloo process group, and
returns ``{rank: result}``.  A rank that raises returns the traceback's text, so
the test fails naming it instead of hanging.
"""

from __future__ import annotations

import os
import socket
import traceback
from typing import Any, Callable

import torch.multiprocessing as mp

__all__ = ["run_ranks"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, world: int, port: int, target: Callable[..., Any], args: tuple,
               results: Any) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        results.put((rank, target(rank, world, *args)))
    except Exception:  # reported to the test, which fails naming it
        results.put((rank, traceback.format_exc()))
    finally:
        dist.destroy_process_group()


def run_ranks(world: int, target: Callable[..., Any], *args: Any,
              timeout: float = 1500) -> dict[int, Any]:
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, world, port, target, args, results))
             for r in range(world)]
    for p in procs:
        p.start()
    try:
        return dict(results.get(timeout=timeout) for _ in procs)
    finally:
        for p in procs:
            p.join(60)
