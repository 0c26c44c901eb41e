"""The hint contract's edge cases (issue 29), each compiled and compared with eager:
a split of 1 is no loop, a name given only through named_dims is registered with the
size it names, and names need to agree only on the dims a hint tiles."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from spyre_rules import config
from spyre_rules.hints import declare_tensor_dim, declared_tensor_dims, name_tensor_dims, spyre_hint
from spyre_rules.program.op_spec import LoopSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backend"))
from spyre_helpers import run_spyre  # noqa: E402


def _loops(compiled) -> list[int]:
    return [int(item.count) for k in compiled.kernels for item in k.specs if isinstance(item, LoopSpec)]


def test_a_split_of_one_on_a_squeezed_dim_is_no_loop():
    """B has size 1: Inductor squeezes it away, so no op has a dim named B; a split of 1 is
    no loop and must not fail (it was `matches no dim named 'B'`)."""
    declare_tensor_dim("B", 1)
    declare_tensor_dim("M", 64)
    declare_tensor_dim("K", 128)
    x = name_tensor_dims(torch.randn(1, 64, 128), ["B", "M", "K"])

    def f(t):
        with spyre_hint(slices={"B": 1}):
            return t.sum(dim=0) * 2

    compiled = run_spyre(f, x)
    torch.testing.assert_close(compiled.output, f(x), rtol=1e-5, atol=1e-5)
    assert _loops(compiled) == []


def test_named_dims_registers_an_undeclared_name_with_the_size_it_names():
    """spyre_hint(named_dims=["M", "N"]) with neither declared: the names are registered
    with the sizes they name (as declare_tensor_dim would), and the slice on M tiles."""
    x = torch.randn(64, 128)

    def f(t):
        with spyre_hint(slices={"M": 2}, named_dims=["M", "N"]):
            return t * 3 + 1

    compiled = run_spyre(f, x)
    torch.testing.assert_close(compiled.output, f(x), rtol=1e-5, atol=1e-5)
    assert declared_tensor_dims() == {"M": 64, "N": 128}
    assert _loops(compiled) == [2]


def test_names_need_to_agree_only_on_the_tiled_dims():
    """q named [B, H, Lq, D], v named [B, H, Lk, D]: q + v uses one loop dim as Lq and as Lk.
    Under spyre_hint(slices={"H": 2}) only H is tiled, and both agree on it."""
    for name, size in dict(B=2, H=4, Lq=16, Lk=16, D=64).items():
        declare_tensor_dim(name, size)
    q = name_tensor_dims(torch.randn(2, 4, 16, 64), ["B", "H", "Lq", "D"])
    v = name_tensor_dims(torch.randn(2, 4, 16, 64), ["B", "H", "Lk", "D"])

    def f(a, b):
        with spyre_hint(slices={"H": 2}):
            return (a + b) * 0.5

    with config.patch(fallback="error"):
        compiled = run_spyre(f, q, v)
    torch.testing.assert_close(compiled.output, f(q, v), rtol=1e-5, atol=1e-5)
    assert _loops(compiled) == [2]


def _lost_name_error(f):
    from spyre_rules.hints import HintError
    from spyre_rules.ir.errors import find_cause

    declare_tensor_dim("B", 2)
    declare_tensor_dim("H", 16)
    x = name_tensor_dims(torch.randn(2, 16, 64), ["B", "H", None])

    def g(t):
        with spyre_hint(slices={"H": 4}):
            return f(t)

    try:
        run_spyre(g, x)
    except Exception as exc:  # noqa: BLE001 - Dynamo wraps the HintError
        return str(find_cause(exc, HintError))
    raise AssertionError("compiled")


def test_a_name_lost_through_a_slice_says_where():
    assert _lost_name_error(lambda t: t[:, 2:9] * 2) == (
        "spyre_hint(slices={'H': 4}) matches no dim named 'H' on its ops ['buf0']; name the input "
        "dims with name_tensor_dims or spyre_hint(named_dims=...); the name 'H' was lost at buf0 "
        "(aten ops: mul.Tensor, slice.Tensor), reading dim 1 of arg0_1: it reads it through d1 + 2, "
        "an index that is not the dim itself (a view, reshape or offset slice keeps no name)")


def test_a_name_lost_through_a_reshape_says_where():
    assert _lost_name_error(lambda t: t.reshape(2, 4, 256) * 2) == (
        "spyre_hint(slices={'H': 4}) matches no dim named 'H' on its ops ['buf0']; name the input "
        "dims with name_tensor_dims or spyre_hint(named_dims=...); the name 'H' was lost at buf0 "
        "(aten ops: mul.Tensor, reshape.default), reading dim 1 of arg0_1: it reads it through "
        "4*d1 + floor(d2/64), an index that is not the dim itself (a view, reshape or offset slice "
        "keeps no name)")


def _planned_and_run(f, x, tmp_path):
    """(op, levels) of plan.json and the loop counts of the program that ran."""
    import json

    with config.patch(dump_dir=str(tmp_path)):
        compiled = run_spyre(f, x)
    torch.testing.assert_close(compiled.output, f(x), rtol=0, atol=0)
    (plan,) = tmp_path.glob("**/plan.json")
    return [(o["op"], o["levels"]) for o in json.loads(plan.read_text())["ops"]], _loops(compiled)


def test_a_fill_inside_a_hint_runs_in_the_hint_loop(tmp_path):
    """torch.full / full_like inside spyre_hint(slices={"M": 4}, named_dims=["M", "K"]), read
    by an add outside: Inductor inlines a buffer that reads nothing into its readers, so the
    fill's planned level ran nowhere (plan.json recorded [[0, 4]], the program had no loop).
    A fill made in a hint block stays its own op and runs in the loop of 4."""
    declare_tensor_dim("M", 256)
    declare_tensor_dim("K", 64)
    x = torch.randn(256, 64, dtype=torch.float16)
    fills = {
        "full": lambda t: torch.full(t.shape, 0.5, dtype=t.dtype),
        "full_like": lambda t: torch.full_like(t, 0.5),
    }
    for make in fills.values():
        def f(t, make=make):
            with spyre_hint(slices={"M": 4}, named_dims=["M", "K"]):
                bias = make(t)
            return t + bias

        planned, loops = _planned_and_run(f, x, tmp_path / make.__name__ / str(id(make)))
        assert planned == [("buf0", [[0, 4]]), ("buf1", [])]
        assert loops == [4]


def test_a_dead_fill_gets_no_plan_record(tmp_path):
    """Outside a hint the fill is still inlined into the add (no buffer, no kernel); the op
    left dead is dropped before planning, so automatic tiling plans and records only the
    add, the op that runs (it recorded a level for the fill too)."""
    x = torch.randn(256, 64, dtype=torch.float16)

    def f(t):
        return t + torch.full(t.shape, 0.5, dtype=t.dtype)

    with config.patch(max_span_bytes=4096, ignore_span_overflow_hints=False):
        planned, loops = _planned_and_run(f, x, tmp_path)
    assert planned == [("buf1", [[0, 8]])]
    assert loops == [8]
