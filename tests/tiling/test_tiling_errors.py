"""Clear errors of coarse tiling (exact messages), raised before anything is allocated."""

from __future__ import annotations

import os

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import types  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from tiling_helpers import explicit_groups, run_spyre  # noqa: E402

from spyre_rules.backend.capture import capture_operations  # noqa: E402
from spyre_rules.hints import HintError, clear_tensor_dims, declare_tensor_dim, name_tensor_dims, spyre_hint  # noqa: E402
from spyre_rules.ir.errors import find_cause  # noqa: E402
from spyre_rules.ir.loop_stamp import LoopStamp, loop_group_id, loop_stamp  # noqa: E402
from spyre_rules.passes.coarse_tile import CoarseTileError  # noqa: E402
from spyre_rules.passes.tiling_propagation import tile_groups  # noqa: E402
from spyre_rules.scheduler import LoopGroupError, build_loop_scheduler_nodes  # noqa: E402


def test_hint_on_non_dividing_dim():
    clear_tensor_dims()
    declare_tensor_dim("A", 6)
    declare_tensor_dim("B", 64)
    a = name_tensor_dims(torch.randn(6, 64), ["A", "B"])

    def f(a):
        with spyre_hint(slices={"A": 4}):
            return a + 1.0

    with pytest.raises(Exception) as info:
        run_spyre(f, a)
    err = find_cause(info.value, HintError)
    assert str(err) == (
        "spyre_hint(slices={'A': 4}): count 4 does not divide dim 'A' (dim 0 of size 6) of "
        "buf0 (aten ops: add.Tensor)"
    )
    clear_tensor_dims()


def test_read_of_another_iterations_tile_is_refused_at_compile_time():
    """An explicit group tiling a transposed reader on the dim its producer does not
    tile: each iteration would read rows of tiles other iterations write."""
    x = torch.randn(64, 64)

    def f(x):
        y = x + 1.0
        return y.t() * 2.0

    with explicit_groups(([0, 1, 2], 2, [0])), pytest.raises(Exception) as info:
        run_spyre(f, x)
    err = find_cause(info.value, CoarseTileError)
    assert str(err) == (
        "coarse_tile: buf1 reads buf2 inside their loop at index t0 + 64*t1 of buf2's full "
        "buffer (host size [64, 64], per tile [32, 64]; t<i> walks dim i of one buf1 tile): "
        "host dim 0 (t1) takes values 0..63 over one tile of buf1, outside the 32 the tile holds"
    )


def test_non_contiguous_group():
    ops = capture_ops(lambda a: ((a + 1.0) * 2.0) - 3.0, torch.randn(8, 64))
    graph = ops.graphs[0]
    before = [op.get_name() for op in graph.operations]
    with ops.graph_context(0), pytest.raises(CoarseTileError) as info:
        tile_groups(graph, [([ops[0], ops[2]], 2)])
    assert str(info.value) == (
        "coarse_tile: group 0 ops ['buf0', 'buf2'] are not a contiguous slice of the "
        "operations (['buf1'] sit between them)"
    )
    assert [op.get_name() for op in graph.operations] == before
    assert all(loop_group_id(op) is None for op in ops)


def test_argmax_tiled_on_two_reduction_dims():
    ops = capture_ops(lambda x: x.argmax(), torch.randn(8, 64))
    graph = ops.graphs[0]
    with ops.graph_context(0), pytest.raises(CoarseTileError) as info:
        tile_groups(graph, [([ops[0]], [(2, [0]), (2, [1])])])
    assert str(info.value) == (
        "coarse_tile: group 0 level 1: buf0 (aten ops: argmax.default) (argmax) tiles its "
        "reduction dim 1 inside a loop over its reduction dim 0; an index reduction accumulates "
        "over one tiled reduction dim"
    )
    assert list(ops[0].data.ranges) == [] and loop_stamp(ops[0]) is None


def _node(name, gid, count):
    stamp = None if gid is None else LoopStamp(gid, count, [[]] * len(gid), [[]] * len(gid))
    op = types.SimpleNamespace(loop_stamp=stamp)
    node = types.SimpleNamespace(node=op, get_name=lambda: name)
    node.get_nodes = lambda: [node]
    return node


def test_scheduler_rejects_non_contiguous_loop_group():
    nodes = [_node("buf0", (0,), [2]), _node("buf1", None, None), _node("buf2", (0,), [2])]
    with pytest.raises(LoopGroupError) as info:
        build_loop_scheduler_nodes(nodes)
    assert str(info.value) == (
        "build_loop_scheduler_nodes: loop group (0,) is not contiguous: ['buf0'] and "
        "['buf2'] are separated by ['buf1']"
    )


def test_scheduler_rejects_count_disagreement():
    nodes = [_node("buf0", (0,), [2]), _node("buf1", (0,), [4])]
    with pytest.raises(LoopGroupError) as info:
        build_loop_scheduler_nodes(nodes)
    assert str(info.value) == (
        "build_loop_scheduler_nodes: loop group (0,) members disagree on the loop count at "
        "depth 0: ['buf0'] count 2; ['buf1'] count 4"
    )


def capture_ops(fn, *xs):
    torch._dynamo.reset()
    return capture_operations(fn, *xs)
