"""The ``spyre_rules`` torch.compile backend.

``spyre_rules_backend(gm, example_inputs)`` lowers the graph with Inductor's
``compile_fx`` inside ``spyre_rules_context`` (our hooks, restored afterwards)
and returns the compiled wrapper, whose kernels execute the generated Spyre
program on the CPU executor.

An op without a Spyre lowering follows ``config.fallback``: ``"eager"``
partitions the graph -- the op runs on the host as its own step inside the
compiled program (backend/host_steps.py), the rest stays on the Spyre program,
and one warning names every host op and why; ``"error"`` raises
``BackendCompileError`` naming the op.  A graph we cannot compile at all -- it
needs autograd, or the tiling policy refuses it -- is run eagerly whole under
``"eager"`` (a warning naming the reason) and raises under ``"error"``.  Nothing
falls back silently; any other error propagates unchanged.

A graph with symbolic sizes compiles one static program per concrete shape, at
the calls (backend/specialize.py).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from spyre_rules import config
from spyre_rules.ir.errors import (
    BackendCompileError,
    UnsupportedGraph,
    find_cause,
    find_unsupported,
)

__all__ = ["spyre_rules_backend", "precheck", "fallback"]


def precheck(example_inputs: Sequence[Any]) -> str | None:
    """Why the graph cannot be compiled before lowering it (None: go ahead)."""
    for i, value in enumerate(example_inputs):
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return f"input {i} is a symbolic scalar; dynamic shapes are unsupported"
        if isinstance(value, torch.Tensor):
            if torch.is_grad_enabled() and value.requires_grad:
                return (
                    f"the graph needs autograd (input {i} requires grad with grad mode "
                    "enabled); spyre_rules compiles inference graphs only -- run under "
                    "torch.no_grad() or torch.inference_mode()"
                )
            if any(isinstance(s, torch.SymInt) for s in value.shape):
                return f"input {i} has a symbolic shape; dynamic shapes are unsupported"
    return None


def fallback(gm: torch.fx.GraphModule, reason: str, cause: BaseException | None = None) -> Callable:
    if config.fallback == "error":
        raise BackendCompileError(f"spyre_rules cannot compile this graph: {reason}") from cause
    warnings.warn(
        f"spyre_rules: running this graph eagerly instead of on the Spyre program: {reason}",
        stacklevel=2,
    )
    return gm.forward


#: Compilations of one graph at most: each retry moves at least one more aten node
#: to the host, and the seam names all it finds at once, so two or three suffice.
MAX_PARTITION_ATTEMPTS = 8


def rewrite_before_inductor(gm: torch.fx.GraphModule) -> None:
    """The Dynamo-graph rewrites every compile runs before ``compile_fx``, in order: the
    paged attention (its matmuls before keep_matmul_batch rewrites them), grouped-query
    heads unrepeated (SDPA, then products written out), einsum's and matmul's batch kept."""
    from spyre_rules.backend.batch_matmul import keep_matmul_batch
    from spyre_rules.backend.einsum_batch import keep_einsum_batch
    from spyre_rules.backend.grouped_attention import grouped_kv_heads, grouped_kv_products
    from spyre_rules.backend.paged_attention_rewrite import rewrite_gathered_page_attention

    rewrite_gathered_page_attention(gm)
    grouped_kv_heads(gm)
    grouped_kv_products(gm)
    keep_einsum_batch(gm)
    keep_matmul_batch(gm)


def spyre_rules_backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
    from torch._inductor.compile_fx import compile_fx

    from spyre_rules.backend.context import decomposition_table, spyre_rules_context
    from spyre_rules.backend.host_steps import HostPlan, HostStepsNeeded, host_plan
    from spyre_rules.codegen.in_allocation import AllocationBoundsError

    from spyre_rules.backend import meta_device
    from spyre_rules.backend.specialize import StaticCompile, is_symbolic, specializing_program

    if is_symbolic(example_inputs):
        from spyre_rules.backend.regions import has_regions, inline_regions

        if has_regions(gm):
            inline_regions(gm)  # one program per shape, of the whole graph
        # one static program per concrete shape, compiled at the call (backend/specialize.py)
        return specializing_program(gm, example_inputs, spyre_rules_backend)

    # A meta-device graph compiles as the CPU graph it stands for; its callable
    # returns meta outputs made from shapes (nothing runs, not even a fallback).
    meta_outputs = meta_device.outputs_from_shapes(gm) if meta_device.has_meta_inputs(
        example_inputs) else None

    def fallback_or_meta(reason: str, cause: BaseException | None = None) -> Callable:
        run = fallback(gm, reason, cause)
        return run if meta_outputs is None else meta_outputs

    reason = precheck(example_inputs)
    if reason is not None:
        return fallback_or_meta(reason)
    from spyre_rules.backend import regions

    if regions.has_regions(gm):
        if regions.splittable(gm):
            # identical layers marked with torch.compiler.nested_compile_region: each
            # subgraph compiles once and every call of it runs that program
            return regions.RegionProgram(gm, spyre_rules_backend)
        regions.inline_regions(gm)
    static = StaticCompile(gm, example_inputs)
    from spyre_rules.hints import bind_input_dim_names

    rewrite_before_inductor(gm)
    compile_inputs = (example_inputs if meta_outputs is None
                      else meta_device.retarget(gm, example_inputs))

    # fallback='eager' partitions: ops without a Spyre lowering run as host steps.
    plan = HostPlan() if config.fallback == "eager" else None
    for _ in range(MAX_PARTITION_ATTEMPTS):
        try:
            quiet = _quiet_inductor_error_log() if plan is not None else contextlib.nullcontext()
            with spyre_rules_context(), host_plan(plan), quiet, \
                    bind_input_dim_names(example_inputs):
                compiled = compile_fx(gm, compile_inputs, decompositions=decomposition_table())
        except Exception as exc:  # noqa: BLE001 - only our own refusals become fallbacks
            retry = find_cause(exc, HostStepsNeeded)
            if plan is not None and retry is not None and set(retry.nodes) - set(plan.nodes):
                plan.nodes.update({n: r for n, r in retry.nodes.items() if n not in plan.nodes})
                continue
            # a refusal, or a generated access the allocation check could not prove
            # inside its tensor: never run, never a crash of the default path
            unsupported = find_unsupported(exc) or find_cause(exc, AllocationBoundsError)
            if unsupported is None:
                raise
            return fallback_or_meta(str(unsupported), unsupported)
        _warn_host_steps(plan)
        if meta_outputs is not None:
            return meta_outputs
        compiled = _resident_across_calls(compiled)
        static.remember(compiled)
        return compiled
    return fallback_or_meta(f"no partition after {MAX_PARTITION_ATTEMPTS} attempts: "
                        f"{sorted(plan.nodes) if plan is not None else []}")


def _resident_across_calls(compiled: Callable) -> Callable:
    """``compiled`` after ``check_resident_inputs``: an input the program writes in place
    (a KV cache) stays resident from call to call although AOT autograd's runtime
    wrapper bumps its version counter at each call (executor/resident.py)."""
    from spyre_rules.executor.runtime import check_resident_inputs

    def run(*args: Any) -> Any:
        check_resident_inputs()
        return compiled(*args)

    run._boxed_call = getattr(compiled, "_boxed_call", False)  # type: ignore[attr-defined]
    return run


def _warn_host_steps(plan: Any) -> None:
    from spyre_rules.backend.host_steps import host_warning

    if plan is not None and plan.steps:
        warnings.warn(host_warning(plan.steps), stacklevel=3)


def compile_for_capture(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> None:
    """Lower ``gm`` up to the pre-scheduling seam (used by capture_operations)."""
    from torch._inductor.compile_fx import compile_fx

    from spyre_rules.backend import meta_device
    from spyre_rules.backend.context import decomposition_table, spyre_rules_context
    from spyre_rules.backend.pre_scheduling import CaptureComplete

    reason = precheck(example_inputs)
    if reason is not None:
        raise UnsupportedGraph(reason)
    from spyre_rules.hints import bind_input_dim_names

    from spyre_rules.backend.regions import has_regions, inline_regions

    if has_regions(gm):
        inline_regions(gm)  # a capture stops at one seam: the whole graph's
    rewrite_before_inductor(gm)
    if meta_device.has_meta_inputs(example_inputs):
        compile_inputs = meta_device.retarget(gm, example_inputs)
    else:
        compile_inputs = list(example_inputs)

    try:
        with spyre_rules_context(), _quiet_inductor_error_log(), \
                bind_input_dim_names(example_inputs):
            compile_fx(gm, compile_inputs, decompositions=decomposition_table())
    except Exception as exc:  # noqa: BLE001
        if find_cause(exc, CaptureComplete) is not None:
            return
        unsupported = find_unsupported(exc)
        if unsupported is not None:
            raise unsupported from None
        raise
    raise RuntimeError("compile_fx finished without reaching the pre-scheduling seam")


@contextlib.contextmanager
def _quiet_inductor_error_log():
    # Stopping at the seam is the normal end of a capture (and a partition retry is
    # the normal end of an attempt); Inductor would log "on error, temporary cache
    # dir kept" for it (the context removes that dir).
    logger = logging.getLogger("torch._inductor.utils")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
