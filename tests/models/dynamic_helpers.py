"""Call a compiled model with several sequence lengths; collect what each call ran.

``run_lengths`` compiles ``model_zoo.LastHidden(model)`` once with the spyre_rules
backend (``fallback='error'``, ``span_check='error'``, a dump folder) and calls it
with each length in turn, keeping per call: the error against eager, the kernels
the call compiled (strong references: ``recent_kernels`` keeps only the latest),
and how many kernel calls it made; then every dump folder's ``plan.json`` and
``sizes.json``."""

from __future__ import annotations

import json
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

import model_zoo
import spyre_rules  # noqa: F401  (registers the backend)
from spyre_rules import config
from spyre_rules.executor.runtime import recent_kernels


@dataclass
class Call:
    length: int
    max_error: float
    compiled: list  # kernels created by this call (a new program), else []
    kernel_calls: int  # kernel invocations this call made, over every kernel seen so far


@dataclass
class Lengths:
    calls: list[Call]
    folders: list[dict]  # per dump folder: {"plan": ..., "sizes": ... or None}
    messages: list[str]
    kernels: list = field(default_factory=list)

    @property
    def programs(self) -> int:
        return len(self.folders)

    def host_steps(self) -> list:
        return [s for f in self.folders for s in f["plan"]["host_steps"].values()]

    def span_statuses(self) -> set[str]:
        return {r["span_check"]["status"] for f in self.folders for r in f["plan"]["ops"]}


def build(name: str, layers: int = 1, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """``model_zoo`` model ``name`` with ``layers`` decoder layers (faster compiles)."""
    cls, cfg = model_zoo.MODELS[name]("eager")
    for attr in ("num_hidden_layers", "n_layer"):
        if hasattr(cfg, attr):
            setattr(cfg, attr, layers)
    torch.manual_seed(model_zoo.SEED)
    return cls(cfg).to(dtype).eval()


def run_lengths(module: torch.nn.Module, lengths, dynamic=None, **cfg) -> Lengths:
    torch._dynamo.reset()
    wrapped = model_zoo.LastHidden(module)
    compiled = torch.compile(wrapped, backend="spyre_rules", dynamic=dynamic)
    kernels: list = []
    calls = []
    settings = {"fallback": "error", "span_check": "error", **cfg}
    with tempfile.TemporaryDirectory() as dump:
        with config.patch(dump_dir=dump, **settings), torch.no_grad(), \
                warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for length in lengths:
                ids = model_zoo.input_ids(length)
                before_serial = max((k.serial for k in recent_kernels()), default=-1)
                before_calls = sum(k.calls for k in kernels)
                out = compiled(ids)
                new = [k for k in recent_kernels() if k.serial > before_serial]
                kernels.extend(new)
                expected = wrapped(ids)
                calls.append(Call(length, (out.float() - expected.float()).abs().max().item(), new,
                                  sum(k.calls for k in kernels) - before_calls))
        folders = []
        for folder in sorted(Path(dump).iterdir(), key=lambda p: int(p.name.split("_")[1])):
            sizes = folder / "sizes.json"
            folders.append({"plan": json.loads((folder / "plan.json").read_text()),
                            "sizes": json.loads(sizes.read_text()) if sizes.exists() else None})
    messages = [str(w.message) for w in seen if str(w.message).startswith("spyre_rules")]
    return Lengths(calls, folders, messages, kernels)
