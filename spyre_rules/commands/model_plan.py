"""A language model at its real size, planned without running it.

``plan_model(...)`` builds a ``transformers`` model from its configuration on the
meta device (no weights: parameters are shapes only), compiles it with
``torch.compile(model, backend="spyre_rules")`` and automatic span-overflow
tiling, and returns what compilation decided, read back from the dump dir's
``plan.json`` (one per graph): each op's plan, the loop groups and the span
check.  Nothing runs: the compiled call returns meta tensors
(``backend/meta_device.py``).

Configurations are a ``transformers`` config JSON file or the name of one the
package ships (``spyre_rules/model_configs/*.json``: the published numbers of a
few public 7-8B models).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["ConfigError", "MODEL_CONFIG_DIR", "shipped_configs", "load_config", "plan_model"]

MODEL_CONFIG_DIR = Path(__file__).resolve().parent.parent / "model_configs"

#: --dtype choices -> torch dtype attribute names
DTYPES = {"fp16": "float16", "float16": "float16", "bf16": "bfloat16", "bfloat16": "bfloat16",
          "fp32": "float32", "float32": "float32"}


class ConfigError(ValueError):
    """The model configuration cannot be read (a usage error: exit 2)."""


def shipped_configs() -> list[str]:
    return sorted(p.stem for p in MODEL_CONFIG_DIR.glob("*.json"))


def load_config(model: str) -> tuple[str, dict[str, Any]]:
    """``(label, config dict)`` of a config JSON file or a shipped config's name."""
    path = Path(model)
    if not path.is_file():
        shipped = MODEL_CONFIG_DIR / f"{model}.json"
        if not shipped.is_file():
            raise ConfigError(
                f"{model!r} is neither a config JSON file nor a shipped config "
                f"(shipped: {', '.join(shipped_configs())})")
        path = shipped
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise ConfigError(f"{path}: not a transformers config (no \"model_type\")")
    return (model if path.parent == MODEL_CONFIG_DIR else str(path)), data


def _build(data: dict[str, Any], layers: int | None, dtype: Any, **overrides: Any) -> Any:
    """The causal LM of ``data`` on the meta device; ``overrides``: config fields set over
    the file's (a decode plan keeps the cache and lengthens the positions)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = {k: v for k, v in data.items() if k != "model_type"}
    if layers is not None:
        fields["num_hidden_layers"] = layers
    fields["use_cache"] = False
    fields.update(overrides)
    try:
        config = AutoConfig.for_model(data["model_type"], **fields)
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"transformers refuses the config: {exc}") from None
    # On the meta device parameters are shapes only: no memory, no weight init cost.
    # The causal-LM head too: its vocabulary-sized matmul and logits are planned.
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, dtype=dtype).eval()


class Progress:
    """Phase lines on stderr, and a heartbeat while one phase runs long."""

    def __init__(self, stream: Any = None, every: float = 10.0) -> None:
        self.stream = stream
        self.every = every
        self.start = time.monotonic()
        self._beat: Any = None

    def say(self, text: str) -> None:
        if self.stream is not None:
            print(f"[{time.monotonic() - self.start:6.1f}s] {text}", file=self.stream, flush=True)

    def phase(self, text: str) -> None:
        self.stop()
        self.say(text)
        if self.stream is None:
            return
        import threading

        done = threading.Event()

        def beat() -> None:
            while not done.wait(self.every):
                self.say(f"  ... still {text.rstrip('.').lower()}")

        thread = threading.Thread(target=beat, daemon=True)
        thread.start()
        self._beat = (done, thread)

    def stop(self) -> None:
        # Joined, so no heartbeat writes to the stream once the command has returned.
        if self._beat is not None:
            done, thread = self._beat
            done.set()
            thread.join()
            self._beat = None


def _find_error(exc: BaseException) -> str:
    """Our refusal's text when the compiler refused (it names the op and why), else the
    whole cause chain: Dynamo's wrapper alone says only ``backend=... raised:``."""
    from spyre_rules.errors import Unsupported, cause_chain_text, exception_chain
    from spyre_rules.ir.errors import BackendCompileError

    for cause in exception_chain(exc):
        if isinstance(cause, (BackendCompileError, Unsupported)):
            return str(cause).splitlines()[0]
    return cause_chain_text(exc)


def plan_model(model: str, seq: int, batch: int = 1, layers: int | None = None,
               dtype: str = "fp16", max_span_bytes: int = 256 * 1024 * 1024,
               out: Path | None = None, progress: Any = None,
               automatic_tiling: bool = True, reuse_layers: bool = True,
               shard: Any = None) -> dict[str, Any]:
    """Build ``model`` on the meta device, compile it, and report the plan.

    ``automatic_tiling=False`` (benchmarks): every op compiles untiled, so code
    generation and the span check see every op at its full size.

    ``reuse_layers`` (default): the decoder layers are marked as one nested compile
    region (``commands/model_regions.py``), so the layer compiles once and every
    layer runs its program (each graph's ``region`` in the report says which part
    it is and which layers share it); False compiles every layer in one graph.

    ``shard(net)``: applied to the built model before it compiles (commands/tp_plan.py
    shards it over a tensor-parallel mesh); what it returns joins the report.

    Raises :class:`ConfigError` for a configuration that cannot be used."""
    label, data = load_config(model)
    steps = Progress(progress)
    try:
        return _plan(label, data, seq, batch, layers, dtype, max_span_bytes, out, steps,
                     automatic_tiling, reuse_layers, shard)
    finally:
        steps.stop()


def _plan(label: str, data: dict[str, Any], seq: int, batch: int, layers: int | None, dtype: str,
          max_span_bytes: int, out: Path | None, steps: Progress,
          automatic_tiling: bool, reuse_layers: bool = True, shard: Any = None) -> dict[str, Any]:
    steps.phase(f"building {label} on the meta device")
    import torch

    torch_dtype = getattr(torch, DTYPES[dtype])
    started = time.perf_counter(), time.process_time()
    net = _build(data, layers, torch_dtype)
    built = time.perf_counter(), time.process_time()
    config = net.config
    report: dict[str, Any] = {
        "model": label, "model_type": data["model_type"], "seq": seq, "batch": batch,
        "layers": int(config.num_hidden_layers), "dtype": DTYPES[dtype],
        "max_span_bytes": max_span_bytes, "automatic_tiling": automatic_tiling,
        "reuse_layers": reuse_layers,
    }
    if shard is not None:
        report.update(shard(net))
    with tempfile.TemporaryDirectory(prefix="spyre_rules_plan_") as scratch:
        folder = Path(out) if out is not None else Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        before = {p.name for p in folder.iterdir()}
        report["error"] = _compile(net, batch, seq, max_span_bytes, folder, steps,
                                   automatic_tiling, reuse_layers)
        done = time.perf_counter(), time.process_time()
        # wall and CPU seconds (CPU time is the steadier figure on a shared machine)
        report["seconds"] = {"build": [round(b - a, 3) for a, b in zip(started, built)],
                             "compile": [round(b - a, 3) for a, b in zip(built, done)]}
        steps.phase("reading the plan")
        report["graphs"] = [_graph_report(p) for p in sorted(folder.iterdir())
                            if p.is_dir() and p.name not in before]
        if out is not None:
            report["out"] = str(folder)
    return _verdict(report)


def _compile(net: Any, batch: int, seq: int, limit: int, folder: Path, steps: Progress,
             automatic_tiling: bool, reuse_layers: bool = True) -> str | None:
    import contextlib
    import warnings

    import torch

    from spyre_rules import config
    from spyre_rules.commands.model_regions import marked_layers
    from spyre_rules.commands.quiet import hide_cache_off_warning

    hide_cache_off_warning()
    ids = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    settings = dict(max_span_bytes=limit, ignore_span_overflow_hints=not automatic_tiling,
                    ignore_wsr_hints=False,
                    coarse_tiling=True, fallback="error", span_check="warn", dump_dir=str(folder))
    torch._dynamo.reset()
    steps.phase("tracing and compiling (Dynamo, Inductor, planner, codegen, span check)")
    try:
        # The span check's findings are read from plan.json; its warnings would repeat them.
        regions = marked_layers(net) if reuse_layers else contextlib.nullcontext()
        with config.patch(**settings), torch.no_grad(), warnings.catch_warnings(), \
                _span_log_quiet(), _meta_constants_faked(), regions:
            warnings.simplefilter("ignore")
            out = torch.compile(net, backend="spyre_rules")(input_ids=ids)
    except Exception as exc:  # noqa: BLE001 - a refusal is the answer, reported with exit 1
        return _find_error(exc)
    finally:
        torch._dynamo.reset()
    return _logits_error(out, net, batch, seq)


def _logits_error(out: Any, net: Any, batch: int, seq: int) -> str | None:
    """Why the compiled model's output is not meta logits of ``(batch, seq, vocab)``."""
    logits = getattr(out, "logits", None)
    if logits is None or logits.device.type != "meta":
        return f"the compiled model returned {type(logits).__name__} logits, not a meta tensor"
    vocab = int(getattr(net.config, "vocab_size", 0))
    if tuple(logits.shape) != (batch, seq, vocab):
        return f"the compiled model returned logits of shape {tuple(logits.shape)}, not {(batch, seq, vocab)}"
    return None


class _meta_constants_faked:
    """Let Dynamo's fake mode take a meta tensor model code makes while it traces.

    Indexing with a Python list (Falcon's ``fused_qkv[..., [-2], :]``) makes the index
    tensor on the indexed tensor's device, here the meta device, outside Dynamo's fake
    mode, which then refuses it ("Please convert all Tensors to FakeTensors first"), with
    ``backend="eager"`` too.  A meta tensor holds no data, so converting it to a fake one
    loses nothing: while the plan compiles, non-fake inputs are converted (the fake
    mode's thread-local override, None again after)."""

    def __enter__(self) -> None:
        from torch._subclasses.fake_tensor import fake_tensor_tls

        self.saved = fake_tensor_tls.allow_non_fake_inputs_override
        fake_tensor_tls.allow_non_fake_inputs_override = True

    def __exit__(self, *exc: Any) -> None:
        from torch._subclasses.fake_tensor import fake_tensor_tls

        fake_tensor_tls.allow_non_fake_inputs_override = self.saved


class _span_log_quiet:
    def __enter__(self) -> None:
        import logging

        from spyre_rules.codegen import span_check

        self.logger = span_check.logger
        self.level = self.logger.level
        self.logger.setLevel(logging.CRITICAL + 1)
        return None

    def __exit__(self, *exc: Any) -> None:
        self.logger.setLevel(self.level)


def _graph_report(folder: Path) -> dict[str, Any]:
    plan = json.loads((folder / "plan.json").read_text())
    ops = plan["ops"]
    groups: dict[tuple[int, ...], dict[str, Any]] = {}
    for r in ops:
        loop = r.get("loop")
        if loop and loop.get("loop_group_id"):
            key = tuple(loop["loop_group_id"])
            group = groups.setdefault(key, {"id": list(key), "tiles": loop["loop_count"], "ops": []})
            group["ops"].append(r["op"])
            for level in loop.get("loop_last_tiles") or ():
                for t in level:  # a remainder tile: whole tiles, then a shorter last one
                    group.setdefault("last_tiles", {})[r["op"]] = (
                        f"dim {t['dim']}: tiles of {t['tile']}, the last {t['last']}")
    errors = sorted({r["graph_error"] for r in ops if r.get("graph_error")})
    # a part of a model split at its layers (backend/regions.py): the layer program
    # with the layers sharing it, or the ops before / after / between the layers
    return {"folder": str(folder), "graph": plan.get("graph"), "region": plan.get("region"), "ops": ops,
            "loop_groups": list(groups.values()), "graph_errors": errors,
            "host_steps": plan.get("host_steps") or {},
            "collective_steps": plan.get("collective_steps") or {},
            "program": plan.get("program") or []}


def _verdict(report: dict[str, Any]) -> dict[str, Any]:
    from spyre_rules.codegen.span_check import DEFERRED_STATUS

    over, deferred, unsupported, unchecked = [], [], [], []
    for graph in report["graphs"]:
        for r in graph["ops"]:
            status = (r.get("span_check") or {}).get("status")
            if r.get("decision") == "unsupported":
                unsupported.append(f"{r['op']}: {r.get('reason')}")
            if status == "overflow":
                over.append(r["op"])
            elif status == DEFERRED_STATUS:
                deferred.append(r["op"])
            elif status is None and not r.get("host_step"):
                unchecked.append(r["op"])
    report.update(overflows=over, deferred_indirect_reads=deferred, unsupported=unsupported,
                  unchecked=unchecked)
    report["ok"] = (report["error"] is None and not over and not unsupported and not unchecked
                    and bool(report["graphs"]))
    return report

