"""``spyre-rules plan MODEL --tp N``: one rank's shard of a tensor-parallel model, planned.

The model is built on the meta device as ``plan`` builds it (commands/model_plan.py),
then sharded the way transformers shards it on N cards: the model's own
tensor-parallel plan (``base_model_tp_plan`` and the head's ``_tp_plan``: column-parallel
q/k/v and gate/up projections, row-parallel o and down projections followed by an
all_reduce, a vocabulary-parallel embedding followed by an all_reduce, an lm_head whose
column shards are all_gathered), applied by ``apply_tensor_parallelism`` over a device
mesh of N ranks.  No real ranks are needed: the mesh lives on torch.distributed's
``fake`` backend (every collective returns at once, shapes only), and this process is
rank 0.  The compile then sees rank 0's local shard and each collective in place, as a
collective step of the program whose buffers are span-checked like any access
(codegen/collective_spans.py).

Every split dim (attention heads, key/value heads, intermediate size, vocabulary) must
divide by N, so every rank's shard has the same shapes as rank 0's and rank 0's plan is
every rank's plan; a size that does not divide is a usage error (exit 2).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from spyre_rules.commands.model_plan import ConfigError, load_config, plan_model

__all__ = ["plan_tensor_parallel", "split_sizes", "tp_lines"]

#: config fields the tensor-parallel plan splits across the ranks
SPLIT_FIELDS = ("num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size")


def split_sizes(data: dict[str, Any], tp: int) -> dict[str, list[int]]:
    """``field -> [whole, per rank]`` of each split field; ConfigError if one does not divide."""
    out = {}
    for field in SPLIT_FIELDS:
        value = data.get(field)
        if value is None and field == "num_key_value_heads":
            value = data.get("num_attention_heads")
        if not isinstance(value, int):
            continue
        if value % tp:
            raise ConfigError(
                f"--tp {tp} does not divide {field} = {value}: the ranks' shards would differ")
        out[field] = [value, value // tp]
    return out


@contextlib.contextmanager
def fake_world(tp: int) -> Iterator[None]:
    """A process group of ``tp`` ranks on torch.distributed's fake backend; this process
    is rank 0.  Torn down afterwards (unless the caller had one already)."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        if dist.get_world_size() != tp:
            raise ConfigError(f"a process group of {dist.get_world_size()} ranks is already "
                              f"initialised; --tp {tp} needs {tp}")
        yield
        return
    dist.init_process_group("fake", rank=0, world_size=tp, store=FakeStore())
    try:
        yield
    finally:
        dist.destroy_process_group()


def _shard(tp: int) -> Any:
    def shard(net: Any) -> dict[str, Any]:
        from torch.distributed.device_mesh import init_device_mesh
        from transformers.distributed import DistributedConfig
        from transformers.distributed.tensor_parallel import apply_tensor_parallelism

        mesh = init_device_mesh("cpu", (tp,))
        try:
            plan, _, _ = net._resolve_parallel_plans(DistributedConfig(tp_size=tp))
        except ValueError as exc:  # no tp_plan for this model type
            raise ConfigError(f"transformers has no tensor-parallel plan for it: {exc}") from None
        apply_tensor_parallelism(net, mesh, plan)
        styles: dict[str, int] = {}
        for name, style in plan.items():
            if not name.endswith((".weight", ".bias")):
                styles[style] = styles.get(style, 0) + 1
        return {"tp_styles": styles}

    return shard


def plan_tensor_parallel(model: str, tp: int, decode: bool = False, **kwargs: Any) -> dict[str, Any]:
    """``plan_model`` (or with ``decode``, ``plan_decode``: one decode step against a
    cache holding this rank's key/value heads) of rank 0's shard over ``tp`` ranks
    (module doc); the report has the plan's fields plus ``tp`` (ranks, rank planned,
    split sizes, the collectives)."""
    _, data = load_config(model)
    splits = split_sizes(data, tp)
    with fake_world(tp):
        if decode:
            from spyre_rules.commands.decode_plan import plan_decode

            report = plan_decode(model, shard=_shard(tp), ranks=tp, **kwargs)
        else:
            report = plan_model(model, shard=_shard(tp), **kwargs)
    report["tp"] = {"ranks": tp, "rank": 0, "backend": "fake", "split": splits,
                    "styles": report.pop("tp_styles", {}),
                    "collectives": _collectives(report)}
    return report


def _collectives(report: dict[str, Any]) -> dict[str, Any]:
    """Per collective kind: how many steps, and how many run in chunks."""
    out: dict[str, dict[str, int]] = {}
    for graph in report.get("graphs", []):
        for step in graph.get("program", []):
            if step.get("step") != "collective step":
                continue
            entry = out.setdefault(step["collective"], {"steps": 0, "chunked": 0})
            entry["steps"] += 1
            entry["chunked"] += "chunks" in step
    return out


def tp_lines(report: dict[str, Any]) -> list[str]:
    """The text report's lines about the shard."""
    tp = report["tp"]
    split = ", ".join(f"{field} {whole} -> {part}" for field, (whole, part) in tp["split"].items())
    kinds = ", ".join(f"{name} x{c['steps']}" + (f" ({c['chunked']} in chunks)" if c["chunked"] else "")
                      for name, c in tp["collectives"].items()) or "none"
    return [f"tensor parallel: rank {tp['rank']} of {tp['ranks']} ({tp['backend']} process group; "
            f"every rank's shard has these shapes): {split}",
            f"collective steps: {kinds}"]
