"""Sharded models compile on every rank with fallback="error" (issue 39), 2 and 4 gloo ranks.

Each world size is launched once for the module (tests/backend/ranks.py); every rank runs
every case and returns what it measured:

* a Llama-style causal LM (hidden 256, 2 layers, GQA) sharded by transformers' own
  tensor-parallel plan (``apply_tensor_parallelism`` with the model's ``tp_plan``: colwise
  q/k/v/gate/up, rowwise o/down, vocabulary-parallel embedding, gathered lm_head), compiled
  untiled and with automatic tiling at a KiB limit: logits equal the unsharded model's in
  one process (fp32, within the rounding of the split sums);
* a column- then row-parallel MLP parallelised with torch.distributed.tensor.parallel
  (``ColwiseParallel``, ``RowwiseParallel``: DTensor parameters);
* a functional all_gather along dim 1 and a reduce_scatter: equal to eager bit for bit.

No case runs a host step; every collective is a collective step of the program.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

from ranks import run_ranks

#: the automatic-tiling limit of the tiled Llama run (the weights are 128-256 KiB)
TILED_LIMIT = 32 * 1024
SEQ = 16


def _llama(world: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=128, hidden_size=256, intermediate_size=512,
                         num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4,
                         max_position_embeddings=64, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)  # the same weights on every rank
    return LlamaForCausalLM(config).eval()


def _shard_llama(model, world: int):
    from torch.distributed.device_mesh import init_device_mesh
    from transformers.distributed import DistributedConfig
    from transformers.distributed.tensor_parallel import apply_tensor_parallelism

    mesh = init_device_mesh("cpu", (world,))
    plan, _, _ = model._resolve_parallel_plans(DistributedConfig(tp_size=world))
    return apply_tensor_parallelism(model, mesh, plan)


def _plan_summary(folder: Path) -> dict:
    """Collective steps, host steps, loop groups and whether a loop group spans a
    collective (its ops in kernels on both sides of one), from each graph's plan.json."""
    out = {"collectives": 0, "host_steps": 0, "loop_groups": 0, "group_spans_collective": False,
           "overflows": 0}
    for path in sorted(folder.glob("graph_*/plan.json")):
        plan = json.loads(path.read_text())
        out["host_steps"] += len(plan["host_steps"])
        out["collectives"] += sum(1 for s in plan["program"] if s["step"] == "collective step")
        groups = {tuple(r["loop"]["loop_group_id"]): r["op"] for r in plan["ops"]
                  if (r.get("loop") or {}).get("loop_group_id")}
        out["loop_groups"] += len(groups)
        segment, seen = 0, {}
        for step in plan["program"]:
            if step["step"] != "kernel":
                segment += 1
                continue
            for op in step["ops"]:
                record = next((r for r in plan["ops"] if r["op"] == op), None)
                group = ((record or {}).get("loop") or {}).get("loop_group_id")
                if group and seen.setdefault(tuple(group), segment) != segment:
                    out["group_spans_collective"] = True
        out["overflows"] += sum(1 for r in plan["ops"]
                                if (r.get("span_check") or {}).get("status") == "overflow")
    return out


def _compile(fn, dump: Path, **settings):
    from spyre_rules import config

    torch._dynamo.reset()
    with torch.no_grad(), warnings.catch_warnings(record=True) as seen, \
            config.patch(fallback="error", dump_dir=str(dump), **settings):
        warnings.simplefilter("always")
        out = fn()
    host = [str(w.message) for w in seen if "on the host" in str(w.message)]
    return out, host


def _llama_cases(rank: int, world: int, dump: Path) -> dict:
    model = _llama(world)
    ids = torch.randint(0, 128, (1, SEQ), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(input_ids=ids).logits  # the unsharded model, one process
    _shard_llama(model, world)
    out = {}
    for name, settings in (("llama", {}),
                           ("llama_tiled", dict(ignore_span_overflow_hints=False,
                                                max_span_bytes=TILED_LIMIT))):
        compiled = torch.compile(model, backend="spyre_rules", fullgraph=True)
        got, host = _compile(lambda: compiled(input_ids=ids).logits, dump / name, **settings)
        out[name] = {"error_ok": bool((got - want).abs().max() <= 1e-5), "host": host,
                     "shape": tuple(got.shape), **_plan_summary(dump / name)}
    return out


def _mlp_case(rank: int, world: int, dump: Path) -> dict:
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)).eval()
    x = torch.randn(2, 16, 64)
    with torch.no_grad():
        want = mlp(x)
    parallelize_module(mlp, init_device_mesh("cpu", (world,)),
                       {"0": ColwiseParallel(), "2": RowwiseParallel()})
    compiled = torch.compile(mlp, backend="spyre_rules", fullgraph=True)
    got, host = _compile(lambda: compiled(x), dump / "mlp")
    return {"error_ok": bool((got - want).abs().max() <= 1e-5), "host": host,
            **_plan_summary(dump / "mlp")}


def _collective_cases(rank: int, world: int, dump: Path) -> dict:
    import torch.distributed as dist
    import torch.distributed._functional_collectives as fc

    torch.manual_seed(0)
    x = torch.randn(2, 48, 192)
    part = 48 // world

    def gather(t):
        return fc.all_gather_tensor(t[:, rank * part:(rank + 1) * part] * 2, 1,
                                    dist.group.WORLD) + 1

    def scatter(t):
        return fc.reduce_scatter_tensor(t * (rank + 1), "sum", 1, dist.group.WORLD) - 1

    ranks_sum = sum(range(1, world + 1))
    wants = {"all_gather": x * 2 + 1,
             "reduce_scatter": (x * ranks_sum)[:, rank * part:(rank + 1) * part] - 1}
    out = {}
    for name, fn in (("all_gather", gather), ("reduce_scatter", scatter)):
        eager = fn(x)
        compiled = torch.compile(fn, backend="spyre_rules", fullgraph=True)
        got, host = _compile(lambda: compiled(x), dump / name)
        out[name] = {"equal": torch.equal(got, eager), "host": host,
                     "close_to_sum": bool((got - wants[name]).abs().max() <= 1e-5),
                     **_plan_summary(dump / name)}
    return out


def _rank(rank: int, world: int, dump: str) -> dict:
    import spyre_rules  # noqa: F401 - registers the backend

    folder = Path(dump) / f"rank{rank}"
    return {**_llama_cases(rank, world, folder), "mlp": _mlp_case(rank, world, folder),
            **_collective_cases(rank, world, folder)}


@pytest.fixture(scope="module", params=[2, 4], ids=lambda w: f"{w}ranks")
def ranks(request, tmp_path_factory):
    world = request.param
    return world, run_ranks(world, _rank, str(tmp_path_factory.mktemp(f"tp{world}")))


def _no_traceback(results):
    for rank, got in results.items():
        assert isinstance(got, dict), f"rank {rank} failed:\n{got}"


def test_tensor_parallel_llama_equals_the_unsharded_model(ranks):
    world, results = ranks
    _no_traceback(results)
    for rank, got in results.items():
        untiled, tiled = got["llama"], got["llama_tiled"]
        # 2 all_reduces per layer (o_proj, down_proj), 1 after the vocabulary-parallel
        # embedding, 1 all_gather of the logits: each issued and waited
        expected = {"error_ok": True, "host": [], "shape": (1, SEQ, 128), "collectives": 12,
                    "host_steps": 0, "group_spans_collective": False, "overflows": 0}
        assert {k: untiled[k] for k in expected} == expected, (world, rank)
        assert untiled["loop_groups"] == 0
        assert {k: tiled[k] for k in expected} == expected, (world, rank)
        assert tiled["loop_groups"] > 0  # automatic tiling at the KiB limit did tile


def test_dtensor_column_row_parallel_mlp(ranks):
    world, results = ranks
    _no_traceback(results)
    for rank, got in results.items():
        assert {k: got["mlp"][k] for k in ("error_ok", "host", "host_steps", "overflows")} == {
            "error_ok": True, "host": [], "host_steps": 0, "overflows": 0}, (world, rank)
        assert got["mlp"]["collectives"] == 2  # the row-parallel all_reduce and its wait


@pytest.mark.parametrize("case", ["all_gather", "reduce_scatter"])
def test_gather_and_scatter_equal_eager(ranks, case):
    world, results = ranks
    _no_traceback(results)
    for rank, got in results.items():
        assert {k: got[case][k] for k in ("equal", "close_to_sum", "host", "host_steps")} == {
            "equal": True, "close_to_sum": True, "host": [], "host_steps": 0}, (world, rank)
