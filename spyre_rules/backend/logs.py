"""spyre_rules in PyTorch's logging (``TORCH_LOGS``) and structured trace (``TORCH_TRACE``).

``TORCH_LOGS="spyre_rules"`` turns on the ``spyre_rules`` logger hierarchy at
INFO, ``"+spyre_rules"`` at DEBUG (``torch._logging.set_logs(modules=
{"spyre_rules": logging.INFO})`` in code).  Per compiled graph:

* ``spyre_rules.plan`` INFO: one line per op -- its decision, the loop levels it
  runs ``(host dim, tiles)``, the rule that decided and the reason; DEBUG: every
  step of its rule trace;
* ``spyre_rules.span_check`` INFO: the span check's result per kernel (an
  overflowing access is also logged on its own, CRITICAL: codegen/span_check.py).

With ``TORCH_TRACE`` set, the graph's ``plan.json``, wrapper source and every
kernel's ``bundle.mlir`` (in ``config.bundle_mlir_form``) are structured-trace
artifacts named ``spyre_rules_plan``, ``spyre_rules_wrapper`` and
``spyre_rules_bundle_<kernel>``, which ``tlparse`` lists under the compile.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["register", "report_graph", "op_line", "kernel_lines"]

plan_log = logging.getLogger("spyre_rules.plan")
span_log = logging.getLogger("spyre_rules.span_check")


def register() -> None:
    """Name the ``spyre_rules`` logger hierarchy in torch._logging (idempotent)."""
    from torch._logging._internal import log_registry, register_log

    if not log_registry.is_log("spyre_rules"):
        register_log("spyre_rules", "spyre_rules")


def _levels(levels: Any) -> str:
    return " ".join(f"({h}, {k})" for h, k in levels or []) or "-"


def op_line(graph: str, record: dict[str, Any]) -> str:
    """``graph <graph>: <op> (<kind>): <decision>, levels <(dim, tiles)...>, rule <rule>: <reason>``."""
    return (f"graph {graph}: {record['op']} ({record.get('kind')}): {record.get('decision')}, "
            f"levels {_levels(record.get('levels'))}, rule {record.get('rule') or '-'}: "
            f"{record.get('reason') or '-'}")


def kernel_lines(graph: str, checks: list[Any], mode: str) -> list[str]:
    """One line per kernel: the span check's status, largest span, limit and ops."""
    if mode == "off":
        return [f"graph {graph}: span check off (config.span_check)"]
    by_kernel: dict[str, list[Any]] = {}
    for check in checks:
        by_kernel.setdefault(check.kernel, []).append(check)
    lines = []
    for kernel, found in by_kernel.items():
        if any(c.overflows for c in found):
            status = "overflow"
        elif any(c.deferred for c in found):
            status = "indirect reads over the limit (deferred)"
        else:
            status = "fits"
        largest = max(c.max_span_bytes for c in found)
        lines.append(f"graph {graph}: kernel {kernel}: span check {status}, largest span {largest} "
                     f"of {found[0].limit} bytes, ops {', '.join(c.op for c in found)}")
    return lines


def report_graph(graph: Any, label: str, state: Any, mode: str) -> None:
    """The log lines and trace artifacts of one compiled graph."""
    if plan_log.isEnabledFor(logging.INFO):
        for record in state.plan.values():
            view = record.as_dict()
            plan_log.info("%s", op_line(label, view))
            if plan_log.isEnabledFor(logging.DEBUG):
                for step in view.get("rule_trace", []):
                    plan_log.debug("graph %s:   %s.%s -> %s: %s", label, step.get("section"),
                                   step.get("rule"), step.get("outcome"), step.get("message"))
    if span_log.isEnabledFor(logging.INFO):
        for line in kernel_lines(label, state.span_checks, mode):
            span_log.info("%s", line)
    _trace_artifacts(graph, label, state)


def _trace_artifacts(graph: Any, label: str, state: Any) -> None:
    from torch._logging import trace_structured

    from spyre_rules.codegen.bundle import generate_bundle
    from spyre_rules.codegen.dump import plan_json

    def artifact(name: str, encoding: str, payload: Any) -> None:
        trace_structured("artifact", metadata_fn=lambda: {"name": name, "encoding": encoding},
                         payload_fn=payload)

    artifact("spyre_rules_plan", "json", lambda: plan_json(graph, state, label))
    artifact("spyre_rules_wrapper", "string", lambda: state.wrapper_source or "")
    for name, specs in state.kernels:
        artifact(f"spyre_rules_bundle_{name}", "string",
                 lambda specs=specs: generate_bundle(specs))
