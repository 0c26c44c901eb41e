"""The hook points exist in this torch, and the context restores every one of them."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.backends import common as dynamo_common
from torch._inductor import config as inductor_config
from torch._inductor import ir
from torch._inductor import lowering as L
from torch._inductor.codegen import common as codegen_common
from torch._inductor.graph import GraphLowering
from torch._inductor.sizevars import SizeVarAllocator

import spyre_rules  # noqa: F401  (registers the backend)
from spyre_rules.backend.context import decomposition_table, spyre_rules_context
from spyre_rules.backend.post_fusion import RulesPostFusionPass
from spyre_rules.backend.scheduling import RulesScheduling

aten = torch.ops.aten


def _snapshot():
    codegen_common.init_backend_registration()
    return {
        "update_scheduler": GraphLowering.__dict__["_update_scheduler"],
        "simplify": SizeVarAllocator.__dict__["_simplify_loops_impl"],
        "large_inner_fn": ir.Loops.__dict__["has_large_inner_fn"],
        "make_loader": ir.ComputedBuffer.__dict__["make_loader"],
        "mm": L.lowerings[aten.mm.default],
        "addmm": L.lowerings[aten.addmm.default],
        "cpu": codegen_common.device_codegens["cpu"],
        "split_reductions": inductor_config.split_reductions,
        "post_fusion": inductor_config._post_fusion_custom_pass,
        # left alone: compile_fx keeps inference input mutations in the graph (in_place.py)
        "aot_autograd": dynamo_common.aot_autograd,
        "cumsum": L.lowerings[aten.cumsum.default],
        # issue 41: the router's topk, the experts' sort, their grouped matmuls
        "topk": L.lowerings[aten.topk.default],
        "sort": L.lowerings[aten.sort.stable],
        "grouped_mm": L.lowerings[aten._grouped_mm.default],
    }


def test_hook_points_exist_in_installed_torch():
    # docs/inductor_integration.md pitfall 13: these are internals; fail loudly if renamed.
    assert callable(GraphLowering._update_scheduler)
    assert callable(SizeVarAllocator._simplify_loops_impl)
    assert callable(ir.Loops.has_large_inner_fn)
    assert "make_loader" in vars(ir.ComputedBuffer)  # inlines buffers that read nothing
    assert hasattr(inductor_config, "_post_fusion_custom_pass")
    assert callable(codegen_common.register_backend_for_device)
    from spyre_rules.backend import precision_casts

    assert precision_casts._guard() == 1  # the joint-graph pass folding cast chains


def test_context_installs_and_restores_everything():
    before = _snapshot()
    with spyre_rules_context():
        inside = _snapshot()
        assert inductor_config.split_reductions is False
        assert inductor_config.unroll_reductions_threshold == 1
        assert inductor_config.fx_graph_cache is False
        assert isinstance(inductor_config._post_fusion_custom_pass, RulesPostFusionPass)
        assert codegen_common.get_scheduling_for_device("cpu") is RulesScheduling
        assert inside["mm"] is not before["mm"]
        assert inside["cumsum"] is not before["cumsum"]
        assert all(inside[op] is not before[op] for op in ("topk", "sort", "grouped_mm"))
        assert inside["aot_autograd"] is before["aot_autograd"]
        assert ir.Loops.has_large_inner_fn(None) is True
        assert inside["make_loader"] is not before["make_loader"]
    assert _snapshot() == before


def test_context_restores_after_an_error():
    before = _snapshot()
    with pytest.raises(RuntimeError, match="boom"):
        with spyre_rules_context():
            raise RuntimeError("boom")
    assert _snapshot() == before


def test_decomposition_table_counts_histc_and_slices_a_depthwise_conv():
    from spyre_rules.backend import depthwise_conv, histogram

    table = decomposition_table()
    assert table[aten.histc.default] is histogram._histc
    assert table[aten.convolution.default] is depthwise_conv._convolution


def test_decomposition_table_keeps_matmuls_for_our_lowering():
    table = decomposition_table()
    for op in (aten.mm.default, aten.bmm.default, aten.addmm.default):
        assert op not in table


def test_backend_features_are_plain():
    # Consulted during lowering: no tuple/single-element reductions, scans or sorts.
    assert list(RulesScheduling(None).get_backend_features(torch.device("cpu"))) == []


def test_post_fusion_pass_is_stateless_and_keyed():
    p = RulesPostFusionPass()
    assert vars(p) == {}
    assert isinstance(p.uuid(), str) and len(p.uuid()) == 64
    assert p([]) == []


def test_backend_is_registered_by_name():
    from torch._dynamo.backends.registry import lookup_backend

    assert callable(lookup_backend("spyre_rules"))


def test_pre_scheduling_and_post_fusion_seams_run_registered_passes():
    from spyre_helpers import run_spyre

    from spyre_rules.backend import pass_lists
    from spyre_rules.ir.graph_state import graph_state

    seen_ops, seen_nodes = [], []

    def pre_pass(graph):
        state = graph_state(graph)
        for op in graph.operations:
            seen_ops.append(op.get_name())
            # Every op already has its layout when the seam's passes run.
            assert op.get_name() in state.layouts
            assert state.plan[op.get_name()].op == op.get_name()  # and its plan record

    def post_pass(nodes):
        seen_nodes.extend(n.node.get_name() for n in nodes)
        return nodes

    pass_lists.register_pre_scheduling_pass(pre_pass)
    pass_lists.register_post_fusion_pass(post_pass)
    try:
        x = torch.randn(4, 37)
        compiled = run_spyre(lambda x: torch.softmax(x, -1), x)
    finally:
        pass_lists.PRE_SCHEDULING_PASSES.remove(pre_pass)
        pass_lists.POST_FUSION_PASSES.remove(post_pass)
    assert len(seen_ops) == 5 and seen_nodes == seen_ops  # no fusion: one node per op
    torch.testing.assert_close(compiled.output, torch.softmax(x, -1))
