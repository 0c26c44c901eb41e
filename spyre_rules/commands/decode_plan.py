"""One decode step of a real-size language model, planned without running it.

``plan_decode(...)`` builds the model on the meta device like ``plan_model``
(``commands/model_plan.py``), then compiles **one decode step**: a batch of one new
token per sequence against a KV cache of ``context`` tokens that already lives on the
device.  The cache is a graph input the step writes in place (the new token's keys and
values) and reads whole (attention over every cached token):

* static (default): the model's own ``transformers.StaticCache`` of ``context`` tokens,
  initialised before the step (as after a prefill), so each layer's ``index_copy_``
  writes a graph input; a sliding-window model's layers keep their window, as the
  model does;
* paged (``paged=True``): a serving engine's layout (``commands/paged_cache.py``):
  ``k_cache (num_blocks, block_size, kv_heads, head_dim)`` per layer, a block table per
  sequence; the new token is written with ``index_copy_`` into the flat cache and the
  model's attention is ``paged_decode_attention`` over the pages (the cache's
  ``attention="blocks"``: key blocks, each block's pages gathered inside the key loop, a
  softmax combine; ``backend/paged_attention.py``).

The report, JSON and exit codes are the prefill plan's (``commands/plan.py``).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from spyre_rules.commands import model_plan
from spyre_rules.commands.model_plan import DTYPES, ConfigError, Progress

__all__ = ["cache_kv_heads", "decode_header", "plan_decode"]


def plan_decode(model: str, context: int, batch: int = 1, layers: int | None = None,
                dtype: str = "fp16", max_span_bytes: int = 256 * 1024 * 1024,
                out: Path | None = None, progress: Any = None, paged: bool = False,
                block_size: int = 16, shard: Any = None, ranks: int = 1) -> dict[str, Any]:
    """Build ``model`` on the meta device, compile one decode step against a cache of
    ``context`` tokens, and report the plan (the shape of ``plan_model``'s report).

    ``shard(net)`` (commands/tp_plan.py) shards the built model over ``ranks``
    tensor-parallel ranks; the cache then holds one rank's key/value heads.

    Raises :class:`ConfigError` for a configuration that cannot be used."""
    label, data = model_plan.load_config(model)
    if paged and context % block_size:
        raise ConfigError(f"--context {context} is not a whole number of blocks of {block_size}")
    steps = Progress(progress)
    try:
        return _plan(label, data, context, batch, layers, dtype, max_span_bytes, out, steps,
                     paged, block_size, shard, ranks)
    finally:
        steps.stop()


def decode_header(report: dict[str, Any]) -> str:
    """The first line of the text report of a decode plan."""
    limit = report["max_span_bytes"]
    cache = (f"paged cache, blocks of {report['block_size']}" if report["paged"]
             else "static cache")
    return (f"model {report['model']} ({report['model_type']}, {report['layers']} layers, "
            f"{report['dtype']}): decode, batch {report['batch']}, context {report['context']} "
            f"({cache}); limit {limit} bytes ({limit / 2 ** 20:.1f} MiB), automatic tiling on, "
            "nothing executed")


def _build(data: dict[str, Any], layers: int | None, dtype: Any, context: int) -> Any:
    positions = max(int(data.get("max_position_embeddings") or 0), context)
    return model_plan._build(data, layers, dtype, use_cache=True,
                             max_position_embeddings=positions)


def cache_kv_heads(config: Any) -> int:
    """How many key/value heads a layer's cache holds.  Most configs name them
    (``num_key_value_heads``, else every attention head); Falcon's do not: its new decoder
    architecture caches its keys already broadcast to every query head, the older one
    ``num_kv_heads`` heads, or one when ``multi_query`` (``FalconAttention``)."""
    if getattr(config, "model_type", None) == "falcon":
        if config.new_decoder_architecture:
            return int(config.num_attention_heads)
        return 1 if config.multi_query else int(config.num_kv_heads or config.num_attention_heads)
    return int(getattr(config, "num_key_value_heads", None) or config.num_attention_heads)


def _cache(config: Any, batch: int, context: int, dtype: Any, paged: bool,
           block_size: int, ranks: int = 1, blocks_attention: bool = True) -> Any:
    """The cache of ``context`` tokens on the meta device, filled (as after a prefill);
    over ``ranks`` tensor-parallel ranks, one rank's share of the key/value heads.
    ``blocks_attention``: a paged cache hands the attention its pools (the model's attention
    runs as ``paged_decode_attention``), else the gathered pages."""
    import torch
    from transformers import StaticCache

    from spyre_rules.commands.paged_cache import PagedCache

    kv_heads = cache_kv_heads(config) // ranks
    head_dim = int(getattr(config, "head_dim", None)
                   or config.hidden_size // config.num_attention_heads)
    meta = torch.device("meta")
    if paged:
        return PagedCache.for_decode(config.num_hidden_layers, batch, context, block_size,
                                     kv_heads, head_dim, dtype, meta,
                                     attention="blocks" if blocks_attention else "gathered")
    cache = StaticCache(config=config, max_cache_len=context)
    cache.early_initialization(batch, kv_heads, head_dim, dtype, meta)
    return cache


def _plan(label: str, data: dict[str, Any], context: int, batch: int, layers: int | None,
          dtype: str, max_span_bytes: int, out: Path | None, steps: Progress, paged: bool,
          block_size: int, shard: Any = None, ranks: int = 1) -> dict[str, Any]:
    steps.phase(f"building {label} and its {'paged' if paged else 'static'} cache on the meta device")
    import torch

    from spyre_rules.commands.paged_cache import blocks_attention_fits

    torch_dtype = getattr(torch, DTYPES[dtype])
    started = time.perf_counter(), time.process_time()
    net = _build(data, layers, torch_dtype, context)
    sharded = shard(net) if shard is not None else {}
    # a model whose attention is a transformers attention function runs paged_decode_attention
    # over a paged cache; one with its own attention code (Falcon) or softcapped logits
    # (Gemma 2) reads the gathered pages
    blocks = blocks_attention_fits(net)
    cache = _cache(net.config, batch, context, torch_dtype, paged, block_size, ranks, blocks)
    built = time.perf_counter(), time.process_time()
    report: dict[str, Any] = {
        "model": label, "model_type": data["model_type"], "decode": True, "context": context,
        "seq": 1, "batch": batch, "paged": paged, "block_size": block_size if paged else None,
        "layers": int(net.config.num_hidden_layers), "dtype": DTYPES[dtype],
        "max_span_bytes": max_span_bytes, "automatic_tiling": True, **sharded,
    }
    with tempfile.TemporaryDirectory(prefix="spyre_rules_plan_") as scratch:
        folder = Path(out) if out is not None else Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        before = {p.name for p in folder.iterdir()}
        report["error"] = _compile(net, cache, batch, context, max_span_bytes, folder, steps)
        done = time.perf_counter(), time.process_time()
        report["seconds"] = {"build": [round(b - a, 3) for a, b in zip(started, built)],
                             "compile": [round(b - a, 3) for a, b in zip(built, done)]}
        steps.phase("reading the plan")
        report["graphs"] = [model_plan._graph_report(p) for p in sorted(folder.iterdir())
                            if p.is_dir() and p.name not in before]
        if out is not None:
            report["out"] = str(folder)
    return model_plan._verdict(report)


def _compile(net: Any, cache: Any, batch: int, context: int, limit: int, folder: Path,
             steps: Progress) -> str | None:
    import warnings

    import torch

    from spyre_rules import config
    from spyre_rules.commands.quiet import hide_cache_off_warning

    hide_cache_off_warning()
    from spyre_rules.commands.paged_cache import PAGED_ATTENTION, PagedCache, paged_call_kwargs

    meta = torch.device("meta")
    ids = torch.zeros(batch, 1, dtype=torch.long, device=meta)
    position = torch.tensor([context - 1], device=meta)  # the last slot of the cache
    extra: dict[str, Any] = {}
    if isinstance(cache, PagedCache) and cache.attention == "blocks":
        net.set_attn_implementation(PAGED_ATTENTION)
        extra = paged_call_kwargs(cache, torch.full((batch,), context, device=meta))
    settings = dict(max_span_bytes=limit, ignore_span_overflow_hints=False,
                    ignore_wsr_hints=False, coarse_tiling=True, fallback="error",
                    span_check="warn", dump_dir=str(folder))
    torch._dynamo.reset()
    steps.phase("tracing and compiling one decode step (Dynamo, Inductor, planner, codegen, "
                "span check)")
    try:
        with config.patch(**settings), torch.no_grad(), warnings.catch_warnings(), \
                model_plan._span_log_quiet(), model_plan._meta_constants_faked():
            warnings.simplefilter("ignore")
            out = torch.compile(net, backend="spyre_rules")(
                input_ids=ids, cache=cache, cache_position=position, use_cache=True, **extra)
    except Exception as exc:  # noqa: BLE001 - a refusal is the answer, reported with exit 1
        return model_plan._find_error(exc)
    finally:
        torch._dynamo.reset()
    return model_plan._logits_error(out, net, batch, 1)
