"""spyre_hint / named dims / DimHint stamping / hint-derived groups."""

from __future__ import annotations

import pytest
import sympy
import torch
from torch.fx import traceback as fx_traceback

import spyre_rules
from spyre_rules.ir.ir_edit import op_description
from spyre_rules.hints import (
    DimHint,
    HintError,
    bind_input_dim_names,
    bound_input_dim_names,
    declare_tensor_dim,
    declared_tensor_dims,
    hints_to_coarse_tile_groups,
    name_tensor_dims,
    spyre_hint,
    tensor_dim_names,
)
from spyre_rules.hints.api import LEVELS_KEY, NAMED_DIMS_KEY


def declare(**dims):
    for name, size in dims.items():
        declare_tensor_dim(name, size)


def named(shape, names, seed=0):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return name_tensor_dims(x, names)


def ab_inputs(n=3, a=8, b=128):
    declare(A=a, B=b)
    return [named((a, b), ["A", "B"], seed=i) for i in range(n)]


def record_meta(fn, *inputs):
    """Trace ``fn`` with Dynamo only; return {fx node name: meta["custom"]}."""
    seen = {}

    def backend(gm, example_inputs):
        for node in gm.graph.nodes:
            if node.op == "call_function":
                seen[node.name] = node.meta.get("custom")
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=backend)(*inputs)
    return seen


def summary(ops):
    return [([op.get_name() for op in g], levels) for g, levels in hints_to_coarse_tile_groups(ops)]


# --------------------------------------------------------------------------- spyre_hint


def test_nesting_accumulates_levels_outer_first():
    def f(a, b):
        with spyre_hint(slices={"A": 2}):
            with spyre_hint(slices={"B": 4}):
                y = a + b
            z = y * 2
        return z - 1

    meta = record_meta(f, torch.randn(4, 8), torch.randn(4, 8))
    inner = meta["y"][LEVELS_KEY]
    assert [(name, count) for _, name, count in inner] == [("A", 2), ("B", 4)]
    assert meta["z"][LEVELS_KEY] == inner[:1]  # the outer level, same id
    assert meta["sub"] is None
    assert inner[0][0] != inner[1][0]


def test_one_hint_with_several_dims_is_several_levels_in_dict_order():
    def f(a):
        with spyre_hint(slices={"B": 4, "A": 2}):
            return a + 1

    meta = record_meta(f, torch.randn(4, 8))
    assert [(n, c) for _, n, c in meta["add"][LEVELS_KEY]] == [("B", 4), ("A", 2)]


def test_num_tiles_per_dim_is_slices(capture):
    def by_slices(a, b):
        with spyre_hint(slices={"A": 2}):
            return a + b

    def by_alias(a, b):
        with spyre_hint(num_tiles_per_dim={"A": 2}):
            return a + b

    x, y = ab_inputs(2)
    assert summary(capture(by_slices, x, y)) == summary(capture(by_alias, x, y)) == [
        (["buf0"], [(0, 2, False)])
    ]


def test_named_dims_annotation():
    def f(a):
        with spyre_hint(named_dims=["A", None]):
            return a + 1

    assert record_meta(f, torch.randn(4, 8))["add"] == {NAMED_DIMS_KEY: ("A", None)}


def test_eager_use_is_harmless():
    a = torch.randn(4, 8)
    with spyre_hint(slices={"A": 2}):
        with spyre_hint(slices={"B": 4}, named_dims=["A", "B"]):
            out = a + 1
    assert torch.equal(out, a + 1)
    assert "custom" not in fx_traceback.current_meta


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "spyre_hint needs slices=, num_tiles_per_dim= or named_dims="),
        (
            {"slices": {"A": 2}, "num_tiles_per_dim": {"A": 2}},
            "spyre_hint: pass slices= or num_tiles_per_dim= (the same thing), not both",
        ),
        ({"slices": {"A": 0}}, "spyre_hint: count 0 for dim 'A' must be a positive int"),
        ({"slices": {"A": True}}, "spyre_hint: count True for dim 'A' must be a positive int"),
        ({"slices": {"A": 2.0}}, "spyre_hint: count 2.0 for dim 'A' must be a positive int"),
        ({"slices": {}}, "spyre_hint: slices must be a non-empty dict {dim name: count}"),
        (
            {"num_tiles_per_dim": [("A", 2)]},
            "spyre_hint: num_tiles_per_dim must be a non-empty dict {dim name: count}",
        ),
        ({"slices": {"": 2}}, "spyre_hint: dim name '' must be a non-empty string"),
        ({"named_dims": "AB"}, "spyre_hint: named_dims must be a list of dim names, not 'AB'"),
    ],
)
def test_spyre_hint_argument_errors(kwargs, message):
    with pytest.raises(HintError) as info:
        spyre_hint(**kwargs)
    assert str(info.value) == message


def test_spyre_hint_argument_error_inside_compiled_code():
    def f(a):
        with spyre_hint(slices={"A": 0}):
            return a + 1

    torch._dynamo.reset()
    with pytest.raises(HintError, match="count 0 for dim 'A' must be a positive int"):
        torch.compile(f, backend=lambda gm, ex: gm.forward)(torch.randn(3))


def test_public_names():
    assert spyre_rules.spyre_hint is spyre_hint
    assert spyre_rules.name_tensor_dims is name_tensor_dims
    assert spyre_rules.declare_tensor_dim is declare_tensor_dim
    assert callable(spyre_rules.coarse_tile)


# --------------------------------------------------------------------------- declared / named dims


def test_declare_and_name():
    declare(A=4, B=8)
    declare_tensor_dim("A", 4)  # same size again: fine
    assert declared_tensor_dims() == {"A": 4, "B": 8}
    x = torch.randn(4, 8)
    assert name_tensor_dims(x, ["A", None]) is x
    assert tensor_dim_names(x) == ("A", None)
    assert tensor_dim_names(torch.randn(2)) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("A", 8), "declare_tensor_dim: dim 'A' is already declared with size 4, not 8"),
        (("C", 0), "declare_tensor_dim: size 0 of dim 'C' must be a positive int"),
        (("C", 2.5), "declare_tensor_dim: size 2.5 of dim 'C' must be a positive int"),
        (("", 2), "declare_tensor_dim: dim name '' must be a non-empty string"),
    ],
)
def test_declare_errors(args, message):
    declare(A=4)
    with pytest.raises(HintError) as info:
        declare_tensor_dim(*args)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["A"], "name_tensor_dims: 1 names ['A'] for a tensor of rank 2 (shape [4, 8])"),
        (
            ["A", "Z"],
            "name_tensor_dims: dim 1 is named 'Z', which is not declared (declared dims: A, B); "
            "call declare_tensor_dim('Z', 8) first",
        ),
        (
            ["B", None],
            "name_tensor_dims: dim 0 named 'B' has size 4, but 'B' is declared with size 8",
        ),
        (["A", "A"], "name_tensor_dims: dim name 'A' is used twice in ['A', 'A']"),
        ("AB", "name_tensor_dims: names must be a list of dim names, not 'AB'"),
    ],
)
def test_name_tensor_dims_errors(names, message):
    declare(A=4, B=8)
    with pytest.raises(HintError) as info:
        name_tensor_dims(torch.randn(4, 8), names)
    assert str(info.value) == message


def test_bind_input_dim_names_is_scoped():
    declare(A=4)
    x = name_tensor_dims(torch.randn(4), ["A"])
    assert bound_input_dim_names() is None
    with bind_input_dim_names([x, 3, torch.randn(2)]) as names:
        assert names == (("A",), None, None)
        assert bound_input_dim_names() == names
    assert bound_input_dim_names() is None


# --------------------------------------------------------------------------- the pass


def test_seed_dim_hints_and_groups(capture):
    def f(a, b, c):
        with spyre_hint(slices={"A": 2}):
            with spyre_hint(slices={"B": 4}):
                return (a + b) * c

    ops = capture(f, *ab_inputs())
    for op in ops:
        assert op.dim_names == ["A", "B"]
        assert [(h.dim_names, h.split_count, h.is_reduction, h.hint_id, h.host_dim)
                for h in op.dim_hints] == [(["A"], 2, False, 0, 0), (["B"], 4, False, 1, 1)]
        assert all(isinstance(h.loop_var, sympy.Symbol) for h in op.dim_hints)
    groups = hints_to_coarse_tile_groups(ops)
    assert summary(ops) == [(["buf0", "buf1"], [(0, 2, False), (1, 4, False)])]
    for _, levels in groups:
        for hint_id, count, is_reduction in levels:
            assert isinstance(hint_id, int) and isinstance(count, sympy.Integer)
            assert is_reduction is False


def test_ops_outside_a_hint_have_no_dim_hints(capture):
    def f(a, b):
        y = a - b
        with spyre_hint(slices={"A": 2}):
            z = y * b
        return z + 1

    ops = capture(f, *ab_inputs(2))
    assert [hasattr(op, "dim_hints") for op in ops] == [False, True, False]
    assert summary(ops) == [(["buf1"], [(0, 2, False)])]


def test_partial_nesting_and_sequential_blocks_form_separate_groups(capture):
    def f(a, b):
        with spyre_hint(slices={"A": 2}):
            y = a + b
            with spyre_hint(slices={"B": 4}):
                z = y * b
        with spyre_hint(slices={"A": 2}):
            return z - a

    assert summary(capture(f, *ab_inputs(2))) == [
        (["buf0"], [(0, 2, False)]),
        (["buf1"], [(0, 2, False), (1, 4, False)]),
        (["buf2"], [(2, 2, False)]),
    ]


def test_names_propagate_through_broadcast_reduction_and_matmul(capture):
    declare(A=8, B=128, C=192)
    a = named((8, 128), ["A", "B"])
    bias = named((128,), ["B"], seed=1)
    w = named((128, 192), ["B", "C"], seed=2)

    def f(a, bias, w):
        y = a + bias
        with spyre_hint(slices={"B": 2}):
            s = y.sum(-1)
        with spyre_hint(slices={"C": 3}):
            m = y @ w
        return s, m

    add, total, mm = capture(f, a, bias, w)
    assert (add.dim_names, add.reduction_dim_names) == (["A", "B"], [])
    assert (total.dim_names, total.reduction_dim_names) == (["A"], ["B"])
    assert (mm.dim_names, mm.reduction_dim_names) == (["A", "C"], ["B"])
    (hint,) = total.dim_hints
    assert (hint.is_reduction, hint.host_dim, hint.split_count) == (True, 0, 2)
    (hint,) = mm.dim_hints
    assert (hint.is_reduction, hint.host_dim, hint.split_count) == (False, 1, 3)
    assert summary([add, total, mm]) == [(["buf1"], [(0, 2, True)]), (["buf2"], [(1, 3, False)])]


def test_unnamed_program_gets_no_names(capture):
    ops = capture(lambda a, b: a + b, torch.randn(4, 8), torch.randn(4, 8))
    assert not hasattr(ops[0], "dim_names")
    assert not hasattr(ops[0], "dim_hints")


def test_named_dims_hint_names_created_tensors(capture):
    declare(A=8, B=128)

    def f(a, b):
        with spyre_hint(named_dims=["A", "B"]):
            y = a + b
            s = y.sum(-1)  # rank 1: keeps its propagated names
        with spyre_hint(slices={"A": 2}):
            return y * 2, s

    ops = capture(f, torch.randn(8, 128), torch.randn(8, 128))
    by_kind = {str(next(iter(op.origins)).target).split(".")[1]: op for op in ops}
    add, total, mul = by_kind["add"], by_kind["sum"], by_kind["mul"]
    assert add.dim_names == ["A", "B"]
    assert (total.dim_names, total.reduction_dim_names) == (["A"], ["B"])
    assert not hasattr(add, "dim_hints")
    assert [(h.dim_names, h.host_dim) for h in mul.dim_hints] == [(["A"], 0)]


def test_named_dims_errors(capture, root_error):
    declare(A=8, B=64)

    def wrong_size(a):
        with spyre_hint(named_dims=["B", None]):
            return a + 1

    def wrong_rank(a):
        with spyre_hint(named_dims=["A"]):
            return a + 1

    x = torch.randn(8, 128)
    desc = op_description(capture(lambda a: a + 1, x)[0])
    expected = {
        wrong_size: f"spyre_hint(named_dims=['B', None]) names dim 0 of {desc} 'B', but that "
        "dim has size 8 and 'B' is declared with size 64",
        wrong_rank: "spyre_hint(named_dims=['A']) has 1 names but the ops created in it "
        "have rank 2",
    }
    for fn, message in expected.items():
        with pytest.raises(Exception) as info:
            capture(fn, x)
        assert str(root_error(info.value, HintError)) == message


def test_hint_on_a_dim_no_op_has(capture, root_error):
    declare(A=8)

    def f(a, b):
        with spyre_hint(slices={"A": 2}):
            return a + b

    with pytest.raises(Exception) as info:
        capture(f, torch.randn(8, 16), torch.randn(8, 16))
    assert str(root_error(info.value, HintError)) == (
        "spyre_hint(slices={'A': 2}) matches no dim named 'A' on its ops ['buf0']; name the "
        "input dims with name_tensor_dims or spyre_hint(named_dims=...)"
    )


def test_loop_invariant_op_in_a_hint(capture):
    declare(A=8, B=128)
    a = named((8, 128), ["A", "B"])

    def f(a, b):
        with spyre_hint(slices={"A": 2}):
            return a + 1, b * 2  # b is unnamed: its op is not tiled by the hint

    first, second = capture(f, a, torch.randn(8, 128))
    assert first.dim_hints[0].host_dim == 0
    assert second.dim_hints == [DimHint(["A"], 2, None, False, 0, None)]
    # the untiled op runs once, outside the loop (inside, its whole buffer was read as the tile)
    assert summary([first, second]) == [(["buf0"], [(0, 2, False)])]


def test_conflicting_names_leave_the_dim_unnamed(capture, root_error):
    """Two reads naming one loop dim differently leave it unnamed (only a tiled dim needs
    a name, tests/hints/test_hint_contract.py); a hint on such a dim matches nothing."""
    declare(A=64, B=64)
    a = named((64, 64), ["A", "B"])
    b = named((64, 64), ["B", "A"], seed=1)
    (op,) = capture(lambda a, b: a + b, a, b)
    assert getattr(op, "dim_names", None) in (None, [None, None])

    def f(a, b):
        with spyre_hint(slices={"A": 2}):
            return a + b

    with pytest.raises(Exception) as info:
        capture(f, a, b)
    assert str(root_error(info.value, HintError)).startswith(
        "spyre_hint(slices={'A': 2}) matches no dim named 'A' on its ops ['buf0']")


def test_partial_slices_do_not_carry_names(capture):
    declare(A=8, B=128)
    a = named((8, 128), ["A", "B"])
    (op,) = capture(lambda a: a[:, :64] * 2, a)
    assert op.dim_names == ["A", None]


def test_name_tensor_dims_inside_compiled_code(capture):
    declare(S=16)

    def f(x):
        y = x * 2
        name_tensor_dims(y, [None, "S", None])  # names y itself: the result may be dropped
        with spyre_hint(slices={"S": 2}):
            return y + 1

    mul, add = capture(f, torch.randn(1, 16, 64))[:2]
    assert mul.dim_names == [None, "S", None]
    assert not hasattr(mul, "dim_hints")
    assert [(h.dim_names, h.host_dim, h.split_count) for h in add.dim_hints] == [(["S"], 1, 2)]


def test_name_tensor_dims_of_a_view_inside_compiled_code_names_a_copy(capture):
    declare(S=16)

    def f(x):
        y = name_tensor_dims(x.transpose(0, 1), ["S", None])
        with spyre_hint(slices={"S": 2}):
            return y + 1

    ops = capture(f, torch.randn(64, 16))
    (add,) = [op for op in ops if getattr(op, "dim_hints", None)]
    named_copies = [op for op in ops if op is not add and getattr(op, "dim_names", None)]
    assert [(list(op.get_size()), op.dim_names) for op in named_copies] == [([16, 64], ["S", None])]
    assert [(h.dim_names, h.host_dim) for h in add.dim_hints] == [(["S"], 0)]


def test_attention_scores_keep_the_sequence_name_on_the_query_dim(capture):
    """q, k and v all carry "S": the scores name only their query dim, p @ v names
    its rows (not the contracted key dim), and the scores, which read every key,
    start a loop after the key projection's (loop fission)."""
    declare(S=16)
    x = named((16, 64), ["S", None])
    w = torch.randn(64, 64)

    def f(x, w):
        with spyre_hint(slices={"S": 2}):
            k = x @ w
            scores = x @ k.t()
            return torch.softmax(scores, -1) @ k

    ops = capture(f, x, w)
    by_name = {op.get_name(): op for op in ops}
    k, scores = by_name["buf0"], by_name["buf1"]
    out = ops[-1]
    assert (k.dim_names, k.reduction_dim_names) == (["S", None], [None])
    assert (scores.dim_names, scores.reduction_dim_names) == (["S", None], [None])
    assert (out.dim_names, out.reduction_dim_names) == (["S", None], [None])
    groups = summary(ops)
    # the key projection and its restickified copy (buf8) for k.t() form the first loop
    assert groups[0] == (["buf0", "buf8"], [(0, 2, False)])
    assert groups[1][0][0] == "buf1"
