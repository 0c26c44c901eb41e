"""``facts.read_writes`` equals Inductor's ``get_read_writes`` exactly.

Compared field by field, order included (reads, writes, index expressions,
range variables and their ranges), on the ops of plain Inductor lowerings of
many op kinds -- pointwise, reductions (one and several outputs), indirect
indexing, masked loads, bucketize, scatter stores, random seeds,
views -- and on the ops the spyre_rules capture hands the planner (tiled
layouts, restickify).  Scans and sorts (which ``read_writes`` leaves to
Inductor) are fallback kernels on CPU, so they appear here as extern kernels.
"""

from __future__ import annotations

import pytest
import torch
import torch._inductor.config as inductor_config
from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep, StarDep

import spyre_rules
from spyre_rules.facts.read_writes import read_writes


def _fields(rw) -> tuple:
    deps = lambda s: [(type(d).__name__, repr(d)) for d in s]  # noqa: E731
    return (list(rw.reads), list(rw.writes), list(rw.index_exprs), deps(rw.reads),
            deps(rw.writes), deps(rw.index_exprs), list(rw.range_vars or []), dict(rw.var_ranges or {}),
            list(rw.var_ranges or {}))


def _compare(ops) -> list:
    """The ops compared (both answers are equal, else an assertion fails)."""
    compared = []
    for op in ops:
        expected = op.get_read_writes()
        assert _fields(read_writes(op)) == _fields(expected), op.get_name()
        compared.append((op, expected))
    return compared


def _inductor_ops(fn, *inputs) -> list:
    """Compare on every op of ``fn``'s plain Inductor lowering (at the scheduler's seam)."""
    compared: list = []

    def at_seam(nodes):
        compared.extend(_compare([n.node for n in nodes if n.node is not None]))
        return nodes

    torch._dynamo.reset()
    with inductor_config.patch(_pre_fusion_custom_pass=at_seam, fallback_random=False), \
            torch.no_grad():
        torch.compile(fn, backend="inductor", dynamic=False)(*inputs)
    assert compared
    return compared


def _kinds(compared) -> set:
    return {type(op.data).__name__ for op, _ in compared if isinstance(op, ir.ComputedBuffer)}


X = torch.randn(4, 8, 16)
IDX = torch.tensor([3, 0, 2, 1, 0])

PROGRAMS = {
    "pointwise chain": (lambda x: (x + 1).sin() * x.exp(), (X,)),
    "fp16 add": (lambda x: x + 1, (X.half(),)),
    "sum last dim": (lambda x: x.sum(-1), (X,)),
    "amax keepdim and consumer": (lambda x: x - x.amax(dim=-1, keepdim=True), (X,)),
    "reduction over dim 0": (lambda x: x.sum(0) + 1, (X,)),
    "argmax": (lambda x: x.argmax(1), (X,)),
    # over 1,024 elements: Inductor's CPU lowering takes Welford (three outputs)
    "var_mean (welford, several outputs)": (lambda x: torch.var_mean(x, dim=-1),
                                            (torch.randn(2, 2048),)),
    "softmax": (lambda x: torch.softmax(x, -1), (X,)),
    "cumsum (scan)": (lambda x: torch.cumsum(x, 1), (X,)),
    "sort": (lambda x: torch.sort(x, -1)[0] + 1, (X,)),
    "index_select (indirect)": (lambda x, i: x.index_select(0, i % 4) * 2, (X, IDX)),
    "embedding (indirect)": (lambda w, i: torch.nn.functional.embedding(i, w) + 1,
                             (torch.randn(6, 16), IDX)),
    "gather (indirect)": (lambda x, i: torch.gather(x, 2, i) + 1,
                          (X, torch.randint(0, 16, (4, 8, 3)))),
    "constant_pad (masked)": (lambda x: torch.nn.functional.pad(x, (1, 2)) * 3, (X,)),
    "where": (lambda x: torch.where(x > 0, x, x * 0.5), (X,)),
    "permute and transpose views": (lambda x: x.permute(2, 0, 1).contiguous() + x.transpose(0, 2),
                                    (torch.randn(8, 8, 8),)),
    "slice and expand views": (lambda x: x[:, 1:5, ::2] + x[:, :1, ::2].expand(4, 4, 8), (X,)),
    "cat": (lambda x: torch.cat([x + 1, x * 2], 1), (X,)),
    "bucketize": (lambda x, b: torch.bucketize(x, b) + 1, (X, torch.tensor([-1.0, 0.0, 1.0]))),
    "index_put (scatter store)": (
        lambda x, i: torch.zeros(6, 16).index_put_((i,), x[0, :5], accumulate=True),
        (X, IDX)),
    "rand (load_seed)": (lambda x: x + torch.rand_like(x), (X,)),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_equals_inductor_on_plain_lowering(name: str) -> None:
    fn, inputs = PROGRAMS[name]
    _inductor_ops(fn, *inputs)


def test_the_programs_cover_every_traced_kind_and_dependency() -> None:
    """The comparison above met each kind of op and of dependency it claims to."""
    compared = []
    for fn, inputs in PROGRAMS.values():
        compared += _inductor_ops(fn, *inputs)
    assert {"Pointwise", "Reduction", "Scatter", "WelfordReduction"} <= _kinds(compared)
    reads = [d for _, rw in compared for d in rw.reads]
    assert any(isinstance(d, MemoryDep) and d.is_indirect() for d in reads)
    assert any(isinstance(d, StarDep) for d in reads)  # bucketize boundaries
    assert any(rw.index_exprs for _, rw in compared)
    assert any(d.mode == "atomic_add" for _, rw in compared for d in rw.writes)


def test_equals_inductor_on_the_captured_planner_ops() -> None:
    def program(x):
        y = x + 1
        y = y - y.amax(dim=-1, keepdim=True)
        y = y.sum(0, keepdim=True) + y
        return y.transpose(1, 2).contiguous() * 2

    ops = spyre_rules.capture_operations(program, torch.randn(4, 64, 128, dtype=torch.float16))
    with ops.graph_context():
        compared = _compare(ops)
    assert len(compared) == len(ops) >= 4


def test_an_op_with_its_own_get_read_writes_is_asked_directly() -> None:
    sentinel = object()

    class Own(ir.ComputedBuffer):
        def get_read_writes(self):
            return sentinel

    op = Own.__new__(Own)
    assert read_writes(op) is sentinel
