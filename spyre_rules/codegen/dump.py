"""The dump directory (``config.dump_dir`` / ``SPYRE_RULES_DUMP_DIR``).

Per compiled graph, a new folder ``graph_<N>`` (first free N) holding:

* ``wrapper.py``  -- the generated wrapper module source;
* ``plan.json``   -- every op's plan record (``passes/plan_record.py``: name,
  kind, layout with HBM address, ``decision`` -- ``"no plan"`` until a planner
  records one, and its rule trace), ``span_check`` -- the op's result from
  ``codegen/span_check.py`` (``fits`` / ``overflow`` / ``off``) -- plus the memory map
  and ``host_steps``: the ops that ran on the host (name -> description, reason);
* ``<kernel>/sdsc_N.json`` + ``<kernel>/bundle.mlir`` per generated kernel;
* ``sizes.json`` -- only for a program specialised from a graph with symbolic
  sizes (backend/specialize.py): the graph, the value of each size symbol and
  which input dim it is (also under ``"sizes"`` in ``plan.json``).

A graph compiled as one part of a graph split at its region calls
(backend/regions.py) says which part in ``plan.json``'s ``"region"``: a
subgraph's program with every call sharing it (``"shared_by"``), or the place
of a run of ops between the calls.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spyre_rules import config
from spyre_rules.codegen.bundle import generate_bundle, sdsc_files
from spyre_rules.passes.plan_record import COLLECTIVE_STEP_KIND, HOST_STEP_KIND

__all__ = ["dump_graph", "dump_region", "dump_sizes", "plan_json"]

_SIZES: contextvars.ContextVar[dict | None] = contextvars.ContextVar("spyre_rules_sizes", default=None)
_REGION: contextvars.ContextVar[dict | None] = contextvars.ContextVar("spyre_rules_region", default=None)


@contextlib.contextmanager
def dump_sizes(sizes: dict) -> Iterator[None]:
    """Graphs dumped inside record ``sizes`` (the symbol values they were specialised to)."""
    token = _SIZES.set(sizes)
    try:
        yield
    finally:
        _SIZES.reset(token)


@contextlib.contextmanager
def dump_region(region: dict) -> Iterator[None]:
    """Graphs dumped inside record ``region``: which part of a graph split at its
    region calls they are, and the calls sharing their program (backend/regions.py)."""
    token = _REGION.set(region)
    try:
        yield
    finally:
        _REGION.reset(token)


def _new_folder(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    n = 0
    while True:
        folder = root / f"graph_{n}"
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            n += 1


def _steps(state: Any, kind: str) -> dict[str, dict[str, Any]]:
    steps = getattr(state, "host_steps", {}) or {}
    return {name: {"description": step["description"], "reason": step["reason"],
                   **({"chunks": step["chunks"]} if "chunks" in step else {})}
            for name, step in steps.items() if step.get("kind", HOST_STEP_KIND) == kind}


def plan_json(graph: Any, state: Any, name: str) -> str:
    """``plan.json``'s text; ``name`` names the graph when Inductor gave it none."""
    plan = {
        "graph": getattr(graph, "name", None) or name,
        "ops": [record.as_dict() for record in state.plan.values()],
        # ops run on the host (backend/host_steps.py): name -> description, reason
        "host_steps": _steps(state, HOST_STEP_KIND),
        # collectives between the kernels (backend/collectives.py): the same fields
        "collective_steps": _steps(state, COLLECTIVE_STEP_KIND),
        # kernels, host steps and collective steps in the order the wrapper runs them
        "program": list(getattr(state, "program_steps", [])),
        "memory_map": state.memory.to_json() if state.memory is not None else None,
    }
    sizes = _SIZES.get()
    if sizes is not None:
        plan["sizes"] = sizes
    region = _REGION.get()
    if region is not None:
        plan["region"] = region
    return json.dumps(plan, indent=2, default=str) + "\n"


def dump_graph(graph: Any, state: Any) -> Path | None:
    root = config.dump_dir
    if not root:
        return None
    folder = _new_folder(Path(root))
    (folder / "wrapper.py").write_text(state.wrapper_source or "")
    sizes = _SIZES.get()
    if sizes is not None:
        (folder / "sizes.json").write_text(json.dumps(sizes, indent=2) + "\n")
    (folder / "plan.json").write_text(plan_json(graph, state, folder.name))
    for name, specs in state.kernels:
        kdir = folder / name
        kdir.mkdir()
        for filename, content in sdsc_files(specs).items():
            (kdir / filename).write_text(json.dumps(content, indent=2) + "\n")
        (kdir / "bundle.mlir").write_text(generate_bundle(specs))
    return folder
