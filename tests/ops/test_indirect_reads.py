"""embedding / index_select / gather: indirect reads through the Spyre program.

The planner skips them (rules/planner.rules, ``indirect_reads``); codegen emits
an OpSpec whose gathered TensorArg carries an ``IndirectIndex`` (the symbol its
device coordinates use, the indexed extent, the arg the index is loaded from);
the executor binds the symbol to the loaded values and refuses any index outside
the indexed dim, naming the op.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from ops_helpers import DTYPES, check, fresh_dims, named, randint, randn, run_spyre
from spyre_rules import config
from spyre_rules.program.op_spec import IndirectIndex
from spyre_rules.executor import IndirectIndexError


def embedding(ids, w):
    return F.embedding(ids, w)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_embedding_equals_eager_and_is_an_indirect_arg(dtype):
    ids, w = randint(0, 50, 2, 16), randn(50, 64, dtype=dtype)
    compiled = check(embedding, ids, w)
    (spec,) = compiled.op_specs()
    assert spec.op == "embedding"
    index_arg, table, out = spec.args
    assert index_arg.indirect == [] and out.indirect == []
    (ind,) = table.indirect
    assert ind == IndirectIndex(ind.symbol, 50, 0)  # its values are loaded through args[0]
    assert str(ind.symbol) == "ind0" and ind.symbol in table.device_coordinates[1].free_symbols
    entry = next(e for e in spec.op_info["program"] if e["op"] == "indirect_index")
    assert entry == {"op": "indirect_index", "in": [0], "symbol": "ind0", "size": 50, "wrap_neg": False}


def test_index_select_both_dims():
    x = randn(7, 40)
    check(lambda x, i: torch.index_select(x, 0, i), x, torch.tensor([6, 0, 3, 3]))
    check(lambda x, i: torch.index_select(x, 1, i), x, torch.tensor([39, 1, 2]))


def test_gather_and_negative_index_wraps():
    x = randn(4, 37, dtype=torch.float16)
    check(lambda x, i: torch.gather(x, 1, i), x, randint(0, 37, 4, 9))
    # x[idx] counts negative indices from the end (wrap_neg), like eager
    compiled = check(lambda x, i: x[i] * 2, x, torch.tensor([-1, 0, -4, 2]))
    entry = next(e for s in compiled.op_specs() for e in s.op_info["program"]
                 if e["op"] == "indirect_index")
    assert entry["wrap_neg"] is True and entry["size"] == 4


def test_out_of_range_index_is_an_error_naming_the_op():
    ids, w = randint(0, 50, 2, 16), randn(50, 64)
    ids[1, 3] = 50
    with pytest.raises(IndirectIndexError) as err:
        run_spyre(embedding, ids, w)
    assert str(err.value) == (
        "op sdsc_embedding_0/embedding: indirect index ind0 = 50 at c0=1, c1=3 is outside "
        "[0, 50) of the dim it indexes (indexing tensor arg1_1; read from tensor arg0_1)"
    )


def test_negative_index_beyond_the_dim_is_an_error():
    with pytest.raises(IndirectIndexError, match=r"indirect index ind0 = -5 at c0=1 is outside \[0, 4\)"):
        run_spyre(lambda x, i: x[i] + 1, randn(4, 37), torch.tensor([0, -5]))


def test_artifacts_show_the_indirect_arg(tmp_path):
    ids, w = randint(0, 50, 2, 16), randn(50, 64)
    with config.patch(dump_dir=str(tmp_path), ignore_span_overflow_hints=False):
        run_spyre(embedding, ids, w)
    (graph,) = tmp_path.iterdir()
    (kernel,) = [p for p in graph.iterdir() if p.is_dir()]
    sdsc = json.loads((kernel / "sdsc_0.json").read_text())
    table = sdsc["args"][1]
    assert table["device_coordinates"] == ["floor(c2/32)", "ind0", "Mod(c2, 32)"]  # fp32: 2 sticks
    assert table["indirect"] == [{"symbol": "ind0", "size": 50, "source_arg": 0}]
    assert "indirect" not in sdsc["args"][0]
    assert 'sdsc_execute () {sdsc_filename="sdsc_0.json"}' in (kernel / "bundle.mlir").read_text()
    assert "indirect=[(sympify('ind0'), 50, 0)]," in (graph / "wrapper.py").read_text()
    (op,) = json.loads((graph / "plan.json").read_text())["ops"]
    assert op["span_check"]["status"] == "fits"
    # the planner measures the gathered read (every row for ind0) and finds nothing to tile
    assert (op["decision"], op["rule"]) == ("no plan", "candidates.none")


def test_span_check_bounds_an_indirect_coordinate_over_the_whole_dim():
    from spyre_rules.codegen.span_check import check_kernel

    ids, w = randint(0, 50, 2, 16), randn(50, 64)
    compiled = run_spyre(embedding, ids, w)
    (op,) = check_kernel("k", compiled.kernels[0].specs, 1 << 28)
    table = [d for d in op.dims if d.tensor == "arg1_1"]
    # device [2, 50, 32] (fp32: two sticks per row); ind0 may take any of the 50 rows
    assert [(d.device_dim, d.span_bytes, d.symbols) for d in table] == [
        (0, 2 * 50 * 128, ("c2",)), (1, 50 * 128, ("ind0",))]


@pytest.mark.parametrize("unroll", [False, True])
@pytest.mark.parametrize("dim", ["S", "H"])
def test_embedding_inside_a_hint_loop(dim, unroll):
    from spyre_rules.hints import spyre_hint

    def fn(ids, w, x):
        with spyre_hint(slices={dim: 2 if dim == "H" else 4}):
            return F.embedding(ids, w) + x

    fresh_dims()
    ids = named(randint(0, 50, 2, 16), ["B", "S"])
    w = named(randn(50, 64, dtype=torch.float16), ["V", "H"])
    x = named(randn(2, 16, 64, dtype=torch.float16, seed=1), ["B", "S", "H"])
    with config.patch(unroll_loops=unroll):
        compiled = check(fn, ids, w, x)
    specs = compiled.op_specs()
    assert [s.op for s in specs] == (["embedding", "add"] * (4 if dim == "S" else 2) if unroll
                                     else ["embedding", "add"])


def test_embedding_table_is_tiled_along_the_hidden_dim_and_checked():
    """vocab 1000, hidden 256, fp16 at 128 KiB: the table is laid out [4, 1000, 64]; its
    stick-count dim spans 4 x 128000 bytes, so the planner splits the hidden dim 4 ways
    (one stick per tile); the gathered row coordinate spans all 1000 rows (128000 bytes)
    in every tile and fits.  Executed in a counted loop, equal to eager, under
    span_check='error' (every access enforced, the gathered read included)."""
    ids, w = randint(0, 1000, 1, 64), randn(1000, 256, dtype=torch.float16)
    with config.patch(max_span_bytes=128 * 1024, span_check="error",
                      ignore_span_overflow_hints=False):
        compiled = check(embedding, ids, w)
    (loop,) = compiled.kernels[0].specs
    assert loop.count == 4
    (spec,) = loop.body
    assert spec.op == "embedding" and [str(s) for s in spec.tiled_symbols[0]] == ["c1"]
    table = spec.args[1]
    assert [str(c) for c in table.device_coordinates] == ["floor(c1/64)", "ind0", "Mod(c1, 64)"]
    assert table.indirect[0].size == 1000


def test_a_table_whose_rows_alone_overflow_is_read_in_windows():
    """(4000, 128) fp16 at 128 KiB: all 4000 rows span 512000 bytes in any tile, so the table
    is read in 4 windows of 1000 rows (backend/gathered_windows.py; the refusals that stay
    are in test_gathered_windows.py) and the hidden dim's 2 sticks split 2 ways."""
    ids, w = randint(0, 4000, 1, 8), randn(4000, 128, dtype=torch.float16)
    with config.patch(max_span_bytes=128 * 1024, span_check="error",
                      ignore_span_overflow_hints=False):
        compiled = check(embedding, ids, w)
    (loop,) = compiled.kernels[0].specs
    (spec,) = loop.body
    assert loop.count == 2 and [a.indirect[0].size for a in spec.args if a.indirect] == [1000] * 4
