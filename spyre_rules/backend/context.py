"""The context manager that turns stock Inductor into the spyre-rules pipeline.

Everything here is a *temporary* change to process-global Inductor state, made
only for the duration of one ``compile_fx`` call and undone in ``finally`` (also
when compilation raises).  Hook points and why each is needed are described in
``docs/inductor_integration.md`` §1 and §4 (verified on torch 2.13):

* Inductor config: no reduction splitting/unrolling (we need one Reduction per
  aten reduction), no buffer reuse (every buffer gets its own device
  allocation), no FX graph cache (a cache hit skips lowering and all our hooks),
  the post-fusion seam ``_post_fusion_custom_pass``, the post-grad graph pass
  (``post_grad.py``: complex values as real parts, slice_scatter as cat), and no
  fusion pairs tried (our Scheduling fuses nothing; trying cost minutes on big graphs).
* ``Loops.has_large_inner_fn -> True``: every Pointwise is realized, i.e. one
  ComputedBuffer per aten op instead of inlined chains.
* ``SizeVarAllocator._simplify_loops_impl`` no-op: Inductor must not merge
  contiguous loop dims (one loop per tensor dim keeps iteration spaces aligned
  with host dims, which layouts and tiling reason about).
* ``GraphLowering._update_scheduler``: the pre-scheduling seam (our passes run
  on ``graph.operations`` before the Scheduler wraps them).
* ``lowerings[aten.mm/bmm/addmm/baddbmm]`` -> ``batchmatmul`` Reductions.
* ``lowerings[aten.cumsum/cumprod]`` -> masked sum/prod Reductions (``scan.py``).
* ``ComputedBuffer.make_loader``: a buffer that reads nothing (a fill) made
  inside a ``spyre_hint`` block is loaded, not inlined into its readers, so the
  hint's loop runs it (``hinted_fills.py``).
* ``lowerings[spyre_rules.name_dims]``: ``name_tensor_dims`` inside compiled code
  records dim names on a buffer (``named_dims.py``).
* SDPA decomposed into matmuls, mask and softmax; Inductor's attention fusion
  kept off explicit attention (``attention.py``).
* ``GraphLowering.call_function`` / ``run_node`` and ``Scheduler.codegen_extern_call``:
  host steps (``host_steps.py``, ``host_codegen.py``) -- a node the host plan or
  the support table puts on the host lowers to a FallbackKernel, every op is
  tagged with the aten node that created it, and a host step's wrapper call is
  framed by its device transfers.
* The "cpu" codegen registry entry -> our Scheduling + wrapper codegen.

The state is process-global and not thread-safe, so compilations inside the
context are serialised with a lock.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Iterator
from typing import Any

import torch
from torch._inductor import config as inductor_config
from torch._inductor import ir
from torch._inductor.codegen import common as codegen_common
from torch._inductor.graph import GraphLowering
from torch._inductor.sizevars import SizeVarAllocator

from torch._inductor.scheduler import Scheduler

from spyre_rules.backend import (
    attention, concat, depthwise_conv, eye, grouped_mm, hinted_fills, histogram,
    host_steps, matmul, named_dims, post_grad, pre_scheduling, precision_casts, ranking, scan,
    softmax_values, triangular_solve,
)
from spyre_rules.backend.host_codegen import make_codegen_extern_call
from spyre_rules.backend.post_fusion import RulesPostFusionPass

__all__ = ["spyre_rules_context", "inductor_config_patches", "decomposition_table"]

_LOCK = threading.RLock()


def inductor_config_patches() -> dict[str, Any]:
    """Inductor settings the pipeline relies on (see module docstring)."""
    return {
        "split_reductions": False,
        "unroll_reductions_threshold": 1,
        "allow_buffer_reuse": False,
        "permute_fusion": False,
        "fx_graph_cache": False,
        "force_disable_caches": True,
        "cpp_wrapper": False,
        "freezing": False,
        # Padding would change host strides of buffers behind our back.
        "comprehensive_padding": False,
        "_post_fusion_custom_pass": RulesPostFusionPass(),
        # complex values as real parts, slice_scatter as a concatenation (post_grad.py)
        "post_grad_custom_pre_pass": post_grad.RulesPostGradPass(),
        # Our Scheduling never fuses (RulesScheduling.can_fuse_* is False, grouping is the
        # post-fusion pass's), yet Inductor's fuse_nodes asks can_fuse of up to 64 later
        # readers of every buffer a node reads, each scoring shared memory first: 147 s of
        # RWKV's 7000-op graph for no fusion.  0 pairs: the same nodes, none of that cost.
        "max_fusion_buffer_group_pairwise_attempts": 0,
    }


def decomposition_table() -> dict[Any, Any]:
    """Inductor's decompositions minus the matmul family, plus fused attention's.

    On CPU Inductor decomposes small mm/bmm/addmm into mul + sum before lowering;
    removing them makes every matmul reach our lowering (as batchmatmul).  The
    fused CPU attention kernel is decomposed into ops we lower (attention.py), a
    constant pad into a concatenation (concat.py), an identity matrix from int32
    ranges (eye.py), histc into a counting reduction (histogram.py), a depthwise
    conv1d into shifted slices (depthwise_conv.py) and a triangular solve into
    matmuls by doubling (triangular_solve.py).
    """
    from torch._inductor.decomposition import select_decomp_table

    table = dict(select_decomp_table())
    for packet in matmul.MATMUL_PACKETS:
        for overload in packet.overloads():
            table.pop(getattr(packet, overload), None)
    table.update(attention.attention_decompositions())
    table.update(concat.pad_decompositions())
    table.update(eye.eye_decompositions())  # int32 ranges, not uint8 (Kimi-Linear)
    # experts and state-space layers (issue 41): counting experts, the Mamba2 conv1d
    table.update(histogram.histogram_decompositions())
    table.update(depthwise_conv.depthwise_conv_decompositions())
    # the gated delta rule's chunk solve (Qwen3-Next and kin)
    table.update(triangular_solve.triangular_solve_decompositions())
    return table


def _always_large_inner_fn(self: Any, threshold: int | None = None) -> bool:
    return True


def _no_loop_merging(self: Any, index_vars: Any, sizes: Any, index_formulas: Any) -> Any:
    # Keep every loop (no merging, no dropping of size-1 dims).
    sizes = list(map(self.simplify, sizes))

    def reindex(index: Any) -> Any:
        return list(index)

    def prune(index: Any) -> Any:
        return list(index)

    return sizes, reindex, prune


# Temporary Inductor cache dirs created while our context is active (see below).
_TEMP_CACHE_DIRS: list[str] = []


def _make_update_scheduler(original: Any) -> Any:
    def _update_scheduler(self: GraphLowering) -> None:
        # With force_disable_caches Inductor compiles into a fresh temp dir that it
        # never deletes (compile_fx.with_fresh_cache_if_config); remember it so the
        # context can remove it once the wrapper module is loaded.
        cache_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        if cache_dir and cache_dir not in _TEMP_CACHE_DIRS:
            _TEMP_CACHE_DIRS.append(cache_dir)
        pre_scheduling.run_pre_scheduling_passes(self)
        original(self)

    return _update_scheduler


@contextlib.contextmanager
def _temp_cache_dirs_removed() -> Iterator[None]:
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    try:
        yield
    finally:
        root = os.path.realpath(cache_dir())
        while _TEMP_CACHE_DIRS:
            path = os.path.realpath(_TEMP_CACHE_DIRS.pop())
            # Only fresh temp dirs *inside* the default cache root, never the root itself.
            if os.path.dirname(path) == root:
                shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _patched_attr(obj: Any, name: str, value: Any) -> Iterator[None]:
    had = name in vars(obj)
    old = vars(obj).get(name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        if had:
            setattr(obj, name, old)
        else:
            delattr(obj, name)


@contextlib.contextmanager
def _cpu_codegen_registered() -> Iterator[None]:
    from spyre_rules.backend.scheduling import RulesScheduling
    from spyre_rules.backend.wrapper import RulesWrapperCodegen

    codegen_common.init_backend_registration()
    saved = (
        codegen_common.device_codegens.get("cpu"),
        codegen_common.custom_backend_passes.get("cpu"),
        codegen_common.custom_backend_codegen_configs.get("cpu"),
    )
    codegen_common.register_backend_for_device("cpu", RulesScheduling, RulesWrapperCodegen)
    try:
        yield
    finally:
        codegen, passes, cfg = saved
        if codegen is None:
            codegen_common.device_codegens.pop("cpu", None)
        else:
            codegen_common.device_codegens["cpu"] = codegen
        codegen_common.custom_backend_passes["cpu"] = passes
        codegen_common.custom_backend_codegen_configs["cpu"] = cfg


@contextlib.contextmanager
def spyre_rules_context() -> Iterator[None]:
    """Install every hook for one compilation; restore all of it afterwards."""
    with _LOCK, contextlib.ExitStack() as stack:
        stack.enter_context(_temp_cache_dirs_removed())
        stack.enter_context(inductor_config.patch(inductor_config_patches()))
        stack.enter_context(
            torch._functorch.config.patch({"enable_autograd_cache": False})
        )
        stack.enter_context(_patched_attr(ir.Loops, "has_large_inner_fn", _always_large_inner_fn))
        stack.enter_context(
            _patched_attr(SizeVarAllocator, "_simplify_loops_impl", _no_loop_merging)
        )
        stack.enter_context(
            _patched_attr(
                GraphLowering,
                "_update_scheduler",
                _make_update_scheduler(GraphLowering._update_scheduler),
            )
        )
        stack.enter_context(
            _patched_attr(GraphLowering, "call_function",
                          host_steps.make_call_function(GraphLowering.call_function))
        )
        stack.enter_context(
            _patched_attr(GraphLowering, "run_node",
                          host_steps.make_run_node(GraphLowering.run_node))
        )
        stack.enter_context(
            _patched_attr(Scheduler, "codegen_extern_call",
                          make_codegen_extern_call(Scheduler.codegen_extern_call))
        )
        stack.enter_context(matmul.batchmatmul_lowerings())
        stack.enter_context(softmax_values.softmax_values_lowerings())
        stack.enter_context(scan.scan_lowerings())
        stack.enter_context(ranking.ranking_lowerings())
        stack.enter_context(grouped_mm.grouped_mm_lowerings())
        stack.enter_context(named_dims.name_dims_lowerings())
        stack.enter_context(hinted_fills.hinted_fills_kept())
        stack.enter_context(attention.explicit_attention_kept())
        stack.enter_context(precision_casts.lossy_casts_kept())
        stack.enter_context(_cpu_codegen_registered())
        yield
