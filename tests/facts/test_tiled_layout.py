"""FixedTiledLayout: a real Inductor FixedLayout carrying the Spyre device layout (§2.1)."""

from __future__ import annotations

import copy
import pickle
import re

import pytest
import sympy
import torch
from torch._inductor.ir import FixedLayout, FlexibleLayout

from spyre_rules.errors import LayoutError
from spyre_rules.facts.coordinates import device_coordinates
from spyre_rules.facts.stick_layout import (
    DataFormat,
    SpyreTensorLayout,
    generic_stick_layout,
    resize_device_layout,
)
from spyre_rules.facts.tiled_layout import FixedTiledLayout, fixed_tiled_layout

CPU = torch.device("cpu")
c0, c1 = sympy.symbols("c0 c1", integer=True, nonnegative=True)


def make(size=(1024, 4096), **kw):
    return fixed_tiled_layout(CPU, torch.float16, list(size), **kw)


def test_is_a_real_fixed_layout():
    lay = make()
    assert isinstance(lay, FixedLayout)
    assert lay.as_fixed() is lay
    assert lay.size == [1024, 4096]
    assert lay.stride == [4096, 1]
    assert all(isinstance(v, sympy.Integer) for v in [*lay.size, *lay.stride])
    assert lay.offset == 0
    assert lay.dtype is torch.float16 and lay.device == CPU
    assert lay.make_indexer()([c0, c1]) == 4096 * c0 + c1
    assert lay.storage_size() == 1024 * 4096
    assert lay.get_free_symbol_uses() == set()


def test_device_layout_and_defaults():
    lay = make()
    assert lay.device_layout == SpyreTensorLayout((64, 1024, 64), (64, 4096, 1), DataFormat.SEN169_FP16)
    assert lay.allocation == {}
    assert lay.per_tile_fixed is False
    other = make()
    other.allocation["hbm"] = 0x400000000
    assert lay.allocation == {}  # no shared default dict


def test_constructor_matches_fixed_layout_signature():
    stl = generic_stick_layout([4, 150], [150, 1], "float16")
    lay = FixedTiledLayout("cpu", torch.float16, [4, 150], [150, 1], 0, device_layout=stl,
                           allocation={"lx": 128}, per_tile_fixed=True)
    assert lay.device == CPU
    assert lay.allocation == {"lx": 128}
    assert lay.per_tile_fixed is True
    default_stride = FixedTiledLayout(CPU, torch.float16, [4, 150], device_layout=stl)
    assert default_stride.stride == FlexibleLayout.contiguous_strides([4, 150])
    with pytest.raises(LayoutError, match=re.escape("device_layout None is not a SpyreTensorLayout")):
        FixedTiledLayout(CPU, torch.float16, [4, 150], [150, 1], device_layout=None)


def test_str_and_repr_show_device_layout():
    lay = make()
    text = ("FixedTiledLayout('cpu', torch.float16, size=[1024, 4096], stride=[4096, 1], "
            "device_size=[64, 1024, 64], stride_map=[64, 4096, 1], device_dtype=SEN169_FP16)")
    assert str(lay) == text
    assert repr(lay) == text
    lay.allocation["hbm"] = 0
    lay.per_tile_fixed = True
    assert str(lay).endswith("device_dtype=SEN169_FP16, allocation={'hbm': 0}, per_tile_fixed=True)")
    off = make(offset=24)
    assert ", offset=24, device_size=" in str(off)


def test_equality_and_hash():
    a, b = make(), make()
    b.allocation["hbm"] = 4096  # bookkeeping is not part of equality
    b.per_tile_fixed = True
    assert a == b
    assert hash(a) == hash(b)
    plain = FixedLayout(CPU, torch.float16, a.size, a.stride)
    assert a != plain and plain != a  # same host view, but no stick layout
    restick = make(dim_order=[1, 0])
    assert restick.device_layout.device_size == (16, 4096, 64)
    assert restick != a
    assert len({a, b}) == 1


def test_copy_and_pickle_keep_device_layout():
    lay = make()
    lay.allocation["pool"] = 64
    for clone in (copy.deepcopy(lay), pickle.loads(pickle.dumps(lay))):
        assert type(clone) is FixedTiledLayout
        assert clone == lay
        assert clone.allocation == {"pool": 64}
        assert clone.allocation is not lay.allocation


def test_fixed_tiled_layout_helper_variants():
    lm = fixed_tiled_layout(CPU, torch.float16, [1024, 64], [64, 1], dim_order=[1, 0])
    assert (lm.device_layout.device_size, lm.device_layout.stride_map) == ((16, 64, 64), (4096, 1, 64))
    fp32 = fixed_tiled_layout(CPU, torch.float32, [1024, 4096])
    assert fp32.device_layout.device_size == (128, 1024, 32)
    scalar = fixed_tiled_layout(CPU, torch.float16, [])
    assert scalar.device_layout.device_size == (1, 64)
    sym = fixed_tiled_layout(CPU, torch.float16, [sympy.Integer(4), sympy.Integer(150)])
    assert sym.device_layout.device_size == (3, 4, 64)


def test_fixed_tiled_layout_refuses_symbolic_and_bad_dtype():
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    with pytest.raises(LayoutError, match=re.escape(
        "size[1] = s0 is not a static integer (in size [4, s0]); a Spyre stick layout needs concrete sizes"
    )):
        fixed_tiled_layout(CPU, torch.float16, [4, s0])
    with pytest.raises(LayoutError, match=re.escape("unsupported dtype torch.float64")):
        fixed_tiled_layout(CPU, torch.float64, [4, 64])


def test_device_coordinates_of_tiled_layout_and_resize():
    lay = make()
    assert device_coordinates(lay, 4096 * c0 + c1, {c0: 1024, c1: 4096}) == [
        sympy.floor(c1 / 64), c0, sympy.Mod(c1, 64)]
    tile = resize_device_layout(lay.device_layout, [1024, 4096], [512, 1024])
    per_tile = FixedTiledLayout(CPU, torch.float16, [512, 1024], [1024, 1], device_layout=tile)
    assert per_tile.device_layout.device_size == (16, 512, 64)
    assert per_tile.storage_size() == 512 * 1024


def test_inductor_accepts_it_on_a_lowered_buffer():
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V
    from torch.fx.experimental.proxy_tensor import make_fx

    x = torch.randn(32, 128, dtype=torch.float16)
    graph = GraphLowering(make_fx(lambda t: t + 1)(x))
    with V.set_graph_handler(graph):
        graph.run(x)
        (op,) = graph.operations
        host = op.layout
        op.layout = fixed_tiled_layout(host.device, host.dtype, host.size, host.stride)
        assert op.get_layout() is op.layout
        assert op.layout.is_contiguous()
        assert op.layout.is_stride_ordered([1, 0])
        assert op.get_size() == [32, 128] and op.get_stride() == [128, 1]
        (write,) = op.get_read_writes().writes
        ranges = dict(zip(write.var_names, write.size))
        d0, d1 = write.var_names
        assert device_coordinates(op.get_layout(), write.index, ranges) == [
            sympy.floor(d1 / 64), d0, sympy.Mod(d1, 64)]
        assert op.layout.device_layout.device_size == (2, 32, 64)


def test_facade_lazy_exports():
    import spyre_rules.layout as L

    assert L.FixedTiledLayout is FixedTiledLayout
    assert L.fixed_tiled_layout is fixed_tiled_layout
    assert "FixedTiledLayout" in dir(L)
